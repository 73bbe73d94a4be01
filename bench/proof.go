package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
)

// proofScenario: what proof of life costs a rollout, by each proof (issue
// 28). On nodes that heartbeat as kubelets do (node Leases every 10 s), in
// alternating rounds: ota-controller's AdvancedRollingUpdate with the node
// agents' answers (simulated agents on every node, runAgents), the same
// DaemonSet with edgeota.io/agent-proof "false" (the Leases alone, as for
// nodes without an agent), the native RollingUpdate, and the Leases alone
// again under a controller started with --lease-watch=every-lease (one
// watch of every Lease, as the controller had before issue 28), each at
// 10 %.
var proofScenario = scenario{name: "proof", heartbeat: kubeletHeartbeat, run: runProof}

// Its targets (issue 28): a wave's answers within a second of its last node
// settling, each wave at most a second slower than native for it; on the
// Leases alone, a renewal taken within 100 ms of its arrival and the
// rollout no slower than when the controller watches every Lease, within
// the same noise as against native (rolloutRatioTarget); the controller's
// own reaction as in the rollout scenario.
const (
	settledToProofP99   = time.Second
	answerWaveAllowance = time.Second
	renewalToProofP99   = 100 * time.Millisecond
)

// proofNamespace holds the proof scenario's two DaemonSets.
const proofNamespace = "bench-proof"

// proofMode is how a run proves its nodes alive.
type proofMode int

const (
	// byAnswers: ota-controller, the agents answering its challenges.
	byAnswers proofMode = iota
	// byLeases: ota-controller with edgeota.io/agent-proof "false".
	byLeases
	// nativeMode: the native DaemonSet controller; no proof of life.
	nativeMode
	// byEveryLease: as byLeases, under a controller that watches every
	// node Lease (--lease-watch=every-lease).
	byEveryLease
)

// proofModes are a round's runs, in order: the controller that watches
// every Lease runs last, so that each round swaps controllers twice.
var proofModes = []proofMode{byAnswers, byLeases, nativeMode, byEveryLease}

// everyLeaseFlag starts the controller of the byEveryLease runs.
const everyLeaseFlag = "--lease-watch=every-lease"

// proofRun is one timed rollout of the proof scenario.
type proofRun struct {
	rolloutRun
	mode proofMode
	// start is the image change; settled is when the controller's rollout
	// status showed every node settled (for native, when every pod was up
	// to date): the window of its proofs in the controller's log.
	start, settled time.Time
	// proven is the rollout status's count of nodes by proof, once settled.
	proven rollout.ProvenNodes
	// challenges, answers and failed are the controller's challenges
	// written and the agents' answers written and failed attempts during
	// the run, until it settled.
	challenges, answers, failed float64
	// agentsCPU and controllerCPU are the simulated agents' and the
	// controller's CPU time over the run.
	agentsCPU, controllerCPU time.Duration
}

// proofFigures are the proof scenario's results.
type proofFigures struct {
	runs []proofRun // in order, a round being proofModes
	// settledToProof are, over the answer runs, each node's time from the
	// bench's pod watch seeing its new pod Ready to the controller taking
	// its proof of life (its log). Sorted.
	settledToProof []time.Duration
	// renewalToProof are, over each mode's Lease runs, each node's time
	// from the bench's Lease watch seeing the renewal that proves it (one
	// sent after its pod settled, seen after it) to the controller taking
	// it. Sorted.
	renewalToProof map[proofMode][]time.Duration
	// deletionToProof are, over each mode's Lease runs, each node's time
	// from the controller sending its old pod's deletion to its taking the
	// node's proof of life (its log): the node's turn, which the Lease
	// watch could only lengthen, free of how the turns of a budget slot
	// add up, which moves the wall time. Sorted.
	deletionToProof map[proofMode][]time.Duration
	// untimed counts the nodes proven without a proof in the log (a
	// heartbeat the controller had before it judged the pod settled).
	untimed int
	// reaction are the controller's reactions (proof in its cache →
	// deletion sent) in each mode's runs, sorted.
	reaction map[proofMode][]time.Duration
}

