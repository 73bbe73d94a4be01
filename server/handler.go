package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/cache"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

// limits keep a slow, idle or oversized client from holding the agent.
type limits struct {
	readHeader, read, write, idle time.Duration
	// maxBody bounds what a REST request body may hold; no route reads one.
	maxBody int64
}

var defaultLimits = limits{
	readHeader: 5 * time.Second,
	read:       30 * time.Second,
	write:      30 * time.Second,
	idle:       2 * time.Minute,
	maxBody:    64 << 10,
}

// Handler is everything behind the agent's one port: gRPC (HTTP/2 requests
// with content-type application/grpc, including the standard health service
// and server reflection), the REST gateway, and the probes /healthz (the
// process answers) and /readyz (a view of the pods is served: the live one
// once the pod cache has synced, the stored one before; the body says which
// and how old, and which identity the agent acts as toward the API server),
// and /metrics (to viewers, as the REST reads). It authenticates every
// request once, for both protocols, and survives a panicking one.
type Handler struct {
	svc     *Server
	auth    ownerauth.Authenticator
	grpc    *grpc.Server
	health  *health.Server
	rest    http.Handler
	metrics http.Handler
	limits  limits
}

// NewHandler wires svc into a gRPC server and a REST gateway that calls it
// in-process (no loopback hop between the two protocols), both audited and
// guarded by svc's ownerauth.Authenticator (see Options).
func NewHandler(ctx context.Context, svc *Server) (*Handler, error) {
	auth := svc.auth
	h := &Handler{
		svc:  svc,
		auth: auth,
		grpc: grpc.NewServer(
			grpc.ForceServerCodecV2(newListCodec()),
			grpc.ChainUnaryInterceptor(recoverUnary, auth.UnaryInterceptor),
			grpc.ChainStreamInterceptor(recoverStream, auth.StreamInterceptor)),
		health:  health.NewServer(),
		metrics: metricsHandler(svc.identity, svc.answers.results),
		limits:  defaultLimits,
	}
	api := audited{svc}
	edgeotav1.RegisterOTAServiceServer(h.grpc, api)
	healthpb.RegisterHealthServer(h.grpc, h.health)
	reflection.Register(h.grpc)
	h.health.SetServingStatus(edgeotav1.OTAService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)

	gw := newGateway()
	if err := edgeotav1.RegisterOTAServiceHandlerServer(ctx, gw, api); err != nil {
		return nil, fmt.Errorf("registering the REST gateway: %w", err)
	}
	h.rest = gw
	return h, nil
}

// ServeHTTP dispatches by protocol first, then by path. gRPC calls are
// authorized by the gRPC server's interceptors, REST calls here.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer recoverHTTP(w, r)
	if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		if r.URL.Path == edgeotav1.OTAService_WatchUpgrades_FullMethodName {
			// A watch outlives the server's timeouts; it bounds each send,
			// until this handler returns (streamDeadline).
			deadline := &streamDeadline{write: liftTimeouts(w)}
			defer deadline.end()
			r = r.WithContext(context.WithValue(r.Context(), deadlineKey{}, deadline.set))
		}
		h.grpc.ServeHTTP(w, h.auth.Identify(r, "gRPC"))
		return
	}
	switch r.URL.Path {
	case watchUpgradesPath:
		h.serveWatchREST(w, h.auth.Identify(r, "REST"))
	case "/healthz":
		h.probe(w, r, true, "ok")
	case "/readyz":
		ok, msg := h.svc.readiness()
		h.probe(w, r, ok, msg)
	case metricsPath:
		if r = h.authorizeREST(w, h.auth.Identify(r, "REST")); r != nil {
			h.metrics.ServeHTTP(w, r)
		}
	default:
		if r = h.authorizeREST(w, h.auth.Identify(r, "REST")); r != nil {
			r.Body = http.MaxBytesReader(w, r.Body, h.limits.maxBody)
			h.rest.ServeHTTP(w, r)
		}
	}
}

// authorizeREST negotiates the answer's format and returns r if its caller
// may make it, else answers the refusal and returns nil.
func (h *Handler) authorizeREST(w http.ResponseWriter, r *http.Request) *http.Request {
	negotiate(r)
	if err := h.auth.Authorize(r.Context(), ownerauth.RESTAccess(r)); err != nil {
		if status.Code(err) == codes.Unauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgeota"`)
		}
		writeError(r.Context(), nil, nil, w, r, err)
		return nil
	}
	return r
}

// probe answers a probe: 200 and msg when ok, else 503 and msg.
func (h *Handler) probe(w http.ResponseWriter, r *http.Request, ok bool, msg string) {
	w.Header().Set("Content-Type", contentTypeText)
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = fmt.Fprintln(w, "Method Not Allowed")
	case !ok:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, msg)
	default:
		_, _ = fmt.Fprintln(w, msg)
	}
}

// readiness reports whether a view of the pods is served, and says which and
// how old: the live view once the cache has synced, the stored one before.
func (s *Server) readiness() (bool, string) {
	age := func(at time.Time) string {
		return fmt.Sprintf("last contact with the API server %s ago (%s)",
			max(s.clock.Now().Sub(at), 0).Truncate(time.Second), at.UTC().Format(time.RFC3339))
	}
	identity := ""
	if s.identity != nil {
		identity = "; " + s.identity.describe()
	}
	switch {
	case s.synced():
		return true, "ok: serving the live view; " + age(s.lastContact()) + identity
	case s.stored != nil:
		return true, "ok: serving the stored view until the API server answers; " + age(s.stored.lastContact) + identity
	default:
		return false, "the pod cache has not synced yet and no stored view could be read" + identity
	}
}

// watchReadiness marks the OTA service SERVING in the gRPC health service
// while a view of the pods is served, as /readyz does for HTTP: at once when
// a stored view was read, else once the pod cache has synced.
func (h *Handler) watchReadiness(ctx context.Context) {
	if h.svc.stored != nil || cache.WaitForCacheSync(ctx.Done(), h.svc.synced) {
		h.health.SetServingStatus(edgeotav1.OTAService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
}
