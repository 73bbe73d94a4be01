package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/rollout"
)

// inPlaceScenario: an image change rolled out in place (issue 43), beside
// the same change recreated and the native controller, on nodes that
// heartbeat as kubelets (node Leases every 10 s), in alternating rounds: in
// place with the agents' answers, native RollingUpdate, in place on the
// Leases alone (edgeota.io/agent-proof "false"), recreated with the agents'
// answers; each at 10 %. A node is done once its kubelet observed its pod's
// spec and runs the new image, Ready (runs): for a pod patched in place the
// spec's image is there at the patch, long before. Waves and the reaction
// are counted from the patches.
var inPlaceScenario = scenario{name: "inplace", heartbeat: kubeletHeartbeat, run: runInPlace}

// Its target (issue 43): in place with the agents' answers no slower than
// native (the median of the per-round ratios); AdvancedRollingUpdate's pod
// writes per node at most native's.
const inPlaceRatioTarget = 1.0

// inPlaceNamespace holds the scenario's two DaemonSets.
const inPlaceNamespace = "bench-inplace"

// inPlaceMode is how a run of the scenario rolls its DaemonSet out.
type inPlaceMode int

const (
	// inPlaceAnswers: ota-controller in place, the agents answering.
	inPlaceAnswers inPlaceMode = iota
	// inPlaceNative: the native DaemonSet controller, RollingUpdate.
	inPlaceNative
	// inPlaceLeases: ota-controller in place, edgeota.io/agent-proof "false".
	inPlaceLeases
	// recreateAnswers: ota-controller recreating, the agents answering.
	recreateAnswers
)

// inPlaceModes are a round's runs, in order: in place with answers and
// native back to back, the pair the target is about.
var inPlaceModes = []inPlaceMode{inPlaceAnswers, inPlaceNative, inPlaceLeases, recreateAnswers}

// modesOf are a round's runs with p: only the pair with BENCH_INPLACE_PAIR=1.
func modesOf(p params) []inPlaceMode {
	if p.inPlacePair {
		return inPlaceModes[:2]
	}
	return inPlaceModes
}

// modeNames name the modes in the report.
var modeNames = map[inPlaceMode]string{inPlaceAnswers: "in place, answers", inPlaceNative: "native",
	inPlaceLeases: "in place, Leases alone", recreateAnswers: "recreate, answers"}

// inPlaceRun is one timed rollout of the scenario.
type inPlaceRun struct {
	rolloutRun
	mode inPlaceMode
	// patched and deleted are the controller's patches in place and
	// deletions during the run (its metrics).
	patched, deleted float64
	// byWriter are, with BENCH_AUDIT=1, the pod writes in the scenario's
	// namespace during the run, by the API server's audit log, by writer
	// (a user, or a group of them: the nodes).
	byWriter map[string]float64
}

// inPlaceFigures are the scenario's results.
type inPlaceFigures struct {
	runs     []inPlaceRun
	reaction []time.Duration
	memory   measure.Memory
}

func runInPlace(ctx context.Context, s *session, _ *findings) (table, error) {
	var names []string
	for _, m := range modesOf(s.p) {
		names = append(names, modeNames[m])
	}
	progress("inplace: %d rounds of %s", s.p.pairs, strings.Join(names, ", "))
	f, err := benchInPlace(ctx, s)
	if err != nil {
		return table{}, err
	}
	return inPlaceTable(s.p, f), nil
}

