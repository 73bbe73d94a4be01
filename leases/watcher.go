package leases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/internal/choice"
	"github.com/edgeota/edgeota/internal/kube"
)

// What Options.Counted is told of, one value a call: label values for the
// caller's metrics. Renewed, Missing and Failed say what following found;
// Listed and Watched count the requests it costs the API server.
const (
	// Renewed: a renewTime was reported to the renew callback.
	Renewed = "renewed"
	// Missing: a followed node was found without a Lease (by a list, or a
	// watch's DELETED event), once each time it goes missing. Its proof of
	// life must come from elsewhere (its Node status heartbeats) until a
	// Lease appears, whose renewTime is then reported.
	Missing = "missing"
	// Failed: a list or a watch failed; the next try waits for the backoff.
	Failed = "error"
	// Listed: a list was sent.
	Listed = "list"
	// Watched: a watch was started.
	Watched = "watch"
)

// DefaultListsAtOnce bounds the lists under way at once when
// Options.ListsAtOnce is zero: enough that a few hundred nodes followed in
// the same instant start within a second from the watch cache, few enough
// that they never crowd the client's other requests.
const DefaultListsAtOnce = 32

const (
	// backoffBase and backoffCap bound the wait after a failure: 1 s,
	// doubling to 10 s, each with up to a quarter more of jitter.
	backoffBase = time.Second
	backoffCap  = 10 * time.Second
	// listTimeout bounds one list, which the watch cache answers in
	// milliseconds, so that a hung one never holds a place for long.
	listTimeout = 10 * time.Second
	// minWatchTimeout is the shortest timeout a watch asks the server for;
	// each asks for up to twice as long, as client-go's reflector does, so
	// that watches started together do not all end, and list again,
	// together.
	minWatchTimeout = 5 * time.Minute
)

// Options configures a Watcher beyond what NewWatcher requires.
type Options struct {
	// Counted, if set, is called with Renewed, Missing, Failed, Listed or
	// Watched each time one happens, so that the caller can export them
	// (Prometheus counters, say) without this package importing a metrics
	// library. It is called from the nodes' goroutines and must not block.
	Counted func(what string)
	// ListsAtOnce bounds the lists under way at once; zero means
	// DefaultListsAtOnce.
	ListsAtOnce int
	// WideAt is the fewest nodes followed for which one watch of every
	// Lease replaces their own watches (see the package doc); zero means
	// DefaultWideAt.
	WideAt int
	// Mode says how the Leases are watched; empty means ModeAuto.
	Mode Mode
}

// Mode says how a Watcher watches the Leases of the nodes it follows. Every
// mode reports the same renewals, as the API server stores them; they differ
// in what the watching costs (see the package doc).
type Mode string

const (
	// ModeAuto watches each followed node's Lease by name, and every Lease
	// in one watch while that costs less ("One watch for many"): the
	// default.
	ModeAuto Mode = "auto"
	// ModeEachNode watches each followed node's Lease by name, however many
	// are followed.
	ModeEachNode Mode = "each-node"
	// ModeEveryLease watches every node Lease from Run on, followed or not,
	// as an informer of all the Leases would: the cost ModeAuto avoids at
	// rest, kept so that the two can be compared on the same cluster.
	ModeEveryLease Mode = "every-lease"
)

// Modes are the valid Modes, the default first.
var Modes = []Mode{ModeAuto, ModeEachNode, ModeEveryLease}

// ParseMode returns the Mode named s, or an error naming the valid ones.
func ParseMode(s string) (Mode, error) { return choice.Parse(s, Modes) }

// DefaultWideAt is Options.WideAt's default: one HTTP/2 connection's worth
// of watches (the API server allows 100 streams on each). Below it, the
// nodes' own watches cost less than any watch of the whole fleet.
const DefaultWideAt = 100

