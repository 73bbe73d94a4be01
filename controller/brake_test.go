package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
)

// rolloutStatuses returns the rollout statuses written, in order.
func (f *fixture) rolloutStatuses() []rollout.Status {
	f.t.Helper()
	var out []rollout.Status
	for _, a := range f.allWrites() {
		p, ok := a.(core.PatchAction)
		if !ok || a.GetResource().Resource != "daemonsets" {
			continue
		}
		annotations := f.patchAnnotations(p)
		if len(annotations) != 1 {
			f.t.Errorf("got a DaemonSet patch of annotations %v, want %s alone", annotations, rollout.RolloutStatusAnnotation)
		}
		var s rollout.Status
		if err := json.Unmarshal([]byte(annotations[rollout.RolloutStatusAnnotation]), &s); err != nil {
			f.t.Fatalf("decoding the rollout status %q: %v", annotations[rollout.RolloutStatusAnnotation], err)
		}
		out = append(out, s)
	}
	return out
}

// lastStatus returns the last rollout status written, failing without one.
func (f *fixture) lastStatus() rollout.Status {
	f.t.Helper()
	all := f.rolloutStatuses()
	if len(all) == 0 {
		f.t.Fatalf("got writes %v, want a rollout status written", f.writes())
	}
	return all[len(all)-1]
}

// replaceNode swaps the seeded node of the same name.
func replaceNode(objs []runtime.Object, node *corev1.Node) []runtime.Object {
	for i, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok && n.Name == node.Name {
			objs[i] = node
		}
	}
	return objs
}

// upgradedNode makes node-i run a new pod changed by opts, on a node whose
// Ready status and last heartbeat (ago) are given.
func upgradedNode(objs []runtime.Object, i string, ready corev1.ConditionStatus, heartbeat time.Duration, opts ...podOption) []runtime.Object {
	objs = replacePod(objs, newPod("pod-"+i, "node-"+i, newHash, opts...))
	return replaceNode(objs, heartbeatAgo(newNode("node-"+i, ready), heartbeat))
}