func runProof(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("proof: %d rounds of answers, Leases alone, native, Leases alone watching every Lease", s.p.pairs)
	f, err := benchProof(ctx, s)
	if err != nil {
		return table{}, err
	}
	return proofTable(s.p, f), nil
}

// benchProof times the rounds and reads the controller's log.
func benchProof(ctx context.Context, s *session) (proofFigures, error) {
	var f proofFigures
	client := s.cluster.Client
	beats, err := watchHeartbeats(ctx, s, true)
	if err != nil {
		return f, err
	}
	defer beats.close()
	watches := map[string]*view[*corev1.Pod]{}
	for _, name := range []string{"ota", "native"} {
		strategy := ""
		if name == "ota" {
			strategy = advancedRollingUpdate
		}
		w, err := deploy(ctx, client, proofNamespace, daemonSet(name, strategy, nil), s.nodes())
		if err != nil {
			return f, err
		}
		defer w.close()
		watches[name] = w
	}
	const ctrlName, everyName = "ota-controller-proof", "ota-controller-proof-every-lease"
	ctrl, err := s.startController(ctx, ctrlName, reactionVerbosity)
	if err != nil {
		return f, err
	}
	agents, err := s.startAgents(ctx, proofNamespace, "app=ota")
	if err != nil {
		return f, err
	}
	// The first rollout's record: every node settled before the first
	// timed run.
	if err := waitSettled(ctx, s, 0); err != nil {
		return f, err
	}
	// events are the logs of the controllers stopped so far: each start
	// truncates its log.
	var events []logEvent
	swap := func(name string, flags ...string) error {
		logged, err := controllerLogOf(ctrl.LogPath)
		if err != nil {
			return err
		}
		events = append(events, logged...)
		if err := s.stopChild(ctrl); err != nil {
			return err
		}
		ctrl, err = s.startController(ctx, name, reactionVerbosity, flags...)
		return err
	}
	image := 0
	for round := 1; round <= s.p.pairs; round++ {
		for _, mode := range proofModes {
			switch {
			case mode == byEveryLease:
				if err := swap(everyName, everyLeaseFlag); err != nil {
					return f, err
				}
			case ctrl.Name == everyName:
				if err := swap(ctrlName); err != nil {
					return f, err
				}
			}
			image++
			r, err := measureProofRun(ctx, s, ctrl, agents, watches, beats, mode, image)
			if err != nil {
				return f, err
			}
			f.runs = append(f.runs, r)
		}
		n := len(f.runs)
		progress("proof round %d: answers %s (%d by answer), Leases alone %s, native %s, Leases alone watching every Lease %s", round,
			f.runs[n-4].wall, f.runs[n-4].proven.Answer, f.runs[n-3].wall, f.runs[n-2].wall, f.runs[n-1].wall)
	}
	logged, err := controllerLogOf(ctrl.LogPath)
	if err != nil {
		return f, err
	}
	f.join(append(events, logged...))
	return f, errors.Join(s.stopChild(agents), s.stopChild(ctrl), deleteNamespace(ctx, client, proofNamespace))
}

