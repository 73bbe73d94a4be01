package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The targets. Those stated for 500 nodes are scaled to N by
// params.scale where they are amounts of work.
const (
	rolloutRatioTarget  = 1.05
	cutoffRatioTarget   = 0.85
	returnDeleteTarget  = time.Second
	markingRatioTarget  = 1.5
	markingAt500        = 1.5 // seconds
	controllerCPUAt500  = 1.0 // seconds per rollout
	controllerRSSTarget = 50 << 20
	nodeAPIRateTarget   = 0.5
	nodeAPIP99Target    = 2.0
	agentRSSTarget      = 40 << 20
	targetClients       = 64
	conflictShareTarget = 0.01
)

func rolloutTable(p params, f rolloutFigures) table {
	wall := func(r rollout) time.Duration { return r.wall }
	ota, native := mapRuns(f.ota, wall), mapRuns(f.native, wall)
	r := median(pairRatios(ota, native))
	worst := slices.Max(mapRuns(f.ota, func(r rollout) int { return r.maxUnavailable }))
	worstNative := slices.Max(mapRuns(f.native, func(r rollout) int { return r.maxUnavailable }))
	cpu := median(mapRuns(f.ota, func(r rollout) time.Duration { return r.cpu }))
	cpuTarget := p.scale(controllerCPUAt500)
	return table{
		title: fmt.Sprintf("1. Rollout: %d nodes, image change, maxUnavailable 10%%", p.nodes),
		rows: []row{
			{fmt.Sprintf("wall time until every pod runs the new image (median of %d)", len(ota)),
				seconds(median(ota)), seconds(median(native)), times(r), "≤ " + times(rolloutRatioTarget), verdict(r <= rolloutRatioTarget)},
			{"most nodes without an available pod, any sample", fmt.Sprint(worst), fmt.Sprint(worstNative), "",
				fmt.Sprintf("≤ %d (budget)", p.budget()), verdict(worst <= p.budget())},
			{"controller CPU per rollout (median)", seconds(cpu), "", "", fmt.Sprintf("≤ %.2f s (1 s at 500 nodes)", cpuTarget), verdict(cpu.Seconds() <= cpuTarget)},
			{"controller peak RSS (VmHWM)", mib(f.peakRSS), "", "", "≤ 50 MiB (at 500 nodes)", verdict(f.peakRSS <= controllerRSSTarget)},
		},
		notes: []string{
			"edgeota: ota-controller, AdvancedRollingUpdate; baseline: the native DaemonSet controller, RollingUpdate, same cluster, alternating a b a b …",
			"ratio: median of the per-pair ratios. Pairs (edgeota / native): " + pairList(ota, native),
		},
	}
}

func cutoffTable(p params, f cutoffFigures, ref rolloutFigures) table {
	allReady := median(mapRuns(ref.ota, func(r rollout) time.Duration { return r.wall }))
	r := ratio(f.readyDone.wall, allReady)
	deleted, replaced := sorted(f.deleted), sorted(f.replaced)
	maxDeleted := deleted[len(deleted)-1]
	firstWave := deleted[min(p.budget(), len(deleted))-1] // the nodes the budget lets go at once
	return table{
		title: fmt.Sprintf("2. Cut-off nodes: %d of %d nodes Ready=Unknown before the image change (ota-controller)", f.cut, p.nodes),
		rows: []row{
			{"wall time until every Ready node runs the new image", seconds(f.readyDone.wall), seconds(allReady) + " (1a, all Ready)",
				times(r), "≤ " + times(cutoffRatioTarget) + " (ideal 0.80×)", verdict(r <= cutoffRatioTarget)},
			{"most nodes without an available pod, any sample", fmt.Sprint(f.readyDone.maxUnavailable), "", "",
				fmt.Sprintf("≤ %d (budget)", p.budget()), verdict(f.readyDone.maxUnavailable <= p.budget())},
			{"returning node: Ready → old pod deleted, p50 / max", seconds(percentile(deleted, 0.5)) + " / " + seconds(maxDeleted), "", "",
				"max ≤ " + seconds(returnDeleteTarget), verdict(maxDeleted <= returnDeleteTarget)},
			{fmt.Sprintf("… the first %d (one budget's worth), max", min(p.budget(), len(deleted))), seconds(firstWave), "", "",
				"max ≤ " + seconds(returnDeleteTarget), verdict(firstWave <= returnDeleteTarget)},
			{"returning node: Ready → new pod Ready, p50 / max", seconds(percentile(replaced, 0.5)) + " / " + seconds(replaced[len(replaced)-1]), "", "", "", ""},
			{"controller CPU, rollout of the Ready nodes", seconds(f.readyDone.cpu), "", "", "", ""},
			{"controller peak RSS (VmHWM)", mib(f.peakRSS), "", "", "≤ 50 MiB (at 500 nodes)", verdict(f.peakRSS <= controllerRSSTarget)},
		},
		notes: []string{
			"Cut-off: the KWOK stage reports the nodes' conditions Unknown; all come back at once. Times per returning node run from the node watch's first Ready=True to the pod watch's first event showing the old pod terminating or gone (and the new one Ready).",
			fmt.Sprintf("%d nodes return at once against a budget of %d: beyond the first %d, a node's old pod must wait for earlier replacements to be Ready, so the overall max includes that wait; the first wave's max is the controller's own reaction.", f.cut, p.budget(), p.budget()),
		},
	}
}

