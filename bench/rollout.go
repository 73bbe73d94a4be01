package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/localcluster"
	recordstore "github.com/edgeota/edgeota/record"
)

// rolloutScenario: a DaemonSet image change on N nodes with 10% unavailability
// allowed, ota-controller's AdvancedRollingUpdate against the native
// controller's RollingUpdate, in alternating pairs, with the nodes
// heartbeating as BENCH_HEARTBEAT says (the failure brake waits for one
// heartbeat after each new pod settles).
var rolloutScenario = scenario{name: "rollout", heartbeat: rolloutHeartbeat, run: runRollout}

// rolloutHeartbeat is how the nodes heartbeat in the rollout scenarios.
func rolloutHeartbeat(p params) localcluster.Heartbeat { return p.rolloutHeartbeat }

// Its targets: as fast as the native controller within noise once the
// heartbeats the failure brake waits for are taken out (and at most one
// heartbeat period per wave slower with them), never past the budget, the
// next deletion within 100 ms of budget being freed (25 ms of it the
// controller's own reaction), and at most 1 ms of controller CPU per node
// and rollout, at every size.
const (
	rolloutRatioTarget = 1.05
	freeToDeleteP99    = 100 * time.Millisecond
	reactionP99        = 25 * time.Millisecond
	controllerCPUNode  = time.Millisecond // per node and rollout
)

// settleCPU is how long after a rollout completes its controller CPU time is
// still counted: the last events arrive after the last pod is Ready.
const settleCPU = 500 * time.Millisecond

// idleCPUWindow is how long the controller's CPU is sampled with nothing to
// roll out: the cost of watching N nodes heartbeat (by default a node
// status write each every 2-3 s, five times a kubelet's rate), which the
// rollout's own cost is given net of.
const idleCPUWindow = 10 * time.Second

// idleSettle is how long after the last rollout the idle sample starts: two
// heartbeat periods, by which every node has proven itself and the
// controller has nothing left to do.
func idleSettle(p params) time.Duration { return 2 * p.rolloutHeartbeat.Period() }

// rollout is one timed image change.
type rolloutRun struct {
	wall           time.Duration // image change until every awaited node is up to date
	maxUnavailable int           // most nodes without an available pod at any sample
	cpu            time.Duration // controller CPU time: in ota-controller runs, and in native runs, which it only watches
	idleCPU        time.Duration // of which the cost of watching idle nodes for as long
	leaseReads     float64       // node Leases the controller read during the run (none in native runs)
	recordWrites   float64       // rollout record ConfigMaps written during the run
	recordBytes    float64       // and their data after each write, summed, as the controller counts it
	recordStored   int64         // each record ConfigMap written as etcd stores it, summed, as the bench's watch of them saw them
	waves          waveFigures   // its pacing, from the pod and node watches
	// apiWrites are the API server's writes during the rollout, every
	// client's, by resource (measure.Metrics.WritesByResource); apiWatchEvents
	// the watch events it sent meanwhile, every watcher's
	// (measure.Metrics.WatchEventsByResource).
	apiWrites, apiWatchEvents map[string]float64
	// machineCPU is the CPU time each process on the machine used during
	// the rollout, by name (machineProcesses).
	machineCPU map[string]time.Duration
}

// rolloutFigures are the rollout scenario's results.
type rolloutFigures struct {
	ota, native []rolloutRun // alternating pairs
	memory      measure.Memory
	// reaction is the controller's own share of budget freed → next
	// deletion over all its rollouts (controllerReaction), sorted.
	reaction []time.Duration
}

// rolloutNamespace holds the rollout scenario's two DaemonSets, which live
// side by side so that alternating runs need no re-creation.
const rolloutNamespace = "bench-rollout"

func runRollout(ctx context.Context, s *session, found *findings) (table, error) {
	progress("rollout: %d alternating pairs", s.p.pairs)
	f, err := benchRollout(ctx, s)
	if err != nil {
		return table{}, err
	}
	found.rolloutWall = measure.Median(pick(f.ota, rolloutWall))
	return rolloutTable(s.p, f), nil
}