// measureProofRun rolls one DaemonSet out to image(i) in mode, and, for
// ota-controller, waits until its rollout status shows every node settled,
// counting the proof-of-life writes until then.
func measureProofRun(ctx context.Context, s *session, ctrl, agents *child, watches map[string]*view[*corev1.Pod],
	beats heartbeatViews, mode proofMode, i int) (proofRun, error) {
	r := proofRun{mode: mode}
	name := "native"
	if mode != nativeMode {
		name = "ota"
		if err := setAgentProof(ctx, s, mode == byAnswers); err != nil {
			return r, err
		}
	}
	revision, err := statusRevision(ctx, s)
	if err != nil {
		return r, err
	}
	before, err := proofCounters(ctx, ctrl, agents)
	if err != nil {
		return r, err
	}
	agentsBefore, err := agents.cpu()
	if err != nil {
		return r, err
	}
	ctrlBefore, err := ctrl.cpu()
	if err != nil {
		return r, err
	}
	r.start = time.Now()
	r.rolloutRun, err = countingWrites(ctx, s, func() (rolloutRun, error) {
		return rollOutRecorded(ctx, s, watches[name], beats, proofNamespace, name, image(i), mode != nativeMode)
	})
	if err != nil {
		return r, err
	}
	if mode != nativeMode {
		if err := waitSettled(ctx, s, revision); err != nil {
			return r, err
		}
		st, err := currentStatus(ctx, s)
		if err != nil {
			return r, err
		}
		if st.Proven != nil {
			r.proven = *st.Proven
		}
	}
	r.settled = time.Now()
	after, err := proofCounters(ctx, ctrl, agents)
	if err != nil {
		return r, err
	}
	r.challenges, r.answers, r.failed = after[0]-before[0], after[1]-before[1], after[2]-before[2]
	agentsAfter, err := agents.cpu()
	if err != nil {
		return r, err
	}
	r.agentsCPU = agentsAfter - agentsBefore
	ctrlAfter, err := ctrl.cpu()
	r.controllerCPU = ctrlAfter - ctrlBefore
	return r, err
}

// setAgentProof sets edgeota.io/agent-proof on the ota DaemonSet: removed
// (the default: answers taken) or "false" (the Leases alone).
func setAgentProof(ctx context.Context, s *session, answers bool) error {
	var value any = "false"
	if answers {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{rollout.AgentProofAnnotation: value}}})
	if err != nil {
		return err
	}
	if _, err := s.cluster.Client.AppsV1().DaemonSets(proofNamespace).Patch(ctx, "ota", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting %s on DaemonSet %s/ota: %w", rollout.AgentProofAnnotation, proofNamespace, err)
	}
	return nil
}

// currentStatus reads the ota DaemonSet's rollout status.
func currentStatus(ctx context.Context, s *session) (rollout.Status, error) {
	return readRolloutStatus(ctx, s.cluster.Client, proofNamespace, "ota")
}

// statusRevision is the revision the ota DaemonSet's rollout status is
// about now (0 without one).
func statusRevision(ctx context.Context, s *session) (int64, error) {
	st, err := currentStatus(ctx, s)
	return st.Revision, err
}

// waitSettled waits until the ota DaemonSet's rollout status is about a
// revision after since and shows every node settled, none in flight.
func waitSettled(ctx context.Context, s *session, since int64) error {
	n := s.p.nodes
	return waitRolloutStatus(ctx, s.cluster.Client, proofNamespace, "ota", fmt.Sprintf("%d nodes settled after revision %d", n, since),
		func(st rollout.Status) bool { return st.Revision > since && st.Updated == n && st.InFlight == 0 })
}

// proofCounters reads the controller's challenges written and the agents'
// answers written and failed.
func proofCounters(ctx context.Context, ctrl, agents *child) ([3]float64, error) {
	var out [3]float64
	cm, err := ctrl.metrics(ctx)
	if err != nil {
		return out, err
	}
	am, err := agents.metrics(ctx)
	if err != nil {
		return out, err
	}
	out[0] = cm.Sum("edgeota_controller_challenges_written_total", nil)
	out[1] = am.Sum("edgeota_agent_alive_answers_total", map[string]string{"result": "written"})
	out[2] = am.Sum("edgeota_agent_alive_answers_total", map[string]string{"result": "failed"})
	return out, nil
}