func markingTable(p params, f markingFigures) table {
	wall := func(m marking) time.Duration { return m.wall }
	first := func(m marking) time.Duration { return m.first }
	ota, ceiling := mapRuns(f.ota, wall), mapRuns(f.ceiling, wall)
	r := median(pairRatios(ota, ceiling))
	perPod := func(runs []marking, get func(apiRequests) float64) string {
		return fmt.Sprintf("%.2f", median(mapRuns(runs, func(m marking) float64 { return get(m.requests) }))/float64(p.nodes))
	}
	patches := func(a apiRequests) float64 { return a.statusPatches }
	total := func(a apiRequests) float64 { return a.total }
	conflicts := func(runs []marking) float64 {
		return slices.Max(mapRuns(runs, func(m marking) float64 { return m.requests.conflicts }))
	}
	absTarget := p.scale(markingAt500)
	cpu := median(mapRuns(f.ota, func(m marking) time.Duration { return m.cpu }))
	return table{
		title: fmt.Sprintf("3. OTA marking: %d pods, image change until every pod has PodNeedUpgrade=True", p.nodes),
		rows: []row{
			{fmt.Sprintf("wall time (median of %d)", len(ota)), seconds(median(ota)), seconds(median(ceiling)), times(r),
				"≤ " + times(markingRatioTarget), verdict(r <= markingRatioTarget)},
			{"wall time, absolute", seconds(median(ota)), "", "", fmt.Sprintf("≤ %.2f s (1.5 s at 500 pods)", absTarget), verdict(median(ota).Seconds() <= absTarget)},
			{"… until the native controller's new ControllerRevision is seen (median)", seconds(median(mapRuns(f.ota, func(m marking) time.Duration { return m.revision }))), "", "", "", ""},
			{"… until the first pod is seen marked (median)", seconds(median(mapRuns(f.ota, first))), seconds(median(mapRuns(f.ceiling, first))), "", "", ""},
			{"PATCH pods/status per pod (API server)", perPod(f.ota, patches), perPod(f.ceiling, patches), "", "", ""},
			{"API requests per pod, all clients (API server)", perPod(f.ota, total), perPod(f.ceiling, total), "", "", ""},
			{"409 Conflict answers, worst run", fmt.Sprint(conflicts(f.ota)), fmt.Sprint(conflicts(f.ceiling)), "",
				fmt.Sprintf("no storm: ≤ %.0f", conflictShareTarget*float64(p.nodes)), verdict(conflicts(f.ota) <= conflictShareTarget*float64(p.nodes))},
			{"PodNeedUpgrade writes per pod (controller's counter)", fmt.Sprintf("%.2f", f.written/float64(p.nodes*len(f.ota))), "", "", "", ""},
			{"controller CPU per marking (median)", seconds(cpu), "", "", "", ""},
			{"controller peak RSS (VmHWM, worst run)", mib(f.peakRSS), "", "", "≤ 50 MiB (at 500 nodes)", verdict(f.peakRSS <= controllerRSSTarget)},
		},
		notes: []string{
			fmt.Sprintf("baseline (write ceiling): a plain client-go client at QPS %g / burst %d patching the same condition (podcondition.Set: strategic-merge patch of pods/status) onto the same pods from %d goroutines, the controller's write parallelism; the controller is stopped meanwhile and a fresh one starts each pair.", p.qps, p.burst, ceilingParallelism),
			"Both times run until the bench's pod watch sees every pod marked. Request counts are deltas of the API server's apiserver_request_total over the run; \"all clients\" includes the cluster's own components.",
			"Pairs (edgeota / ceiling): " + pairList(ota, ceiling),
		},
	}
}

