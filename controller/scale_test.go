package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	v := fresh.view()
	if v.Counts[nodeFailed] != failures || v.Counts[nodeInFlight] != 100 {
		t.Fatalf("restarted: got %d failed, %d in flight, want %d and 100", v.Counts[nodeFailed], v.Counts[nodeInFlight], failures)
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
	s := fresh.view()
	if s.Counts[nodeFailed] != 1004 {
		t.Fatalf("got %d failed, want 1004", s.Counts[nodeFailed])
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
	if got := fresh.view().Counts[nodeFailed]; got != 1005 {
		t.Fatalf("got %d failed, want 1005", got)
	}
	if st := fresh.lastStatus(); !st.Halted || st.Failed.Count != 1005 {
		t.Errorf("got halted %v with %d failed, want halted with 1005", st.Halted, st.Failed.Count)
	}
	if got := len(fresh.deletedPods()); got != 50 {
		t.Errorf("got %d pods deleted in all, want still 50 once halted", got)
	}
}

// TestRecordFitsTheAPIAtTenThousandFailures: 10,000 failed nodes with
// 253-character names fit in record ConfigMaps each under the API's 1 MiB,
// and read back exactly.
func TestRecordFitsTheAPIAtTenThousandFailures(t *testing.T) {
	f := newFixture(t, advancedDaemonSet("1"))
	rev := revision{hash: newHash, number: 2}
	r := newRolloutRecord(testDSUID, testDSKey, rev)
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("%0253d", i)
		r.set(names[i], recordEntry{State: entryFailed, Reason: strings.Repeat("r", maxRecordedReason)})
	}
	if err := f.c.writeRecord(f.ctx, r); err != nil {
		t.Fatal(err)
	}
	shards := f.records()
	if len(shards) < 6 {
		t.Errorf("got %d record ConfigMaps, want the record split across several", len(shards))
	}
	for _, obj := range shards {
		cm := obj.(*corev1.ConfigMap)
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		if size > 1<<20 {
			t.Errorf("got %s holding %d bytes, want at most 1 MiB", cm.Name, size)
		}
		if err := f.indexer(cm).Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	read, stale := f.c.loadRecord(advancedDaemonSet("1"), testDSKey, rev, nil)
	if len(stale) != 0 {
		t.Errorf("got stale records %v, want none", stale)
	}
	got, _ := read.failedNodes()
	if read.failedCount() != len(names) || !slices.Equal(got, names) {
		t.Errorf("read back %d failed nodes, want exactly the %d written", read.failedCount(), len(names))
	}
}

// TestRecordOfOtherRevisionsDeleted: a new target revision starts a new
// record; the records of older revisions are deleted.
func TestRecordOfOtherRevisionsDeleted(t *testing.T) {
	old := recordOf(map[string]recordEntry{"node-0": {State: entryFailed, Reason: "x"}})
	old.Name = recordName(testDSUID, revision{hash: oldHash, number: 1}, 0)
	old.Labels[recordHashLabel], old.Labels[recordRevisionLabel] = oldHash, "1"
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
		if err := f.indexer(obj).Add(obj); err != nil {
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

	orphan := recordOf(map[string]recordEntry{"node-0": {State: entryFailed}})
	orphan.Labels[RecordLabel] = string(types.UID("gone-uid"))
	g := newFixture(t, append(cluster(advancedDaemonSet("1"), readyNodes(1)), orphan)...)
	g.c.sweepRecords(g.ctx)
	g.c.background.Wait()
	if got := g.deleted("configmaps"); !slices.Equal(got, []string{orphan.Name}) {
		t.Errorf("got %v swept, want [%s]", got, orphan.Name)
	}
}