// join times each run's proofs against the controller's log: when it took
// each node's proof, against when the bench saw the node's pod settle (the
// answer runs) or the renewal that proves it arrive (the Lease runs), and
// its reactions within each mode's runs.
func (f *proofFigures) join(events []logEvent) {
	f.reaction = map[proofMode][]time.Duration{}
	f.renewalToProof = map[proofMode][]time.Duration{}
	f.deletionToProof = map[proofMode][]time.Duration{}
	for _, r := range f.runs {
		if r.mode == nativeMode {
			continue
		}
		// The last wave's proofs may be logged a moment after the status
		// showed them.
		to := r.settled.Add(time.Second)
		taken := firstProofs(events, r.start, to)
		for _, p := range r.waves.proofs {
			line, ok := taken[p.node]
			switch {
			case !ok:
				f.untimed++
			case r.mode == byAnswers:
				f.settledToProof = append(f.settledToProof, line.at.Sub(p.settled))
			case p.by == heartbeatSeen && line.proof == decision.ProofHeartbeat:
				f.renewalToProof[r.mode] = append(f.renewalToProof[r.mode], line.at.Sub(p.proven))
			}
		}
		window := slices.DeleteFunc(slices.Clone(events), func(e logEvent) bool { return e.at.Before(r.start) || !e.at.Before(to) })
		if r.mode == byLeases || r.mode == byEveryLease {
			f.deletionToProof[r.mode] = append(f.deletionToProof[r.mode], turns(window, taken)...)
		}
		for _, d := range reactions(window) {
			f.reaction[r.mode] = append(f.reaction[r.mode], d...)
		}
	}
	f.settledToProof = measure.Sorted(f.settledToProof)
	for _, byMode := range []map[proofMode][]time.Duration{f.reaction, f.renewalToProof, f.deletionToProof} {
		for m := range byMode {
			byMode[m] = measure.Sorted(byMode[m])
		}
	}
}

// of returns the runs of one mode, in order.
func (f proofFigures) of(mode proofMode) []proofRun {
	return slices.DeleteFunc(slices.Clone(f.runs), func(r proofRun) bool { return r.mode != mode })
}

// p50p99 renders the median and the 99th percentile of sorted durations.
func p50p99(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "none"
	}
	return millis(measure.Percentile(sorted, 0.5)) + " / " + millis(measure.Percentile(sorted, 0.99))
}

