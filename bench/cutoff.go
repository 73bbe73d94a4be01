package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// cutoffScenario: 20% of the nodes cut off (Ready=Unknown) before the image
// change; the Ready nodes' rollout is compared with the rollout scenario's
// all-Ready one, then the cut nodes come back at once and each one's upgrade
// is timed from its return. Last, a version that cuts off every node it runs
// on must halt at the budget (the failure brake), with no answer from a
// cut-off node when simulated agents run (BENCH_AGENTS). It heartbeats as
// the rollout it compares with.
var cutoffScenario = scenario{name: "cutoff", needs: []string{rolloutScenario.name}, heartbeat: rolloutHeartbeat, run: runCutOff}

// Its targets: the Ready 80% done in about 80% of the all-Ready time (the
// budget still counts all N), and a returning node's old pod deleted within
// a second of its return.
const (
	cutoffRatioTarget  = 0.85
	returnDeleteTarget = time.Second
)

// cutoffNamespace holds the cut-off scenario's DaemonSet.
const cutoffNamespace = "bench-cutoff"

// labelParallelism bounds the node label patches in flight: cutting 100
// nodes off one at a time, waiting for each as localcluster.CutOff does,
// would take minutes.
const labelParallelism = 16

// cutoffFigures are the cut-off scenario's results.
type cutoffFigures struct {
	cut       int
	readyDone rolloutRun      // image change until every Ready node is done
	deleted   []time.Duration // per returning node: Ready until its old pod is deleted
	replaced  []time.Duration // per returning node: Ready until its new pod is Ready
	brake     brakeCheck      // a version that cuts its nodes off
	memory    measure.Memory
}

// cutOffImage is a version that cuts off every node it runs on, as a broken
// VPN client or CNI plugin would as it starts. The bench cuts the node's
// agent off (agentCutOffLabel) as soon as its watch sees the node's pod of
// it, before the pod settles, so before any challenge; and the node itself
// (localcluster.CutOffLabel: its Lease stops) once its watch sees the pod
// Ready, since kwok-controller stops running a cut-off node's pods, where a
// real node so cut would never report the pod Ready at all. (Both cut at
// Ready, as before issue 28, the cut raced the agent's answer, which comes
// within a few hundred milliseconds: a node that answered first had reached
// the API server after its pod settled, and was rightly settled; see
// docs/concepts/failure-brake.md on what a proof shows.) To the cluster it
// is an image like any other.
const cutOffImage = "registry.bench.local/app:cuts-off"

// brakeHold is how long a halted rollout is watched for a deletion it must
// not make.
const brakeHold = 5 * time.Second

// brakeCheck is what a version that cuts its nodes off did.
type brakeCheck struct {
	// ran counts the nodes that ran it (each then cut off); failed the
	// rollout status's failures; proven the nodes it counts proven alive,
	// which renewed their Lease after their pod settled and before the
	// bench cut their heartbeat (the cut follows the pod's Ready by the
	// bench's watch and kwok's reaction): by the failure brake's rules
	// settled, not failed, so their budget is free again; halted whether
	// it halted, after took.
	ran, failed, proven int
	halted              bool
	took                time.Duration
	// challenged counts the cut-off nodes whose pod carries the
	// controller's challenge, answered those whose pod carries an answer
	// echoing it: a cut-off node's agent must answer nothing.
	challenged, answered int
	// agentsFailed counts the simulated agents' failed attempts at an
	// answer (the cut-off nodes' agents trying over their cut link); -1
	// without agents.
	agentsFailed float64
}

func runCutOff(ctx context.Context, s *session, found *findings) (table, error) {
	f, err := benchCutOff(ctx, s)
	if err != nil {
		return table{}, err
	}
	return cutoffTable(s.p, f, found.rolloutWall), nil
}