func TestInFlightUntilHeartbeatAfterAvailability(t *testing.T) {
	tests := []struct {
		name      string
		heartbeat time.Duration // ago; the pod settled 100 s ago
		want      []string
	}{
		{"no heartbeat since the pod settled", 200 * time.Second, nil},
		{"heartbeat since", 10 * time.Second, []string{"pod-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := upgradedNode(cluster(advancedDaemonSet("1"), readyNodes(3)), "0", corev1.ConditionTrue, tt.heartbeat)
			f := newFixture(t, objs...)
			f.sync()
			if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, tt.want) {
				t.Errorf("got pods deleted %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHeartbeatRequeuesWaitingDaemonSets: a heartbeat syncs the DaemonSets
// whose in-flight node it settles: sent after the node's new pod settled
// (100 s ago), from that node. A heartbeat sent before proves nothing and
// syncs nothing.
func TestHeartbeatRequeuesWaitingDaemonSets(t *testing.T) {
	objs := upgradedNode(cluster(advancedDaemonSet("1"), readyNodes(3)), "0", corev1.ConditionTrue, 200*time.Second)
	f := newFixture(t, objs...)
	f.sync()
	f.c.queue.Forget(testDSKey)
	for f.c.queue.Len() > 0 { // the pacing of status writes may have queued it
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	old := heartbeatAgo(newNode("node-0", corev1.ConditionTrue), 200*time.Second)
	for _, step := range []struct {
		what string
		node *corev1.Node
		want int
	}{
		{"node-0's heartbeat sent before its pod settled", heartbeatAgo(newNode("node-0", corev1.ConditionTrue), 150*time.Second), 0},
		{"node-1's heartbeat: nothing waits for node-1", newNode("node-1", corev1.ConditionTrue), 0},
		{"node-0's heartbeat since its pod settled", newNode("node-0", corev1.ConditionTrue), 1},
	} {
		f.c.updateNode(cached(old), cached(step.node))
		if got := f.c.queue.Len(); got != step.want {
			t.Errorf("after %s: got %d queued, want %d", step.what, got, step.want)
		}
	}
}

func TestFailedOnNotReadyWhileInFlight(t *testing.T) {
	// node-0 upgraded, its pod settled 100 s ago, then it went NotReady with
	// its last heartbeat before that: the new version cut it off.
	objs := upgradedNode(cluster(advancedDaemonSet("2"), readyNodes(5)), "0", corev1.ConditionUnknown, 200*time.Second)
	f := newFixture(t, objs...)
	f.sync()
	s := f.lastStatus()
	if s.Failed.Count != 1 || !slices.Equal(s.Failed.Nodes, []string{"node-0"}) || s.Halted {
		t.Errorf("got failed %+v halted %v, want node-0 failed, not halted (max-failed 2)", s.Failed, s.Halted)
	}
	// The failed node holds one of the two units of budget.
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("got pods deleted %v, want [pod-1]", got)
	}
}

func TestFailedAtTheDeadline(t *testing.T) {
	tests := []struct {
		name       string
		ds         *appsv1.DaemonSet
		pod        []podOption
		wantFailed int
	}{
		{"not ready within the default 600 s", advancedDaemonSet("2"), []podOption{notReady, createdAgo(11 * time.Minute)}, 1},
		{"not ready, deadline not reached", advancedDaemonSet("2"), []podOption{notReady, createdAgo(9 * time.Minute)}, 0},
		{"not ready past edgeota.io/progress-deadline-seconds", advancedDaemonSet("2", withAnnotation(rollout.ProgressDeadlineAnnotation, "60")),
			[]podOption{notReady, createdAgo(2 * time.Minute)}, 1},
		{"crash loop fails at once", advancedDaemonSet("2"), []podOption{crashLooping, createdAgo(10 * time.Second)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := upgradedNode(cluster(tt.ds, readyNodes(5)), "0", corev1.ConditionTrue, 0, tt.pod...)
			f := newFixture(t, objs...)
			f.sync()
			if got := f.lastStatus().Failed.Count; got != tt.wantFailed {
				t.Errorf("got %d failed, want %d", got, tt.wantFailed)
			}
			// Failed or in flight, node-0 holds one unit of the budget of 2.
			if got := len(f.deletedPods()); got != 1 {
				t.Errorf("got %d pods deleted, want 1", got)
			}
		})
	}
}

func TestSettledThenNotReadyIsSkipped(t *testing.T) {
	// node-0 settled (heartbeat after its pod settled), then went offline.
	objs := upgradedNode(cluster(advancedDaemonSet("2"), readyNodes(5)), "0", corev1.ConditionUnknown, 10*time.Second)
	f := newFixture(t, objs...)
	f.sync()
	s := f.lastStatus()
	if s.Failed.Count != 0 || s.Skipped != 1 {
		t.Errorf("got failed %d skipped %d, want 0 and 1", s.Failed.Count, s.Skipped)
	}
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-1", "pod-2"}) {
		t.Errorf("got pods deleted %v, want [pod-1 pod-2]: a skipped node holds no budget", got)
	}
}

func TestUntouchedNotReadyIsSkipped(t *testing.T) {
	objs := cluster(advancedDaemonSet("1"), []corev1.ConditionStatus{corev1.ConditionUnknown, corev1.ConditionTrue, corev1.ConditionTrue})
	f := newFixture(t, objs...)
	f.sync()
	s := f.lastStatus()
	if s.Failed.Count != 0 || s.Skipped != 1 {
		t.Errorf("got failed %d skipped %d, want 0 and 1", s.Failed.Count, s.Skipped)
	}
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("got pods deleted %v, want [pod-1]", got)
	}
}

// TestUnavailableOldPodsCountAgainstTheBudget: a previous version that never
// became Ready left two nodes down (budget 2); the next version replaces
// those pods, which frees nothing, and deletes no healthy pod.
func TestUnavailableOldPodsCountAgainstTheBudget(t *testing.T) {
	objs := cluster(advancedDaemonSet("2"), readyNodes(8))
	objs = replacePod(objs, newPod("pod-0", "node-0", "older0", notReady))
	objs = replacePod(objs, newPod("pod-1", "node-1", "older0", notReady))
	f := newFixture(t, objs...)
	f.sync()
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-0", "pod-1"}) {
		t.Errorf("got pods deleted %v, want [pod-0 pod-1]: the down pods replaced, no healthy one", got)
	}
}

func TestFailedNodesHaltTheRollout(t *testing.T) {
	objs := cluster(advancedDaemonSet("3", withAnnotation(rollout.MaxFailedAnnotation, "2")), readyNodes(6))
	objs = upgradedNode(objs, "0", corev1.ConditionTrue, 0, crashLooping)
	objs = upgradedNode(objs, "1", corev1.ConditionUnknown, 200*time.Second)
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v, want none once max-failed nodes failed, though budget is left", got)
	}
	s := f.lastStatus()
	if !s.Halted || s.Failed.Count != 2 || !slices.Equal(s.Failed.Nodes, []string{"node-0", "node-1"}) {
		t.Errorf("got %+v, want halted with node-0 and node-1 failed", s)
	}
	events := f.events()
	if got := countEvents(events, corev1.EventTypeWarning, rollout.ReasonRolloutHalted); got != 1 {
		t.Fatalf("got events %q, want one %s", events, rollout.ReasonRolloutHalted)
	}
	for _, e := range events {
		if strings.Contains(e, rollout.ReasonRolloutHalted) && (!strings.Contains(e, "node-0 (CrashLoopBackOff") || !strings.Contains(e, "node-1 (NotReady after the upgrade")) {
			t.Errorf("got %q, want the failed nodes named with why", e)
		}
	}
	if got := testutil.ToFloat64(f.c.metrics.rolloutHalted.WithLabelValues(testNamespace, testDSName)); got != 1 {
		t.Errorf("got halted gauge %v, want 1", got)
	}
}

// TestFailureRecordedBeforeTheNextDeletion: the sync that sees a failure
// writes it to the rollout record, then shows it in the rollout status,
// before it deletes anything; when either write fails, it deletes nothing.
func TestFailureRecordedBeforeTheNextDeletion(t *testing.T) {
	for _, fails := range []string{"", "daemonsets", "configmaps"} {
		objs := upgradedNode(cluster(advancedDaemonSet("3"), readyNodes(6)), "0", corev1.ConditionUnknown, 200*time.Second)
		f := newFixture(t, objs...)
		if fails != "" {
			for _, verb := range []string{"create", "patch"} {
				f.client.PrependReactor(verb, fails, func(core.Action) (bool, runtime.Object, error) {
					return true, nil, errorString("etcd is down")
				})
			}
			if err := f.syncErr(); err == nil {
				t.Errorf("%s failing: got no error, want one (to retry)", fails)
			}
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("%s failing: got pods deleted %v while the failure could not be recorded, want none", fails, got)
			}
			continue
		}
		f.sync()
		var order []string
		for _, a := range f.allWrites() {
			order = append(order, a.GetVerb()+" "+a.GetResource().Resource)
		}
		record, status, deletion := slices.Index(order, "create configmaps"), slices.Index(order, "patch daemonsets"), slices.Index(order, "delete pods")
		if record < 0 || status < 0 || deletion < 0 || !(record < status && status < deletion) {
			t.Errorf("got writes %v, want the record, then the status, before the deletions", order)
		}
		if got := f.recordEntries()["node-0"]; got.Stage != decision.StageFailed {
			t.Errorf("got node-0's record entry %+v, want it failed", got)
		}
	}
}

