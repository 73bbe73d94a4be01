package server

import (
	"context"
	"errors"
	"net/http"
	"net/textproto"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/untrusted"
	"github.com/edgeota/edgeota/ownerauth"
)

// watchUpgradesPath is WatchUpgrades' REST route. grpc-gateway's in-process
// mode does not stream, so Handler serves it itself (see serveWatchREST).
const watchUpgradesPath = "/edgeota.io/v1/watch/upgrades"

// watcher is one WatchUpgrades stream's place in the fan-out: a bounded
// backlog the publisher never blocks on, and gone, closed when the stream
// must end (err says why: nil at shutdown).
type watcher struct {
	events chan *edgeotav1.WatchUpgradesResponse
	gone   chan struct{}
	err    error
}

// offer queues e without blocking, and reports false when the backlog is
// full.
func (w *watcher) offer(e *edgeotav1.WatchUpgradesResponse) bool {
	select {
	case w.events <- e:
		return true
	default:
		return false
	}
}

// subscribe registers a watcher and returns it with the snapshot it starts
// from: both under the view's lock, so that no change falls between them.
func (v *upgradeView) subscribe(ctx context.Context) (*watcher, []*edgeotav1.App, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.closed:
		return nil, nil, status.Error(codes.Unavailable, "the agent is shutting down")
	case !v.srv.hasView():
		return nil, nil, status.Error(codes.Unavailable, "the pod cache has not synced with the API server yet and no stored view could be read")
	case len(v.watchers) >= v.max:
		return nil, nil, status.Errorf(codes.ResourceExhausted, "too many watches: at most %d at once", v.max)
	}
	v.refreshLocked(ctx, time.Now())
	w := &watcher{events: make(chan *edgeotav1.WatchUpgradesResponse, v.backlog), gone: make(chan struct{})}
	v.watchers[w] = struct{}{}
	return w, v.snapshotLocked(), nil
}

// dropLocked ends a watcher's stream with err.
func (v *upgradeView) dropLocked(w *watcher, err error) {
	if _, ok := v.watchers[w]; !ok {
		return
	}
	delete(v.watchers, w)
	w.err = err
	close(w.gone)
}

func (v *upgradeView) unsubscribe(w *watcher) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.dropLocked(w, nil)
}

// close ends every watch (the agent is shutting down) and refuses new ones.
func (v *upgradeView) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = true
	for w := range v.watchers {
		v.dropLocked(w, nil)
	}
}

// hasView reports whether the owner's view has pods to show.
func (s *Server) hasView() bool {
	_, _, ok := s.podSource()
	return ok
}

// sendFunc sends one message of a watch.
type sendFunc func(*edgeotav1.WatchUpgradesResponse) error

// stream serves one watch until the caller leaves, it falls behind, or the
// agent shuts down: the snapshot, then every change, and a heartbeat whenever
// the stream was quiet for the heartbeat interval. Each send may take at
// most v.stall: setDeadline bounds the transport's writes (the server's own
// write timeout is lifted for watches), so that a reader that stopped reading
// is cut off by its own stream failing, never by slowing the publisher.
func (v *upgradeView) stream(ctx context.Context, send sendFunc, setDeadline func(time.Time) error) error {
	w, snapshot, err := v.subscribe(ctx)
	if err != nil {
		return err
	}
	defer v.unsubscribe(w)
	// Between sends, the deadline leaves room for the next heartbeat.
	idle := v.heartbeat + v.stall
	deliver := func(e *edgeotav1.WatchUpgradesResponse) error {
		_ = setDeadline(time.Now().Add(v.stall))
		if err := send(e); err != nil {
			return err
		}
		_ = setDeadline(time.Now().Add(idle))
		return nil
	}
	if err := deliver(&edgeotav1.WatchUpgradesResponse{
		Type: edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT, Apps: snapshot, SyncedAt: v.syncedAt(),
	}); err != nil {
		return err
	}
	heartbeat := time.NewTimer(v.heartbeat)
	defer heartbeat.Stop()
	for {
		var e *edgeotav1.WatchUpgradesResponse
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-w.gone:
			return w.err
		case e = <-w.events:
		case <-heartbeat.C:
			e = &edgeotav1.WatchUpgradesResponse{Type: edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_HEARTBEAT, SyncedAt: v.syncedAt()}
		}
		if err := deliver(e); err != nil {
			return err
		}
		heartbeat.Reset(v.heartbeat)
	}
}