// benchCutOff cuts 20% of the nodes off, rolls the AdvancedRollingUpdate
// DaemonSet over the Ready 80%, then reconnects the rest and times each one's
// upgrade from the moment it is Ready again.
func benchCutOff(ctx context.Context, s *session) (cutoffFigures, error) {
	var f cutoffFigures
	client := s.cluster.Client
	all := s.nodes()
	f.cut = len(all) / 5
	ready, cut := all[:len(all)-f.cut], all[len(all)-f.cut:]
	pods, err := deploy(ctx, client, cutoffNamespace, daemonSet("ota", advancedRollingUpdate, nil), all)
	if err != nil {
		return f, err
	}
	defer pods.close()
	nodes, err := watchNodes(ctx, client)
	if err != nil {
		return f, err
	}
	defer nodes.close()
	ctrl, err := s.startController(ctx, "ota-controller-cutoff", 0)
	if err != nil {
		return f, err
	}
	var agents *child
	if s.p.agents {
		if agents, err = s.startAgents(ctx, cutoffNamespace, "app=ota"); err != nil {
			return f, err
		}
		defer func() { _ = s.stopChild(agents) }()
	}
	if err := forEachNode(ctx, cut, s.cluster.BeginCutOff); err != nil {
		return f, err
	}
	if _, err := waitReady(ctx, nodes, cut, corev1.ConditionUnknown); err != nil {
		return f, err
	}
	if f.readyDone, f.readyDone.cpu, err = measureCPU(ctrl, func() (rolloutRun, error) {
		return rollOut(ctx, s, pods, cutoffNamespace, "ota", image(1), ready)
	}); err != nil {
		return f, err
	}
	progress("cut-off: %d Ready nodes done in %s", len(ready), f.readyDone.wall)
	// The last wave is still in flight until its nodes' heartbeats prove
	// them alive, and holds the budget meanwhile: reconnecting now would
	// time that wait, not the controller's reaction to a returning node.
	settled := func(st rollout.Status) bool { return st.Updated >= len(ready) && st.InFlight == 0 }
	if err := waitRolloutStatus(ctx, client, cutoffNamespace, "ota", fmt.Sprintf("%d settled nodes", len(ready)), settled); err != nil {
		return f, err
	}
	if err := reconnect(ctx, s, &f, pods, nodes, cut); err != nil {
		return f, err
	}
	if f.brake, err = checkBrake(ctx, s, pods, nodes, agents); err != nil {
		return f, err
	}
	progress("cut-off: a version cutting its nodes off ran on %d nodes, %d failed, halted %t", f.brake.ran, f.brake.failed, f.brake.halted)
	if f.memory, err = ctrl.memory(); err != nil {
		return f, err
	}
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, cutoffNamespace))
}

// reconnect brings the cut nodes back at once and records, per node, the
// time from its Ready=True (as the node watch sees it) to its old pod's
// deletion (the first event showing it terminating or gone) and to its new
// pod being Ready.
func reconnect(ctx context.Context, s *session, f *cutoffFigures, pods *view[*corev1.Pod], nodes *view[*corev1.Node], cut []string) error {
	if err := forEachNode(ctx, cut, s.cluster.BeginReconnect); err != nil {
		return err
	}
	var readyAt map[string]time.Time
	var readyErr error
	var wg sync.WaitGroup
	wg.Go(func() { readyAt, readyErr = waitReady(ctx, nodes, cut, corev1.ConditionTrue) })
	deletedAt, doneAt := map[string]time.Time{}, map[string]time.Time{}
	img := image(1)
	var grouper podGrouper
	err := pods.until(ctx, settleTimeout, "the reconnected nodes to be up to date", func(now time.Time, items map[string]*corev1.Pod) bool {
		byNode := grouper.group(items)
		for _, n := range cut {
			if _, seen := deletedAt[n]; !seen && !runsOther(byNode[n], img) {
				deletedAt[n] = now
			}
			if _, seen := doneAt[n]; !seen && upToDate(byNode[n], img) {
				doneAt[n] = now
			}
		}
		return len(doneAt) == len(cut)
	})
	wg.Wait()
	if err = errors.Join(err, readyErr); err != nil {
		return err
	}
	for _, n := range cut {
		f.deleted = append(f.deleted, deletedAt[n].Sub(readyAt[n]))
		f.replaced = append(f.replaced, doneAt[n].Sub(readyAt[n]))
	}
	return nil
}

