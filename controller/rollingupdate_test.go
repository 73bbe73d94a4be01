package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
	"github.com/prometheus/client_golang/prometheus/testutil"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func advancedDaemonSet(maxUnavailable string, opts ...dsOption) *appsv1.DaemonSet {
	opts = append(opts, withAnnotation(rollout.StrategyAnnotation, "AdvancedRollingUpdate"))
	if maxUnavailable != "" {
		opts = append(opts, withAnnotation(rollout.MaxUnavailableAnnotation, maxUnavailable))
	}
	return newDaemonSet(opts...)
}

// replacePod swaps the seeded pod of the same name for one changed by opts.
func replacePod(objs []runtime.Object, pod *corev1.Pod) []runtime.Object {
	for i, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == pod.Name {
			objs[i] = pod
		}
	}
	return objs
}

func TestRollingUpdateAllNodesReady(t *testing.T) {
	tests := []struct {
		name           string
		maxUnavailable string
		nodes          int
		want           int
	}{
		{"percentage rounds up", "30%", 10, 3},
		{"integer", "2", 10, 2},
		{"default 10%", "", 10, 1},
		{"budget above nodes", "50", 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet(tt.maxUnavailable), readyNodes(tt.nodes))...)
			f.sync()
			if got := len(f.deletedPods()); got != tt.want {
				t.Errorf("got %d pods deleted, want %d", got, tt.want)
			}
			if got := len(f.conditionPatches()); got != 0 {
				t.Errorf("got %d condition patches, want none in AdvancedRollingUpdate", got)
			}
			if got := countEvents(f.events(), corev1.EventTypeNormal, rollout.ReasonDeletedPod); got != tt.want {
				t.Errorf("got %d %s events, want %d", got, rollout.ReasonDeletedPod, tt.want)
			}
		})
	}
}

func TestSkipsNotReadyNodes(t *testing.T) {
	// Six Ready nodes, then one each NotReady, Unknown, without a Ready
	// condition, and one missing from the cache.
	ready := append(readyNodes(6), corev1.ConditionFalse, corev1.ConditionUnknown, "")
	objs := cluster(advancedDaemonSet("30%"), ready)
	objs = append(objs, newPod("pod-gone", "gone-node", oldHash))
	f := newFixture(t, objs...)
	f.sync()
	deleted := f.deletedPods()
	// 10 nodes run pods: 30% is 3, and no NotReady node uses the budget.
	if len(deleted) != 3 {
		t.Errorf("got %d pods deleted (%v), want 3", len(deleted), deleted)
	}
	for _, name := range deleted {
		if name >= "pod-6" {
			t.Errorf("got pod %s deleted, want only pods on Ready nodes (pod-0..pod-5)", name)
		}
	}
}

func TestNewPodNotYetAvailableHoldsBudget(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"new pod not Ready", newPod("pod-0", "node-0", newHash, notReady), 1},
		{"new pod Ready for less than minReadySeconds", newPod("pod-0", "node-0", newHash, readySince(10*time.Second)), 1},
		{"new pod available", newPod("pod-0", "node-0", newHash), 2},
		{"only a terminating pod", newPod("pod-0", "node-0", oldHash, terminating), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := advancedDaemonSet("2", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 60 })
			f := newFixture(t, replacePod(cluster(ds, readyNodes(5)), tt.pod)...)
			f.sync()
			if got := len(f.deletedPods()); got != tt.want {
				t.Errorf("got %d pods deleted, want %d", got, tt.want)
			}
			if slices.Contains(f.deletedPods(), "pod-0") {
				t.Errorf("got pod-0 deleted, want it left alone")
			}
		})
	}
}