func nodeAPITable(f nodeAPIFigures) table {
	t := table{title: fmt.Sprintf("4. Node API: one agent, %d pods on its node (GET /pods body %d bytes)", podsPerNode, f.bodyBytes)}
	for _, l := range f.levels {
		rateRatio := ratio(l.rest.rps, l.restCeiling.rps)
		p99Ratio := ratio(l.rest.p99, l.restCeiling.p99)
		rateTarget, rateMet, p99Target, p99Met := "", "", "", ""
		if l.clients == targetClients {
			rateTarget, rateMet = "≥ "+times(nodeAPIRateTarget), verdict(rateRatio >= nodeAPIRateTarget)
			p99Target, p99Met = "p99 ≤ "+times(nodeAPIP99Target), verdict(p99Ratio <= nodeAPIP99Target)
		}
		t.rows = append(t.rows,
			row{fmt.Sprintf("REST GET /pods, %d clients: requests/s", l.clients), rps(l.rest), rps(l.restCeiling), times(rateRatio), rateTarget, rateMet},
			row{fmt.Sprintf("REST GET /pods, %d clients: p50 / p99", l.clients), latency(l.rest), latency(l.restCeiling), times(p99Ratio) + " (p99)", p99Target, p99Met},
			row{fmt.Sprintf("gRPC ListPods, %d clients: requests/s", l.clients), rps(l.grpcAgent), rps(l.grpcCeiling), times(ratio(l.grpcAgent.rps, l.grpcCeiling.rps)), "", ""},
			row{fmt.Sprintf("gRPC ListPods, %d clients: p50 / p99", l.clients), latency(l.grpcAgent), latency(l.grpcCeiling), times(ratio(l.grpcAgent.p99, l.grpcCeiling.p99)) + " (p99)", "", ""},
		)
	}
	t.rows = append(t.rows,
		row{"agent RSS, synced, before the load", fmt.Sprintf("%s (%s anonymous)", mib(f.idleRSS), mib(f.idleAnon)), "", "", "≤ 40 MiB", verdict(f.idleRSS <= agentRSSTarget)},
		row{"agent peak RSS (VmHWM), after the load", mib(f.peakRSS), mib(f.ceilingPeakRSS) + " (ceiling)", times(ratio(f.peakRSS, f.ceilingPeakRSS)), "≤ 40 MiB", verdict(f.peakRSS <= agentRSSTarget)},
		row{"bin/ota-server size", mib(f.binarySize), "", "", "", ""},
	)
	var failures []string
	for _, l := range f.levels {
		for name, r := range map[string]loadResult{"REST agent": l.rest, "REST ceiling": l.restCeiling, "gRPC agent": l.grpcAgent, "gRPC ceiling": l.grpcCeiling} {
			if r.errors > 0 {
				failures = append(failures, fmt.Sprintf("%s, %d clients: %d (first: %v)", name, l.clients, r.errors, r.firstErr))
			}
		}
	}
	slices.Sort(failures)
	t.notes = []string{
		"baseline (ceiling): a plain net/http server in its own process answering the agent's very GET /pods bytes, and a plain gRPC server answering its very ListPods message, served on one port the way the agent serves (HTTP/1.1 and h2c).",
		"Load: Go clients in the bench process, back to back for a fixed time per level; REST: one keep-alive HTTP/1.1 connection per client; gRPC: one grpc.ClientConn per client. The load generator shares the 2 cores with the server it measures, so absolute rates mostly measure the machine.",
		"Failed requests: " + cmp.Or(strings.Join(failures, "; "), "none") + ".",
	}
	return t
}

func upgradeTable(f upgradeFigures) table {
	a, d := sorted(f.agent), sorted(f.direct)
	return table{
		title: "5. Upgrade latency: request until the pod's deletion is seen by a watch",
		rows: []row{
			{fmt.Sprintf("p50 (%d upgrades each)", len(a)), millis(percentile(a, 0.5)), millis(percentile(d, 0.5)), times(ratio(percentile(a, 0.5), percentile(d, 0.5))), "", ""},
			{"p99", millis(percentile(a, 0.99)), millis(percentile(d, 0.99)), times(ratio(percentile(a, 0.99), percentile(d, 0.99))), "", ""},
			{"controller CPU, whole scenario (marking every upgrade)", seconds(f.cpu), "", "", "", ""},
			{"controller peak RSS (VmHWM)", mib(f.peakRSS), "", "", "≤ 50 MiB (at 500 nodes)", verdict(f.peakRSS <= controllerRSSTarget)},
		},
		notes: []string{
			"edgeota: POST /openyurt.io/v1/namespaces/{ns}/pods/{name}/upgrade to the agent; baseline: the bench deletes the pod itself (one API DELETE with a UID precondition), alternating. Deletion seen = the first watch event with deletionTimestamp set (or the pod gone).",
			fmt.Sprintf("Upgrades the agent refused first and were retried (its cache a write behind): %d; timing starts at the accepted attempt.", f.retries),
		},
	}
}

func rps(r loadResult) string { return fmt.Sprintf("%.0f", r.rps) }

func latency(r loadResult) string { return millis(r.p50) + " / " + millis(r.p99) }

// mapRuns picks one figure of every run.
func mapRuns[R, T any](runs []R, get func(R) T) []T {
	out := make([]T, len(runs))
	for i, r := range runs {
		out[i] = get(r)
	}
	return out
}

// pairList shows each pair's two times.
func pairList(a, b []time.Duration) string {
	pairs := make([]string, len(a))
	for i := range a {
		pairs[i] = seconds(a[i]) + " / " + seconds(b[i])
	}
	return strings.Join(pairs, ", ")
}

// pairRatios divides each run by its pair's baseline.
func pairRatios(a, b []time.Duration) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = ratio(a[i], b[i])
	}
	return out
}