// benchInPlace times the rounds.
func benchInPlace(ctx context.Context, s *session) (inPlaceFigures, error) {
	var f inPlaceFigures
	client := s.cluster.Client
	beats, err := watchHeartbeats(ctx, s, true)
	if err != nil {
		return f, err
	}
	defer beats.close()
	watches := map[string]*view[*corev1.Pod]{}
	for name, ds := range map[string]*appsv1.DaemonSet{"ota": inPlaceDaemonSet("ota"), "native": daemonSet("native", "", nil)} {
		w, err := deploy(ctx, client, inPlaceNamespace, ds, s.nodes())
		if err != nil {
			return f, err
		}
		defer w.close()
		watches[name] = w
	}
	ctrl, err := s.startController(ctx, "ota-controller-inplace", reactionVerbosity)
	if err != nil {
		return f, err
	}
	agents, err := s.startAgents(ctx, inPlaceNamespace, "app=ota")
	if err != nil {
		return f, err
	}
	if err := waitSettledIn(ctx, s, inPlaceNamespace, 0); err != nil {
		return f, err
	}
	image := 0
	for round := 1; round <= s.p.pairs; round++ {
		var walls []string
		for _, mode := range modesOf(s.p) {
			image++
			r, err := measureInPlaceRun(ctx, s, ctrl, watches, beats, mode, image)
			if err != nil {
				return f, err
			}
			f.runs = append(f.runs, r)
			walls = append(walls, fmt.Sprintf("%s %s", modeNames[mode], r.wall))
		}
		progress("inplace round %d: %s", round, strings.Join(walls, ", "))
	}
	if f.memory, err = ctrl.memory(); err != nil {
		return f, err
	}
	reaction, err := controllerReactionOf(ctrl.LogPath)
	if err != nil {
		return f, err
	}
	f.reaction = measure.Sorted(reaction)
	return f, errors.Join(s.stopChild(agents), s.stopChild(ctrl), deleteNamespace(ctx, client, inPlaceNamespace))
}

// inPlaceDaemonSet is daemonSet's ota-controller DaemonSet with upgrades in
// place asked for and its template opted in.
func inPlaceDaemonSet(name string) *appsv1.DaemonSet {
	ds := daemonSet(name, advancedRollingUpdate, nil)
	ds.Annotations[rollout.UpdateMethodAnnotation] = string(rollout.MethodInPlaceIfPossible)
	ds.Spec.Template.Labels[rollout.InPlaceLabel] = "true"
	return ds
}