// deadlineKey carries, in a gRPC watch's context, the write deadline of the
// HTTP/2 stream it rides on (see Handler.ServeHTTP).
type deadlineKey struct{}

// errStreamEnded is a watch's write deadline set after its HTTP handler
// returned.
var errStreamEnded = errors.New("the watch's HTTP/2 stream has ended")

// streamDeadline is the write deadline of a gRPC watch's HTTP/2 stream.
// gRPC runs the watch in a goroutine of its own, which may still be sending
// a heartbeat when the caller leaves and the HTTP handler returns; from then
// on the ResponseWriter must not be touched (net/http reuses it; a late
// SetWriteDeadline raced with its teardown and dereferenced nil). The
// handler ends the deadline before it returns, and a set after that does
// nothing.
type streamDeadline struct {
	mu    sync.Mutex
	write func(time.Time) error
	ended bool
}

// set sets the stream's write deadline while its handler runs.
func (d *streamDeadline) set(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended {
		return errStreamEnded
	}
	return d.write(t)
}

// end stops every set from now on; a set under way finishes first.
func (d *streamDeadline) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended = true
}

// WatchUpgrades streams the owner's view; see upgradeView.stream.
func (s *Server) WatchUpgrades(_ *edgeotav1.WatchUpgradesRequest, ss grpc.ServerStreamingServer[edgeotav1.WatchUpgradesResponse]) error {
	ctx := ss.Context()
	setDeadline, ok := ctx.Value(deadlineKey{}).(func(time.Time) error)
	if !ok {
		setDeadline = func(time.Time) error { return nil }
	}
	_, at, _ := s.podSource()
	_ = ss.SetHeader(syncedAtMD(at))
	return s.upgrades.stream(ctx, ss.Send, setDeadline)
}

// liftTimeouts takes a watch's stream off the server's read and write
// timeouts, which would end it after 30 s, and returns the stream's write
// deadline for the watch to set before each send. A ResponseWriter without
// deadlines (a test recorder) gets a no-op.
func liftTimeouts(w http.ResponseWriter) func(time.Time) error {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); errors.Is(err, http.ErrNotSupported) {
		return func(time.Time) error { return nil }
	}
	_ = rc.SetReadDeadline(time.Time{})
	return rc.SetWriteDeadline
}

// serveWatchREST serves WatchUpgrades over REST as grpc-gateway streams: one
// JSON object per line, {"result": {...}}, and {"error": {...}} if the
// stream ends with an error after it began. Authentication and authorization
// are the other REST routes'; X-Edgeota-Synced-At is sent once, at the start.
func (h *Handler) serveWatchREST(w http.ResponseWriter, r *http.Request) {
	negotiate(r)
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(r.Context(), nil, nil, w, r, &runtime.HTTPStatusError{HTTPStatus: http.StatusMethodNotAllowed,
			Err: status.Errorf(codes.Unimplemented, "Method Not Allowed: %s %s", untrusted.Quote(r.Method), watchUpgradesPath)})
		return
	}
	if err := h.auth.Authorize(r.Context(), ownerauth.View); err != nil {
		if status.Code(err) == codes.Unauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgeota"`)
		}
		writeError(r.Context(), nil, nil, w, r, err)
		return
	}
	setDeadline := liftTimeouts(w)
	flusher := http.NewResponseController(w)
	started := false
	marshal := protojson.MarshalOptions{}
	send := func(e *edgeotav1.WatchUpgradesResponse) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", mimeJSON)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, at, _ := h.svc.podSource()
			w.Header().Set(textproto.CanonicalMIMEHeaderKey(SyncedAtHeader), formatSyncedAt(at))
			w.WriteHeader(http.StatusOK)
		}
		b, err := marshal.Marshal(e)
		if err != nil {
			return status.Errorf(codes.Internal, "encoding a watch event: %v", err)
		}
		line := make([]byte, 0, len(b)+13)
		line = append(append(append(line, `{"result":`...), b...), "}\n"...)
		if _, err := w.Write(line); err != nil {
			return err
		}
		return flusher.Flush()
	}
	err := h.svc.upgrades.stream(r.Context(), send, setDeadline)
	switch {
	case err == nil:
	case !started:
		writeError(r.Context(), nil, nil, w, r, err)
	default:
		st := status.Convert(err)
		if b, merr := (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(st.Proto()); merr == nil {
			_, _ = w.Write(append(append([]byte(`{"error":`), b...), "}\n"...))
			_ = flusher.Flush()
		}
		klog.FromContext(r.Context()).V(2).Info("Watch ended", "err", err)
	}
}