// benchRollout times P alternating rollouts of the same N nodes: ota-controller
// with AdvancedRollingUpdate, then the native DaemonSet controller with
// RollingUpdate, both at maxUnavailable 10%.
func benchRollout(ctx context.Context, s *session) (rolloutFigures, error) {
	var f rolloutFigures
	client := s.cluster.Client
	beats, err := watchHeartbeats(ctx, s, s.p.rolloutHeartbeat.Leases)
	if err != nil {
		return f, err
	}
	defer beats.close()
	watches := map[string]*view[*corev1.Pod]{}
	for name, strategy := range map[string]string{"ota": advancedRollingUpdate, "native": ""} {
		w, err := deploy(ctx, client, rolloutNamespace, daemonSet(name, strategy, nil), s.nodes())
		if err != nil {
			return f, err
		}
		defer w.close()
		watches[name] = w
	}
	ctrl, err := s.startController(ctx, rolloutController, reactionVerbosity)
	if err != nil {
		return f, err
	}
	processes, err := s.cluster.PIDs()
	if err != nil {
		return f, err
	}
	processes[rolloutController] = ctrl.Pid()
	processes[benchProcess] = os.Getpid()
	if s.p.agents {
		agents, err := s.startAgents(ctx, rolloutNamespace, "app=ota")
		if err != nil {
			return f, err
		}
		defer func() { _ = s.stopChild(agents) }()
		processes[agentsProcess] = agents.Pid()
	}
	// measured rolls the DaemonSet out to img with the API server's writes,
	// the controller's CPU and its Lease reads counted. The native
	// rollout's pods are DaemonSet pods too: the controller receives their
	// every change and has nothing to do with them.
	measured := func(name, img string, recorded bool) (rolloutRun, error) {
		readsBefore, err := leaseReads(ctx, ctrl)
		if err != nil {
			return rolloutRun{}, err
		}
		writesBefore, bytesBefore, err := recordWrites(ctx, ctrl)
		if err != nil {
			return rolloutRun{}, err
		}
		stored, err := watchRecordStored(ctx, s)
		if err != nil {
			return rolloutRun{}, err
		}
		r, err := countingWrites(ctx, s, func() (rolloutRun, error) {
			before, err := machineCPU(processes)
			if err != nil {
				return rolloutRun{}, err
			}
			r, cpu, err := measureCPU(ctrl, func() (rolloutRun, error) {
				return rollOutRecorded(ctx, s, watches[name], beats, rolloutNamespace, name, img, recorded)
			})
			r.cpu = cpu
			if err != nil {
				return r, err
			}
			after, err := machineCPU(processes)
			r.machineCPU = measure.Delta(after, before)
			return r, err
		})
		if err != nil {
			return r, err
		}
		readsAfter, err := leaseReads(ctx, ctrl)
		if err != nil {
			return r, err
		}
		r.leaseReads = readsAfter - readsBefore
		writesAfter, bytesAfter, err := recordWrites(ctx, ctrl)
		r.recordWrites, r.recordBytes, r.recordStored = writesAfter-writesBefore, bytesAfter-bytesBefore, stored()
		return r, err
	}
	for i := 1; i <= s.p.pairs; i++ {
		a, err := measured("ota", image(i), true)
		if err != nil {
			return f, err
		}
		b, err := measured("native", image(i), false)
		if err != nil {
			return f, err
		}
		progress("rollout pair %d: ota-controller %s (%s waiting for heartbeats, %d waves), native %s",
			i, a.wall, a.waves.heartbeatWait(s.p.budget()).Round(time.Millisecond), a.waves.waves(s.p.budget()), b.wall)
		f.ota, f.native = append(f.ota, a), append(f.native, b)
	}
	// The idle cost is sampled once every rollout is over and every node
	// settled: right after the controller starts, its initial lists and
	// syncs would count as idle.
	time.Sleep(idleSettle(s.p))
	idleRate, err := idleCPURate(ctrl)
	if err != nil {
		return f, err
	}
	for _, runs := range [][]rolloutRun{f.ota, f.native} {
		for i := range runs {
			runs[i].idleCPU = time.Duration(idleRate * float64(runs[i].wall+settleCPU))
		}
	}
	if f.memory, err = ctrl.memory(); err != nil {
		return f, err
	}
	reaction, err := controllerReactionOf(s.h.LogPath(rolloutController))
	if err != nil {
		return f, err
	}
	f.reaction = measure.Sorted(reaction)
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, rolloutNamespace))
}

