package main

import (
	"testing"
	"time"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/localcluster"
)

func TestRolloutTableReportsTheMedianPairRatioAndTheWorstSample(t *testing.T) {
	p := params{nodes: 100, rolloutHeartbeat: localcluster.Heartbeat{Interval: nodeHeartbeat}}
	f := rolloutFigures{
		ota: []rolloutRun{{wall: 2 * time.Second, maxUnavailable: 10, cpu: 300 * time.Millisecond, idleCPU: 150 * time.Millisecond},
			{wall: 9 * time.Second, maxUnavailable: 11, cpu: 400 * time.Millisecond, idleCPU: 100 * time.Millisecond},
			{wall: 4 * time.Second, cpu: 250 * time.Millisecond, idleCPU: 100 * time.Millisecond}},
		native: []rolloutRun{{wall: time.Second, maxUnavailable: 10, cpu: 150 * time.Millisecond, idleCPU: 50 * time.Millisecond},
			{wall: 3 * time.Second, cpu: 90 * time.Millisecond, idleCPU: 100 * time.Millisecond}, {wall: 8 * time.Second, cpu: 200 * time.Millisecond}},
		memory: measure.Memory{PeakRSS: 61 << 20, AnonRSS: 30 << 20},
	}
	tb := rolloutTable(p, f)
	// Pair ratios 2, 3 and 0.5: their median is 2, where the ratio of the
	// medians would be 4/3.
	if got := rowNamed(t, tb, "wall time").ratio; got != "2.00×" {
		t.Errorf("wall time ratio: got %s, want 2.00×", got)
	}
	if got := rowNamed(t, tb, "most nodes"); got.edgeota != "11" || got.baseline != "10" || got.target != "≤ 10 (budget)" || got.met != "**missed**" {
		t.Errorf("budget row: got %+v, want 11 against 10, budget 10, missed", got)
	}
	if got := rowNamed(t, tb, "controller peak RSS"); got.met != "**missed**" || got.edgeota != "61.0 MiB (30.0 MiB anonymous at the end)" {
		t.Errorf("peak RSS of 61 MiB, 30 anonymous: got %q (%s), want missed against 60 MiB, the anonymous part beside", got.met, got.edgeota)
	}
	// Gross 0.30, 0.40, 0.25 s: median 0.30 s, no target; net of the idle
	// cost 0.15, 0.30, 0.15 s: median 0.15 s, 1.5 ms per node, against
	// 1 ms per node (0.10 s at 100 nodes).
	if got := rowNamed(t, tb, "controller CPU"); got.edgeota != "0.30 s" || got.target != "" {
		t.Errorf("gross CPU: got %+v, want 0.30 s without a target", got)
	}
	if got := rowNamed(t, tb, "… net of watching"); got.edgeota != "0.15 s" || got.target != "≤ 0.10 s (1 ms per node)" || got.met != "**missed**" {
		t.Errorf("net CPU at 100 nodes: got %+v, want 0.15 s, missed against 0.10 s", got)
	}
	if got := rowNamed(t, tb, "… per node"); got.edgeota != "1.50 ms" || got.met != "**missed**" {
		t.Errorf("net CPU per node: got %+v, want 1.50 ms, missed", got)
	}
	// Watching the native rollouts, net: 0.10, 0 (not below nothing), 0.20 s:
	// median 0.10 s, 1 ms per node.
	if got := rowNamed(t, tb, "… of which receiving"); got.baseline != "1.00 ms" || got.edgeota != "" {
		t.Errorf("receiving the pod events: got %+v, want 1.00 ms per node in the native column", got)
	}
	f.ota[0].leaseReads, f.ota[1].leaseReads, f.ota[2].leaseReads = 150, 300, 210
	if got := rowNamed(t, rolloutTable(p, f), "node Lease requests").edgeota; got != "2.10" {
		t.Errorf("lease requests per node: got %s, want the median 210 over 100 nodes, 2.10", got)
	}
	// Per node and rollout over the runs: (300 + 0) pods, (150 + 30 + 120)
	// heartbeats, (6 + 0 + 9) other, over 3 runs of 100 nodes.
	f.ota[0].apiWrites = map[string]float64{"pods": 300, "nodes": 150, "leases": 30, "daemonsets": 6}
	f.ota[2].apiWrites = map[string]float64{"nodes": 120, "events": 9}
	if got := rowNamed(t, rolloutTable(p, f), "API server writes"); got.edgeota != "pods 1.00, heartbeats 1.00, other 0.05" || got.baseline != "pods 0.00, heartbeats 0.00, other 0.00" {
		t.Errorf("writes: got %+v", got)
	}
}

