package main

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/rollout"
)

// waveEvents is a rollout of two nodes with a budget of one: n1 is deleted
// 10 ms after the change, its new pod is Ready at 1 s, n1 heartbeats at
// 1.5 s (sent before the pod settled: no proof) and at 3 s, n2 is deleted
// at 3.02 s, settles at 4 s and heartbeats at 6 s.
func waveEvents(start time.Time) []flightEvent {
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	return []flightEvent{
		{at: at(10), node: "n1", kind: podDeleted},
		{at: at(1000), node: "n1", kind: podSettled, sent: at(990)},
		{at: at(1500), node: "n1", kind: heartbeatSeen, sent: at(900)},
		{at: at(1600), node: "n2", kind: heartbeatSeen, sent: at(1590)},
		{at: at(3000), node: "n1", kind: heartbeatSeen, sent: at(2990)},
		{at: at(3020), node: "n2", kind: podDeleted},
		{at: at(4000), node: "n2", kind: podSettled, sent: at(3990)},
		{at: at(6000), node: "n2", kind: heartbeatSeen, sent: at(5990)},
	}
}

// TestAnalyzeWavesEndsFlightsAsTheControllerDoes: with proof of life (the
// failure brake) a flight ends at the first heartbeat sent after the pod
// settled, and each node's wait for it is summed; without it, a flight ends
// when the pod settles.
func TestAnalyzeWavesEndsFlightsAsTheControllerDoes(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		name        string
		proofOfLife bool
		// wantFree: n1's deletion 10 ms after the change, then n2's after
		// n1 leaves flight (3 s with proof of life, 1 s without).
		wantFree []time.Duration
		// wantWait: with proof of life, n1 waits from 1 s to 3 s and n2
		// from 4 s to 6 s; wantProven: both.
		wantWait   time.Duration
		wantProven int
	}{
		{"with proof of life", true, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, 4 * time.Second, 2},
		{"without proof of life", false, []time.Duration{10 * time.Millisecond, 2020 * time.Millisecond}, 0, 0},
	} {
		f := analyzeWaves(start, waveEvents(start), tc.proofOfLife)
		if !slices.Equal(f.freeToDelete, tc.wantFree) {
			t.Errorf("%s: free to delete: got %v, want %v", tc.name, f.freeToDelete, tc.wantFree)
		}
		if f.proofWait != tc.wantWait || f.proven != tc.wantProven {
			t.Errorf("%s: heartbeat waits: got %s over %d nodes, want %s over %d", tc.name, f.proofWait, f.proven, tc.wantWait, tc.wantProven)
		}
		// A budget of one: two waves of one node, each waiting 2 s on
		// average; the second wave's wait comes after the wall time ends.
		if got, want := f.heartbeatWait(1), tc.wantWait/2; got != want {
			t.Errorf("%s: wall time spent on heartbeats: got %s, want %s", tc.name, got, want)
		}
		if f.replaced != 2 {
			t.Errorf("%s: replaced: got %d, want 2", tc.name, f.replaced)
		}
	}
}

// TestAnalyzeWavesTakesAHeartbeatSeenBeforeThePodByItsTime: the controller
// compares times (decision.ProvesAlive), not the order the bench saw the
// events in: a Lease renewed from the second after the pod's
// ContainersReady transition (whole seconds) on, but seen before the pod
// turned Ready, proves the node at once; one renewed within that second
// proves nothing, and the node waits for the next.
func TestAnalyzeWavesTakesAHeartbeatSeenBeforeThePodByItsTime(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	f := analyzeWaves(start, []flightEvent{
		{at: at(10), node: "n1", kind: podDeleted},
		{at: at(2020), node: "n1", kind: heartbeatSeen, sent: at(2010)},
		{at: at(2050), node: "n1", kind: podSettled, sent: at(1000)}, // ready at 1.99 s, transition read as 1 s
		{at: at(2100), node: "n2", kind: podDeleted},
	}, true)
	if want := []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) || f.proven != 1 || f.proofWait != 0 {
		t.Errorf("renewed the second after: got free to delete %v, %d proven waiting %s; want %v, 1 proven waiting 0s", f.freeToDelete, f.proven, f.proofWait, want)
	}

	f = analyzeWaves(start, []flightEvent{
		{at: at(10), node: "n1", kind: podDeleted},
		{at: at(1300), node: "n1", kind: heartbeatSeen, sent: at(1290)},
		{at: at(1400), node: "n1", kind: podSettled, sent: at(1000)}, // ready at 1.39 s: the renewal may come before it
		{at: at(11300), node: "n1", kind: heartbeatSeen, sent: at(11290)},
		{at: at(11350), node: "n2", kind: podDeleted},
	}, true)
	if want := []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) || f.proven != 1 || f.proofWait != 9900*time.Millisecond {
		t.Errorf("renewed within the second: got free to delete %v, %d proven waiting %s; want %v, 1 proven waiting 9.9s", f.freeToDelete, f.proven, f.proofWait, want)
	}
}