func TestRequeuesAfterMinReadySeconds(t *testing.T) {
	ds := advancedDaemonSet("1", func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 2 })
	f := newFixture(t, replacePod(cluster(ds, readyNodes(2)), newPod("pod-0", "node-0", newHash, readySince(time.Second)))...)
	f.sync()
	if got := len(f.deletedPods()); got != 0 {
		t.Fatalf("got %d pods deleted, want 0 while pod-0 is not yet available", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.c.queue.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if f.c.queue.Len() != 1 {
		t.Errorf("got %d queued, want the DaemonSet requeued once pod-0 becomes available", f.c.queue.Len())
	}
}

func TestReplacesUnavailableOldPodAtOnce(t *testing.T) {
	// Budget 1, already used by node-0's unavailable new pod; node-1's old pod
	// is down anyway, so replacing it costs nothing.
	objs := cluster(advancedDaemonSet("1"), readyNodes(4))
	objs = replacePod(objs, newPod("pod-0", "node-0", newHash, notReady))
	objs = replacePod(objs, newPod("pod-1", "node-1", oldHash, notReady))
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("got pods deleted %v, want [pod-1]", got)
	}
}

func TestInvalidMaxUnavailableDeletesNothing(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("lots"), readyNodes(3))...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v, want none", got)
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonInvalidMaxUnavailable)
}

func TestNotReadyNodeTurningReadyIsUpgraded(t *testing.T) {
	// node-0..1 are upgraded; node-2 is disconnected with an old pod.
	objs := cluster(advancedDaemonSet("1"), []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionFalse}, newHash, newHash)
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v while node-2 is NotReady, want none", got)
	}

	old := newNode("node-2", corev1.ConditionFalse)
	reconnected := newNode("node-2", corev1.ConditionTrue)
	reconnected.ResourceVersion = "2"
	if err := f.indexer(reconnected).Update(cached(reconnected)); err != nil {
		t.Fatal(err)
	}
	f.c.queue.Forget(testDSKey)
	f.c.updateNode(cached(old), cached(reconnected))
	if got := f.c.queue.Len(); got != 1 {
		t.Fatalf("got %d queued after node-2 turned Ready, want 1", got)
	}
	key, _ := f.c.queue.Get()
	if key != testDSKey {
		t.Fatalf("got %q queued, want %q", key, testDSKey)
	}
	f.c.queue.Done(key)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-2"}) {
		t.Errorf("got pods deleted %v, want [pod-2]", got)
	}
}

// TestDecidesOnACacheLaggingItsDeletions: budget freed while the cache
// still shows a deleted pod running, or already lost it before its deletion
// was observed, is used at once, and those nodes count against it: exactly
// one more pod goes each time the budget grows by one.
func TestDecidesOnACacheLaggingItsDeletions(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(4))...)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
		t.Fatalf("got pods deleted %v, want [pod-0]", got)
	}
	raise := func(budget string) {
		t.Helper()
		obj, _, err := f.inf.DaemonSets.GetIndexer().GetByKey(testDSKey)
		if err != nil {
			t.Fatal(err)
		}
		ds := obj.(*appsv1.DaemonSet).DeepCopy()
		ds.Annotations[rollout.MaxUnavailableAnnotation] = budget
		if err := f.indexer(ds).Update(ds); err != nil {
			t.Fatal(err)
		}
	}

	// The cache still shows pod-0 running.
	raise("2")
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0", "pod-1"}) {
		t.Fatalf("got pods deleted %v on a cache still showing pod-0, want [pod-0 pod-1]", got)
	}

	// pod-0 and pod-1 left the cache, their events not handled yet.
	for _, obj := range f.inf.DaemonPods.GetIndexer().List() {
		if p := obj.(*podRecord); p.Name == "pod-0" || p.Name == "pod-1" {
			if err := f.inf.DaemonPods.GetIndexer().Delete(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	raise("3")
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0", "pod-1", "pod-2"}) {
		t.Errorf("got pods deleted %v on a cache that lost pod-0 and pod-1 unseen, want [pod-0 pod-1 pod-2]", got)
	}
}

func TestExpectationsPreventOverDeletion(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(3))...)
	f.sync()
	deleted := f.deletedPods()
	if len(deleted) != 1 {
		t.Fatalf("got %d pods deleted, want 1", len(deleted))
	}

	// The cache still shows the deleted pod running: no second deletion.
	f.sync()
	if got := f.deletedPods(); len(got) != 1 {
		t.Fatalf("got %d pods deleted after a sync on a stale cache, want still 1", len(got))
	}

	// The deletion shows up and the pod leaves the cache, but its replacement
	// has not arrived: the node still counts as unavailable.
	var gone *podRecord
	pods := f.inf.DaemonPods.GetIndexer()
	for _, obj := range pods.List() {
		if p := obj.(*podRecord); p.Name == deleted[0] {
			gone = p
		}
	}
	if err := pods.Delete(gone); err != nil {
		t.Fatal(err)
	}
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: testNamespace + "/" + gone.Name, Obj: gone})
	f.sync()
	if got := f.deletedPods(); len(got) != 1 {
		t.Fatalf("got %d pods deleted before the replacement appeared, want still 1", len(got))
	}

	// The replacement arrives and becomes available: the next pod goes.
	replacement := newPod(gone.Name+"-new", gone.Node, newHash)
	f.update(replacement)
	f.sync()
	if got := f.deletedPods(); len(got) != 2 {
		t.Errorf("got %d pods deleted after the replacement became available, want 2", len(got))
	}
}

