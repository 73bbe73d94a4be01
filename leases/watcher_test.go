package leases

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/internal/kube/kubetest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// deadline bounds every wait: long enough that only a hang reaches it, so
// that it proves an answer came, never how fast.
const deadline = 30 * time.Second

// base is the first renewTime of the tests' Leases; renewal(i) is the i-th,
// every 10 s, in whole seconds as a Lease's microseconds survive any copy.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func renewal(i int) time.Time { return base.Add(time.Duration(i) * 10 * time.Second) }

// lease is the node's Lease, renewed at renewed, as a kubelet holds it.
func lease(node string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &node,
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            &metav1.MicroTime{Time: renewed},
		},
	}
}

// report is one call of the renew callback.
type report struct {
	node    string
	renewed time.Time
}

func (r report) String() string {
	return fmt.Sprintf("%s at %s", r.node, r.renewed.Format(time.TimeOnly))
}

// fixture is a Watcher on a fake clientset, with what it reported and
// counted.
type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	w       *Watcher
	reports chan report
	// received is every report next has taken, in order.
	received []report

	mu     sync.Mutex
	counts map[string]int

	cancel context.CancelFunc
	done   chan struct{}
}

// server says how the fixture's fake API server answers a watch with
// initial events (sendInitialEvents), which client-go's fake ignores.
type server int

const (
	// streams: as the API server with the WatchList feature (Kubernetes'
	// default since 1.32) does (streamingLeases).
	streams server = iota
	// refuses: as the API server without it does, 422 Invalid (lists and
	// watches then follow each Lease).
	refuses
)

func (s server) String() string {
	return [...]string{"a server that streams", "a server that refuses streams"}[s]
}

// servers are both kinds, for the tests that must hold on either.
var servers = []server{streams, refuses}

// newFixture makes a Watcher on a fake clientset holding objs, on a server
// that streams; it does not run it (see run). configure, if set, adds
// reactors before anything runs.
func newFixture(t *testing.T, configure func(*fake.Clientset), objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureOn(t, streams, configure, objs...)
}

// newFixtureOn is newFixture on the server given.
func newFixtureOn(t *testing.T, s server, configure func(*fake.Clientset), objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...), reports: make(chan report, 1000), counts: map[string]int{}}
	if configure != nil {
		configure(f.client)
	}
	f.w = NewWatcher(kubetest.Wrap(f.client), func(node string, renewed time.Time) { f.reports <- report{node, renewed} },
		Options{Counted: f.count})
	f.w.leases = streamingLeases{Leases: f.w.leases, refuse: s == refuses}
	return f
}

// streamingLeases answers a watch with initial events (sendInitialEvents) as
// an API server does, over client-go's fake, which ignores the option: an
// ADDED event for each Lease the field selector selects, the bookmark that
// ends them, then the changes; or, if refuse, 422 as a server without the
// WatchList feature does. Other requests go to the fake as they are.
type streamingLeases struct {
	kube.Leases
	refuse bool
}

// refusal is what kube-apiserver answers a watch with initial events when
// its WatchList feature is off.
var refusal = apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "",
	field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")})

func (s streamingLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		return s.Leases.Watch(ctx, opts)
	}
	if s.refuse {
		return nil, refusal
	}
	if opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !opts.AllowWatchBookmarks {
		return nil, apierrors.NewBadRequest("sendInitialEvents needs resourceVersionMatch NotOlderThan and allowWatchBookmarks")
	}
	selector, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// The changes are watched before the state is listed: nothing falls
	// between, and what is in both is reported once.
	changes, err := s.Leases.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	list, err := s.Leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		changes.Stop()
		return nil, err
	}
	result := make(chan watch.Event)
	out := watch.NewProxyWatcher(result)
	go func() {
		defer close(result)
		defer changes.Stop()
		send := func(ev watch.Event) bool {
			select {
			case result <- ev:
				return true
			case <-out.StopChan():
				return false
			}
		}
		for i := range list.Items {
			l := &list.Items[i]
			if selector.Matches(fields.Set{"metadata.name": l.Name, "metadata.namespace": l.Namespace}) && !send(watch.Event{Type: watch.Added, Object: l}) {
				return
			}
		}
		end := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: list.ResourceVersion,
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		if !send(watch.Event{Type: watch.Bookmark, Object: end}) {
			return
		}
		for {
			select {
			case ev, ok := <-changes.ResultChan():
				if !ok || !send(ev) {
					return
				}
			case <-out.StopChan():
				return
			}
		}
	}()
	return out, nil
}

