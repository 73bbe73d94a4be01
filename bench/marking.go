package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/podcondition"
)

// markingScenario: N pods under the OTA strategy, from the image change
// until every pod has PodNeedUpgrade=True naming the new revision, against
// the write ceiling (a plain client at the controller's QPS writing the same
// condition), in alternating pairs.
var markingScenario = scenario{name: "marking", run: runMarking}

// Its targets: within 1.5× the write ceiling, 1.5 s for 500 pods, and no
// storm of conflicting writes.
const (
	markingRatioTarget  = 1.5
	markingAt500        = 1.5  // seconds, scaled to N
	conflictShareTarget = 0.01 // 409 answers per pod
)

// markingNamespace holds the marking scenario's OTA DaemonSet.
const markingNamespace = "bench-ota"

// The ceiling writes PodNeedUpgrade with this message prefix, so that the
// next controller run can be told to have restored the real one, with the
// controller's write parallelism.
const (
	ceilingParallelism = controller.WriteParallelism
	ceilingManager     = "edgeota-bench"
)

var ceilingMessage = podcondition.RevisionMessage("bench-ceiling-")

// marking is one timed write of PodNeedUpgrade onto every pod.
type marking struct {
	wall     time.Duration
	first    time.Duration       // until the first pod is seen marked: reaction, not throughput
	revision time.Duration       // controller runs: until the native controller's new ControllerRevision is seen
	requests measure.APIRequests // the API server's counts during the run
	cpu      time.Duration
}

// markingFigures are the marking scenario's results.
type markingFigures struct {
	ota, ceiling []marking      // alternating pairs
	written      float64        // conditions the controllers reported writing in their runs
	memory       measure.Memory // of the run whose controller peaked highest
}

func runMarking(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("marking: %d alternating pairs", s.p.pairs)
	f, err := benchMarking(ctx, s)
	if err != nil {
		return table{}, err
	}
	return markingTable(s.p, f), nil
}

// benchMarking times P alternating pairs: ota-controller marking N OTA pods
// PodNeedUpgrade=True after an image change, then a plain client at the
// controller's QPS writing the same condition onto the same pods. Each pair
// has a fresh controller, stopped while the ceiling writes so that it does
// not write back.
func benchMarking(ctx context.Context, s *session) (markingFigures, error) {
	var f markingFigures
	client := s.cluster.Client
	pods, err := deploy(ctx, client, markingNamespace, daemonSet("ota", otaStrategy, nil), s.nodes())
	if err != nil {
		return f, err
	}
	defer pods.close()
	revisions, err := watchRevisions(ctx, client, markingNamespace)
	if err != nil {
		return f, err
	}
	defer revisions.close()
	writer, err := ceilingClient(s)
	if err != nil {
		return f, err
	}
	for i := 1; i <= s.p.pairs; i++ {
		a, written, mem, err := markByController(ctx, s, pods, revisions, i)
		if err != nil {
			return f, err
		}
		f.written += written
		if mem.PeakRSS > f.memory.PeakRSS {
			f.memory = mem
		}
		b, err := markByCeiling(ctx, s, writer, pods, i)
		if err != nil {
			return f, err
		}
		progress("marking pair %d: ota-controller %s, ceiling %s", i, a.wall, b.wall)
		f.ota, f.ceiling = append(f.ota, a), append(f.ceiling, b)
	}
	return f, deleteNamespace(ctx, client, markingNamespace)
}