// The processes measured beside the cluster's components: the controller,
// the simulated agents and the bench itself (its watches).
const (
	rolloutController = "ota-controller-rollout"
	agentsProcess     = "agents"
	benchProcess      = "bench"
)

// machineProcesses are the processes whose CPU a rollout reports, in the
// report's order: the cluster's, then the controller, its agents and the
// bench.
var machineProcesses = append(slices.Clone(localcluster.Components), rolloutController, agentsProcess, benchProcess)

// machineCPU reads the CPU time each process has used so far.
func machineCPU(pids map[string]int) (map[string]time.Duration, error) {
	cpu := make(map[string]time.Duration, len(pids))
	for name, pid := range pids {
		d, err := measure.CPUTime(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cpu[name] = d
	}
	return cpu, nil
}

// machineCPURow is the median CPU time of each process during the
// rollouts, edgeota's and native's, and their sum: on two cores every
// process's share slows the others, the cluster's steps of each node's
// turn included.
func machineCPURow(ota, native []rolloutRun) row {
	list := func(runs []rolloutRun) string {
		if len(runs) == 0 {
			return "–"
		}
		var parts []string
		var total time.Duration
		for _, name := range machineProcesses {
			if _, ok := runs[0].machineCPU[name]; !ok {
				continue
			}
			d := measure.Median(pick(runs, func(r rolloutRun) time.Duration { return r.machineCPU[name] }))
			total += d
			parts = append(parts, fmt.Sprintf("%s %s", name, seconds(d)))
		}
		return fmt.Sprintf("%s (all %s)", strings.Join(parts, ", "), seconds(total))
	}
	return row{"CPU of each process during the rollout (median)", list(ota), list(native), "", "", ""}
}

// leaseRenewalsRow is the share of the node Lease renewals due during the
// rollouts that the simulated kubelets made: below 100 %, kwok-controller
// fell behind, as no fleet of kubelets does.
func leaseRenewalsRow(p params, ota, native []rolloutRun) row {
	share := func(runs []rolloutRun) string {
		if !p.rolloutHeartbeat.Leases {
			return "– (no node Leases)"
		}
		var made, due float64
		for _, r := range runs {
			made += r.apiWrites["leases"]
			due += float64(p.nodes) * r.wall.Seconds() / p.rolloutHeartbeat.Period().Seconds()
		}
		if due == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f %%", 100*made/due)
	}
	return row{"node Lease renewals made, of those due during the rollout (kwok-controller's, as every node's kubelet)", share(ota), share(native), "", "", ""}
}

// leaseReads is how many requests for node Leases the controller made so
// far, lists and watches (edgeota_controller_lease_requests_total).
func leaseReads(ctx context.Context, ctrl *child) (float64, error) {
	m, err := ctrl.metrics(ctx)
	if err != nil {
		return 0, err
	}
	return m.Sum("edgeota_controller_lease_requests_total", nil), nil
}

// recordWrites is how many rollout record ConfigMaps the controller wrote so
// far, and their size after each write, summed
// (edgeota_controller_record_writes_total, _record_bytes_written_total).
func recordWrites(ctx context.Context, ctrl *child) (writes, bytes float64, err error) {
	m, err := ctrl.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return m.Sum("edgeota_controller_record_writes_total", nil), m.Sum("edgeota_controller_record_bytes_written_total", nil), nil
}

// watchRecordStored watches the rollout record ConfigMaps from now on, and
// sums each one written (created or patched) as etcd stores it
// (kube.StoredSize: the object serialised, metadata and managedFields
// included), whichever controller build writes them; stop ends the watch
// and returns the sum.
func watchRecordStored(ctx context.Context, s *session) (stop func() int64, err error) {
	cms := s.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: recordstore.Label, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("listing the rollout records: %w", err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: recordstore.Label, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watching the rollout records: %w", err)
	}
	var sum int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			if cm, ok := e.Object.(*corev1.ConfigMap); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
				if n, err := kube.StoredSize(cm); err == nil {
					sum += int64(n)
				}
			}
		}
	}()
	return func() int64 {
		time.Sleep(time.Second) // the last writes' events
		w.Stop()
		<-done
		return sum
	}, nil
}