func proofTable(p params, f proofFigures) table {
	wall := func(r proofRun) time.Duration { return r.wall }
	answers, leases, native, every := f.of(byAnswers), f.of(byLeases), f.of(nativeMode), f.of(byEveryLease)
	aWall, lWall, nWall, eWall := pick(answers, wall), pick(leases, wall), pick(native, wall), pick(every, wall)
	nativeMedian := measure.Median(nWall)
	waves := measure.Median(pick(answers, func(r proofRun) int { return r.waves.waves(p.budget()) }))
	allowance := time.Duration(float64(nativeMedian)*rolloutRatioTarget) + time.Duration(waves)*answerWaveAllowance
	perNode := func(runs []proofRun, get func(proofRun) float64) string {
		return fmt.Sprintf("%.2f", measure.Median(pick(runs, get))/float64(p.nodes))
	}
	leaseRatio := measure.Median(measure.PairRatios(lWall, eWall))
	// Each node's turn, deletion → proof: the wall time adds up the turns
	// of each budget slot, each as long as the node's renewal phase makes
	// it, and moves by ±10 % from one run to the next; the turns' mean
	// does not.
	lTurn, eTurn := f.deletionToProof[byLeases], f.deletionToProof[byEveryLease]
	turnRatio := measure.Ratio(measure.Mean(lTurn), measure.Mean(eTurn))
	leaseEvents := func(runs []proofRun) string {
		return perNode(runs, func(r proofRun) float64 { return r.apiWatchEvents["leases"] })
	}
	ctrlCPU := func(runs []proofRun) string {
		return seconds(measure.Median(pick(runs, func(r proofRun) time.Duration { return r.controllerCPU })))
	}
	proofWait := func(runs []proofRun) string {
		return seconds(measure.Median(pick(runs, func(r proofRun) time.Duration { return r.waves.heartbeatWait(p.budget()) })))
	}
	settledP99 := measure.Percentile(f.settledToProof, 0.99)
	renewalP99 := measure.Percentile(f.renewalToProof[byLeases], 0.99)
	reaction := func(mode proofMode, what string) row {
		r := f.reaction[mode]
		p99 := measure.Percentile(r, 0.99)
		return row{fmt.Sprintf("… the controller's own reaction: %s in its cache → deletion sent, p50 / p99 (%d samples)", what, len(r)),
			p50p99(r), "", "", "p99 ≤ " + millis(reactionP99), verdict(len(r) > 0 && p99 <= reactionP99)}
	}
	unavailable := func(r proofRun) int { return r.maxUnavailable }
	var ota []proofRun
	ota = append(append(append(ota, answers...), leases...), every...)
	return table{
		title: fmt.Sprintf("Proof of life: %d nodes on node Leases, the agents' answers against the Leases alone, maxUnavailable 10%%", p.nodes),
		rows: []row{
			{fmt.Sprintf("wall time with the agents' answers (median of %d)", len(aWall)), seconds(measure.Median(aWall)), seconds(nativeMedian),
				times(measure.Median(measure.PairRatios(aWall, nWall))),
				fmt.Sprintf("≤ %s (1.05× native + %d waves × %s)", seconds(allowance), waves, answerWaveAllowance), verdict(measure.Median(aWall) <= allowance)},
			{"… of which waiting for proof of life (median)", proofWait(answers), "", "", "", ""},
			{fmt.Sprintf("settled → proof, p50 / p99 (%d nodes): new pod Ready in the bench's watch → the controller takes its proof", len(f.settledToProof)),
				p50p99(f.settledToProof), "", "", "p99 ≤ " + millis(settledToProofP99), verdict(len(f.settledToProof) > 0 && settledP99 <= settledToProofP99)},
			{"nodes proven by an answer / by a heartbeat, per rollout (median)",
				fmt.Sprintf("%d / %d", measure.Median(pick(answers, func(r proofRun) int { return r.proven.Answer })),
					measure.Median(pick(answers, func(r proofRun) int { return r.proven.Heartbeat }))), "", "", "", ""},
			{"proof-of-life writes per node and rollout (median): challenges (controller), answers (agents), failed answer attempts",
				perNode(answers, func(r proofRun) float64 { return r.challenges }) + ", " + perNode(answers, func(r proofRun) float64 { return r.answers }) +
					", " + perNode(answers, func(r proofRun) float64 { return r.failed }), "", "", "", ""},
			reaction(byAnswers, "an answer (or heartbeat)"),
			{fmt.Sprintf("wall time on the Leases alone, %s \"false\" (median of %d); baseline: the same, the controller watching every Lease", rollout.AgentProofAnnotation, len(lWall)),
				seconds(measure.Median(lWall)), seconds(measure.Median(eWall)), times(leaseRatio),
				"≤ " + times(rolloutRatioTarget) + " (no slower, within the noise allowed against native)", verdict(len(eWall) > 0 && leaseRatio <= rolloutRatioTarget)},
			{fmt.Sprintf("… each node's turn: its deletion sent → its proof taken, mean, p50 / p99 (%d / %d nodes)", len(lTurn), len(eTurn)),
				millis(measure.Mean(lTurn)) + ", " + p50p99(lTurn), millis(measure.Mean(eTurn)) + ", " + p50p99(eTurn), times(turnRatio),
				"mean ≤ " + times(rolloutRatioTarget), verdict(len(lTurn) > 0 && len(eTurn) > 0 && turnRatio <= rolloutRatioTarget)},
			{"… against native", seconds(measure.Median(lWall)), seconds(nativeMedian), times(measure.Median(measure.PairRatios(lWall, nWall))), "", ""},
			{"… of which waiting for proof of life (median)", proofWait(leases), proofWait(every), "", "", ""},
			{fmt.Sprintf("renewal → proof, p50 / p99 (%d / %d nodes): the renewal in the bench's Lease watch → the controller takes it",
				len(f.renewalToProof[byLeases]), len(f.renewalToProof[byEveryLease])),
				p50p99(f.renewalToProof[byLeases]), p50p99(f.renewalToProof[byEveryLease]), "",
				"p99 ≤ " + millis(renewalToProofP99), verdict(len(f.renewalToProof[byLeases]) > 0 && renewalP99 <= renewalToProofP99)},
			reaction(byLeases, "a heartbeat"),
			{"API server's Lease watch events sent per node and rollout, every watcher's (median)", leaseEvents(leases), leaseEvents(every), "", "", ""},
			{"controller CPU per rollout on the Leases alone (median)", ctrlCPU(leases), ctrlCPU(every), "", "", ""},
			budgetRow(p, slices.Max(pick(ota, unavailable)), fmt.Sprint(slices.Max(pick(native, unavailable)))),
			{"API server writes per node and rollout, every client's (mean): pods, heartbeats (nodes, leases), other; answers / Leases alone",
				writesPerNode(p, pick(answers, func(r proofRun) rolloutRun { return r.rolloutRun })) + " / " +
					writesPerNode(p, pick(leases, func(r proofRun) rolloutRun { return r.rolloutRun })),
				writesPerNode(p, pick(native, func(r proofRun) rolloutRun { return r.rolloutRun })), "", "", ""},
			{"the simulated agents' CPU per rollout with answers (median)", seconds(measure.Median(pick(answers, func(r proofRun) time.Duration { return r.agentsCPU }))), "", "", "", ""},
		},
		notes: []string{
			"edgeota: ota-controller, AdvancedRollingUpdate, with simulated node agents answering its challenges (one process for every node: one pod watch, each answer written as its node, by the agent's own code), then the same DaemonSet with " +
				rollout.AgentProofAnnotation + " \"false\"; baseline: the native DaemonSet controller, RollingUpdate; then the Leases alone again under a controller started with " + everyLeaseFlag +
				" (one watch of every node Lease, always, as the controller watched them before issue 28), in place of the first, which watches the Leases of the nodes it waits on by name; rounds of the four, in that order, on one cluster whose nodes renew Leases every 10 s",
			"ratio: median of the per-round ratios. Rounds (answers / Leases alone / native / Leases alone watching every Lease): " + roundList(aWall, lWall, nWall, eWall),
			"each node's turn: from the controller's log line sending the deletion of its old pod to the one taking its proof of life, both the controller's clock: the new pod's start, its settling, and the wait for a renewal after it, which the node's renewal phase sets whichever watch delivers it; a budget slot's turns add up to the wall time, whose ±10 % between runs (rounds below) is how they happen to add up",
			"Lease watch events: apiserver_watch_events_total for leases during each rollout, every watcher's (kube-controller-manager's node lifecycle controller and kwok-controller watch every Lease whatever the controller does), per node",
			"settled → proof runs from the bench's pod watch seeing the new pod Ready (settled: minReadySeconds 0) to the controller's log line taking the node's proof (-v=4, its handler, at an answer or a heartbeat): the controller seeing the pod Ready, its challenge write, the agent's watch and answer write, the controller's watch; renewal → proof from the bench's Lease watch seeing the first renewal sent after the pod settled to the controller's log line taking it. Both are one machine's clock",
			fmt.Sprintf("%d proofs were in no log line (a heartbeat the controller held before it judged the pod settled: proven at once) and are in neither figure", f.untimed),
			"proof-of-life writes: edgeota_controller_challenges_written_total and the agents' edgeota_agent_alive_answers_total{result} until the rollout status showed every node settled, per node",
			"waves: ⌈nodes replaced / budget⌉; waiting for proof of life: each node's mean time from its new pod Ready to what proved it (answer or renewal, as the bench's watches saw it), once per wave but the last",
		},
	}
}
