package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// t0 is the fixtures' clock at the start of the deadline tests: a whole
// second, as the record keeps times.
var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// clockAt sets the controller's clock.
func (f *fixture) clockAt(at time.Time) { f.c.now = func() time.Time { return at } }

// records returns the rollout record ConfigMaps the controller wrote, as
// the API holds them: what a restarted controller finds.
func (f *fixture) records() []runtime.Object {
	f.t.Helper()
	list, err := f.client.CoreV1().ConfigMaps(testRecordNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []runtime.Object
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// withoutPods drops the named pods from a cluster's objects.
func withoutPods(objs []runtime.Object, names ...string) []runtime.Object {
	return slices.DeleteFunc(slices.Clone(objs), func(obj runtime.Object) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && slices.Contains(names, p.Name)
	})
}

// unschedulable marks a pod Pending with the scheduler's refusal.
func unschedulable(pod *corev1.Pod) {
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/5 nodes are available: 5 Insufficient cpu.",
	}}}
}

// pending marks a pod Pending with no word from any scheduler.
func pending(pod *corev1.Pod) { pod.Status = corev1.PodStatus{Phase: corev1.PodPending} }

// taint gives a node a taint the test DaemonSet's template does not tolerate.
func taint(node *corev1.Node) *corev1.Node {
	node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}
	return node
}

// TestMissingReplacementsFailAtTheDeadline: a node whose old pod the
// controller deleted is in flight, holding its budget, until a pod of the
// revision runs there: when the replacement is never created (a taint the
// new template does not tolerate), created but unschedulable, or created
// but never bound, the node fails at the deadline, and the reason names
// what happened.
func TestMissingReplacementsFailAtTheDeadline(t *testing.T) {
	const deadline = 20 * time.Second
	tests := []struct {
		name        string
		replacement *corev1.Pod // nil: none created
		wantWhy     string
	}{
		{"never created: a taint not tolerated", nil, "no replacement created (taint dedicated=edge:NoSchedule not tolerated) within 20s"},
		{"created, unschedulable", newPod("new-0", "", newHash, unschedulable, meantFor("node-0"), createdAt(t0.Add(time.Second))),
			"replacement new-0 not scheduled: Unschedulable: 0/5 nodes are available: 5 Insufficient cpu. within 20s"},
		{"created, never bound", newPod("new-0", "", newHash, pending, meantFor("node-0"), createdAt(t0.Add(time.Second))),
			"replacement new-0 not scheduled within 20s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := advancedDaemonSet("1", withAnnotation(rollout.ProgressDeadlineAnnotation, "20"))
			objs := cluster(ds, readyNodes(3))
			objs = replaceNode(objs, taint(newNode("node-0", corev1.ConditionTrue)))
			f := newFixture(t, objs...)
			f.clockAt(t0)
			f.sync()
			if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
				t.Fatalf("got pods deleted %v, want [pod-0]", got)
			}

			// The old pod is gone; the replacement, if any, appears.
			f.remove(newPod("pod-0", "node-0", oldHash))
			if tt.replacement != nil {
				f.update(tt.replacement)
			}
			since := t0
			if tt.replacement != nil {
				since = tt.replacement.CreationTimestamp.Time
			}
			for _, step := range []struct {
				at         time.Time
				wantFailed bool
			}{
				{since.Add(deadline - time.Second), false},
				{since.Add(deadline), true},
			} {
				f.clockAt(step.at)
				f.sync()
				state, why := f.rollout().State("node-0")
				if failed := state == decision.StateFailed; failed != step.wantFailed {
					t.Fatalf("at %s: got node-0 %v (%s), want failed=%v", step.at.Sub(since), state, why, step.wantFailed)
				}
				if at := f.rollout().TimerOf("node-0"); !step.wantFailed && at != since.Add(deadline) {
					t.Errorf("got node-0's verdict changing at %s, want at the deadline %s", at, since.Add(deadline))
				}
				if got := len(f.deletedPods()); got != 1 {
					t.Errorf("got %d pods deleted, want 1: node-0 holds the budget, in flight or failed", got)
				}
			}
			if got := f.recordEntries()["node-0"]; got.Stage != decision.StageFailed || got.Reason != tt.wantWhy {
				t.Errorf("got node-0's record %+v, want failed because %q", got, tt.wantWhy)
			}
		})
	}
}

