package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/leases"
	"github.com/prometheus/client_golang/prometheus/testutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
)

// nodeLease is a node's Lease as a kubelet keeps it, renewed ago.
func nodeLease(node string, ago time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new(node), LeaseDurationSeconds: new(int32(40)),
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-ago)}},
	}
}

// leaseReads returns the nodes whose Lease the controller listed or watched,
// by the name its field selector asks for, in order.
func (f *fixture) leaseReads() []string {
	var nodes []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != "leases" {
			continue
		}
		var sel fields.Selector
		switch a := a.(type) {
		case core.ListAction:
			sel = a.GetListRestrictions().Fields
		case core.WatchAction:
			sel = a.GetWatchRestrictions().Fields
		default:
			continue
		}
		if name, ok := sel.RequiresExactMatch(metav1.ObjectNameField); ok {
			nodes = append(nodes, name)
		}
	}
	return nodes
}

// TestProofOfLifeFromLeasesOfInFlightNodesOnly: on nodes that heartbeat as
// kubelets do (a Lease renewed every 10 s, the Node status rarely), the
// controller watches the Lease of the node it waits on, and no other; its
// renewal after the new pod settled settles the node at once, and the next
// pod goes.
func TestProofOfLifeFromLeasesOfInFlightNodesOnly(t *testing.T) {
	objs := cluster(advancedDaemonSet("1"), readyNodes(4))
	for i, node := range []string{"node-0", "node-1", "node-2", "node-3"} {
		// Node status written 4 minutes ago, as a kubelet every 5 minutes.
		objs = replaceNode(objs, heartbeatAgo(newNode(node, corev1.ConditionTrue), 4*time.Minute))
		objs = append(objs, nodeLease(node, time.Duration(i)*time.Second))
	}
	// node-0 was upgraded; its pod settled 100 s ago; its Lease was last
	// renewed before that.
	objs = replacePod(objs, newPod("pod-0", "node-0", newHash))
	objs = replaceLease(objs, nodeLease("node-0", 150*time.Second))
	f := newFixture(t, objs...)
	ctx, cancel := context.WithCancel(f.ctx)
	ran := make(chan struct{})
	defer func() { cancel(); <-ran }()
	go func() { f.c.leases.Run(ctx); close(ran) }()

	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v before node-0 proved alive, want none", got)
	}
	f.drainQueue()
	eventually(t, "node-0's Lease watched", func() bool {
		return slices.Contains(f.leaseReads(), "node-0") && testutil.ToFloat64(f.c.metrics.leaseRequests.WithLabelValues(leases.Watched)) > 0
	})

	// node-0's kubelet renews its Lease: the reader sees it and the
	// DaemonSet is queued.
	renewed := nodeLease("node-0", 0)
	if err := f.client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), renewed, corev1.NamespaceNodeLease); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the DaemonSet queued by node-0's renewal", func() bool { return f.c.queue.Len() > 0 })
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("got pods deleted %v after node-0's Lease renewal, want [pod-1]", got)
	}
	for _, node := range f.leaseReads() {
		if node != "node-0" {
			t.Errorf("got the Lease of %s followed, want only node-0's: nothing waits on it", node)
		}
	}
	if got := f.state("node-0"); got != decision.StateSettled {
		t.Errorf("got node-0 %v, want settled", got)
	}
	// The renewals seen are counted: the one the first list found, then
	// the one the watch delivered.
	if renewals := testutil.ToFloat64(f.c.metrics.leaseReads.WithLabelValues(leases.Renewed)); renewals < 2 {
		t.Errorf("got %v renewals counted, want at least 2 (the first list's, and the renewal watched)", renewals)
	}
}

// TestFreshControllerLearnsRenewalsByOneList: a controller that starts on
// an upgraded fleet (every pod settled 100 s ago, the Node statuses 4
// minutes old, as kubelets on Leases write them) learns every node's last
// Lease renewal from one list before its first sync: the nodes that renewed
// since their pods settled are settled at once, with no challenge written
// and no Lease followed; the one whose last renewal came before its pod
// settled is the only one followed and challenged.
func TestFreshControllerLearnsRenewalsByOneList(t *testing.T) {
	objs := cluster(advancedDaemonSet("1"), readyNodes(4), newHash, newHash, newHash, newHash)
	for i, node := range []string{"node-0", "node-1", "node-2", "node-3"} {
		objs = replaceNode(objs, heartbeatAgo(newNode(node, corev1.ConditionTrue), 4*time.Minute))
		objs = append(objs, nodeLease(node, time.Duration(i+1)*time.Second))
	}
	objs = replaceLease(objs, nodeLease("node-3", 150*time.Second))
	// A Lease of a node the cluster no longer has is left out.
	objs = append(objs, nodeLease("node-gone", time.Second))
	f := newFixture(t, objs...)

	f.c.learnRenewals(f.ctx)
	f.sync()
	var lists []string
	for _, a := range f.client.Actions() {
		if l, ok := a.(core.ListAction); ok && a.GetResource().Resource == "leases" {
			lists = append(lists, l.GetListRestrictions().Fields.String())
		}
	}
	if !slices.Equal(lists, []string{""}) {
		t.Errorf("got Lease lists with field selectors %q, want one list of every Lease", lists)
	}
	for _, node := range []string{"node-0", "node-1", "node-2"} {
		if got := f.state(node); got != decision.StateSettled {
			t.Errorf("got %s %v, want settled by the renewal the list found", node, got)
		}
	}
	if got := f.state("node-3"); got != decision.StateInFlight {
		t.Errorf("got node-3 %v, want in flight: its last renewal came before its pod settled", got)
	}
	if got := f.challenges(); len(got) != 1 || got["pod-3"] == "" {
		t.Errorf("got challenges on %v, want one, on pod-3", slices.Sorted(maps.Keys(got)))
	}
	if got, want := f.c.heartbeats.byNode, []string{"node-3"}; !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
		t.Errorf("got the Leases of %v awaited, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	if got := f.c.heartbeats.seen("node-gone"); !got.IsZero() {
		t.Errorf("got a renewal kept for node-gone (%v), want none: no such node", got)
	}
}