// measureInPlaceRun rolls one DaemonSet out to image(i) in mode, and, for
// ota-controller, waits until its rollout status shows every node settled.
func measureInPlaceRun(ctx context.Context, s *session, ctrl *child, watches map[string]*view[*corev1.Pod], beats heartbeatViews,
	mode inPlaceMode, i int) (inPlaceRun, error) {
	r := inPlaceRun{mode: mode}
	name := "native"
	if mode != inPlaceNative {
		name = "ota"
		method := rollout.MethodInPlaceIfPossible
		if mode == recreateAnswers {
			method = rollout.MethodRecreate
		}
		var proof any
		if mode == inPlaceLeases {
			proof = "false"
		}
		if err := setDaemonSetAnnotations(ctx, s, inPlaceNamespace, "ota", map[string]any{rollout.UpdateMethodAnnotation: string(method),
			rollout.AgentProofAnnotation: proof}); err != nil {
			return r, err
		}
	}
	revision, err := readRolloutStatus(ctx, s.cluster.Client, inPlaceNamespace, "ota")
	if err != nil {
		return r, err
	}
	before, err := ctrl.metrics(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	r.rolloutRun, err = countingWrites(ctx, s, func() (rolloutRun, error) {
		return rollOutRecorded(ctx, s, watches[name], beats, inPlaceNamespace, name, image(i), mode != inPlaceNative)
	})
	if err != nil {
		return r, err
	}
	if mode != inPlaceNative {
		if err := waitSettledIn(ctx, s, inPlaceNamespace, revision.Revision); err != nil {
			return r, err
		}
	}
	after, err := ctrl.metrics(ctx)
	if err != nil {
		return r, err
	}
	r.patched = after.Sum("edgeota_controller_pods_patched_total", nil) - before.Sum("edgeota_controller_pods_patched_total", nil)
	r.deleted = after.Sum("edgeota_controller_pods_deleted_total", nil) - before.Sum("edgeota_controller_pods_deleted_total", nil)
	if s.p.audit {
		// The writes of the pods going on after the wall time (the last
		// proofs' challenges and answers) belong to the run too.
		time.Sleep(settleCPU)
		if r.byWriter, err = podWritesByWriter(s.auditLog(), inPlaceNamespace, start, time.Now()); err != nil {
			return r, err
		}
	}
	return r, nil
}

// setDaemonSetAnnotations sets annotations of DaemonSet ns/name, removing those
// whose value is nil.
func setDaemonSetAnnotations(ctx context.Context, s *session, ns, name string, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if _, err := s.cluster.Client.AppsV1().DaemonSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating DaemonSet %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitSettledIn waits until the ota DaemonSet of ns's rollout status is
// about a revision after since and shows every node settled.
func waitSettledIn(ctx context.Context, s *session, ns string, since int64) error {
	n := s.p.nodes
	return waitRolloutStatus(ctx, s.cluster.Client, ns, "ota", fmt.Sprintf("%d nodes settled after revision %d", n, since),
		func(st rollout.Status) bool { return st.Revision > since && st.Updated == n && st.InFlight == 0 })
}

// runsOf are the runs in the mode.
func (f *inPlaceFigures) runsOf(mode inPlaceMode) []inPlaceRun {
	return slices.DeleteFunc(slices.Clone(f.runs), func(r inPlaceRun) bool { return r.mode != mode })
}

func inPlaceTable(p params, f inPlaceFigures) table {
	wall := func(r inPlaceRun) time.Duration { return r.wall }
	walls := map[inPlaceMode][]time.Duration{}
	for _, m := range inPlaceModes {
		walls[m] = pick(f.runsOf(m), wall)
	}
	native := walls[inPlaceNative]
	ratio := func(m inPlaceMode) float64 { return measure.Median(measure.PairRatios(walls[m], native)) }
	spread := func(m inPlaceMode) string {
		rs := measure.PairRatios(walls[m], native)
		if len(rs) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×–%.2f×", slices.Min(rs), slices.Max(rs))
	}
	r := ratio(inPlaceAnswers)
	rows := []row{
		{fmt.Sprintf("wall time in place, with the agents' answers (median of %d)", len(walls[inPlaceAnswers])),
			seconds(measure.Median(walls[inPlaceAnswers])), seconds(measure.Median(native)), times(r) + " (" + spread(inPlaceAnswers) + ")",
			"≤ " + times(inPlaceRatioTarget), verdict(r <= inPlaceRatioTarget)},
	}
	for _, m := range []inPlaceMode{inPlaceLeases, recreateAnswers} {
		if len(walls[m]) > 0 {
			rows = append(rows, row{"wall time " + modeNames[m], seconds(measure.Median(walls[m])), seconds(measure.Median(native)),
				times(ratio(m)) + " (" + spread(m) + ")", "", ""})
		}
	}
	var podWrites [4]float64
	for _, m := range inPlaceModes {
		runs := f.runsOf(m)
		var pods float64
		for _, r := range runs {
			pods += r.apiWrites["pods"]
		}
		if len(runs) > 0 {
			podWrites[m] = pods / float64(len(runs)*p.nodes)
		}
	}
	for _, m := range []inPlaceMode{inPlaceAnswers, inPlaceLeases, recreateAnswers} {
		if len(f.runsOf(m)) == 0 {
			continue
		}
		rows = append(rows, row{"API server writes per node and rollout, every client's (mean): " + modeNames[m],
			writesPerNode(p, rolloutRuns(f.runsOf(m))), writesPerNode(p, rolloutRuns(f.runsOf(inPlaceNative))), "", "", ""})
	}
	rows = append(rows, row{"pod writes per node and rollout, in place with answers (AdvancedRollingUpdate)",
		fmt.Sprintf("%.2f", podWrites[inPlaceAnswers]), fmt.Sprintf("%.2f", podWrites[inPlaceNative]), "",
		"≤ native's", verdict(podWrites[inPlaceAnswers] <= podWrites[inPlaceNative])})
	for _, m := range inPlaceModes {
		if w := writersOf(f.runsOf(m), p.nodes); w != "" {
			rows = append(rows, row{"pod writes per node by writer, audit log: " + modeNames[m], w, "", "", "", ""})
		}
	}
	patched := func(m inPlaceMode) string {
		runs := f.runsOf(m)
		var pa, de float64
		for _, r := range runs {
			pa, de = pa+r.patched, de+r.deleted
		}
		if len(runs) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f / %.0f", pa/float64(len(runs)), de/float64(len(runs)))
	}
	rows = append(rows,
		row{"pods patched in place / deleted per rollout: in place with answers, on the Leases alone, recreate",
			patched(inPlaceAnswers) + ", " + patched(inPlaceLeases) + ", " + patched(recreateAnswers), "", "", "", ""},
		turnRow(rolloutRuns(f.runsOf(inPlaceAnswers)), rolloutRuns(f.runsOf(inPlaceNative))),
		row{fmt.Sprintf("the controller's own reaction: proof in its cache → patch (or deletion) sent, p50 / p99 (%d samples)", len(f.reaction)),
			millis(measure.Percentile(f.reaction, 0.5)) + " / " + millis(measure.Percentile(f.reaction, 0.99)), "", "",
			"p99 ≤ " + millis(reactionP99), verdict(len(f.reaction) > 0 && measure.Percentile(f.reaction, 0.99) <= reactionP99)},
		budgetRow(p, maxUnavailableOf(f.runsOf(inPlaceAnswers)), fmt.Sprint(maxUnavailableOf(f.runsOf(inPlaceNative)))),
		controllerRSSRow("controller peak RSS (VmHWM)", f.memory),
	)
	modes := modesOf(p)
	var names, rounds []string
	for _, m := range modes {
		names = append(names, modeNames[m])
	}
	for i := 0; i+len(modes) <= len(f.runs); i += len(modes) {
		var ws []string
		for _, r := range f.runs[i : i+len(modes)] {
			ws = append(ws, seconds(r.wall))
		}
		rounds = append(rounds, strings.Join(ws, " / "))
	}
	return table{
		title: fmt.Sprintf("Upgrades in place: %d nodes on node Leases, image change, maxUnavailable 10%%", p.nodes),
		rows:  rows,
		notes: []string{
			"edgeota: ota-controller, AdvancedRollingUpdate, edgeota.io/update-method InPlaceIfPossible (the template labelled edgeota.io/in-place), simulated node agents answering its challenges; on the Leases alone with edgeota.io/agent-proof \"false\"; recreate: the same DaemonSet with edgeota.io/update-method Recreate; baseline: the native DaemonSet controller, RollingUpdate; rounds of the four on one cluster whose nodes renew Leases every 10 s",
			"ratio: median of the per-round ratios against native, with their spread. Rounds (" + strings.Join(names, " / ") + "): " + strings.Join(rounds, ", "),
			"done: a node's kubelet observed its pod's spec (observedGeneration) and reports its container running the new image, Ready: for a pod patched in place, the local cluster's kubelet model restarts the container in one status write (localcluster/inplace.go); native's and recreate's new pods the same in KWOK's one write per start",
			"a node's turn in place: from the patch (the pod seen at the new image in its spec) to its new container Ready, then to its proof of life; no pod is created or bound",
			"pod writes: apiserver_request_total's writes of pods during each rollout (and the 0.5 s after it), every client's, per node; by writer (BENCH_AUDIT=1, a separate untimed run): the API server's audit log of the namespace's pod writes, the nodes' as one writer (KWOK's kubelet model and the simulated agents acting as their nodes)",
		},
	}
}

// rolloutRuns are the runs' rolloutRuns.
func rolloutRuns(runs []inPlaceRun) []rolloutRun {
	out := make([]rolloutRun, len(runs))
	for i, r := range runs {
		out[i] = r.rolloutRun
	}
	return out
}

// maxUnavailableOf is the most nodes without an available pod over runs.
func maxUnavailableOf(runs []inPlaceRun) int {
	n := 0
	for _, r := range runs {
		n = max(n, r.maxUnavailable)
	}
	return n
}

// writersOf renders the mean pod writes per node by writer over runs, ""
// without an audit log.
func writersOf(runs []inPlaceRun, nodes int) string {
	sum := map[string]float64{}
	counted := 0
	for _, r := range runs {
		if r.byWriter == nil {
			continue
		}
		counted++
		for w, n := range r.byWriter {
			sum[w] += n
		}
	}
	if counted == 0 {
		return ""
	}
	var parts []string
	total := 0.0
	for _, w := range slices.Sorted(maps.Keys(sum)) {
		v := sum[w] / float64(counted*nodes)
		total += v
		parts = append(parts, fmt.Sprintf("%s %.2f", w, v))
	}
	return fmt.Sprintf("%s (all %.2f)", strings.Join(parts, ", "), total)
}