// TestStatusWrittenAfterTheDeletions: without a new failure to record, the
// sync starts its deletions first and writes the rollout status after, both
// in the background, so that the write never delays a deletion the budget
// allows; a failing write still deletes, and requeues with backoff.
func TestStatusWrittenAfterTheDeletions(t *testing.T) {
	for _, patchFails := range []bool{false, true} {
		f := newFixture(t, cluster(advancedDaemonSet("2"), readyNodes(6))...)
		var startedFirst int
		f.client.PrependReactor("patch", "daemonsets", func(core.Action) (bool, runtime.Object, error) {
			startedFirst = f.deletionsIssued()
			if patchFails {
				return true, nil, errorString("etcd is down")
			}
			return false, nil, nil
		})
		f.sync()
		if got, want := f.c.queue.NumRequeues(testDSKey), map[bool]int{false: 0, true: 1}[patchFails]; got != want {
			t.Errorf("status write failing %v: got %d requeues with backoff, want %d", patchFails, got, want)
		}
		if startedFirst != 2 {
			t.Errorf("status write failing %v: got %d deletions started before the status write, want 2", patchFails, startedFirst)
		}
		var writes []string
		for _, a := range f.allWrites() {
			if a.GetResource().Resource != "configmaps" { // the record: see TestRecordWrittenBeforeDeleting
				writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
		slices.Sort(writes)
		if want := []string{"delete pods", "delete pods", "patch daemonsets"}; !slices.Equal(writes, want) {
			t.Errorf("status write failing %v: got writes %v, want %v", patchFails, writes, want)
		}
	}
}

// TestFailedDeletionRequeues: a deletion runs after its sync returned; when
// it fails, its node no longer counts as in flight, the DaemonSet says
// FailedDelete, and it is queued again with backoff, as after a failed sync.
func TestFailedDeletionRequeues(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(3))...)
	f.client.PrependReactor("delete", "pods", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errorString("etcd is down")
	})
	f.sync()
	if got := f.deletionsIssued(); got != 0 {
		t.Errorf("got %d deletions in flight after the deletion failed, want none", got)
	}
	if got := f.c.queue.NumRequeues(testDSKey); got != 1 {
		t.Errorf("got %d requeues with backoff, want 1", got)
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonFailedDelete)
}

