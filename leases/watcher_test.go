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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
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

// newFixture makes a Watcher on a fake clientset holding objs; it does not
// run it (see run). configure, if set, adds reactors before anything runs.
func newFixture(t *testing.T, configure func(*fake.Clientset), objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...), reports: make(chan report, 1000), counts: map[string]int{}}
	if configure != nil {
		configure(f.client)
	}
	f.w = NewWatcher(f.client, func(node string, renewed time.Time) { f.reports <- report{node, renewed} },
		Options{Counted: f.count})
	return f
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
	f := newFixture(t, nil, lease("n1", renewal(1)), lease("n2", renewal(2)), lease("n3", renewal(3)))
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
}

func TestARenewalIsReportedOnce(t *testing.T) {
	f := newFixture(t, nil, lease("n1", renewal(1)))
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
}

func TestStopEndsReports(t *testing.T) {
	// Record each node's watches (the fake's own), to see n1's stop.
	var mu sync.Mutex
	watches := map[string][]watch.Interface{}
	f := newFixture(t, func(c *fake.Clientset) {
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
}

func TestANodeWithoutLeaseIsMissingUntilItsLeaseAppears(t *testing.T) {
	f := newFixture(t, nil, lease("other", renewal(1)))
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			watches := make(chan *watch.FakeWatcher, 10)
			f := newFixture(t, func(c *fake.Clientset) {
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
			tc.end(first)

			second := nextWatch()
			if got := f.counted(Listed); got != 2 {
				t.Errorf("got %d lists, want 2: one at the start, one after the watch ended", got)
			}
			second.Modify(lease("n1", renewal(3)))
			f.want("n1", renewal(3)) // and not renewal(2) again, from the list
			if got := f.counted(Failed); got != 0 {
				t.Errorf("got %d failures counted, want none: a watch that ends is listed again at once", got)
			}
		})
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var lists atomic.Int64
			f := newFixture(t, func(c *fake.Clientset) {
				tc.configure(c)
				// First in the chain: counts every list, then lets the
				// others answer.
				c.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
					lists.Add(1)
					return false, nil, nil
				})
			}, lease("n1", renewal(1)))
			start := time.Now()
			f.w.Start("n1")
			f.run()
			waitFor(t, "a second list", func() (bool, string) {
				n := lists.Load()
				return n >= 2, fmt.Sprintf("%d lists", n)
			})
			time.Sleep(2 * time.Second)
			// Each retry waits at least backoffBase: a spin would list
			// thousands of times, a backoff at most once a backoffBase.
			elapsed := time.Since(start)
			got, bound := lists.Load(), 2+int64(elapsed/backoffBase)
			if got > bound {
				t.Errorf("got %d lists in %s, want at most %d: failures must back off", got, elapsed.Round(time.Millisecond), bound)
			}
		})
	}
}

// gatedLeases holds every list until the gate opens, and records how many
// were under way at most.
type gatedLeases struct {
	typedcoordinationv1.LeaseInterface
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
	return g.LeaseInterface.List(ctx, opts)
}

func (g *gatedLeases) state() (now, most, all int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.most, g.all
}

func TestListsUnderWayAreBounded(t *testing.T) {
	const nodes, atOnce = 10, 3
	var objs []runtime.Object
	for i := range nodes {
		objs = append(objs, lease(fmt.Sprintf("n%d", i), renewal(i)))
	}
	f := newFixture(t, nil, objs...)
	gated := &gatedLeases{LeaseInterface: f.w.leases, gate: make(chan struct{})}
	f.w = NewWatcher(f.client, func(node string, renewed time.Time) { f.reports <- report{node, renewed} },
		Options{Counted: f.count, ListsAtOnce: atOnce})
	f.w.leases = gated
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
	f := newFixture(t, nil, lease("n1", renewal(1)), lease("n2", renewal(2)))
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