// Watcher follows the node Leases of the nodes it is asked to, one watch
// each, and reports every renewal it sees. Proof of life needs a renewal
// from each node in flight within moments of its reaching the API server,
// and nothing from the rest of the fleet: a watch per followed node gives
// both. The zero value is not usable; see NewWatcher.
type Watcher struct {
	leases  kube.Leases
	renew   func(node string, renewed time.Time)
	counted func(what string)
	// lists holds a place for each list under way.
	lists chan struct{}
	// backoffBase and backoffCap are the package's, but for tests.
	backoffBase, backoffCap time.Duration
	// streams is set until the API server refuses a watch with initial
	// events (follower.stream).
	streams atomic.Bool

	mu sync.Mutex
	// ctx is Run's, nil until Run starts.
	ctx context.Context
	// ended is set once Run's ctx ended: Start does nothing then.
	ended bool
	// followed maps each node followed to what stops its goroutine; nil
	// until Run starts it, and while the wide watch follows it.
	followed map[string]context.CancelFunc
	// wide, while set, follows every node of followed with one watch of
	// all the Leases, in place of their own.
	wide *wide
	// wideAt is Options.WideAt, or its default.
	wideAt int
	// mode is Options.Mode, or ModeAuto.
	mode Mode
	// fleet is how many node Leases the last complete list counted
	// (ListAll's, or the wide watch's): zero while unknown, and then no
	// wide watch is started, since the fleet it would deliver is unknown.
	fleet int
	wg    sync.WaitGroup
}

// NewWatcher returns a Watcher reading node Leases through client, which
// calls renew with a node's renewTime when it starts following the node,
// then with each renewTime that differs from the last reported. Calls for one
// node come one at a time, in the order seen; calls for different nodes may
// come at once, from different goroutines. renew must not block for long:
// the node's watch waits for it. Give the Watcher a client with a rate
// limiter of its own (see the package doc), so that its lists and watches
// never wait behind the caller's other requests.
func NewWatcher(client kube.Interface, renew func(node string, renewed time.Time), opts Options) *Watcher {
	counted := opts.Counted
	if counted == nil {
		counted = func(string) {}
	}
	lists := opts.ListsAtOnce
	if lists <= 0 {
		lists = DefaultListsAtOnce
	}
	wideAt := opts.WideAt
	if wideAt <= 0 {
		wideAt = DefaultWideAt
	}
	w := &Watcher{
		leases:      client.CoordinationV1().Leases(corev1.NamespaceNodeLease),
		renew:       renew,
		counted:     counted,
		lists:       make(chan struct{}, lists),
		backoffBase: backoffBase,
		backoffCap:  backoffCap,
		followed:    map[string]context.CancelFunc{},
		wideAt:      wideAt,
		mode:        cmp.Or(opts.Mode, ModeAuto),
	}
	w.streams.Store(true)
	return w
}

// ListAllPageSize is how many Leases each page of ListAll asks for: a page
// of node Leases is about 200 KB on the wire, so a fleet of 100,000 nodes
// is read in 200 requests without ever holding more than one page.
const ListAllPageSize = 500

// ListAll lists every node Lease once, a page at a time, and hands each
// renewTime to report (the node's name, its Lease's renewTime), before
// anything is followed. A controller that has just started finds every node
// of a settled fleet running the revision it targets and cannot tell from
// its caches which of them proved life since their pods settled: following
// each would open a watch per node and wait for its next renewal, hundreds
// at once. One paged list instead proves, within a second of the start,
// every node that renewed its Lease after its pod settled, and leaves only
// the nodes upgraded in the last seconds to be followed. Leases without a
// renewTime are skipped. Each page is counted as Listed, a failed one as
// Failed; the first error ends the list. Call it before Run:
// report is not ordered with the renew callback's calls.
func (w *Watcher) ListAll(ctx context.Context, report func(node string, renewed time.Time)) error {
	opts := metav1.ListOptions{Limit: ListAllPageSize}
	counted := 0
	for {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		w.counted(Listed)
		list, err := w.leases.List(lctx, opts)
		cancel()
		if err != nil {
			w.counted(Failed)
			return fmt.Errorf("listing the node Leases in %s: %w", corev1.NamespaceNodeLease, err)
		}
		counted += len(list.Items)
		for i := range list.Items {
			lease := &list.Items[i]
			if lease.Spec.RenewTime != nil {
				report(lease.Name, lease.Spec.RenewTime.Time)
			}
		}
		if list.Continue == "" {
			w.mu.Lock()
			w.fleet = counted
			w.mu.Unlock()
			return nil
		}
		opts.Continue = list.Continue
	}
}

