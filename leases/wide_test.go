package leases

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fleet is n nodes' Leases, node-1 … node-n, node-i renewed at renewal(i).
func fleet(n int) []runtime.Object {
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = lease(fmt.Sprintf("node-%d", i+1), renewal(i+1))
	}
	return objs
}

// selectors records every Lease watch's field selector.
type selectors struct {
	mu   sync.Mutex
	seen []string
}

// record has the fake clientset record its Lease watches' selectors.
func (s *selectors) record(c *fake.Clientset) {
	c.PrependWatchReactor("leases", func(a k8stesting.Action) (bool, watch.Interface, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen = append(s.seen, a.(k8stesting.WatchActionImpl).ListOptions.FieldSelector)
		return false, nil, nil
	})
}

// last is the last watch's selector.
func (s *selectors) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// learnFleet has the Watcher count the fleet, as the controller's ListAll
// at start does.
func (f *fixture) learnFleet() {
	f.t.Helper()
	if err := f.w.ListAll(context.Background(), func(string, time.Time) {}); err != nil {
		f.t.Fatalf("ListAll: %v", err)
	}
}

// TestManyNodesFollowedShareOneWatch: once a quarter of the fleet and
// WideAt nodes are followed, one watch of every Lease replaces theirs; it
// reports the followed nodes' renewals and nobody else's, and a node started
// meanwhile gets its current renewTime at once.
func TestManyNodesFollowedShareOneWatch(t *testing.T) {
	var watches selectors
	f := newFixture(t, watches.record, fleet(8)...)
	f.w.wideAt = 2
	f.learnFleet()
	f.run()
	f.w.Start("node-1")
	f.want("node-1", renewal(1))
	if f.w.Wide() {
		t.Fatalf("got a wide watch for 1 node followed, want its own")
	}
	f.waitCounted(Watched, 1) // node-1's own: its list reported before it
	f.w.Start("node-2")       // 2 of 8: wide
	if !f.w.Wide() {
		t.Fatalf("got no wide watch for 2 of 8 nodes followed at WideAt 2, want one")
	}
	// The wide list reports both again: a report the caller has is harmless.
	f.wantNodes(map[string]time.Time{"node-1": renewal(1), "node-2": renewal(2)})
	f.waitCounted(Watched, 2)      // node-1's own, then the wide one
	f.renew("node-5", renewal(50)) // not followed
	f.renew("node-2", renewal(20))
	f.want("node-2", renewal(20))
	f.w.Start("node-3")
	f.want("node-3", renewal(3))
	if got := watches.last(); got != "" {
		t.Errorf("got the last watch selecting %q, want every Lease", got)
	}
	f.wantNoReport("for a node not followed")
}

// TestTheWideWatchGivesWayWhenFewAreFollowed: stopped down to below half the
// thresholds, the nodes left get their own watches again, and a stopped
// node is reported no more.
func TestTheWideWatchGivesWayWhenFewAreFollowed(t *testing.T) {
	f := newFixture(t, nil, fleet(8)...)
	f.w.wideAt = 4
	f.learnFleet()
	for i := 1; i <= 4; i++ {
		f.w.Start(fmt.Sprintf("node-%d", i)) // before Run: Run starts wide
	}
	f.run()
	f.wantNodes(map[string]time.Time{"node-1": renewal(1), "node-2": renewal(2), "node-3": renewal(3), "node-4": renewal(4)})
	if !f.w.Wide() {
		t.Fatalf("got no wide watch for 4 of 8 nodes at WideAt 4, want one")
	}
	f.w.Stop("node-1")
	f.w.Stop("node-2")
	if !f.w.Wide() {
		t.Errorf("got the wide watch stopped at 2 nodes, want it kept until fewer than 2 (half of WideAt)")
	}
	f.w.Stop("node-3")
	if f.w.Wide() {
		t.Fatalf("got a wide watch for 1 node, want its own watch again")
	}
	f.want("node-4", renewal(4)) // its own list reports it again
	f.renew("node-1", renewal(10))
	f.renew("node-4", renewal(40))
	f.want("node-4", renewal(40))
	if got := f.w.Followed(); got != 1 {
		t.Errorf("got %d followed, want 1", got)
	}
}