// TestFreshControllerWithoutLeaseList: a controller that may not list the
// Leases starts all the same, and follows the nodes it waits on one by one.
func TestFreshControllerWithoutLeaseList(t *testing.T) {
	objs := cluster(advancedDaemonSet("1"), readyNodes(2), newHash, newHash)
	for _, node := range []string{"node-0", "node-1"} {
		objs = replaceNode(objs, heartbeatAgo(newNode(node, corev1.ConditionTrue), 4*time.Minute))
		objs = append(objs, nodeLease(node, time.Second))
	}
	f := newFixture(t, objs...)
	f.client.PrependReactor("list", "leases", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("no"))
	})
	f.c.learnRenewals(f.ctx)
	f.sync()
	if got := f.c.heartbeats.byNode; len(got) != 2 {
		t.Errorf("got %d nodes awaited, want 2: nothing learned, each followed", len(got))
	}
}

func replaceLease(objs []runtime.Object, lease *coordinationv1.Lease) []runtime.Object {
	for i, obj := range objs {
		if l, ok := obj.(*coordinationv1.Lease); ok && l.Name == lease.Name {
			objs[i] = lease
		}
	}
	return objs
}

// eventually waits, generously, for cond: it proves an answer comes, not
// how fast.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartMidWave: a controller started in the middle of a wave (one
// node's replacement not ready yet, another's not created yet) rebuilds
// from the cluster and its record exactly what its predecessor knew: it
// deletes nothing while both are in flight, and exactly one more pod once
// one of them settles.
func TestRestartMidWave(t *testing.T) {
	objs := cluster(advancedDaemonSet("2"), readyNodes(6))
	first := newFixture(t, objs...)
	first.sync()
	if got := slices.Sorted(slices.Values(first.deletedPods())); !slices.Equal(got, []string{"pod-0", "pod-1"}) {
		t.Fatalf("got pods deleted %v, want [pod-0 pod-1]", got)
	}
	// Mid-wave: node-0's replacement runs, not ready yet; node-1's is not
	// created yet.
	mid := withoutPods(objs, "pod-0", "pod-1")
	mid = append(mid, newPod("new-0", "node-0", newHash, notReady, createdAgo(time.Second)))
	fresh := newFixture(t, append(mid, first.records()...)...)
	fresh.sync()
	if got := fresh.deletedPods(); len(got) != 0 {
		t.Fatalf("restarted mid-wave: got pods deleted %v, want none (two nodes in flight, budget 2)", got)
	}
	if got := fresh.count(decision.StateInFlight); got != 2 {
		t.Errorf("restarted: got %d in flight, want 2", got)
	}
	// node-0's replacement settles, and its node heartbeats: one more goes.
	settled := newPod("new-0", "node-0", newHash)
	settled.ResourceVersion = "2"
	fresh.update(settled)
	fresh.update(newNode("node-0", corev1.ConditionTrue))
	fresh.sync()
	if got := fresh.deletedPods(); !slices.Equal(got, []string{"pod-2"}) {
		t.Errorf("got pods deleted %v once node-0 settled, want [pod-2]", got)
	}
}

// TestHeartbeatProvesOnlyAfterTheSettledSecond: a pod's ready time is known
// to the second, a Lease renewal to the microsecond: a renewal within the
// second the pod turned ready may have come before it, and proves nothing.
func TestHeartbeatProvesOnlyAfterTheSettledSecond(t *testing.T) {
	settled := time.Date(2026, 11, 25, 10, 0, 10, 0, time.UTC) // shown as 10:00:10, turned ready at 10:00:10.x
	for _, tc := range []struct {
		sent time.Time
		want bool
	}{
		{settled.Add(-time.Second), false},
		{settled, false},
		{settled.Add(500 * time.Millisecond), false},
		{settled.Add(999 * time.Millisecond), false},
		{settled.Add(time.Second), true},
		{settled.Add(3 * time.Second), true},
	} {
		if got := decision.ProvesAlive(tc.sent, settled); got != tc.want {
			t.Errorf("a heartbeat at %s for a pod settled at %s: got proves=%v, want %v", tc.sent.Format("15:04:05.000"), settled.Format("15:04:05"), got, tc.want)
		}
	}
}

// TestClockSetBackProvesNothingEarly: a node whose clock ran ahead renewed
// its Lease with a time in the future; once its clock is set back, its next
// renewals read earlier, and the one in the future no longer counts: a pod
// that settles now is not proven by it.
func TestClockSetBackProvesNothingEarly(t *testing.T) {
	h := newHeartbeats(nopFollower{})
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	h.observe("n", now.Add(time.Hour)) // the clock an hour ahead
	h.observe("n", now)                // set back
	if got := h.seen("n"); !got.Equal(now) {
		t.Errorf("got the last heartbeat at %s, want %s: the one in the future is gone", got, now)
	}
	settled := now.Add(time.Minute)
	if decision.ProvesAlive(h.seen("n"), settled) {
		t.Errorf("got a pod settled after the last renewal proven, want it waiting for the next")
	}
}

// nopFollower follows no Lease.
type nopFollower struct{}

func (nopFollower) Start(string) {}
func (nopFollower) Stop(string)  {}
