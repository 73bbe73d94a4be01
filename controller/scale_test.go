package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/decision"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// TestFailureRecordAtScale: on 2,000 nodes with max-unavailable 1,100 and
// max-failed 1,005, 1,000 failures are recorded, and a restarted controller
// counts exactly 1,000: the failed nodes hold the budget though they
// recovered, exactly five more failures halt the rollout, and deletions stay
// at max-unavailable minus failed minus in flight. A record that kept only
// a few names, or a count of them, cannot pass.
func TestFailureRecordAtScale(t *testing.T) {
	const nodes, failures = 2000, 1000
	ds := advancedDaemonSet("1100", withAnnotation(rollout.MaxFailedAnnotation, "1005"))
	objs := cluster(ds, readyNodes(nodes))
	index := map[string]int{}
	for i, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			index[p.Name] = i
		}
	}
	set := func(objs []runtime.Object, pod *corev1.Pod) { objs[index[pod.Name]] = pod }
	for i := range failures {
		set(objs, newPod(fmt.Sprintf("pod-%d", i), fmt.Sprintf("node-%d", i), newHash, crashLooping, createdAgo(10*time.Second)))
	}
	first := newFixture(t, objs...)
	first.sync()
	deleted := first.deletedPods()
	if len(deleted) != 100 {
		t.Fatalf("got %d pods deleted, want 100: budget 1,100, 1,000 failed", len(deleted))
	}
	if s := first.lastStatus(); s.Failed.Count != failures || s.Halted || len(s.Failed.Nodes) != rollout.ShownNodes {
		t.Fatalf("got failed %d (naming %d) halted %v, want %d (naming %d), not halted", s.Failed.Count, len(s.Failed.Nodes), s.Halted, failures, rollout.ShownNodes)
	}

	// A restart: the failed nodes recovered (their pods settled), the 100
	// deleted pods are gone and not replaced yet.
	for i := range failures {
		set(objs, newPod(fmt.Sprintf("pod-%d", i), fmt.Sprintf("node-%d", i), newHash))
	}
	objs = append(withoutPods(objs, deleted...), first.records()...)
	fresh := newFixture(t, objs...)
	fresh.sync()
	if fresh.count(decision.StateFailed) != failures || fresh.count(decision.StateInFlight) != 100 {
		t.Fatalf("restarted: got %d failed, %d in flight, want %d and 100", fresh.count(decision.StateFailed), fresh.count(decision.StateInFlight), failures)
	}
	if got := fresh.deletedPods(); len(got) != 0 {
		t.Fatalf("restarted: got %d pods deleted, want none: 1,100 - 1,000 failed - 100 in flight", len(got))
	}

	// Four of the in-flight nodes fail and fifty settle: fifty more go.
	slices.Sort(deleted)
	replace := func(pod string, opts ...podOption) {
		node := "node-" + strings.TrimPrefix(pod, "pod-")
		fresh.update(newPod(pod+"-new", node, newHash, opts...))
	}
	for _, pod := range deleted[:4] {
		replace(pod, crashLooping, createdAgo(time.Second))
	}
	for _, pod := range deleted[4:54] {
		replace(pod)
	}
	fresh.clockAt(time.Now().Add(2 * statusWriteInterval)) // the status write is due
	fresh.sync()
	if got := fresh.count(decision.StateFailed); got != 1004 {
		t.Fatalf("got %d failed, want 1004", got)
	}
	if got := len(fresh.deletedPods()); got != 50 {
		t.Errorf("got %d pods deleted, want 50: 1,100 - 1,004 failed - 46 in flight", got)
	}
	if halted := fresh.lastStatus().Halted; halted {
		t.Errorf("got halted at 1,004 failures, want not (max-failed 1,005)")
	}

	// The fifth: halted, nothing more deleted.
	replace(deleted[54], crashLooping, createdAgo(time.Second))
	fresh.clockAt(time.Now().Add(4 * statusWriteInterval))
	fresh.sync()
	if got := fresh.count(decision.StateFailed); got != 1005 {
		t.Fatalf("got %d failed, want 1005", got)
	}
	if st := fresh.lastStatus(); !st.Halted || st.Failed.Count != 1005 {
		t.Errorf("got halted %v with %d failed, want halted with 1005", st.Halted, st.Failed.Count)
	}
	if got := len(fresh.deletedPods()); got != 50 {
		t.Errorf("got %d pods deleted in all, want still 50 once halted", got)
	}
}

// TestRecordOfOtherRevisionsDeleted: a new target revision starts a new
// record; the records of older revisions are deleted.
func TestRecordOfOtherRevisionsDeleted(t *testing.T) {
	old := recordOf(map[string]decision.Entry{"node-0": failedEntry("x")})
	old.Name = fmt.Sprintf("edgeota-rollout-%s-1-0", testDSUID)
	old.Labels["edgeota.io/revision-hash"], old.Labels["edgeota.io/revision-number"] = oldHash, "1"
	f := newFixture(t, append(cluster(advancedDaemonSet("1"), readyNodes(2)), old)...)
	f.sync()
	if got := f.deleted("configmaps"); !slices.Equal(got, []string{old.Name}) {
		t.Errorf("got record ConfigMaps deleted %v, want [%s]", got, old.Name)
	}
	if s := f.lastStatus(); s.Failed.Count != 0 {
		t.Errorf("got %d failed for the new revision, want none: node-0 failed for the old one", s.Failed.Count)
	}
}

// TestRecordsOfADeletedDaemonSetDeleted: a DaemonSet's records go with it,
// and a controller starting after a DaemonSet was deleted sweeps them.
func TestRecordsOfADeletedDaemonSetDeleted(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(2))...)
	f.sync()
	records := f.records()
	if len(records) == 0 {
		t.Fatalf("got no record written, want the in-flight entries")
	}
	for _, obj := range records {
		if err := f.indexer(obj).Add(cached(obj)); err != nil {
			t.Fatal(err)
		}
	}
	ds := newDaemonSet()
	if err := f.indexer(ds).Delete(ds); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := f.deleted("configmaps"); len(got) != len(records) {
		t.Errorf("got record ConfigMaps deleted %v, want the %d of the deleted DaemonSet", got, len(records))
	}

	orphan := recordOf(map[string]decision.Entry{"node-0": failedEntry("")})
	orphan.Labels[recordstore.Label] = string(types.UID("gone-uid"))
	g := newFixture(t, append(cluster(advancedDaemonSet("1"), readyNodes(1)), orphan)...)
	g.c.sweepRecords(g.ctx)
	g.c.background.Wait()
	if got := g.deleted("configmaps"); !slices.Equal(got, []string{orphan.Name}) {
		t.Errorf("got %v swept, want [%s]", got, orphan.Name)
	}
}