func TestAnalyzeWavesCountsOnlyTheFirstDeletionAfterAFreeingEvent(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	f := analyzeWaves(start, []flightEvent{
		{at: at(5), node: "n1", kind: podDeleted},
		{at: at(6), node: "n2", kind: podDeleted},
		{at: at(6), node: "n2", kind: podDeleted}, // seen again: ignored
		{at: at(500), node: "n1", kind: podSettled, sent: at(500)},
		{at: at(700), node: "n3", kind: podDeleted},
		{at: at(710), node: "n4", kind: podDeleted},
	}, false)
	if want := []time.Duration{5 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) || f.replaced != 4 {
		t.Errorf("got %v with %d nodes replaced, want %v with 4", f.freeToDelete, f.replaced, want)
	}
}

// TestWavesAreBudgetsWorthsOfNodes: a wave is one budget's worth of nodes
// going through, however many deletion batches the controller made.
func TestWavesAreBudgetsWorthsOfNodes(t *testing.T) {
	for _, tc := range []struct{ replaced, budget, want int }{
		{500, 50, 10},
		{501, 50, 11},
		{20, 2, 10},
		{3, 10, 1},
		{0, 10, 0},
	} {
		if got := (waveFigures{replaced: tc.replaced}).waves(tc.budget); got != tc.want {
			t.Errorf("%d nodes replaced, budget %d: got %d waves, want %d", tc.replaced, tc.budget, got, tc.want)
		}
	}
}

func TestFlightRecorderReportsEachPodOnceAndOnlyNewerHeartbeats(t *testing.T) {
	now := time.Unix(2000, 0)
	ready := metav1.NewTime(now.Add(-time.Second))
	pod := func(name, img string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Image: img}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
			}, ContainerStatuses: runningStatus(img, ready)},
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	node := func(hb time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(hb)}}}}
	}
	r := newFlightRecorder("v1")
	r.pod(now, pod("old", "v0", false)) // the old pod, alive: nothing
	r.pod(now, pod("old", "v0", true))
	r.pod(now, pod("old", "v0", true)) // seen again
	r.pod(now, pod("new", "v1", false))
	r.pod(now, pod("new", "v1", false)) // seen again
	r.node(now, node(now))
	r.node(now, node(now)) // the same heartbeat
	// A Lease renewal is a heartbeat of its node; one older than the node's
	// status heartbeat adds nothing.
	lease := func(renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	renewed := now.Add(1500 * time.Millisecond)
	r.lease(now, lease(now.Add(-time.Second)))
	r.lease(now, lease(renewed))
	r.lease(now, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}) // never renewed
	want := []flightEvent{
		{at: now, node: "n1", kind: podDeleted},
		{at: now, node: "n1", kind: podCreated},
		{at: now, node: "n1", kind: podBound},
		{at: now, node: "n1", kind: podSettled, sent: ready.Time},
		{at: now, node: "n1", kind: heartbeatSeen, sent: now},
		{at: now, node: "n1", kind: heartbeatSeen, sent: renewed},
	}
	if !slices.EqualFunc(r.events, want, func(a, b flightEvent) bool {
		return a.at.Equal(b.at) && a.node == b.node && a.kind == b.kind && a.sent.Equal(b.sent)
	}) {
		t.Errorf("got %+v, want %+v", r.events, want)
	}
}