// countingWrites runs a rollout and records the API server's writes and
// watch events during it, from its counters read before and after.
func countingWrites(ctx context.Context, s *session, run func() (rolloutRun, error)) (rolloutRun, error) {
	before, err := measure.ScrapeAPIServerMetrics(ctx, s.cluster.Client)
	if err != nil {
		return rolloutRun{}, err
	}
	r, err := run()
	if err != nil {
		return r, err
	}
	after, err := measure.ScrapeAPIServerMetrics(ctx, s.cluster.Client)
	r.apiWrites = measure.Delta(after.WritesByResource(), before.WritesByResource())
	r.apiWatchEvents = measure.Delta(after.WatchEventsByResource(), before.WatchEventsByResource())
	return r, err
}

// heartbeatResources are the resources the nodes' heartbeats write.
var heartbeatResources = []string{"nodes", "leases"}

// writesPerNode says what the runs wrote through the API server per node
// and rollout, on average: pods, the heartbeats, and everything else.
func writesPerNode(p params, runs []rolloutRun) string {
	var pods, heartbeats, other float64
	for _, r := range runs {
		pods += r.apiWrites["pods"]
		for _, res := range heartbeatResources {
			heartbeats += r.apiWrites[res]
		}
		other += sumExcept(r.apiWrites, append([]string{"pods"}, heartbeatResources...))
	}
	per := float64(p.nodes * len(runs))
	return fmt.Sprintf("pods %.2f, heartbeats %.2f, other %.2f", pods/per, heartbeats/per, other/per)
}

// idleCPURate is the controller's CPU time per second of wall time while it
// has nothing to do, sampled over idleCPUWindow.
func idleCPURate(ctrl *child) (float64, error) {
	before, err := ctrl.cpu()
	if err != nil {
		return 0, err
	}
	time.Sleep(idleCPUWindow)
	after, err := ctrl.cpu()
	return float64(after-before) / float64(idleCPUWindow), err
}

// measureCPU runs a timed step and returns the controller's CPU time during
// it, up to settleCPU after it ends.
func measureCPU[T any](ctrl *child, run func() (T, error)) (T, time.Duration, error) {
	var zero T
	before, err := ctrl.cpu()
	if err != nil {
		return zero, 0, err
	}
	r, err := run()
	if err != nil {
		return r, 0, err
	}
	time.Sleep(settleCPU)
	after, err := ctrl.cpu()
	return r, after - before, err
}

// rollOut sets the DaemonSet's image and waits until every node of done (the
// Ready nodes) is up to date with it, sampling at every event and every
// 100 ms how many of them have no available pod: a cut-off node counts
// against no budget (with node Leases the node lifecycle controller marks
// its pod not Ready).
func rollOut(ctx context.Context, s *session, pods *view[*corev1.Pod], ns, ds, img string, done []string) (rolloutRun, error) {
	var r rolloutRun
	start := time.Now()
	if err := setImage(ctx, s.cluster.Client, ns, ds, img); err != nil {
		return r, err
	}
	var grouper podGrouper
	err := pods.until(ctx, settleTimeoutFor(len(done), 500), fmt.Sprintf("DaemonSet %s/%s to run %s on %d nodes", ns, ds, img, len(done)),
		func(now time.Time, items map[string]*corev1.Pod) bool {
			byNode := grouper.group(items)
			r.maxUnavailable = max(r.maxUnavailable, unavailable(byNode, done))
			r.wall = now.Sub(start)
			return allUpToDate(byNode, done, img)
		})
	return r, err
}

// heartbeatViews watch what the nodes heartbeat with: their status, and
// their Leases when they have some.
type heartbeatViews struct {
	nodes  *view[*corev1.Node]
	leases *view[*coordinationv1.Lease] // nil without node Leases
}

// watchHeartbeats watches the nodes, and their Leases when they have some.
func watchHeartbeats(ctx context.Context, s *session, leases bool) (heartbeatViews, error) {
	var v heartbeatViews
	var err error
	if v.nodes, err = watchNodes(ctx, s.cluster.Client); err != nil {
		return v, err
	}
	if leases {
		if v.leases, err = watchLeases(ctx, s.cluster.Client); err != nil {
			v.nodes.close()
			return v, err
		}
	}
	return v, nil
}

// observe hands the heartbeats to rec until observe(nil).
func (v heartbeatViews) observe(rec *flightRecorder) {
	if rec == nil {
		v.nodes.observe(nil)
		if v.leases != nil {
			v.leases.observe(nil)
		}
		return
	}
	v.nodes.observe(rec.node)
	if v.leases != nil {
		v.leases.observe(rec.lease)
	}
}