func (f *fixture) count(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[what]++
}

// counted is how many times what was counted.
func (f *fixture) counted(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[what]
}

// run runs the Watcher until the test ends, then checks that Run returned:
// every node's goroutine ended.
func (f *fixture) run() {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		f.w.Run(ctx)
	}()
	f.t.Cleanup(f.stop)
}

// stop ends Run's context and waits for Run to return.
func (f *fixture) stop() {
	f.t.Helper()
	f.cancel()
	select {
	case <-f.done:
	case <-time.After(deadline):
		f.t.Fatalf("Run had not returned %s after its context ended, want it to return once every watch stopped", deadline)
	}
}

// next is the next report.
func (f *fixture) next() report {
	f.t.Helper()
	select {
	case r := <-f.reports:
		f.received = append(f.received, r)
		return r
	case <-time.After(deadline):
		f.t.Fatalf("no report in %s, want one (reports so far: %v)", deadline, f.received)
		return report{}
	}
}

// wantNoReport checks that no report is waiting, saying when none should
// have come.
func (f *fixture) wantNoReport(when string) {
	f.t.Helper()
	select {
	case r := <-f.reports:
		f.t.Errorf("got report %v %s, want none", r, when)
	default:
	}
}

// want takes the next report and checks it.
func (f *fixture) want(node string, renewed time.Time) {
	f.t.Helper()
	if got, want := f.next(), (report{node, renewed}); got != want {
		f.t.Fatalf("got report %v, want %v (reports before: %v)", got, want, f.received[:len(f.received)-1])
	}
}

// wantNodes takes a report for each of nodes, in any order, and checks
// their renewTimes.
func (f *fixture) wantNodes(want map[string]time.Time) {
	f.t.Helper()
	got := map[string]time.Time{}
	for range want {
		r := f.next()
		got[r.node] = r.renewed
	}
	for node, renewed := range want {
		if !got[node].Equal(renewed) {
			f.t.Errorf("got renewal %s for node %s, want %s (reports: %v)", got[node], node, renewed, f.received)
		}
	}
}

// waitCounted waits until what was counted at least n times.
func (f *fixture) waitCounted(what string, n int) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%q counted %d times", what, n), func() (bool, string) {
		got := f.counted(what)
		return got >= n, fmt.Sprintf("counted %d times", got)
	})
}

// waitFor polls cond until it holds, failing the test at the deadline with
// cond's last state.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("gave up after %s waiting for %s: %s", deadline, what, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// renew renews the node's Lease at renewed through the fake clientset.
func (f *fixture) renew(node string, renewed time.Time) {
	f.t.Helper()
	f.update(node, func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: renewed} })
}

// update changes the node's Lease through the fake clientset.
func (f *fixture) update(node string, change func(*coordinationv1.Lease)) {
	f.t.Helper()
	leases := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	l, err := leases.Get(f.t.Context(), node, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("reading the Lease of %s: %v", node, err)
	}
	change(l)
	if _, err := leases.Update(f.t.Context(), l, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("updating the Lease of %s: %v", node, err)
	}
}

func TestStartReportsTheCurrentRenewal(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) {
			f := newFixtureOn(t, s, nil, lease("n1", renewal(1)), lease("n2", renewal(2)), lease("n3", renewal(3)))
			f.w.Start("n1") // before Run: remembered
			f.run()
			f.want("n1", renewal(1))
			f.w.Start("n2")
			f.want("n2", renewal(2))
			f.w.Start("n2") // already followed: nothing new
			if got := f.w.Followed(); got != 2 {
				t.Errorf("got %d nodes followed, want 2", got)
			}

			// The fake serves every Lease to every list and watch, whatever the
			// selector: n3's renewal reaches n1's watch first, then n1's own, so by
			// n1's report its watch has passed n3's over.
			f.waitCounted(Watched, 2)
			f.renew("n3", renewal(10))
			f.renew("n1", renewal(11))
			f.want("n1", renewal(11))
			if got := f.counted(Renewed); got != 3 {
				t.Errorf("got %d renewals counted, want 3", got)
			}
		})
	}
}

