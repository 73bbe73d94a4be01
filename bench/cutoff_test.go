package main

import (
	"testing"
	"time"
)

func TestCutoffTableSeparatesTheFirstWave(t *testing.T) {
	p := params{nodes: 20} // budget 2
	f := cutoffFigures{
		cut:       4,
		readyDone: rolloutRun{wall: 8 * time.Second, maxUnavailable: 2},
		deleted:   []time.Duration{1500 * time.Millisecond, 200 * time.Millisecond, 3 * time.Second, 100 * time.Millisecond},
		replaced:  []time.Duration{time.Second, time.Second, 4 * time.Second, 2 * time.Second},
	}
	tb := cutoffTable(p, f, 10*time.Second)
	if got := rowNamed(t, tb, "wall time"); got.ratio != "0.80×" || got.met != "met" {
		t.Errorf("ratio to the all-Ready rollout: got %s %s, want 0.80× met", got.ratio, got.met)
	}
	if got := rowNamed(t, tb, "returning node: Ready → old pod deleted"); got.edgeota != "0.20 s / 3.00 s" || got.met != "**missed**" {
		t.Errorf("all returning nodes: got %q %s, want p50 0.20 s, max 3.00 s, missed", got.edgeota, got.met)
	}
	// The budget lets 2 go at once: the second fastest is the first wave's max.
	if got := rowNamed(t, tb, "… the first 2"); got.edgeota != "0.20 s" || got.met != "met" {
		t.Errorf("first wave: got %q %s, want 0.20 s met", got.edgeota, got.met)
	}
}