func TestRolloutTableTakesTheHeartbeatWaitsOutAndAllowsOnePeriodPerWave(t *testing.T) {
	p := params{nodes: 100, rolloutHeartbeat: localcluster.Heartbeat{Interval: nodeHeartbeat}}
	hb := func(wall, wait time.Duration, free ...time.Duration) rolloutRun {
		// 100 nodes each waiting wait / 9 for a heartbeat: the first 9 of
		// 10 waves of a budget of 10 spend wait on heartbeats within the
		// wall time.
		return rolloutRun{wall: wall, waves: waveFigures{proofWait: 100 * wait / 9, proven: 100, replaced: 100, freeToDelete: free}}
	}
	f := rolloutFigures{
		ota:    []rolloutRun{hb(22*time.Second, 20*time.Second, 10*time.Millisecond), hb(23*time.Second, 20*time.Second, 150*time.Millisecond)},
		native: []rolloutRun{{wall: 2 * time.Second}, {wall: 2 * time.Second}},
	}
	tb := rolloutTable(p, f)
	// 2 s and 3 s against 2 s: pair ratios 1 and 1.5, median 1.25.
	if got := rowNamed(t, tb, "wall time without"); got.ratio != "1.25×" || got.met != "**missed**" {
		t.Errorf("without heartbeats: got %+v, want 1.25×, missed", got)
	}
	// 100 nodes replaced with a budget of 10 are 10 waves:
	// 1.05 × 2 s + 10 waves × 3 s = 32.1 s allows 22.5 s.
	if got := rowNamed(t, tb, "wall time until"); got.met != "met" || got.target != "≤ 32.10 s (1.05× native + 10 waves × 3s)" {
		t.Errorf("wall time: got %+v, want met against 32.10 s", got)
	}
	if got := rowNamed(t, tb, "budget freed"); got.edgeota != "10.00 ms / 150.00 ms" || got.met != "**missed**" {
		t.Errorf("budget freed: got %+v, want p50 10 ms, p99 150 ms, missed", got)
	}
}

// TestRolloutTableSaysWhereTheMachinesCPUWent: each process's median CPU
// over the runs, in the report's order, and the share of the Lease
// renewals due that kwok-controller made.
func TestRolloutTableSaysWhereTheMachinesCPUWent(t *testing.T) {
	p := params{nodes: 100, rolloutHeartbeat: localcluster.Heartbeat{Leases: true}}
	run := func(wall time.Duration, leases float64, apiserver, ctrl time.Duration) rolloutRun {
		return rolloutRun{wall: wall, apiWrites: map[string]float64{"leases": leases},
			machineCPU: map[string]time.Duration{"kube-apiserver": apiserver, rolloutController: ctrl}}
	}
	period := p.rolloutHeartbeat.Period()
	f := rolloutFigures{
		// 100 nodes over 2 and 4 periods: 600 renewals due, 450 made.
		ota:    []rolloutRun{run(2*period, 150, 3*time.Second, time.Second), run(4*period, 300, 5*time.Second, 2*time.Second)},
		native: []rolloutRun{run(2*period, 200, 2*time.Second, 0), run(2*period, 200, 4*time.Second, 0)},
	}
	tb := rolloutTable(p, f)
	if got, want := rowNamed(t, tb, "CPU of each process").edgeota, "kube-apiserver 4.00 s, ota-controller-rollout 1.50 s (all 5.50 s)"; got != want {
		t.Errorf("CPU by process: got %q, want %q", got, want)
	}
	if got := rowNamed(t, tb, "node Lease renewals made"); got.edgeota != "75 %" || got.baseline != "100 %" {
		t.Errorf("renewals made: got %s and %s, want 75 %% and 100 %%", got.edgeota, got.baseline)
	}
	if got := leaseRenewalsRow(p, nil, nil).edgeota; got != "–" {
		t.Errorf("renewals made without a run: got %q, want –", got)
	}
}