// markByController starts a controller, waits until it has given every pod
// its own PodNeedUpgrade (undoing the ceiling's), changes the image and
// times the marking; it returns the run, the conditions the controller
// counted writing during it, and the controller's peak memory. It also times
// the native controller's part: ota-controller marks pods against the newest
// ControllerRevision, which kube-controller-manager creates after the change.
func markByController(ctx context.Context, s *session, pods *view[*corev1.Pod], revisions *view[*appsv1.ControllerRevision], i int) (marking, float64, measure.Memory, error) {
	ctrl, err := s.startController(ctx, fmt.Sprintf("ota-controller-marking-%d", i), 0)
	if err != nil {
		return marking{}, 0, measure.Memory{}, err
	}
	before := map[string]string{}
	err = pods.until(ctx, settleTimeout, "the controller's PodNeedUpgrade on every pod", func(_ time.Time, items map[string]*corev1.Pod) bool {
		clear(before)
		for key, p := range items {
			c := podcondition.Get(&p.Status, podcondition.NeedUpgrade)
			if c == nil || strings.HasPrefix(c.Message, ceilingMessage) {
				return false
			}
			before[key] = c.Message
		}
		return len(items) == s.p.nodes
	})
	if err != nil {
		return marking{}, 0, measure.Memory{}, errors.Join(err, s.stopChild(ctrl))
	}
	writtenBefore, err := conditionsWritten(ctx, ctrl)
	if err != nil {
		return marking{}, 0, measure.Memory{}, errors.Join(err, s.stopChild(ctrl))
	}
	known := newestRevision(revisions.snapshot())
	var revisionAt time.Time
	var revisionErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		revisionErr = revisions.until(ctx, settleTimeout, "a new ControllerRevision", func(now time.Time, items map[string]*appsv1.ControllerRevision) bool {
			revisionAt = now
			return newestRevision(items) > known
		})
	})
	var start time.Time
	m, cpu, err := measureCPU(ctrl, func() (marking, error) {
		return timeMarking(ctx, s, pods, func() error {
			start = time.Now()
			return setImage(ctx, s.cluster.Client, markingNamespace, "ota", image(i))
		}, func(key string, c *corev1.PodCondition) bool {
			return c.Status == corev1.ConditionTrue && c.Message != before[key]
		})
	})
	wg.Wait()
	err = errors.Join(err, revisionErr)
	m.cpu, m.revision = cpu, revisionAt.Sub(start)
	var written float64
	var mem measure.Memory
	if err == nil {
		written, err = conditionsWritten(ctx, ctrl)
		written -= writtenBefore
	}
	if err == nil {
		mem, err = ctrl.memory()
	}
	return m, written, mem, errors.Join(err, s.stopChild(ctrl))
}

// newestRevision is the highest .revision among the ControllerRevisions.
func newestRevision(revisions map[string]*appsv1.ControllerRevision) int64 {
	var newest int64
	for _, r := range revisions {
		newest = max(newest, r.Revision)
	}
	return newest
}

// conditionsWritten is the controller's count of PodNeedUpgrade writes.
func conditionsWritten(ctx context.Context, ctrl *child) (float64, error) {
	m, err := ctrl.metrics(ctx)
	if err != nil {
		return 0, err
	}
	return m.Sum("edgeota_controller_conditions_written_total", map[string]string{"type": string(podcondition.NeedUpgrade)}), nil
}

// ceilingClient is a plain client with the controller's QPS and burst.
func ceilingClient(s *session) (kubernetes.Interface, error) {
	config := rest.CopyConfig(s.cluster.Config)
	config.QPS, config.Burst = float32(s.p.qps), s.p.burst
	config.UserAgent = ceilingManager
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("creating the ceiling's client: %w", err)
	}
	return client, nil
}

// markByCeiling writes PodNeedUpgrade=True with a message of its own onto
// every pod, as podcondition.Set (the controller's way) does, as fast as the
// API server takes it.
func markByCeiling(ctx context.Context, s *session, writer kubernetes.Interface, pods *view[*corev1.Pod], i int) (marking, error) {
	if _, err := writer.Discovery().ServerVersion(); err != nil { // connect before timing
		return marking{}, fmt.Errorf("connecting the ceiling's client: %w", err)
	}
	targets := slices.Collect(maps.Values(pods.snapshot()))
	want := corev1.PodCondition{
		Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue,
		Reason: "BenchCeiling", Message: fmt.Sprint(ceilingMessage, i),
	}
	return timeMarking(ctx, s, pods, func() error {
		errs := make([]error, len(targets))
		workqueue.ParallelizeUntil(ctx, ceilingParallelism, len(targets), func(j int) {
			_, errs[j] = podcondition.Set(ctx, writer.CoreV1(), targets[j], want, ceilingManager)
		})
		return errors.Join(errs...)
	}, func(_ string, c *corev1.PodCondition) bool { return c.Message == want.Message })
}