func TestARenewalIsReportedOnce(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) {
			f := newFixtureOn(t, s, nil, lease("n1", renewal(1)))
			f.w.Start("n1")
			f.run()
			f.want("n1", renewal(1))

			f.renew("n1", renewal(2))
			f.want("n1", renewal(2))
			// The same renewTime again (another field changed): not a renewal. The
			// next report must be the next renewal, as one node's reports keep the
			// order of its Lease's changes.
			f.update("n1", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](41) })
			f.renew("n1", renewal(3))
			f.want("n1", renewal(3))
			if got := f.counted(Renewed); got != 3 {
				t.Errorf("got %d renewals counted, want 3", got)
			}
		})
	}
}

func TestStopEndsReports(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) {
			// Record each node's watches (the fake's own), to see n1's stop.
			var mu sync.Mutex
			watches := map[string][]watch.Interface{}
			f := newFixtureOn(t, s, func(c *fake.Clientset) {
				c.PrependWatchReactor("leases", func(a k8stesting.Action) (bool, watch.Interface, error) {
					opts := a.(k8stesting.WatchActionImpl).ListOptions
					w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
					if err != nil {
						return true, nil, err
					}
					mu.Lock()
					defer mu.Unlock()
					watches[opts.FieldSelector] = append(watches[opts.FieldSelector], w)
					return true, w, nil
				})
			}, lease("n1", renewal(1)), lease("n2", renewal(2)))
			f.w.Start("n1")
			f.w.Start("n2")
			f.run()
			f.wantNodes(map[string]time.Time{"n1": renewal(1), "n2": renewal(2)})
			f.waitCounted(Watched, 2)

			f.w.Stop("n1")
			f.w.Stop("n1") // twice: nothing more
			if got := f.w.Followed(); got != 1 {
				t.Errorf("got %d nodes followed after a Stop, want 1", got)
			}
			waitFor(t, "n1's watch stopped", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				ws := watches["metadata.name=n1"]
				if len(ws) != 1 {
					return false, fmt.Sprintf("%d watches of n1, want 1", len(ws))
				}
				stopped := ws[0].(interface{ IsStopped() bool }).IsStopped()
				return stopped, fmt.Sprintf("stopped: %t", stopped)
			})
			f.renew("n1", renewal(10))
			f.renew("n2", renewal(11))
			f.want("n2", renewal(11))
			f.wantNoReport("after n1 was stopped")

			f.w.Start("n1") // followed again: its current renewTime is reported again
			f.want("n1", renewal(10))
		})
	}
}

func TestANodeWithoutLeaseIsMissingUntilItsLeaseAppears(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) {
			f := newFixtureOn(t, s, nil, lease("other", renewal(1)))
			f.w.Start("n1")
			f.run()
			f.waitCounted(Missing, 1)
			f.waitCounted(Watched, 1)

			leases := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
			if _, err := leases.Create(t.Context(), lease("n1", renewal(2)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.want("n1", renewal(2))

			if err := leases.Delete(t.Context(), "n1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			f.waitCounted(Missing, 2)
			// Recreated with the renewTime it had: the Lease is back, reported again.
			if _, err := leases.Create(t.Context(), lease("n1", renewal(2)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.want("n1", renewal(2))
			if got := f.counted(Missing); got != 2 {
				t.Errorf("got %d missing counted, want 2: once at the start, once on deletion", got)
			}
			if got := f.counted(Failed); got != 0 {
				t.Errorf("got %d failures counted, want none: a missing Lease is no error", got)
			}
		})
	}
}

func TestAnEndedWatchIsReestablished(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*watch.FakeWatcher)
	}{
		{"closed by the server", func(w *watch.FakeWatcher) { w.Stop() }},
		{"expired", func(w *watch.FakeWatcher) {
			w.Error(&apierrors.NewResourceExpired("too old resource version: 1 (2)").ErrStatus)
		}},
		{"gone (as older servers say it)", func(w *watch.FakeWatcher) {
			w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone})
		}},
	} {
		for _, s := range servers {
			t.Run(tc.name+" on "+s.String(), func(t *testing.T) {
				t.Parallel()
				testAnEndedWatchIsReestablished(t, s, tc.end)
			})
		}
	}
}