// createdAt sets a pod's creation.
func createdAt(at time.Time) podOption {
	return func(pod *corev1.Pod) { pod.CreationTimestamp = metav1.NewTime(at) }
}

// TestRestartedControllerKeepsTheDeadline: a controller restarted while
// nodes wait for replacements that never come finds, in the record its
// predecessor wrote before deleting, when each deletion was issued: the
// failures land at the original deadlines.
func TestRestartedControllerKeepsTheDeadline(t *testing.T) {
	ds := advancedDaemonSet("2", withAnnotation(rollout.ProgressDeadlineAnnotation, "20"))
	objs := cluster(ds, readyNodes(5))
	objs = replaceNode(objs, taint(newNode("node-0", corev1.ConditionTrue)))
	objs = replaceNode(objs, taint(newNode("node-1", corev1.ConditionTrue)))
	first := newFixture(t, objs...)
	first.clockAt(t0)
	first.sync()
	if got := slices.Sorted(slices.Values(first.deletedPods())); !slices.Equal(got, []string{"pod-0", "pod-1"}) {
		t.Fatalf("got pods deleted %v, want [pod-0 pod-1]", got)
	}

	// Ten seconds later the old pods are gone, no replacement came, and a
	// new controller starts from the cluster alone.
	restartObjs := append(withoutPods(objs, "pod-0", "pod-1"), first.records()...)
	fresh := newFixture(t, restartObjs...)
	fresh.clockAt(t0.Add(10 * time.Second))
	fresh.sync()
	for _, node := range []string{"node-0", "node-1"} {
		state, at := fresh.state(node), fresh.rollout().TimerOf(node)
		if state != decision.StateInFlight || at.Sub(t0.Add(20*time.Second)).Abs() > time.Second {
			t.Errorf("restarted: got %s %v changing at %s, want in flight until %s", node, state, at, t0.Add(20*time.Second))
		}
	}
	if got := fresh.deletedPods(); len(got) != 0 {
		t.Errorf("restarted: got pods deleted %v, want none: the two awaited nodes hold the budget", got)
	}
	fresh.clockAt(t0.Add(19 * time.Second))
	fresh.sync()
	if got := fresh.count(decision.StateFailed); got != 0 {
		t.Errorf("a second before the deadline: got %d failed, want 0", got)
	}
	fresh.clockAt(t0.Add(20 * time.Second))
	fresh.sync()
	if got := fresh.count(decision.StateFailed); got != 2 {
		t.Errorf("at the deadline: got %d failed, want 2", got)
	}
}

// TestNodeTheTemplateLeftIsNotCounted: a node whose pod the DaemonSet
// controller removed itself, because the template no longer selects it,
// is neither in flight nor failed; nor is one the controller had deleted
// the pod of before the template moved away from it.
func TestNodeTheTemplateLeftIsNotCounted(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.ProgressDeadlineAnnotation, "20"), func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.NodeSelector = map[string]string{"fleet": "a"}
	})
	objs := cluster(ds, readyNodes(4))
	for _, n := range []string{"node-0", "node-1", "node-3"} {
		objs = labelNode(objs, n, map[string]string{"fleet": "a"})
	}
	// node-2 left the template: its pod is gone; the controller had
	// deleted it (an entry), long ago.
	objs = append(withoutPods(objs, "pod-2"), recordOf(map[string]decision.Entry{"node-2": inFlightSince("pod-2", time.Hour)}))
	f := newFixture(t, objs...)
	f.sync()
	if got := f.state("node-2"); got != decision.StateGone {
		t.Errorf("got node-2 %v, want it out of the DaemonSet", got)
	}
	if f.count(decision.StateFailed) != 0 || f.count(decision.StateInFlight) != 0 {
		t.Errorf("got %d failed and %d in flight, want none", f.count(decision.StateFailed), f.count(decision.StateInFlight))
	}
	if got := len(f.deletedPods()); got != 1 {
		t.Errorf("got %d pods deleted, want 1: the budget is free", got)
	}
	if _, ok := f.recordEntries()["node-2"]; ok {
		t.Errorf("got node-2's entry kept, want it dropped")
	}
}