// Run follows the nodes started before it and those started while it runs,
// until ctx ends; it returns once every node's watch has stopped. Call it
// once. Its logger comes from ctx (klog.FromContext).
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	if w.ctx != nil {
		w.mu.Unlock()
		panic("leases: Watcher.Run called twice")
	}
	w.ctx = ctx
	if w.wideWantedLocked() {
		w.goWideLocked()
	} else {
		for node := range w.followed {
			w.followLocked(node)
		}
	}
	w.mu.Unlock()

	<-ctx.Done()
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.wg.Wait()
}

// Start follows the node's Lease: its current renewTime is reported, then
// each renewal. A node already followed is left as it is (nothing is
// reported again); before Run, the node is remembered and followed once Run
// starts; after Run's ctx ended, Start does nothing.
func (w *Watcher) Start(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	if _, ok := w.followed[node]; ok {
		return
	}
	if w.ctx == nil {
		w.followed[node] = nil
		return
	}
	if w.wide != nil {
		w.followed[node] = nil
		w.wide.started(node)
		return
	}
	// Counted first, so that the node that makes the wide watch worth it
	// never starts a watch of its own only to have it cancelled: a watch
	// that would have raced the wide one to report the same renewal.
	w.followed[node] = nil
	if w.wideWantedLocked() {
		w.goWideLocked()
		return
	}
	w.followLocked(node)
}

// Stop stops following the node's Lease: its watch ends, and no renewal is
// reported for it after a report already under way, if any. Stopping a node
// not followed does nothing. Stop never waits for the node's goroutine, so
// it may be called while holding a lock that renew takes.
func (w *Watcher) Stop(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cancel := w.followed[node]; cancel != nil {
		cancel()
	}
	delete(w.followed, node)
	if w.wide != nil && w.narrowWantedLocked() {
		w.goNarrowLocked()
	}
}

// Wide reports whether one watch of every Lease follows the nodes now, in
// place of their own watches.
func (w *Watcher) Wide() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wide != nil
}

// wideWantedLocked reports whether the nodes followed cost more in watches
// of their own than one watch of every Lease: at least wideAt of them, and
// at least a quarter of the fleet, whose every renewal the wide watch
// delivers. w.mu is held.
func (w *Watcher) wideWantedLocked() bool {
	switch w.mode {
	case ModeEachNode:
		// Never: each node has its own watch.
		return false
	case ModeEveryLease:
		// Always, from Run on, followed nodes or not.
		return true
	}
	n := len(w.followed)
	return w.fleet > 0 && n >= w.wideAt && 4*n >= w.fleet
}

// narrowWantedLocked reports whether the wide watch should give way to the
// nodes' own watches again: half the thresholds that started it, so that a
// count hovering at one does not switch back and forth. w.mu is held.
func (w *Watcher) narrowWantedLocked() bool {
	if w.mode == ModeEveryLease {
		return false
	}
	n := len(w.followed)
	return 2*n < w.wideAt || 8*n < w.fleet
}

// goWideLocked stops every node's own watch and starts the wide one, which
// reports each node's current renewTime again; w.mu is held and Run
// started.
func (w *Watcher) goWideLocked() {
	for node, cancel := range w.followed {
		if cancel != nil {
			cancel()
		}
		w.followed[node] = nil
	}
	ctx, cancel := context.WithCancel(w.ctx)
	wd := &wide{w: w, cancel: cancel, logger: klog.FromContext(ctx).WithValues("namespace", corev1.NamespaceNodeLease),
		renewals: map[string]time.Time{}, nodes: map[string]*reporter{}, wake: make(chan struct{}, 1)}
	w.wide = wd
	wd.logger.V(2).Info("Following the nodes with one watch of every Lease", "nodes", len(w.followed), "leases", w.fleet)
	w.wg.Go(func() { w.loop(ctx, wd, wd.logger) })
}