// testAnEndedWatchIsReestablished is TestAnEndedWatchIsReestablished on
// server s, with the first watch ended by end.
func testAnEndedWatchIsReestablished(t *testing.T, s server, end func(*watch.FakeWatcher)) {
	watches := make(chan *watch.FakeWatcher, 10)
	f := newFixtureOn(t, s, func(c *fake.Clientset) {
		c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
			w := watch.NewFake()
			watches <- w
			return true, w, nil
		})
	}, lease("n1", renewal(1)))
	nextWatch := func() *watch.FakeWatcher {
		t.Helper()
		select {
		case w := <-watches:
			return w
		case <-time.After(deadline):
			t.Fatalf("no watch in %s, want one (lists: %d)", deadline, f.counted(Listed))
			return nil
		}
	}
	f.w.Start("n1")
	f.run()
	f.want("n1", renewal(1))

	first := nextWatch()
	renewed := lease("n1", renewal(2))
	if err := f.client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), renewed, corev1.NamespaceNodeLease); err != nil {
		t.Fatal(err)
	}
	first.Modify(renewed)
	f.want("n1", renewal(2))
	end(first)

	second := nextWatch()
	// Each follow is a list and a watch, or one stream.
	wantLists := map[server]int{streams: 0, refuses: 2}[s]
	if got := f.counted(Listed); got != wantLists {
		t.Errorf("got %d lists, want %d: one per follow, at the start and after the watch ended, where the server does not stream", got, wantLists)
	}
	second.Modify(lease("n1", renewal(3)))
	f.want("n1", renewal(3)) // and not renewal(2) again, from the list or the initial events
	if got := f.counted(Failed); got != 0 {
		t.Errorf("got %d failures counted, want none: a watch that ends is followed again at once", got)
	}
	if got := f.counted(Watched); got != 2 {
		t.Errorf("got %d watches, want 2", got)
	}
}

func TestFailuresBackOff(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	for _, tc := range []struct {
		name      string
		configure func(*fake.Clientset)
	}{
		{"a list fails", func(c *fake.Clientset) {
			c.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, unavailable
			})
		}},
		{"a watch fails", func(c *fake.Clientset) {
			c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, nil, unavailable
			})
		}},
		{"a watch reports an error", func(c *fake.Clientset) {
			c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFakeWithChanSize(1, false)
				w.Error(&apierrors.NewInternalError(fmt.Errorf("etcd is down")).ErrStatus)
				return true, w, nil
			})
		}},
		{"a watch closes at once", func(c *fake.Clientset) {
			c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFake()
				w.Stop()
				return true, w, nil
			})
		}},
	} {
		for _, s := range servers {
			t.Run(tc.name+" on "+s.String(), func(t *testing.T) {
				t.Parallel()
				// A try is a list where the server does not stream, a
				// stream where it does.
				var tries atomic.Int64
				f := newFixtureOn(t, s, func(c *fake.Clientset) {
					tc.configure(c)
					// First in the chain: count every try, then let the
					// others answer.
					c.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
						if s == refuses {
							tries.Add(1)
						}
						return false, nil, nil
					})
					c.PrependWatchReactor("leases", func(a k8stesting.Action) (bool, watch.Interface, error) {
						if initial := a.(k8stesting.WatchActionImpl).ListOptions.SendInitialEvents; initial != nil && *initial {
							tries.Add(1)
						}
						return false, nil, nil
					})
				}, lease("n1", renewal(1)))
				start := time.Now()
				f.w.Start("n1")
				f.run()
				waitFor(t, "a second try", func() (bool, string) {
					n := tries.Load()
					return n >= 2, fmt.Sprintf("%d tries", n)
				})
				time.Sleep(2 * time.Second)
				// Each retry waits at least backoffBase: a spin would try
				// thousands of times, a backoff at most once a backoffBase.
				elapsed := time.Since(start)
				got, bound := tries.Load(), 2+int64(elapsed/backoffBase)
				if got > bound {
					t.Errorf("got %d tries in %s, want at most %d: failures must back off", got, elapsed.Round(time.Millisecond), bound)
				}
			})
		}
	}
}