// TestFailureRecordRebuiltByAFreshController: a controller that fails two
// nodes and halts writes the record; a fresh controller (restart, new
// leader) reading only its caches and that annotation halts too, even though
// one node has recovered, and says nothing new.
func TestFailureRecordRebuiltByAFreshController(t *testing.T) {
	ds := advancedDaemonSet("3", withAnnotation(rollout.MaxFailedAnnotation, "2"))
	objs := cluster(ds, readyNodes(6))
	objs = upgradedNode(objs, "0", corev1.ConditionTrue, 0, crashLooping)
	objs = upgradedNode(objs, "1", corev1.ConditionUnknown, 200*time.Second)
	first := newFixture(t, objs...)
	first.sync()
	want := first.lastStatus()
	if !want.Halted {
		t.Fatalf("got %+v from the first controller, want halted", want)
	}

	data, _ := json.Marshal(want)
	restarted := ds.DeepCopy()
	restarted.Annotations[rollout.RolloutStatusAnnotation] = string(data)
	objs = replaceDaemonSet(objs, restarted)
	objs = upgradedNode(objs, "1", corev1.ConditionTrue, 0) // node-1 came back, settled
	fresh := newFixture(t, objs...)
	fresh.sync()
	if got := fresh.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v by the fresh controller, want none: still halted", got)
	}
	if got := fresh.rolloutStatuses(); len(got) != 0 {
		t.Errorf("got statuses written %+v, want none: nothing changed", got)
	}
	if events := fresh.events(); countEvents(events, corev1.EventTypeWarning, rollout.ReasonRolloutHalted) != 0 {
		t.Errorf("got events %q, want no second %s", events, rollout.ReasonRolloutHalted)
	}
}