// goNarrowLocked stops the wide watch and gives each node followed its own
// again; w.mu is held.
func (w *Watcher) goNarrowLocked() {
	w.wide.cancel()
	w.wide.logger.V(2).Info("Following the nodes with a watch each again", "nodes", len(w.followed), "leases", w.fleet)
	w.wide = nil
	for node := range w.followed {
		w.followLocked(node)
	}
}

// isFollowed reports whether the node is followed.
func (w *Watcher) isFollowed(node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.followed[node]
	return ok
}

// Followed is the number of nodes followed (started and not stopped): the
// watches open or opening, for a gauge.
func (w *Watcher) Followed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.followed)
}

// followLocked starts the node's goroutine; w.mu is held and Run started.
func (w *Watcher) followLocked(node string) {
	ctx, cancel := context.WithCancel(w.ctx)
	w.followed[node] = cancel
	f := &follower{w: w, reporter: reporter{node: node, logger: klog.FromContext(ctx).WithValues("node", node)}}
	w.wg.Go(func() { f.run(ctx) })
}

// follower follows one node's Lease, in one goroutine.
type follower struct {
	w *Watcher
	reporter
}

// reporter is what one followed node's reports are: each renewTime that
// differs from the last reported, and the node's having no Lease, once
// until one appears. The watch by name and the wide watch both report
// through it.
type reporter struct {
	node   string
	logger klog.Logger
	// last is the renewTime last reported, zero before the first and after
	// the Lease went missing.
	last time.Time
	// missing is set while the node is known to have no Lease.
	missing bool
}

// A source is what loop follows: one node's Lease (follower) or every Lease
// (wide).
type source interface {
	// once reports the Lease's current state, then what one watch delivers
	// until it ends or ctx does. It returns whether the watch delivered
	// anything, and an error unless the watch was closed or expired, which
	// the next call settles. errNoStreams asks for another call at once.
	once(ctx context.Context) (delivered bool, err error)
}

// errNoStreams: the API server refused a stream (see follower.stream); the
// next call lists and watches instead.
var errNoStreams = errors.New("the API server serves no watch with initial events (sendInitialEvents)")

// run follows the node's Lease until ctx ends.
func (f *follower) run(ctx context.Context) {
	f.logger.V(4).Info("Following the node's Lease")
	defer f.logger.V(4).Info("Stopped following the node's Lease")
	f.w.loop(ctx, f, f.logger)
}

// loop follows src until ctx ends: its state and a watch, and again when the
// watch ends. After a failure (counted Failed), or a watch that ended without
// delivering anything, it waits backoffBase, doubling up to backoffCap (plus
// up to a quarter of jitter): it never spins. A watch that delivers resets
// the wait.
func (w *Watcher) loop(ctx context.Context, src source, logger klog.Logger) {
	backoff := w.backoffBase
	// retry waits before the next try, and doubles the next wait.
	retry := func() bool {
		d := backoff + rand.N(backoff/4+1)
		backoff = min(2*backoff, w.backoffCap)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		delivered, err := src.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			backoff = w.backoffBase
		}
		switch {
		case errors.Is(err, errNoStreams):
			// Not a failure: the server said which way it serves. List
			// and watch at once.
			continue
		case err != nil:
			w.counted(Failed)
			logger.V(2).Info("Following the Lease failed; trying again", "err", err, "after", backoff)
		case delivered:
			continue
		default:
			// A watch that ended before delivering anything: a quiet
			// Lease's timeout, or a server that closes watches at once.
			// Either way, never list and watch in a tight loop.
			logger.V(4).Info("The Lease watch ended without events; following it again", "after", backoff)
		}
		if !retry() {
			return
		}
	}
}