// close stops the watches.
func (v heartbeatViews) close() {
	v.nodes.close()
	if v.leases != nil {
		v.leases.close()
	}
}

// rollOutRecorded is rollOut of DaemonSet ns/ds on every node, recording
// the pod and heartbeat events to analyze its waves; proofOfLife says
// whether a node stays in flight until a heartbeat after its new pod
// settles, or its agent's answer (ota-controller's failure brake).
func rollOutRecorded(ctx context.Context, s *session, pods *view[*corev1.Pod], beats heartbeatViews, ns, ds, img string, proofOfLife bool) (rolloutRun, error) {
	rec := newFlightRecorder(img)
	// The pods at another image before the rollout: one seen later at img
	// under its own name was patched in place.
	for _, p := range pods.snapshot() {
		if p.DeletionTimestamp == nil && len(p.Spec.Containers) > 0 && !isImage(p.Spec.Containers[0].Image, img) {
			rec.sawOld(p)
		}
	}
	pods.observe(rec.pod)
	beats.observe(rec)
	start := time.Now()
	r, err := rollOut(ctx, s, pods, ns, ds, img, s.nodes())
	pods.observe(nil)
	beats.observe(nil)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r.waves = analyzeWaves(start, rec.events, proofOfLife)
	return r, err
}

// waitUpToDate waits until every node runs one Ready pod with img.
func waitUpToDate(ctx context.Context, pods *view[*corev1.Pod], img string, nodes []string) error {
	var grouper podGrouper
	return pods.until(ctx, settleTimeoutFor(len(nodes), 500), fmt.Sprintf("%s on %d nodes", img, len(nodes)), func(_ time.Time, items map[string]*corev1.Pod) bool {
		return allUpToDate(grouper.group(items), nodes, img)
	})
}

// freeToDelete pools the sorted budget-freed-to-deletion latencies of runs.
func freeToDelete(runs []rolloutRun) []time.Duration {
	var all []time.Duration
	for _, r := range runs {
		all = append(all, r.waves.freeToDelete...)
	}
	return measure.Sorted(all)
}

// turnRow is the mean of each step of a node's turn (turnSteps), over
// every run's nodes, for ota-controller and native.
func turnRow(ota, native []rolloutRun) row {
	means := func(runs []rolloutRun) string {
		var sums [4]time.Duration
		n := 0
		for _, r := range runs {
			for _, t := range r.waves.turns {
				for i, d := range t.steps() {
					sums[i] += d
				}
				n++
			}
		}
		if n == 0 {
			return "–"
		}
		parts := make([]string, len(sums))
		total := time.Duration(0)
		for i, sum := range sums {
			parts[i] = millis(sum / time.Duration(n))
			total += sum / time.Duration(n)
		}
		return fmt.Sprintf("%s (%s, %d nodes)", strings.Join(parts, " / "), seconds(total), n)
	}
	return row{"a node's turn, mean per step: " + strings.Join(turnSteps, " "), means(ota), means(native), "", "", ""}
}

// rolloutWall picks a rollout's wall time.
func rolloutWall(r rolloutRun) time.Duration { return r.wall }