// TestAnalyzeWavesEndsAFlightAtTheAnswer: an agent's answer on the node's
// new pod ends its flight when seen, before any heartbeat, and each proof
// says what ended it and when; a heartbeat after that changes nothing.
func TestAnalyzeWavesEndsAFlightAtTheAnswer(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	f := analyzeWaves(start, []flightEvent{
		{at: at(10), node: "n1", kind: podDeleted},
		{at: at(1000), node: "n1", kind: podSettled, sent: at(990)},
		{at: at(1400), node: "n1", kind: answerSeen},
		{at: at(1420), node: "n2", kind: podDeleted},
		{at: at(3000), node: "n1", kind: heartbeatSeen, sent: at(2990)},
		{at: at(4000), node: "n2", kind: podSettled, sent: at(3990)},
		{at: at(6000), node: "n2", kind: heartbeatSeen, sent: at(5990)},
	}, true)
	if want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) {
		t.Errorf("free to delete: got %v, want %v", f.freeToDelete, want)
	}
	want := []nodeProof{
		{node: "n1", settled: at(1000), proven: at(1400), by: answerSeen},
		{node: "n2", settled: at(4000), proven: at(6000), by: heartbeatSeen},
	}
	if !slices.Equal(f.proofs, want) {
		t.Errorf("got proofs %+v, want %+v", f.proofs, want)
	}
	if f.proofWait != 2400*time.Millisecond || f.proven != 2 {
		t.Errorf("got waits %s over %d nodes, want 2.4 s over 2", f.proofWait, f.proven)
	}
}

// TestFlightRecorderSeesTheAnswer: the recorder reports a new pod's answer
// once, when it echoes the challenge, after the pod was seen Ready; an
// answer to another challenge is none.
func TestFlightRecorderSeesTheAnswer(t *testing.T) {
	rec := newFlightRecorder("img:v2")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Image: "img:v2"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}, ContainerStatuses: runningStatus("img:v2", metav1.Time{})}}
	now := time.Unix(1000, 0)
	rec.pod(now, pod)
	pod.Annotations[rollout.ChallengeAnnotation] = "uid/nonce"
	pod.Annotations[rollout.AnswerAnnotation] = "uid/other"
	rec.pod(now.Add(time.Second), pod)
	pod.Annotations[rollout.AnswerAnnotation] = "uid/nonce"
	rec.pod(now.Add(2*time.Second), pod)
	rec.pod(now.Add(3*time.Second), pod)
	kinds := pick(rec.events, func(e flightEvent) flightKind { return e.kind })
	if want := []flightKind{podCreated, podBound, podSettled, answerSeen}; !slices.Equal(kinds, want) {
		t.Fatalf("got events %v, want %v", kinds, want)
	}
	if got := rec.events[3].at; !got.Equal(now.Add(2 * time.Second)) {
		t.Errorf("got the answer seen at %s, want when it first echoed the challenge", got)
	}
}

// TestAnalyzeWavesTimesEachStepOfATurn: a node's turn is timed from its old
// pod seen terminating to its new pod seen created, bound, Ready and
// proven; a node whose creation the bench never saw has no turn, and a
// pod created for another node does not start this one's.
func TestAnalyzeWavesTimesEachStepOfATurn(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	f := analyzeWaves(start, []flightEvent{
		{at: at(10), node: "n1", kind: podDeleted},
		{at: at(20), node: "n2", kind: podDeleted},
		{at: at(50), node: "n3", kind: podCreated},
		{at: at(300), node: "n1", kind: podCreated},
		{at: at(700), node: "n1", kind: podBound},
		{at: at(710), node: "n2", kind: podBound},
		{at: at(1500), node: "n1", kind: podSettled, sent: at(1490)},
		{at: at(1600), node: "n2", kind: podSettled, sent: at(1590)},
		{at: at(3000), node: "n1", kind: heartbeatSeen, sent: at(2990)},
		{at: at(3100), node: "n2", kind: heartbeatSeen, sent: at(3090)},
	}, true)
	want := []turn{{created: 290 * time.Millisecond, bound: 400 * time.Millisecond, ready: 800 * time.Millisecond, proven: 1500 * time.Millisecond}}
	if !slices.Equal(f.turns, want) {
		t.Errorf("turns: got %+v, want %+v", f.turns, want)
	}
}

// TestRecorderReadsAnUnboundPodsNodeFromItsAffinity: the native controller
// creates a DaemonSet pod unbound, pinned to its node by affinity; the
// recorder reports its creation for that node, and its binding once.
func TestRecorderReadsAnUnboundPodsNodeFromItsAffinity(t *testing.T) {
	rec := newFlightRecorder("img:2")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds-x"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Image: "img:2"}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"n7"}}}}},
		}}},
	}}
	now := time.Unix(1000, 0)
	rec.pod(now, p)
	bound := p.DeepCopy()
	bound.Spec.NodeName = "n7"
	rec.pod(now.Add(time.Second), bound)
	rec.pod(now.Add(2*time.Second), bound)
	want := []flightEvent{{at: now, node: "n7", kind: podCreated}, {at: now.Add(time.Second), node: "n7", kind: podBound}}
	if !slices.Equal(rec.events, want) {
		t.Errorf("events: got %+v, want %+v", rec.events, want)
	}
}