// selector selects the node's Lease by name.
func (f *follower) selector() string {
	return fields.OneTermEqualSelector(metav1.ObjectNameField, f.node).String()
}

// once streams the node's Lease (stream), or lists and watches it where the
// API server serves no streams.
func (f *follower) once(ctx context.Context) (delivered bool, err error) {
	if f.w.streams.Load() {
		return f.stream(ctx)
	}
	rv, err := f.list(ctx)
	if err != nil {
		return false, err
	}
	return f.watch(ctx, rv)
}

// stream watches the node's Lease from its current state: the API server's
// watch list (sendInitialEvents, Kubernetes 1.27 and later, on by default
// since 1.32) sends the Lease as an ADDED event, then a bookmark that ends
// the initial events, then each change. One request where a list and a watch
// take two. No Lease before the bookmark: the node has none. The stream holds
// a ListsAtOnce place until its bookmark, as a list holds one until it is
// answered. A server that refuses the stream's options (400 or 422: the
// WatchList feature off, or a server too old to know it) is asked no more:
// every follower of the Watcher lists and watches from then on.
func (f *follower) stream(ctx context.Context) (delivered bool, err error) {
	release, ok := f.w.holdListPlace(ctx)
	if !ok {
		return false, nil
	}
	defer release()
	opts := metav1.ListOptions{FieldSelector: f.selector(), ResourceVersion: "0",
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}
	found, initial := false, true
	delivered, err = f.w.watchLeases(ctx, opts, f.logger, func(t watch.EventType, lease *coordinationv1.Lease) bool {
		if t == watch.Bookmark {
			if initial && lease.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				initial = false
				release()
				if !found {
					f.gone(f.w)
				}
			}
			return false
		}
		if !f.event(ctx, t, lease) {
			return false
		}
		found = t != watch.Deleted
		// The initial events stand for a list, which delivers nothing:
		// a server that closes each stream once they are sent is
		// followed again after a backoff, never in a tight loop.
		return !initial
	}, nil, nil)
	if err != nil && (apierrors.IsBadRequest(err) || apierrors.IsInvalid(err)) && !delivered {
		if f.w.streams.CompareAndSwap(true, false) {
			f.logger.V(2).Info("The API server refused a watch with initial events; following each Lease with a list and a watch", "err", err)
		}
		return false, errNoStreams
	}
	if err != nil {
		return delivered, fmt.Errorf("streaming the Lease of node %s: %w", f.node, err)
	}
	return delivered, nil
}

// list reads the node's Lease from the watch cache, reports what it found,
// and returns the resourceVersion to watch from.
func (f *follower) list(ctx context.Context) (string, error) {
	list, err := f.w.listLeases(ctx, f.selector())
	if err != nil {
		return "", fmt.Errorf("listing the Lease of node %s: %w", f.node, err)
	}
	for i := range list.Items {
		if f.mine(&list.Items[i]) {
			f.seen(ctx, f.w, renewTime(&list.Items[i]))
			return list.ResourceVersion, nil
		}
	}
	f.gone(f.w)
	return list.ResourceVersion, nil
}

// watch watches the node's Lease from resourceVersion rv and reports what
// it delivers (see Watcher.watchLeases).
func (f *follower) watch(ctx context.Context, rv string) (delivered bool, err error) {
	delivered, err = f.w.watchLeases(ctx, metav1.ListOptions{FieldSelector: f.selector(), ResourceVersion: rv}, f.logger,
		func(t watch.EventType, lease *coordinationv1.Lease) bool { return f.event(ctx, t, lease) }, nil, nil)
	if err != nil {
		return delivered, fmt.Errorf("watching the Lease of node %s: %w", f.node, err)
	}
	return delivered, nil
}

// event reports an ADDED, MODIFIED or DELETED event of the node's Lease (a
// renewal, or the Lease gone), and whether the event was the node's: the
// watch and the stream both take their events through it.
func (f *follower) event(ctx context.Context, t watch.EventType, lease *coordinationv1.Lease) bool {
	if !f.mine(lease) {
		return false
	}
	if t == watch.Deleted {
		f.gone(f.w)
	} else {
		f.seen(ctx, f.w, renewTime(lease))
	}
	return true
}