// TestHaltEnds: raising max-failed above the failures, or a new template,
// lets the rollout go on; a rollback to an old hash gets a new revision
// number, so it starts a fresh record too.
func TestHaltEnds(t *testing.T) {
	halted := rollout.Status{Revision: 2, Hash: newHash, Total: 6, Failed: rollout.FailedNodes{Count: 2, Nodes: []string{"node-4", "node-5"}}, Halted: true}
	tests := []struct {
		name       string
		record     rollout.Status
		maxFailed  string
		wantHalted bool
	}{
		{"still halted", halted, "2", true},
		{"max-failed raised", halted, "3", false},
		{"new template", func() rollout.Status { s := halted; s.Hash, s.Revision = "older0", 1; return s }(), "2", false},
		{"rollback: same hash, older number", func() rollout.Status { s := halted; s.Revision = 1; return s }(), "2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, _ := json.Marshal(tt.record)
			ds := advancedDaemonSet("3", withAnnotation(rollout.MaxFailedAnnotation, tt.maxFailed), withAnnotation(rollout.RolloutStatusAnnotation, string(data)))
			f := newFixture(t, cluster(ds, readyNodes(6))...)
			f.sync()
			halted := len(f.deletedPods()) == 0
			if halted != tt.wantHalted {
				t.Errorf("got pods deleted %v, want halted=%v", f.deletedPods(), tt.wantHalted)
			}
			if !tt.wantHalted && tt.maxFailed == "3" {
				// Recorded failures keep their share of the budget.
				if got := len(f.deletedPods()); got != 1 {
					t.Errorf("got %d deleted, want 1: two of the budget of 3 are held by the failed nodes", got)
				}
				f.wantEvent(f.events(), corev1.EventTypeNormal, rollout.ReasonRolloutResumed)
			}
		})
	}
}

func TestPauseHolds(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("2", withAnnotation(rollout.PausedAnnotation, "true")), readyNodes(4))...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v while paused, want none", got)
	}
	if s := f.lastStatus(); !s.Paused || s.HeldBack != 4 {
		t.Errorf("got %+v, want paused with 4 nodes held back", s)
	}
}

func TestInvalidAnnotationsDeleteNothing(t *testing.T) {
	for _, tt := range []struct{ key, value string }{
		{rollout.MaxFailedAnnotation, "0"},
		{rollout.MaxFailedAnnotation, "many"},
		{rollout.ProgressDeadlineAnnotation, "-5"},
		{rollout.PausedAnnotation, "maybe"},
	} {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("2", withAnnotation(tt.key, tt.value)), readyNodes(3))...)
			f.sync()
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v, want none", got)
			}
			events := f.events()
			if got := countEvents(events, corev1.EventTypeWarning, rollout.ReasonInvalidAnnotation); got != 1 {
				t.Fatalf("got events %q after two syncs, want one %s", events, rollout.ReasonInvalidAnnotation)
			}
			if !strings.Contains(events[0], tt.key) || !strings.Contains(events[0], `"`+tt.value+`"`) {
				t.Errorf("got %q, want the annotation and its value named", events[0])
			}
		})
	}
}

func TestEventsOnlyOnChange(t *testing.T) {
	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		reason string
	}{
		{"deprecated key", newDaemonSet(withAnnotation(rollout.LegacyStrategyAnnotation, "ota")), rollout.ReasonDeprecatedAnnotation},
		{"invalid max-unavailable", advancedDaemonSet("lots"), rollout.ReasonInvalidMaxUnavailable},
		{"unsupported update strategy", newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withUpdateStrategy(appsv1.RollingUpdateDaemonSetStrategyType)), rollout.ReasonUnsupportedUpdateStrategy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cluster(tt.ds, readyNodes(2))...)
			for range 3 {
				f.sync()
			}
			events := f.events()
			if len(events) != 1 || !strings.Contains(events[0], " "+tt.reason+" ") {
				t.Errorf("got events %q after three syncs, want one %s", events, tt.reason)
			}
		})
	}
}