// gatedLeases holds every list until the gate opens, and records how many
// were under way at most.
type gatedLeases struct {
	kube.Leases
	gate           chan struct{}
	mu             sync.Mutex
	now, most, all int
}

func (g *gatedLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	g.mu.Lock()
	g.now++
	g.all++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Leases.List(ctx, opts)
}

func (g *gatedLeases) state() (now, most, all int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.most, g.all
}

// TestListsUnderWayAreBounded: at most ListsAtOnce lists, or streams until
// their initial events end, are under way at once.
func TestListsUnderWayAreBounded(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) { testListsUnderWayAreBounded(t, s) })
	}
}

// testListsUnderWayAreBounded is TestListsUnderWayAreBounded on server s,
// whose lists (its own, or those that give a stream its initial events) wait
// for a gate.
func testListsUnderWayAreBounded(t *testing.T, s server) {
	const nodes, atOnce = 10, 3
	var objs []runtime.Object
	for i := range nodes {
		objs = append(objs, lease(fmt.Sprintf("n%d", i), renewal(i)))
	}
	f := newFixtureOn(t, s, nil, objs...)
	gated := &gatedLeases{Leases: f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease), gate: make(chan struct{})}
	f.w = NewWatcher(kubetest.Wrap(f.client), func(node string, renewed time.Time) { f.reports <- report{node, renewed} },
		Options{Counted: f.count, ListsAtOnce: atOnce})
	f.w.leases = streamingLeases{Leases: gated, refuse: s == refuses}
	want := map[string]time.Time{}
	for i := range nodes {
		node := fmt.Sprintf("n%d", i)
		f.w.Start(node)
		want[node] = renewal(i)
	}
	f.run()
	waitFor(t, fmt.Sprintf("%d lists under way", atOnce), func() (bool, string) {
		now, _, _ := gated.state()
		return now == atOnce, fmt.Sprintf("%d under way", now)
	})
	close(gated.gate)
	f.wantNodes(want)
	if _, most, all := gated.state(); most != atOnce || all != nodes {
		t.Errorf("got %d lists, at most %d at once, want %d lists, at most %d at once", all, most, nodes, atOnce)
	}
}

func TestRunReturnsOnceItsContextEnds(t *testing.T) {
	for _, s := range servers {
		t.Run(s.String(), func(t *testing.T) {
			f := newFixtureOn(t, s, nil, lease("n1", renewal(1)), lease("n2", renewal(2)))
			f.w.Start("n1")
			f.w.Start("n2")
			f.w.Start("n3") // no Lease: its watch is open all the same
			f.run()
			f.wantNodes(map[string]time.Time{"n1": renewal(1), "n2": renewal(2)})
			f.waitCounted(Watched, 3)
			f.stop() // fails the test unless Run returns

			f.w.Start("n4")
			if got := f.w.Followed(); got != 3 {
				t.Errorf("got %d nodes followed after Run returned and n4 was started, want 3: Start does nothing then", got)
			}
			f.wantNoReport("after Run returned")
		})
	}
}