// timeMarking runs start and waits until every pod's PodNeedUpgrade
// satisfies marked (given the pod's key), as the watch sees it; it counts
// the API server's requests meanwhile.
func timeMarking(ctx context.Context, s *session, pods *view[*corev1.Pod], start func() error,
	marked func(key string, c *corev1.PodCondition) bool) (marking, error) {
	var m marking
	before, err := measure.ScrapeAPIServer(ctx, s.cluster.Client)
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	started := make(chan error, 1)
	go func() { started <- start() }() // the watch times the first marks meanwhile
	err = pods.until(ctx, settleTimeout, "PodNeedUpgrade on every pod", func(now time.Time, items map[string]*corev1.Pod) bool {
		done := 0
		for key, p := range items {
			if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c != nil && marked(key, c) {
				done++
			}
		}
		if done > 0 && m.first == 0 {
			m.first = now.Sub(t0)
		}
		m.wall = now.Sub(t0)
		return done == s.p.nodes
	})
	if err = errors.Join(err, <-started); err != nil {
		return m, err
	}
	after, err := measure.ScrapeAPIServer(ctx, s.cluster.Client)
	m.requests = after.Minus(before)
	return m, err
}

func markingTable(p params, f markingFigures) table {
	wall := func(m marking) time.Duration { return m.wall }
	first := func(m marking) time.Duration { return m.first }
	ota, ceiling := pick(f.ota, wall), pick(f.ceiling, wall)
	r := measure.Median(measure.PairRatios(ota, ceiling))
	perPod := func(runs []marking, get func(measure.APIRequests) float64) string {
		return fmt.Sprintf("%.2f", measure.Median(pick(runs, func(m marking) float64 { return get(m.requests) }))/float64(p.nodes))
	}
	patches := func(a measure.APIRequests) float64 { return a.StatusPatches }
	total := func(a measure.APIRequests) float64 { return a.Total }
	conflicts := func(runs []marking) float64 {
		return slices.Max(pick(runs, func(m marking) float64 { return m.requests.Conflicts }))
	}
	absTarget := p.scale(markingAt500)
	cpu := measure.Median(pick(f.ota, func(m marking) time.Duration { return m.cpu }))
	return table{
		title: fmt.Sprintf("OTA marking: %d pods, image change until every pod has PodNeedUpgrade=True", p.nodes),
		rows: []row{
			{fmt.Sprintf("wall time (median of %d)", len(ota)), seconds(measure.Median(ota)), seconds(measure.Median(ceiling)), times(r),
				"≤ " + times(markingRatioTarget), verdict(r <= markingRatioTarget)},
			{"wall time, absolute", seconds(measure.Median(ota)), "", "", fmt.Sprintf("≤ %.2f s (1.5 s at 500 pods)", absTarget), verdict(measure.Median(ota).Seconds() <= absTarget)},
			{"… until the native controller's new ControllerRevision is seen (median)", seconds(measure.Median(pick(f.ota, func(m marking) time.Duration { return m.revision }))), "", "", "", ""},
			{"… until the first pod is seen marked (median)", seconds(measure.Median(pick(f.ota, first))), seconds(measure.Median(pick(f.ceiling, first))), "", "", ""},
			{"PATCH pods/status per pod (API server)", perPod(f.ota, patches), perPod(f.ceiling, patches), "", "", ""},
			{"API requests per pod, all clients (API server)", perPod(f.ota, total), perPod(f.ceiling, total), "", "", ""},
			{"409 Conflict answers, worst run", fmt.Sprint(conflicts(f.ota)), fmt.Sprint(conflicts(f.ceiling)), "",
				fmt.Sprintf("no storm: ≤ %.0f", conflictShareTarget*float64(p.nodes)), verdict(conflicts(f.ota) <= conflictShareTarget*float64(p.nodes))},
			{"PodNeedUpgrade writes per pod (controller's counter)", fmt.Sprintf("%.2f", f.written/float64(p.nodes*len(f.ota))), "", "", "", ""},
			{"controller CPU per marking (median)", seconds(cpu), "", "", "", ""},
			controllerRSSRow("controller peak RSS (VmHWM, worst run)", f.memory),
		},
		notes: []string{
			fmt.Sprintf("baseline (write ceiling): a plain client-go client at QPS %g / burst %d patching the same condition (podcondition.Set: strategic-merge patch of pods/status) onto the same pods from %d goroutines, the controller's write parallelism; the controller is stopped meanwhile and a fresh one starts each pair.", p.qps, p.burst, ceilingParallelism),
			"Both times run until the bench's pod watch sees every pod marked. Request counts are deltas of the API server's apiserver_request_total over the run; \"all clients\" includes the cluster's own components.",
			"Pairs (edgeota / ceiling): " + pairList(ota, ceiling),
		},
	}
}
