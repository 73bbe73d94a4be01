package main

import (
	"testing"
	"time"
)

func TestWatchersTableJudgesTheP99AndTheRSSWithTheStreamsOpen(t *testing.T) {
	latencies := make([]time.Duration, 100)
	for i := range latencies {
		latencies[i] = time.Duration(i+1) * time.Millisecond // the p99 is 99 ms
	}
	tb := watchersTable(watchersFigures{latencies: latencies, rss: 41 << 20, peakRSS: 45 << 20})
	if got := rowNamed(t, tb, "change seen"); got.edgeota != "50.00 ms / 99.00 ms" || got.met != "met" {
		t.Errorf("latency row: got %+v, want 50 ms / 99 ms, met", got)
	}
	if got := rowNamed(t, tb, "agent RSS with"); got.met != "**missed**" {
		t.Errorf("RSS of 41 MiB: got %q, want missed against 40 MiB", got.met)
	}
	if got := rowNamed(t, watchersTable(watchersFigures{}), "change seen"); got.met != "**missed**" {
		t.Errorf("no receipts: got %q, want missed", got.met)
	}
}