// TestListAllReadsEveryPage: ListAll follows the list's continue tokens to
// the last page, asks for pages of ListAllPageSize, reports every Lease that
// has a renewTime, and counts each page as a list.
func TestListAllReadsEveryPage(t *testing.T) {
	pages := [][]coordinationv1.Lease{
		{*lease("node-a", renewal(1)), *lease("node-b", renewal(2))},
		{*lease("node-c", renewal(3)), {ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: "node-new"}}},
	}
	var asked []metav1.ListOptions
	f := newFixture(t, func(c *fake.Clientset) {
		c.PrependReactor("list", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			opts := a.(k8stesting.ListActionImpl).ListOptions
			asked = append(asked, opts)
			list := &coordinationv1.LeaseList{Items: pages[0]}
			list.Continue = "page-2"
			if opts.Continue == "page-2" {
				list = &coordinationv1.LeaseList{Items: pages[1]}
			}
			return true, list, nil
		})
	})
	var got []report
	if err := f.w.ListAll(context.Background(), func(node string, renewed time.Time) { got = append(got, report{node, renewed}) }); err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	want := []report{{"node-a", renewal(1)}, {"node-b", renewal(2)}, {"node-c", renewal(3)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got reports %v, want %v (node-new has no renewTime)", got, want)
	}
	if len(asked) != 2 || asked[0].Limit != ListAllPageSize || asked[1].Continue != "page-2" {
		t.Errorf("got lists %+v, want two pages of %d, the second from the first's continue token", asked, ListAllPageSize)
	}
	if got := f.counted(Listed); got != 2 {
		t.Errorf("got %d lists counted, want 2", got)
	}
}

// TestListAllReturnsItsError: a refused list ends ListAll with an error
// that names the namespace, and is counted as a failure.
func TestListAllReturnsItsError(t *testing.T) {
	f := newFixture(t, func(c *fake.Clientset) {
		c.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "", fmt.Errorf("RBAC"))
		})
	})
	err := f.w.ListAll(context.Background(), func(string, time.Time) { t.Error("got a report, want none") })
	if !apierrors.IsForbidden(err) {
		t.Errorf("got %v, want the Forbidden error wrapped", err)
	}
	if got := f.counted(Failed); got != 1 {
		t.Errorf("got %d failures counted, want 1", got)
	}
}

// TestAStreamFollowsANodeInOneRequest: where the API server streams, each
// node followed costs one watch, which reports its current renewal and then
// each change, and no list.
func TestAStreamFollowsANodeInOneRequest(t *testing.T) {
	f := newFixture(t, nil, lease("n1", renewal(1)), lease("n2", renewal(2)))
	f.w.Start("n1")
	f.w.Start("n2")
	f.run()
	f.wantNodes(map[string]time.Time{"n1": renewal(1), "n2": renewal(2)})
	f.waitCounted(Watched, 2)
	f.renew("n2", renewal(20))
	f.want("n2", renewal(20))
	if got := f.counted(Listed); got != 0 {
		t.Errorf("got %d lists, want none: the streams' initial events stand for them", got)
	}
	if got := f.counted(Watched); got != 2 {
		t.Errorf("got %d watches, want 2: one per node", got)
	}
}

// askedStreams counts the watches with initial events asked of it.
type askedStreams struct {
	kube.Leases
	n atomic.Int64
}

func (a *askedStreams) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		a.n.Add(1)
	}
	return a.Leases.Watch(ctx, opts)
}

// TestAServerThatRefusesStreamsIsAskedOnce: once the API server refuses a
// stream, the Watcher lists and watches every node it follows, then and
// later, without asking again; the refusal is no failure.
func TestAServerThatRefusesStreamsIsAskedOnce(t *testing.T) {
	f := newFixtureOn(t, refuses, nil, lease("n1", renewal(1)), lease("n2", renewal(2)), lease("n3", renewal(3)))
	asked := &askedStreams{Leases: f.w.leases}
	f.w.leases = asked
	f.w.Start("n1")
	f.run()
	f.want("n1", renewal(1))
	f.w.Start("n2")
	f.w.Start("n3")
	f.wantNodes(map[string]time.Time{"n2": renewal(2), "n3": renewal(3)})
	f.waitCounted(Watched, 3)
	f.renew("n3", renewal(30))
	f.want("n3", renewal(30))
	if got := asked.n.Load(); got != 1 {
		t.Errorf("got %d streams asked for, want 1: a refusal stands for the Watcher's life", got)
	}
	if got := f.counted(Listed); got != 3 {
		t.Errorf("got %d lists, want 3: one per node", got)
	}
	if got := f.counted(Failed); got != 0 {
		t.Errorf("got %d failures counted, want none: a refused stream says how the server serves", got)
	}
}
