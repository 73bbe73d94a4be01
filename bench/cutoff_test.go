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

// TestBrakeRowCountsNodesProvenBeforeTheirCut: the version that cuts its
// nodes off is stopped at the budget when every node that ran it failed or
// proved alive before its cut; a node left over, or a rollout not halted,
// is a miss.
func TestBrakeRowCountsNodesProvenBeforeTheirCut(t *testing.T) {
	p := params{nodes: 2000} // budget 200
	for _, tc := range []struct {
		name  string
		b     brakeCheck
		value string
		met   string
	}{
		{"every node failed", brakeCheck{ran: 200, failed: 200, halted: true, took: time.Minute}, "200 / 200, halted after 60.00 s", "met"},
		{"two proven before their cut", brakeCheck{ran: 202, failed: 200, proven: 2, halted: true, took: time.Minute},
			"202 / 200 (2 proven alive before their cut), halted after 60.00 s", "met"},
		{"two more than failed or proven", brakeCheck{ran: 202, failed: 200, halted: true, took: time.Minute}, "202 / 200, halted after 60.00 s", "**missed**"},
		{"not halted", brakeCheck{ran: 200, failed: 200}, "200 / 200, not halted", "**missed**"},
		{"halted short of the budget", brakeCheck{ran: 150, failed: 150, halted: true, took: time.Minute}, "150 / 150, halted after 60.00 s", "**missed**"},
	} {
		r := brakeRow(p, tc.b)
		if r.edgeota != tc.value || r.met != tc.met {
			t.Errorf("%s: got %q %s, want %q %s", tc.name, r.edgeota, r.met, tc.value, tc.met)
		}
	}
}
