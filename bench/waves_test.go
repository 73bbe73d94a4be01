package main

import (
	"slices"
	"testing"
	"time"
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