// TestPodlessNotReadyNodeFailsOnlyWhenReady: a node in flight without a pod
// of the revision that is NotReady keeps its budget and is not failed for
// being NotReady (no pod of the revision ran there); it fails once it is
// Ready past the deadline.
func TestPodlessNotReadyNodeFailsOnlyWhenReady(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.ProgressDeadlineAnnotation, "20"))
	objs := cluster(ds, readyNodes(3))
	objs = replaceNode(withoutPods(objs, "pod-0"), newNode("node-0", corev1.ConditionUnknown))
	objs = append(objs, recordOf(map[string]decision.Entry{"node-0": inFlightSince("pod-0", time.Minute)}))
	f := newFixture(t, objs...)
	f.sync()
	if got := f.state("node-0"); got != decision.StateInFlight {
		t.Fatalf("NotReady past the deadline: got node-0 %v (%s), want in flight", got, f.why("node-0"))
	}
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v, want none: node-0 holds the budget", got)
	}
	f.update(newNode("node-0", corev1.ConditionTrue))
	f.sync()
	if got, why := f.rollout().State("node-0"); got != decision.StateFailed || !strings.Contains(why, "no replacement created") {
		t.Errorf("Ready past the deadline: got node-0 %v (%s), want failed, no replacement", got, why)
	}
}

// TestOTABrakeCountsMissingReplacements: an offered pod that terminated (its
// owner upgraded it) and whose replacement never comes is a failed taker:
// it counts among the failures, in the total and in the base of max-failed
// percentages, and the offers not taken are withdrawn.
func TestOTABrakeCountsMissingReplacements(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.ProgressDeadlineAnnotation, "20"),
		withAnnotation(rollout.MaxFailedAnnotation, "25%"))
	objs := cluster(ds, readyNodes(4))
	taken := newPod("pod-0", "node-0", oldHash, offeredFor(newHash), func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: t0}
		p.DeletionGracePeriodSeconds = new(int64)
	})
	objs = replacePod(objs, taken)
	f := newFixture(t, objs...)
	f.clockAt(t0.Add(time.Second))
	f.sync()
	if got := f.recordEntries()["node-0"]; got.Stage != decision.StageInFlight || got.Since == nil || !got.Since.Time.Equal(t0) {
		t.Fatalf("got node-0's record %+v, want in flight since the termination began (%s)", got, t0)
	}
	// The offers reach the cache; the pod is gone, and nothing replaces it.
	f.refreshPods("pod-1", "pod-2", "pod-3")
	f.remove(taken)
	f.clockAt(t0.Add(21 * time.Second))
	f.sync()
	s := f.lastStatus()
	if s.Total != 4 || s.Failed.Count != 1 || !s.Halted {
		t.Errorf("got total %d, failed %d, halted %v; want 4, 1 and halted (max-failed 25%% of 4)", s.Total, s.Failed.Count, s.Halted)
	}
	for _, pod := range []string{"pod-1", "pod-2", "pod-3"} {
		entries := f.conditionPatches()[pod]
		if len(entries) == 0 || entries[len(entries)-1]["reason"] != podcondition.ReasonRolloutHalted {
			t.Errorf("pod %s: got %v, want its offer withdrawn (%s)", pod, entries, podcondition.ReasonRolloutHalted)
		}
	}
}