// checkBrake rolls out cutOffImage, cutting off each node as its pod of it
// appears, waits until the rollout halts and brakeHold more, and
// records what ran where and whether any cut-off node answered; then it
// reconnects the cut nodes and waits until they are Ready again.
func checkBrake(ctx context.Context, s *session, pods *view[*corev1.Pod], nodes *view[*corev1.Node], agents *child) (brakeCheck, error) {
	b := brakeCheck{agentsFailed: -1}
	var before float64
	if agents != nil {
		m, err := agents.metrics(ctx)
		if err != nil {
			return b, err
		}
		before = m.Sum("edgeota_agent_alive_answers_total", map[string]string{"result": "failed"})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var cutErrs []error
	cutting := func(do func(context.Context) error) {
		wg.Go(func() {
			if err := do(context.WithoutCancel(ctx)); err != nil {
				mu.Lock()
				cutErrs = append(cutErrs, err)
				mu.Unlock()
			}
		})
	}
	// cut: the nodes whose pod of the version appeared, their agents cut;
	// nodeCut: those whose pod of it turned Ready, their heartbeat cut.
	cut, nodeCut := map[string]bool{}, map[string]bool{}
	pods.observe(func(_ time.Time, p *corev1.Pod) {
		node := p.Spec.NodeName
		if node == "" || p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != cutOffImage {
			return
		}
		if !cut[node] {
			cut[node] = true
			cutting(func(ctx context.Context) error {
				return s.cluster.SetNodeLabel(ctx, node, agentCutOffLabel, "true")
			})
		}
		if isReady(p) && !nodeCut[node] {
			nodeCut[node] = true
			cutting(func(ctx context.Context) error { return s.cluster.BeginCutOff(ctx, node) })
		}
	})
	start := time.Now()
	err := setImage(ctx, s.cluster.Client, cutoffNamespace, "ota", cutOffImage)
	if err == nil {
		err = waitRolloutStatus(ctx, s.cluster.Client, cutoffNamespace, "ota", "the rollout of a version that cuts its nodes off to halt",
			func(st rollout.Status) bool { return st.Halted })
	}
	b.took = time.Since(start)
	if err == nil {
		time.Sleep(brakeHold)
	}
	pods.observe(nil)
	wg.Wait()
	if err = errors.Join(append(cutErrs, err)...); err != nil {
		return b, err
	}
	st, err := readRolloutStatus(ctx, s.cluster.Client, cutoffNamespace, "ota")
	if err != nil {
		return b, err
	}
	b.failed, b.halted = st.Failed.Count, st.Halted
	if st.Proven != nil {
		b.proven = st.Proven.Answer + st.Proven.Heartbeat
	}
	b.ran = len(cut)
	for _, p := range pods.snapshot() {
		if !cut[p.Spec.NodeName] || p.Spec.Containers[0].Image != cutOffImage {
			continue
		}
		if challenge := p.Annotations[rollout.ChallengeAnnotation]; challenge != "" {
			b.challenged++
			if answered(p) {
				b.answered++
			}
		}
	}
	if agents != nil {
		m, err := agents.metrics(ctx)
		if err != nil {
			return b, err
		}
		b.agentsFailed = m.Sum("edgeota_agent_alive_answers_total", map[string]string{"result": "failed"}) - before
	}
	if err := forEachNode(ctx, slices.Sorted(maps.Keys(cut)), func(ctx context.Context, node string) error {
		return s.cluster.SetNodeLabel(ctx, node, agentCutOffLabel, nil)
	}); err != nil {
		return b, err
	}
	names := slices.Sorted(maps.Keys(nodeCut))
	if err := forEachNode(ctx, names, s.cluster.BeginReconnect); err != nil {
		return b, err
	}
	_, err = waitReady(ctx, nodes, names, corev1.ConditionTrue)
	return b, err
}

// runsOther reports whether a live pod runs an image other than img.
func runsOther(live []*corev1.Pod, img string) bool {
	for _, p := range live {
		if p.Spec.Containers[0].Image != img {
			return true
		}
	}
	return false
}

// waitReady waits until each of names reports Ready with status want and
// returns when the watch first saw each one so.
func waitReady(ctx context.Context, nodes *view[*corev1.Node], names []string, want corev1.ConditionStatus) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	err := nodes.until(ctx, settleTimeout, fmt.Sprintf("%d nodes to be Ready=%s", len(names), want), func(now time.Time, items map[string]*corev1.Node) bool {
		for _, name := range names {
			if _, ok := seen[name]; !ok && items[name] != nil && readyStatus(items[name]) == want {
				seen[name] = now
			}
		}
		return len(seen) == len(names)
	})
	return seen, err
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := health.NodeCondition(n, corev1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// forEachNode runs do on each of names, labelParallelism at a time.
func forEachNode(ctx context.Context, names []string, do func(ctx context.Context, node string) error) error {
	errs := make([]error, len(names))
	workqueue.ParallelizeUntil(ctx, labelParallelism, len(names), func(i int) { errs[i] = do(ctx, names[i]) })
	return errors.Join(errs...)
}

// cutOffHow says how a node is cut off with the rollout scenarios' heartbeat.
func cutOffHow(p params) string {
	if p.rolloutHeartbeat.Leases {
		return "kwok-controller stops renewing the nodes' Leases and the node lifecycle controller reports them Unknown after its grace period, marking their pods not Ready"
	}
	return "the KWOK stage reports the nodes' conditions Unknown"
}

// cutoffTable compares the Ready nodes' rollout with allReady, the rollout
// scenario's median on all-Ready nodes.
func cutoffTable(p params, f cutoffFigures, allReady time.Duration) table {
	r := measure.Ratio(f.readyDone.wall, allReady)
	deleted, replaced := measure.Sorted(f.deleted), measure.Sorted(f.replaced)
	maxDeleted := deleted[len(deleted)-1]
	firstWave := deleted[min(p.budget(), len(deleted))-1] // the nodes the budget lets go at once
	return table{
		title: fmt.Sprintf("Cut-off nodes: %d of %d nodes Ready=Unknown before the image change (ota-controller)", f.cut, p.nodes),
		rows: []row{
			{"wall time until every Ready node runs the new image", seconds(f.readyDone.wall), seconds(allReady) + " (rollout, all Ready)",
				times(r), "≤ " + times(cutoffRatioTarget) + " (ideal 0.80×)", verdict(r <= cutoffRatioTarget)},
			budgetRow(p, f.readyDone.maxUnavailable, ""),
			{"returning node: Ready → old pod deleted, p50 / max", seconds(measure.Percentile(deleted, 0.5)) + " / " + seconds(maxDeleted), "", "",
				"max ≤ " + seconds(returnDeleteTarget), verdict(maxDeleted <= returnDeleteTarget)},
			{fmt.Sprintf("… the first %d (one budget's worth), max", min(p.budget(), len(deleted))), seconds(firstWave), "", "",
				"max ≤ " + seconds(returnDeleteTarget), verdict(firstWave <= returnDeleteTarget)},
			{"returning node: Ready → new pod Ready, p50 / max", seconds(measure.Percentile(replaced, 0.5)) + " / " + seconds(replaced[len(replaced)-1]), "", "", "", ""},
			{"controller CPU, rollout of the Ready nodes", seconds(f.readyDone.cpu), "", "", "", ""},
			brakeRow(p, f.brake),
			answerRow(f.brake),
			controllerRSSRow("controller peak RSS (VmHWM)", f.memory),
		},
		notes: []string{
			"Cut-off: " + cutOffHow(p) + "; all come back at once. Times per returning node run from the node watch's first Ready=True to the pod watch's first event showing the old pod terminating or gone (and the new one Ready).",
			fmt.Sprintf("%d nodes return at once against a budget of %d: beyond the first %d, a node's old pod must wait for earlier replacements to be Ready, so the overall max includes that wait; the first wave's max is the controller's own reaction.", f.cut, p.budget(), p.budget()),
			brakeNote(f.brake),
		},
	}
}

// brakeRow says whether the version that cuts its nodes off was stopped at
// the budget: max-failed, by default the max-unavailable budget. Every node
// that ran it either failed or proved alive before its cut (brakeCheck's
// proven); none is left in flight.
func brakeRow(p params, b brakeCheck) row {
	halted := "not halted"
	if b.halted {
		halted = "halted after " + seconds(b.took)
	}
	proven := ""
	if b.proven > 0 {
		proven = fmt.Sprintf(" (%d proven alive before their cut)", b.proven)
	}
	return row{"a version that cuts off every node it runs on: nodes that ran it / failed", fmt.Sprintf("%d / %d%s, %s", b.ran, b.failed, proven, halted), "", "",
		fmt.Sprintf("%d / %d (max-failed) plus those proven alive before their cut, halted", p.budget(), p.budget()),
		verdict(b.halted && b.failed == p.budget() && b.ran == b.failed+b.proven)}
}

// answerRow says whether a cut-off node's agent answered a challenge.
func answerRow(b brakeCheck) row {
	return row{"… its cut-off nodes' pods challenged / answered", fmt.Sprintf("%d / %d", b.challenged, b.answered), "", "", "0 answered", verdict(b.answered == 0)}
}

// brakeNote says how the cut-off version was run, and what the agents did.
func brakeNote(b brakeCheck) string {
	agents := "no node agents ran (BENCH_AGENTS=0): a challenge could only go unanswered"
	if b.agentsFailed >= 0 {
		agents = fmt.Sprintf("simulated agents ran on every node (BENCH_AGENTS=1); a cut-off node's agent answers nothing (its writes fail as over a cut link and are retried with the agent's backoff): %.0f failed attempts meanwhile", b.agentsFailed)
	}
	return "A version that cuts its nodes off: the bench cuts off (" + localcluster.CutOffLabel + ") each node's agent as soon as it sees the node's pod of it, before that pod settles (so before any challenge), and the node's heartbeat once KWOK reports the pod Ready; the rollout must stop at max-failed (the budget) failed nodes, with no deletion in the " +
		seconds(brakeHold) + " after; " + agents + ". A node whose Lease renewal reaches the API server between its pod's settling and the cut of its heartbeat proved alive after its pod settled, and is rightly settled: its budget goes to the next node. The cut nodes come back afterwards."
}