// runningStatus is a container's status as a kubelet reports it once it
// runs img, Ready, since started (the pods' generation observed: both 0).
func runningStatus(img string, started metav1.Time) []corev1.ContainerStatus {
	return []corev1.ContainerStatus{{Image: img, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
}

// TestFlightRecorderFollowsAPatchInPlace: a pod seen at the old image, then
// patched to the new one, enters its flight at the patch (no creation, no
// binding), and settles once its kubelet runs the new image, from the new
// container's start, not the old ContainersReady.
func TestFlightRecorderFollowsAPatchInPlace(t *testing.T) {
	now := time.Unix(3000, 0)
	old := metav1.NewTime(now.Add(-time.Hour))
	started := metav1.NewTime(now.Add(2 * time.Second))
	pod := func(specImage string, observed int64, statusImage string, start metav1.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Image: specImage}}},
			Status: corev1.PodStatus{ObservedGeneration: observed, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: old},
			}, ContainerStatuses: runningStatus(statusImage, start)}}
	}
	r := newFlightRecorder("v2")
	r.pod(now, pod("v1", 2, "v1", old))
	r.pod(now.Add(time.Second), pod("v2", 1, "v1", old))   // patched: in flight
	r.pod(now.Add(2*time.Second), pod("v2", 2, "v1", old)) // observed, the old container still reported
	r.pod(now.Add(3*time.Second), pod("v2", 2, "v2", started))
	want := []flightEvent{
		{at: now.Add(time.Second), node: "n1", kind: podPatched},
		{at: now.Add(3 * time.Second), node: "n1", kind: podSettled, sent: started.Time},
	}
	if !slices.EqualFunc(r.events, want, func(a, b flightEvent) bool {
		return a.at.Equal(b.at) && a.node == b.node && a.kind == b.kind && a.sent.Equal(b.sent)
	}) {
		t.Errorf("got %+v, want %+v", r.events, want)
	}
	f := analyzeWaves(now, r.events, false)
	if f.replaced != 1 || len(f.turns) != 1 || f.turns[0].ready != 2*time.Second {
		t.Errorf("got %d replaced, turns %+v; want one, Ready 2 s after its patch", f.replaced, f.turns)
	}
}

// TestFlightRecorderTakesNoAnswerOfTheLastUpgrade: a pod patched in place
// keeps the challenge and answer of its last upgrade; that answer proves
// nothing of this one, whether the pod was seen at the old image by the
// watch or in the snapshot before the rollout: only the answer to a new
// challenge ends its flight.
func TestFlightRecorderTakesNoAnswerOfTheLastUpgrade(t *testing.T) {
	now := time.Unix(3000, 0)
	started := metav1.NewTime(now.Add(time.Second))
	pod := func(img, challenge string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
			rollout.ChallengeAnnotation: challenge, rollout.AnswerAnnotation: challenge}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Image: img}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			}, ContainerStatuses: runningStatus(img, started)}}
	}
	for name, seeOld := range map[string]func(r *flightRecorder, p *corev1.Pod){
		"by the watch":    func(r *flightRecorder, p *corev1.Pod) { r.pod(now, p) },
		"in the snapshot": (*flightRecorder).sawOld,
	} {
		r := newFlightRecorder("v2")
		seeOld(r, pod("v1", "uid/last"))
		r.pod(now.Add(2*time.Second), pod("v2", "uid/last")) // patched and settled, the last answer kept
		r.pod(now.Add(3*time.Second), pod("v2", "uid/this")) // answered anew
		var kinds []flightKind
		var answeredAt time.Time
		for _, e := range r.events {
			kinds = append(kinds, e.kind)
			if e.kind == answerSeen {
				answeredAt = e.at
			}
		}
		if want := []flightKind{podPatched, podSettled, answerSeen}; !slices.Equal(kinds, want) || !answeredAt.Equal(now.Add(3*time.Second)) {
			t.Errorf("seen at the old image %s: got events %v (answered at %v), want %v, answered at +3 s", name, kinds, answeredAt, want)
		}
	}
}