// TestRolloutGauges: the rollout gauges say what the status says.
func TestRolloutGauges(t *testing.T) {
	objs := cluster(advancedDaemonSet("2"), []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionUnknown,
		corev1.ConditionTrue, corev1.ConditionTrue})
	objs = upgradedNode(objs, "0", corev1.ConditionTrue, 0)                          // settled
	objs = upgradedNode(objs, "1", corev1.ConditionTrue, 0, crashLooping)            // failed
	objs = upgradedNode(objs, "3", corev1.ConditionTrue, 0, notReady, createdAgo(0)) // in flight
	f := newFixture(t, objs...)
	f.sync()
	s := f.lastStatus()
	want := map[string]int{"updated": 1, "in_flight": 1, "skipped": 1, "failed": 1}
	got := map[string]int{"updated": s.Updated, "in_flight": s.InFlight, "skipped": s.Skipped, "failed": s.Failed.Count}
	for state, n := range want {
		if got[state] != n {
			t.Errorf("status: got %s %d, want %d", state, got[state], n)
		}
		if g := testutilGauge(f.c.metrics.rolloutNodes.WithLabelValues(testNamespace, testDSName, state)); g != float64(n) {
			t.Errorf("gauge %s: got %v, want %d", state, g, n)
		}
	}
	if g := testutilGauge(f.c.metrics.rolloutHalted.WithLabelValues(testNamespace, testDSName)); g != 0 {
		t.Errorf("halted gauge: got %v, want 0", g)
	}
}

// TestInvalidPartitionDeletesNothing: a partition that does not parse gets
// a Warning naming it, and nothing is deleted.
func TestInvalidPartitionDeletesNothing(t *testing.T) {
	for _, value := range []string{"-1", "many", "101%", "1.5"} {
		t.Run(value, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("2", withAnnotation(rollout.PartitionAnnotation, value)), readyNodes(3))...)
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v, want none", got)
			}
			events := f.events()
			if countEvents(events, corev1.EventTypeWarning, rollout.ReasonInvalidAnnotation) != 1 || !strings.Contains(events[0], rollout.PartitionAnnotation) ||
				!strings.Contains(events[0], `"`+value+`"`) {
				t.Errorf("got events %q, want one %s naming %s and %q", events, rollout.ReasonInvalidAnnotation, rollout.PartitionAnnotation, value)
			}
		})
	}
}

// TestOTAInvalidAnnotationOffersNothing: an OTA DaemonSet with an invalid
// control makes no new offer until it is fixed.
func TestOTAInvalidAnnotationOffersNothing(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.MaxFailedAnnotation, "none"))
	f := newFixture(t, cluster(ds, readyNodes(3))...)
	f.sync()
	for pod, entries := range f.conditionPatches() {
		for _, e := range entries {
			if e["status"] == string(corev1.ConditionTrue) {
				t.Errorf("pod %s: got offered %v, want no new offer", pod, e)
			}
		}
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonInvalidAnnotation)
}

// TestNodeLabelChangeQueuesItsDaemonSets: a node's label change queues the
// DaemonSets with a pod there, and no other.
func TestNodeLabelChangeQueuesItsDaemonSets(t *testing.T) {
	other := advancedDaemonSet("1", func(ds *appsv1.DaemonSet) { ds.Name, ds.UID = "other", "other-uid" })
	objs := append(cluster(advancedDaemonSet("1"), readyNodes(2)), other, newNode("node-9", corev1.ConditionTrue))
	elsewhere := newPod("other-pod", "node-9", oldHash)
	elsewhere.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	objs = append(objs, elsewhere)
	f := newFixture(t, objs...)
	old := newNode("node-0", corev1.ConditionTrue)
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"fleet": "canary"}
	if got := f.queuedBy(func() { f.c.updateNode(cached(old), cached(relabelled)) }); !slices.Equal(got, []string{testDSKey}) {
		t.Errorf("got %q queued after node-0's labels changed, want [%s]", got, testDSKey)
	}
}

// refreshPods brings the named pods from the API into the cache, with a new
// resourceVersion, as the watch would after the controller's writes.
func (f *fixture) refreshPods(names ...string) {
	f.t.Helper()
	for _, name := range names {
		pod, err := f.client.CoreV1().Pods(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		pod.ResourceVersion += "+"
		f.update(pod)
	}
}