func rolloutTable(p params, f rolloutFigures) table {
	ota, native := pick(f.ota, rolloutWall), pick(f.native, rolloutWall)
	r := measure.Median(measure.PairRatios(ota, native))
	// Without the heartbeat waits, and the allowance of one heartbeat
	// period per wave.
	withoutHeartbeats := pick(f.ota, func(r rolloutRun) time.Duration { return r.wall - r.waves.heartbeatWait(p.budget()) })
	rNoHB := measure.Median(measure.PairRatios(withoutHeartbeats, native))
	hbWait := measure.Median(pick(f.ota, func(r rolloutRun) time.Duration { return r.waves.heartbeatWait(p.budget()) }))
	nodeWait := measure.Median(pick(f.ota, func(r rolloutRun) time.Duration { return r.waves.meanProofWait() }))
	waves := measure.Median(pick(f.ota, func(r rolloutRun) int { return r.waves.waves(p.budget()) }))
	// Each wave waits at most a heartbeat period for its proof of life, or
	// about a second for its agents' answers.
	period := p.rolloutHeartbeat.Period()
	if p.agents {
		period = answerWaveAllowance
	}
	allowance := time.Duration(float64(measure.Median(native))*rolloutRatioTarget) + time.Duration(waves)*period
	otaFree, nativeFree := freeToDelete(f.ota), freeToDelete(f.native)
	otaP99 := measure.Percentile(otaFree, 0.99)
	unavailable := func(r rolloutRun) int { return r.maxUnavailable }
	cpu := measure.Median(pick(f.ota, func(r rolloutRun) time.Duration { return r.cpu }))
	netCPU := measure.Median(pick(f.ota, func(r rolloutRun) time.Duration { return r.cpu - r.idleCPU }))
	watchOnly := measure.Median(pick(f.native, func(r rolloutRun) time.Duration { return max(r.cpu-r.idleCPU, 0) }))
	cpuTarget := controllerCPUNode * time.Duration(p.nodes)
	reactionP := measure.Percentile(f.reaction, 0.99)
	agents := "no node agents: proof of life by heartbeats alone"
	if p.agents {
		agents = fmt.Sprintf("simulated node agents on every node (BENCH_AGENTS=1, see the proof scenario): a node's answer or heartbeat, the first seen, ends its flight, and each wave is allowed %s for its answers", answerWaveAllowance)
	}
	return table{
		title: fmt.Sprintf("Rollout: %d nodes, image change, maxUnavailable 10%%", p.nodes),
		rows: []row{
			{fmt.Sprintf("wall time until every pod runs the new image (median of %d)", len(ota)),
				seconds(measure.Median(ota)), seconds(measure.Median(native)), times(r),
				fmt.Sprintf("≤ %s (1.05× native + %d waves × %s)", seconds(allowance), waves, period), verdict(measure.Median(ota) <= allowance)},
			{fmt.Sprintf("of which waiting for heartbeats (median): %d waves but the last × %s per node", waves, millis(nodeWait)), seconds(hbWait), "", "", "", ""},
			{"wall time without the heartbeat waits (median)", seconds(measure.Median(withoutHeartbeats)), seconds(measure.Median(native)), times(rNoHB),
				"≤ " + times(rolloutRatioTarget), verdict(rNoHB <= rolloutRatioTarget)},
			{fmt.Sprintf("budget freed → next deletion, p50 / p99 (%d / %d samples)", len(otaFree), len(nativeFree)),
				millis(measure.Percentile(otaFree, 0.5)) + " / " + millis(otaP99),
				millis(measure.Percentile(nativeFree, 0.5)) + " / " + millis(measure.Percentile(nativeFree, 0.99)), "",
				"p99 ≤ " + millis(freeToDeleteP99), verdict(len(otaFree) > 0 && otaP99 <= freeToDeleteP99)},
			{fmt.Sprintf("… of which the controller's own reaction: heartbeat (or answer) in its cache → deletion sent, p50 / p99 (%d samples)", len(f.reaction)),
				millis(measure.Percentile(f.reaction, 0.5)) + " / " + millis(reactionP), "", "",
				"p99 ≤ " + millis(reactionP99), verdict(len(f.reaction) > 0 && reactionP <= reactionP99)},
			turnRow(f.ota, f.native),
			budgetRow(p, slices.Max(pick(f.ota, unavailable)), fmt.Sprint(slices.Max(pick(f.native, unavailable)))),
			{"controller CPU per rollout (median)", seconds(cpu), "", "", "", ""},
			{"… net of watching the idle nodes for as long (median)", seconds(netCPU), "", "", fmt.Sprintf("≤ %s (1 ms per node)", seconds(cpuTarget)), verdict(netCPU <= cpuTarget)},
			{"… per node", millis(netCPU / time.Duration(p.nodes)), "", "", "≤ " + millis(controllerCPUNode), verdict(netCPU <= cpuTarget)},
			{"… of which receiving the rollout's pod events: the controller's CPU while it only watches the native rollout, net, per node (median)", "", millis(watchOnly / time.Duration(p.nodes)), "", "", ""},
			{"node Lease requests (lists and watches) per node and rollout (median)", fmt.Sprintf("%.2f", measure.Median(pick(f.ota, func(r rolloutRun) float64 { return r.leaseReads }))/float64(p.nodes)), "", "", "", ""},
			{"rollout record writes per rollout (median); the ConfigMaps written, as etcd stores them (their data, as the controller counts it), summed", fmt.Sprintf("%.0f writes; %s (%s)",
				measure.Median(pick(f.ota, func(r rolloutRun) float64 { return r.recordWrites })),
				kib(int64(measure.Median(pick(f.ota, func(r rolloutRun) float64 { return float64(r.recordStored) })))),
				kib(int64(measure.Median(pick(f.ota, func(r rolloutRun) float64 { return r.recordBytes }))))), "", "", "", ""},
			{"… stored per node and rollout (median)", fmt.Sprintf("%.0f B", measure.Median(pick(f.ota, func(r rolloutRun) float64 { return float64(r.recordStored) }))/float64(p.nodes)),
				"", "", fmt.Sprintf("≤ %d B", recordPerNodeTarget), verdict(measure.Median(pick(f.ota, func(r rolloutRun) float64 { return float64(r.recordStored) }))/float64(p.nodes) <= recordPerNodeTarget)},
			controllerRSSRow("controller peak RSS (VmHWM)", f.memory),
			{"API server writes per node and rollout, every client's (mean): pods, heartbeats (nodes, leases), other", writesPerNode(p, f.ota), writesPerNode(p, f.native), "", "", ""},
			machineCPURow(f.ota, f.native),
			leaseRenewalsRow(p, f.ota, f.native),
		},
		notes: []string{
			"edgeota: ota-controller, AdvancedRollingUpdate; baseline: the native DaemonSet controller, RollingUpdate, same cluster, alternating a b a b …",
			"ratio: median of the per-pair ratios. Pairs (edgeota / native): " + pairList(ota, native),
			"a node's turn: each replaced node's steps as the bench's watches saw them, the mean over every run's nodes seen through each step: the old pod terminating → the new pod created (kwok removes the old one, the native DaemonSet controller creates the next) → bound (kube-scheduler) → Ready (kwok) → proof of life (ota-controller's challenge and the agent's answer, or a heartbeat); the budget's slots pass one turn after another, so the wall time is about the waves times the mean turn",
			"CPU of each process: utime+stime from /proc over each rollout, the cluster's components (kwokctl's PID files), the controller, the simulated agents when they run, and the bench's own watches; the machine has two cores, so what one process takes, the others wait for",
			"budget freed → next deletion runs from the bench's watch seeing the heartbeat (native: the pod Ready) to its watch seeing the next deletion, so it includes the API server's delivery of both and the DELETE's round trip; the controller's own reaction is timed in its log (-v=4): from the handler that takes a settling heartbeat to the deletion it sends next",
			"receiving the rollout's pod events: the native controller's rollout changes as many pods as edgeota's, and the controller receives, decodes and caches each change of a DaemonSet pod; its CPU meanwhile, net of watching the idle nodes, is what any rollout costs it before it decides anything: the floor under the net figure above",
			"rollout record writes: edgeota_controller_record_writes_total during the rollout; as etcd stores them: every record ConfigMap created or patched meanwhile, as the bench's own watch of them saw it, serialised as the API server stores it (kube.StoredSize: protobuf, metadata and managedFields included; the same for every controller build); their data: edgeota_controller_record_bytes_written_total",
			"node Lease requests: edgeota_controller_lease_requests_total during the rollout, per node: a watch by name for each node waited on, which begins with its Lease (a list and a watch where the API server does not stream) and delivers its renewal as the API server stores it, none for the rest",
			"API server writes: apiserver_request_total's POST, PUT, PATCH, APPLY and DELETE during each rollout (edgeota's and the 0.5 s after it), every client's, per node: pods (deletions, the native controller's creations, bindings, status reports, conditions), heartbeats (the nodes' status or Leases for as long as the rollout lasts), other (DaemonSet status and annotations, events, ControllerRevisions)",
			fmt.Sprintf("nodes heartbeat: %s, at most %s apart (the failure brake's proof of life waits for one after each new pod settles); "+
				"heartbeat wait: each node's mean time from its new pod Ready to the heartbeat that proved it alive, once per wave but the last (each budget slot passes one node per wave; the last wave's waits come after the wall time ends); waves: ⌈nodes replaced / budget⌉, the budget's worths of nodes that went through", p.rolloutHeartbeat.String(), p.rolloutHeartbeat.Period()),
			agents,
		},
	}
}