// TestHeartbeatToDeletionWaitsForNoWrite: the node the next wave takes is
// recorded ahead, so the sync that a freed budget starts deletes without
// waiting for any write of the record: with every record write failing
// from then on, the deletion still goes. A node not recorded ahead is not
// deleted while its entry cannot be written.
func TestHeartbeatToDeletionWaitsForNoWrite(t *testing.T) {
	for _, ahead := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded ahead=%v", ahead), func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(3))...)
			f.sync()
			if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
				t.Fatalf("got pods deleted %v, want [pod-0]", got)
			}
			tr := f.c.existingTracker(testDSKey)
			if e := f.recordEntries()["node-1"]; e.Stage != decision.StageInFlight || e.Since != nil || !tr.record.Durable("node-1") {
				t.Fatalf("got node-1's entry %+v, want written ahead, before its deletion", e)
			}
			if !ahead {
				tr.record.Ledger.Clear("node-1")
				if _, err := f.c.records.Write(f.ctx, tr.record); err != nil {
					t.Fatal(err)
				}
			}
			for _, verb := range []string{"create", "patch"} {
				f.client.PrependReactor(verb, "configmaps", func(core.Action) (bool, runtime.Object, error) {
					return true, nil, errorString("etcd is down")
				})
			}
			// node-0 settles and proves alive: the budget is free.
			f.remove(newPod("pod-0", "node-0", oldHash))
			f.update(newPod("pod-0-new", "node-0", newHash))
			_ = f.syncErr() // the background writes fail
			want := []string{"pod-0"}
			if ahead {
				want = append(want, "pod-1")
			}
			if got := f.deletedPods(); !slices.Equal(got, want) {
				t.Errorf("got pods deleted %v, want %v", got, want)
			}
		})
	}
}

// TestNextWaveRecordedAheadAfterEveryWave: every wave's deletions record
// the wave after them ahead, while the syncs in between, which change no
// candidate, record nothing more.
func TestNextWaveRecordedAheadAfterEveryWave(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(4))...)
	f.sync()
	for i := range 3 {
		r := f.c.existingTracker(testDSKey).record
		next := fmt.Sprintf("node-%d", i+1)
		if e := f.recordEntries()[next]; e.Stage != decision.StageInFlight || e.Since != nil || !r.Durable(next) {
			t.Fatalf("wave %d: got %s's entry %+v, want written ahead", i, next, e)
		}
		writes := testutil.ToFloat64(f.c.metrics.recordWrites)
		f.sync() // nothing changed
		if got := testutil.ToFloat64(f.c.metrics.recordWrites); got != writes {
			t.Errorf("wave %d: got %v record writes after a sync that changed nothing, want %v", i, got, writes)
		}
		// The wave's node settles and proves alive: the next one goes.
		node := fmt.Sprintf("node-%d", i)
		f.remove(newPod(fmt.Sprintf("pod-%d", i), node, oldHash))
		f.update(newPod(fmt.Sprintf("pod-%d-new", i), node, newHash))
		f.sync()
		if got, want := len(f.deletedPods()), i+2; got != want {
			t.Fatalf("wave %d: got %d pods deleted, want %d", i, got, want)
		}
	}
}