// holdListPlace waits for one of the ListsAtOnce places, and returns what
// gives it back (at most once, however often called); false if ctx ended
// first.
func (w *Watcher) holdListPlace(ctx context.Context) (release func(), ok bool) {
	select {
	case w.lists <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { <-w.lists }) }, true
}

// listLeases lists the node Leases the field selector selects (empty: all)
// from the API server's watch cache (resourceVersion "0"), within
// listTimeout, once it holds one of the ListsAtOnce places; counted as
// Listed.
func (w *Watcher) listLeases(ctx context.Context, selector string) (*coordinationv1.LeaseList, error) {
	release, ok := w.holdListPlace(ctx)
	if !ok {
		return nil, ctx.Err()
	}
	defer release()
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	w.counted(Listed)
	return w.leases.List(lctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: "0"})
}

// watchLeases watches the node Leases as opts say (their field selector,
// empty for all; the resourceVersion to start from), asking the server to
// end the watch after 5-10 min, and hands the Lease of each ADDED, MODIFIED
// or DELETED event (and BOOKMARK, if opts allow them) to handle, which says
// whether it delivered anything; each time wake fires (a nil channel never
// does) it calls woken. It returns once the watch ends or ctx does: whether
// anything was delivered, and an error unless the watch was closed or
// expired, which a new list settles. A watch started is counted as Watched.
func (w *Watcher) watchLeases(ctx context.Context, opts metav1.ListOptions, logger klog.Logger,
	handle func(watch.EventType, *coordinationv1.Lease) bool, wake <-chan struct{}, woken func()) (delivered bool, err error) {
	opts.TimeoutSeconds = ptr.To(int64(minWatchTimeout.Seconds() * (1 + rand.Float64())))
	wi, err := w.leases.Watch(ctx, opts)
	if err != nil {
		if expired(err) {
			logger.V(4).Info("The Lease watch expired; listing again", "resourceVersion", opts.ResourceVersion)
			return false, nil
		}
		return false, fmt.Errorf("from resourceVersion %s: %w", opts.ResourceVersion, err)
	}
	defer wi.Stop()
	w.counted(Watched)
	for {
		select {
		case <-ctx.Done():
			return delivered, nil
		case <-wake:
			woken()
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return delivered, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				if ev.Type == watch.Bookmark && !opts.AllowWatchBookmarks {
					continue
				}
				if lease, ok := ev.Object.(*coordinationv1.Lease); ok && handle(ev.Type, lease) {
					delivered = true
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if expired(err) {
					logger.V(4).Info("The Lease watch expired; listing again", "err", err)
					return delivered, nil
				}
				return delivered, err
			}
		}
	}
}

// mine reports whether lease is the node's: the field selector is never
// trusted alone.
func (f *follower) mine(lease *coordinationv1.Lease) bool {
	return lease.Name == f.node && inNamespace(lease)
}

// seen reports the node's Lease renewed at renewed (zero: a Lease without
// a renewTime, which reports nothing) unless it was the last reported.
func (r *reporter) seen(ctx context.Context, w *Watcher, renewed time.Time) {
	if r.missing {
		r.missing = false
		r.logger.V(2).Info("The node's Lease appeared")
	}
	if renewed.IsZero() || renewed.Equal(r.last) || ctx.Err() != nil {
		return
	}
	r.last = renewed
	w.counted(Renewed)
	w.renew(r.node, renewed)
}

// gone records that the node has no Lease, counting it once until one
// appears.
func (r *reporter) gone(w *Watcher) {
	r.last = time.Time{}
	if r.missing {
		return
	}
	r.missing = true
	w.counted(Missing)
	r.logger.V(2).Info("The node has no Lease; its proof of life must come from its Node status")
}

// expired reports whether err says the resourceVersion watched from is gone
// from the server's window: a new list settles it.
func expired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