// TestNoWideWatchWithoutTheFleetsSize: a Watcher that never counted the
// fleet cannot tell what a watch of every Lease would cost, and keeps the
// nodes' own watches.
func TestNoWideWatchWithoutTheFleetsSize(t *testing.T) {
	f := newFixture(t, nil, fleet(3)...)
	f.w.wideAt = 2
	f.run()
	f.w.Start("node-1")
	f.w.Start("node-2")
	f.w.Start("node-3")
	f.wantNodes(map[string]time.Time{"node-1": renewal(1), "node-2": renewal(2), "node-3": renewal(3)})
	if f.w.Wide() {
		t.Errorf("got a wide watch with the fleet's size unknown, want the nodes' own")
	}
}

// TestAWideWatchReportsAMissingLeaseOnceAndItsArrival: a followed node
// without a Lease is counted missing once; the Lease it then gets is
// reported.
func TestAWideWatchReportsAMissingLeaseOnceAndItsArrival(t *testing.T) {
	f := newFixture(t, nil, fleet(4)...)
	f.w.wideAt = 2
	f.learnFleet()
	f.w.Start("node-1")
	f.w.Start("node-9") // no Lease
	f.run()
	f.want("node-1", renewal(1))
	f.waitCounted(Missing, 1)
	f.waitCounted(Watched, 1)
	f.renew("node-1", renewal(10)) // the watch goes on; node-9 is not counted again
	f.want("node-1", renewal(10))
	if got := f.counted(Missing); got != 1 {
		t.Errorf("got node-9 counted missing %d times, want once", got)
	}
	created := lease("node-9", renewal(90))
	if _, err := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(t.Context(), created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.want("node-9", renewal(90))
}

// TestModeEveryLeaseWatchesFromRunOn: under ModeEveryLease one watch of
// every Lease starts with Run, before any node is followed and without the
// fleet's size, and stays when the last node followed stops.
func TestModeEveryLeaseWatchesFromRunOn(t *testing.T) {
	var watches selectors
	f := newFixture(t, watches.record, fleet(8)...)
	f.w.mode = ModeEveryLease
	f.run()
	f.waitCounted(Watched, 1) // with no node followed
	if !f.w.Wide() {
		t.Fatalf("got no wide watch at Run under %s, want one", ModeEveryLease)
	}
	f.w.Start("node-1")
	f.want("node-1", renewal(1))
	f.renew("node-2", renewal(20)) // not followed
	f.renew("node-1", renewal(10))
	f.want("node-1", renewal(10))
	f.w.Stop("node-1")
	if !f.w.Wide() {
		t.Errorf("got the wide watch stopped with no node followed, want it kept under %s", ModeEveryLease)
	}
	if got := watches.last(); got != "" {
		t.Errorf("got the watch selecting %q, want every Lease", got)
	}
	f.wantNoReport("with no node followed")
}

// TestModeEachNodeNeverWatchesWide: under ModeEachNode every node followed
// has its own watch, however much of the fleet is followed.
func TestModeEachNodeNeverWatchesWide(t *testing.T) {
	var watches selectors
	f := newFixture(t, watches.record, fleet(4)...)
	f.w.mode = ModeEachNode
	f.w.wideAt = 1
	f.learnFleet()
	f.run()
	for i := 1; i <= 4; i++ {
		node := fmt.Sprintf("node-%d", i)
		f.w.Start(node)
		f.want(node, renewal(i))
	}
	if f.w.Wide() {
		t.Fatalf("got a wide watch for the whole fleet under %s, want each node's own", ModeEachNode)
	}
	f.waitCounted(Watched, 4)
	if got, want := watches.last(), "metadata.name=node-"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("got the last watch selecting %q, want one node's Lease by name", got)
	}
}

// TestParseModeNamesTheModes: every Mode parses back, and a wrong one is
// refused with the valid ones named.
func TestParseModeNamesTheModes(t *testing.T) {
	for _, m := range Modes {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v; want %q, nil", m, got, err, m)
		}
	}
	_, err := ParseMode("all")
	if err == nil {
		t.Fatalf("ParseMode(\"all\") = nil error, want one")
	}
	if got, want := err.Error(), `"all": want auto, each-node or every-lease`; got != want {
		t.Errorf("got error %q, want %q", got, want)
	}
}