func TestRolloutEvents(t *testing.T) {
	// A rollout of revision 2 that was complete at revision 1: started.
	prev, _ := json.Marshal(rollout.Status{Revision: 1, Hash: oldHash, Updated: 3, Total: 3})
	f := newFixture(t, cluster(advancedDaemonSet("1", withAnnotation(rollout.RolloutStatusAnnotation, string(prev))), readyNodes(3))...)
	f.sync()
	f.wantEvent(f.events(), corev1.EventTypeNormal, rollout.ReasonRolloutStarted)

	// Every node settled at revision 2: completed, once.
	prev, _ = json.Marshal(rollout.Status{Revision: 2, Hash: newHash, Updated: 2, Total: 3, InFlight: 1})
	f = newFixture(t, cluster(advancedDaemonSet("1", withAnnotation(rollout.RolloutStatusAnnotation, string(prev))), readyNodes(3), newHash, newHash, newHash)...)
	f.sync()
	events := f.events()
	if got := countEvents(events, corev1.EventTypeNormal, rollout.ReasonRolloutCompleted); got != 1 {
		t.Errorf("got events %q, want one %s", events, rollout.ReasonRolloutCompleted)
	}
	if s := f.lastStatus(); s.Updated != 3 || s.Total != 3 || s.InFlight != 0 {
		t.Errorf("got %+v, want 3 of 3 updated", s)
	}
}

// TestRolloutStatusPaced: an unchanged status is not written again; figures
// that change within statusWriteInterval of the last write wait for it, the
// DaemonSet requeued, and are written then.
func TestRolloutStatusPaced(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1", withAnnotation(rollout.PausedAnnotation, "true")), readyNodes(3))...)
	f.sync()
	f.sync() // same figures
	if got := len(f.rolloutStatuses()); got != 1 {
		t.Fatalf("got %d statuses written, want 1", got)
	}
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}

	// node-1 goes offline: skipped, not held back.
	changed := newNode("node-1", corev1.ConditionUnknown)
	changed.ResourceVersion = "2"
	f.update(changed)
	f.drainQueue()
	f.sync()
	if got := len(f.rolloutStatuses()); got != 1 {
		t.Errorf("got %d statuses written within %s, want still 1", got, statusWriteInterval)
	}
	deadline := time.Now().Add(2 * statusWriteInterval)
	for f.c.queue.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if f.c.queue.Len() != 1 {
		t.Fatalf("got %d queued, want the DaemonSet requeued for the paced write", f.c.queue.Len())
	}
	f.sync()
	if got := len(f.rolloutStatuses()); got != 2 {
		t.Errorf("got %d statuses written after the interval, want 2", got)
	}
}

func replaceDaemonSet(objs []runtime.Object, ds *appsv1.DaemonSet) []runtime.Object {
	for i, obj := range objs {
		if _, ok := obj.(*appsv1.DaemonSet); ok {
			objs[i] = ds
		}
	}
	return objs
}

// TestFirstStatusOfANewTargetNotPaced: within statusWriteInterval of the
// last write, a status of the same target waits; the first of a new target
// is written at once (it announces the rollout and what it recreates).
func TestFirstStatusOfANewTargetNotPaced(t *testing.T) {
	ds := advancedDaemonSet("1")
	f := newFixture(t, cluster(ds, readyNodes(1))...)
	now := time.Now()
	f.clockAt(now)
	f.c.statuses.record(testDSKey, ds.UID, "written", now)
	prev := &rollout.Status{Revision: 2, Hash: newHash, Total: 1}
	same := rollout.Status{Revision: 2, Hash: newHash, Total: 1, InFlight: 1}
	if write, upToDate, err := f.c.statusUpdate(t.Context(), ds, testDSKey, "written", prev, same, func() string { return "" }); write != nil || upToDate || err != nil {
		t.Errorf("the same target within the interval: got a write %v, up to date %v, %v; want it paced", write != nil, upToDate, err)
	}
	next := rollout.Status{Revision: 3, Hash: "third", Total: 1}
	if write, _, err := f.c.statusUpdate(t.Context(), ds, testDSKey, "written", prev, next, func() string { return "" }); write == nil || err != nil {
		t.Errorf("a new target within the interval: got no write (%v), want it at once", err)
	}
}
