package main

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestAnalyzeWavesWithProofOfLifeEndsFlightsAtTheFirstHeartbeatAfterSettling(t *testing.T) {
	start := time.Unix(1000, 0)
	f := analyzeWaves(start, waveEvents(start), true)
	if want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) {
		t.Errorf("free to delete: got %v, want %v", f.freeToDelete, want)
	}
	if f.waves != 2 {
		t.Errorf("waves: got %d, want 2", f.waves)
	}
	// n1 waits from 1 s to 3 s, n2 from 4 s to 6 s.
	if want := 4 * time.Second; f.heartbeatWait != want {
		t.Errorf("heartbeat wait: got %s, want %s", f.heartbeatWait, want)
	}
}

func TestAnalyzeWavesWithoutProofOfLifeEndsFlightsWhenThePodSettles(t *testing.T) {
	start := time.Unix(1000, 0)
	f := analyzeWaves(start, waveEvents(start), false)
	// n1 settles at 1 s; the next deletion is n2's at 3.02 s.
	if want := []time.Duration{10 * time.Millisecond, 2020 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) {
		t.Errorf("free to delete: got %v, want %v", f.freeToDelete, want)
	}
	if f.heartbeatWait != 0 {
		t.Errorf("heartbeat wait: got %s, want 0 without proof of life", f.heartbeatWait)
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
	if want := []time.Duration{5 * time.Millisecond, 200 * time.Millisecond}; !slices.Equal(f.freeToDelete, want) || f.waves != 2 {
		t.Errorf("got %v in %d waves, want %v in 2", f.freeToDelete, f.waves, want)
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
			}},
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
	want := []flightEvent{
		{at: now, node: "n1", kind: podDeleted},
		{at: now, node: "n1", kind: podSettled, sent: ready.Time},
		{at: now, node: "n1", kind: heartbeatSeen, sent: now},
	}
	if !slices.EqualFunc(r.events, want, func(a, b flightEvent) bool {
		return a.at.Equal(b.at) && a.node == b.node && a.kind == b.kind && a.sent.Equal(b.sent)
	}) {
		t.Errorf("got %+v, want %+v", r.events, want)
	}
}
