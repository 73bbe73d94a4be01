package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// atRestScenario: N nodes heartbeating as kubelets do (node Leases renewed
// every 10 s, the status written every 5 minutes), a few opted-in
// DaemonSets (AdvancedRollingUpdate and OTA) settled on every node, nothing
// rolling, nothing cut off: what ota-controller spends watching a fleet
// that does nothing (CPU, memory) over BENCH_ATREST_SECONDS, on which of its
// informers, and what the API server saw change meanwhile.
// BENCH_ATREST_TIMED=1 first sets up what issue 19's verdicts, which change
// with the clock, read (see params.atRestTimed).
var atRestScenario = scenario{name: "atrest", heartbeat: kubeletHeartbeat, run: runAtRest}

// kubeletHeartbeat is node Leases, as kubelets heartbeat with their defaults.
func kubeletHeartbeat(params) localcluster.Heartbeat { return localcluster.Heartbeat{Leases: true} }

// Its target (issue 18): the controller's CPU at rest, in percent of one
// core per 1,000 nodes.
const atRestCPUTarget = 0.5

// atRestNamespace holds the at-rest scenario's DaemonSets.
const atRestNamespace = "bench-atrest"

// atRestDaemonSet is one of the scenario's opted-in DaemonSets.
type atRestDaemonSet struct{ name, strategy string }

// atRestDaemonSets are the scenario's opted-in DaemonSets, each on every
// node: two of each strategy.
var atRestDaemonSets = []atRestDaemonSet{
	{"aru-1", advancedRollingUpdate}, {"aru-2", advancedRollingUpdate},
	{"ota-1", otaStrategy}, {"ota-2", otaStrategy},
}

// atRestDeployTimeout bounds the creation of every DaemonSet's pods: at
// 2,000 nodes, 8,000 pods that the native controller creates and KWOK
// starts, on a machine the cluster alone keeps busy.
const atRestDeployTimeout = 20 * time.Minute

// What BENCH_ATREST_TIMED=1 sets up, as issue 19 specifies it.
const (
	// maintenanceWindow, on every DaemonSet
	// (controller.MaintenanceWindowAnnotation): when its nodes may be
	// upgraded, in their local time.
	maintenanceWindow = "Mon-Sun 02:00-04:00"
	// upgradeDeadline, on the OTA DaemonSets, whose pods all hold an offer
	// not taken (controller.UpgradeDeadlineAnnotation): when the controller
	// carries an offer out itself. A day, so that none falls due while the
	// scenario measures.
	upgradeDeadline = 24 * time.Hour
	// overdueDeadline, with BENCH_ATREST_TIMED=2: every offer falls due
	// before the scenario measures, in a window that stays closed
	// (closedWindow).
	overdueDeadline = 5 * time.Second
	// One pod in heldShare (by name) is held by its owner for holdFor
	// (podchannel.Hold, written through the pods/status subresource as the
	// node agent writes it).
	heldShare = 10
	holdFor   = 24 * time.Hour
	// holdManager is the field manager of the holds.
	holdManager = "edgeota-bench-owner"
)

// holdParallelism bounds the hold writes in flight.
const holdParallelism = 16

// atRestFigures are the at-rest scenario's results.
type atRestFigures struct {
	// window is how long the controller was sampled.
	window time.Duration
	// maintenance and deadline are the maintenance window and the OTA
	// upgrade deadline of the timed variants.
	maintenance string
	deadline    time.Duration
	// pods counts the opted-in DaemonSets' pods; held and offered those
	// held by their owner and holding an offer (BENCH_ATREST_TIMED=1).
	pods, held, offered int
	// cpu is the controller's CPU time over the window; memory its memory
	// at the end (peak: since it started).
	cpu    time.Duration
	memory measure.Memory
	// goRuntime says how the controller's Go runtime manages its memory:
	// GOGC and GOMEMLIMIT as its environment set them; goHeap what its heap
	// holds at the end, by its own metrics.
	goRuntime string
	goHeap    goHeap
	// watchEvents are the events each of the controller's informers handed
	// it over the window, by resource.
	watchEvents map[string]float64
	// controllerWrites counts the conditions the controller wrote and the
	// pods it deleted over the window.
	controllerWrites float64
	// apiWrites and apiWatchEvents are the API server's counts over the
	// window, every client's, by resource: writes answered, and events sent
	// to watchers.
	apiWrites, apiWatchEvents map[string]float64
}

func runAtRest(ctx context.Context, s *session, _ *findings) (table, error) {
	f, err := benchAtRest(ctx, s)
	if err != nil {
		return table{}, err
	}
	return atRestTable(s.p, f), nil
}

// benchAtRest deploys the DaemonSets, starts a controller, waits until it
// has settled every one of them (and, with BENCH_ATREST_TIMED=1, until every
// OTA pod holds an offer and a tenth of the pods are held), lets it go
// quiet, then samples it over the window.
func benchAtRest(ctx context.Context, s *session) (atRestFigures, error) {
	f := atRestFigures{window: s.p.atRestWindow}
	client := s.cluster.Client
	progress("atrest: %d DaemonSets on %d nodes", len(atRestDaemonSets), s.p.nodes)
	if err := createNamespace(ctx, client, atRestNamespace); err != nil {
		return f, err
	}
	names := pick(atRestDaemonSets, func(d atRestDaemonSet) string { return d.name })
	f.maintenance, f.deadline = maintenanceWindow, upgradeDeadline
	if s.p.atRestOverdue {
		f.maintenance, f.deadline = closedWindow(time.Now()), overdueDeadline
	}
	for _, d := range atRestDaemonSets {
		ds := daemonSet(d.name, d.strategy, nil)
		if s.p.atRestTimed {
			ds.Annotations[rollout.MaintenanceWindowAnnotation] = f.maintenance
			if d.strategy == otaStrategy {
				ds.Annotations[rollout.UpgradeDeadlineAnnotation] = fmt.Sprint(int(f.deadline.Seconds()))
			}
		}
		if _, err := client.AppsV1().DaemonSets(atRestNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			return f, fmt.Errorf("creating DaemonSet %s/%s: %w", atRestNamespace, d.name, err)
		}
	}
	pods, err := watchPods(ctx, client, atRestNamespace, "")
	if err != nil {
		return f, err
	}
	defer pods.close()
	nodes := s.nodes()
	err = pods.until(ctx, atRestDeployTimeout, fmt.Sprintf("%d DaemonSets on %d nodes", len(names), len(nodes)), func(_ time.Time, items map[string]*corev1.Pod) bool {
		byDS := podsByDaemonSet(items)
		return !slices.ContainsFunc(names, func(ds string) bool { return !allUpToDate(podsByNode(byDS[ds]), nodes, image(0)) })
	})
	if err != nil {
		return f, err
	}
	f.pods = len(names) * len(nodes)
	const ctrlName = "ota-controller-atrest"
	ctrl, err := s.startController(ctx, ctrlName, 0)
	if err != nil {
		return f, err
	}
	if err := settleAtRest(ctx, s, pods, &f); err != nil {
		return f, err
	}
	// Nothing of the bench's own watches while the controller is sampled.
	pods.close()
	settle := 2 * kubeletHeartbeat(s.p).Period()
	progress("atrest: settled; sampling the controller for %s after %s", f.window, settle)
	time.Sleep(settle)
	if err := sampleAtRest(ctx, s, ctrl, &f); err != nil {
		return f, err
	}
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, atRestNamespace))
}

// podsByDaemonSet groups pods by their DaemonSet (the bench's app label).
func podsByDaemonSet(items map[string]*corev1.Pod) map[string]map[string]*corev1.Pod {
	byDS := map[string]map[string]*corev1.Pod{}
	for key, p := range items {
		ds := p.Labels["app"]
		if byDS[ds] == nil {
			byDS[ds] = map[string]*corev1.Pod{}
		}
		byDS[ds][key] = p
	}
	return byDS
}

// closedWindow is a daily maintenance window, in UTC, that opens 11 hours
// after now and lasts an hour: closed for the whole scenario.
func closedWindow(now time.Time) string {
	h := (now.UTC().Hour() + 11) % 24
	return fmt.Sprintf("daily %02d:00-%02d:00", h, (h+1)%24)
}

// settleAtRest waits until the controller has settled every DaemonSet: its
// rollout status shows every node and none in flight, and every OTA pod
// carries PodNeedUpgrade. With BENCH_ATREST_TIMED=1 it first gives the OTA
// DaemonSets a new image, so that every OTA pod holds an offer
// (PodNeedUpgrade=True) that nobody takes, and holds a tenth of all the
// pods.
func settleAtRest(ctx context.Context, s *session, pods *view[*corev1.Pod], f *atRestFigures) error {
	client, n, timed := s.cluster.Client, s.p.nodes, s.p.atRestTimed
	want := corev1.ConditionFalse
	if timed {
		want = corev1.ConditionTrue
		for _, d := range atRestDaemonSets {
			if d.strategy == otaStrategy {
				if err := setImage(ctx, client, atRestNamespace, d.name, image(1)); err != nil {
					return err
				}
			}
		}
	}
	for _, d := range atRestDaemonSets {
		// An offer outstanding leaves the OTA pods out of date.
		updated := n
		if timed && d.strategy == otaStrategy {
			updated = 0
		}
		settled := func(st rollout.Status) bool {
			return st.Total == n && st.Updated == updated && st.InFlight == 0
		}
		if err := waitRolloutStatus(ctx, client, atRestNamespace, d.name, "every node settled", settled); err != nil {
			return err
		}
	}
	otaPods := func(items map[string]*corev1.Pod) []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range items {
			if p.DeletionTimestamp == nil && strings.HasPrefix(p.Labels["app"], "ota-") {
				out = append(out, p)
			}
		}
		return out
	}
	err := pods.until(ctx, settleTimeout, fmt.Sprintf("%s=%s on every OTA pod", podcondition.NeedUpgrade, want), func(_ time.Time, items map[string]*corev1.Pod) bool {
		ota := otaPods(items)
		f.offered = 0
		for _, p := range ota {
			if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c != nil && c.Status == corev1.ConditionTrue {
				f.offered++
			}
		}
		return len(ota) == f.pods/2 && !slices.ContainsFunc(ota, func(p *corev1.Pod) bool {
			c := podcondition.Get(&p.Status, podcondition.NeedUpgrade)
			return c == nil || c.Status != want
		})
	})
	if err != nil || !timed {
		return err
	}
	return holdPods(ctx, s, pods, f)
}

// holdPods holds one pod in heldShare, in name order, for holdFor, as a
// node agent writes an owner's hold.
func holdPods(ctx context.Context, s *session, pods *view[*corev1.Pod], f *atRestFigures) error {
	all := slices.Collect(maps.Values(pods.snapshot()))
	slices.SortFunc(all, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	var held []*corev1.Pod
	for i := 0; i < len(all); i += heldShare {
		held = append(held, all[i])
	}
	now := time.Now()
	value, err := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(now.Add(holdFor)), Reason: "bench", At: metav1.NewTime(now)})
	if err != nil {
		return err
	}
	errs := make([]error, len(held))
	workqueue.ParallelizeUntil(ctx, holdParallelism, len(held), func(i int) {
		_, errs[i] = podcondition.Annotate(ctx, s.cluster.Client.CoreV1(), held[i], podcondition.Annotations{rollout.HoldAnnotation: &value}, holdManager)
	})
	f.held = len(held)
	return errors.Join(errs...)
}

// sampleAtRest samples the controller and the API server over the window.
func sampleAtRest(ctx context.Context, s *session, ctrl *child, f *atRestFigures) error {
	scrape := func() (ctrlMetrics, api measure.Metrics, cpu time.Duration, err error) {
		if ctrlMetrics, err = ctrl.metrics(ctx); err != nil {
			return nil, nil, 0, err
		}
		if api, err = measure.ScrapeAPIServerMetrics(ctx, s.cluster.Client); err != nil {
			return nil, nil, 0, err
		}
		cpu, err = ctrl.cpu()
		return ctrlMetrics, api, cpu, err
	}
	written := func(m measure.Metrics) float64 {
		return m.Sum("edgeota_controller_conditions_written_total", nil) + m.Sum("edgeota_controller_pods_deleted_total", nil)
	}
	ctrlBefore, apiBefore, cpuBefore, err := scrape()
	if err != nil {
		return err
	}
	time.Sleep(f.window)
	ctrlAfter, apiAfter, cpuAfter, err := scrape()
	if err != nil {
		return err
	}
	const watchEvents = "edgeota_controller_watch_events_total"
	f.cpu = cpuAfter - cpuBefore
	f.watchEvents = measure.Delta(ctrlAfter.ByLabel(watchEvents, "resource"), ctrlBefore.ByLabel(watchEvents, "resource"))
	f.controllerWrites = written(ctrlAfter) - written(ctrlBefore)
	f.apiWrites = measure.Delta(apiAfter.WritesByResource(), apiBefore.WritesByResource())
	f.apiWatchEvents = measure.Delta(apiAfter.WatchEventsByResource(), apiBefore.WatchEventsByResource())
	if f.memory, err = ctrl.memory(); err != nil {
		return err
	}
	f.goHeap = goHeapOf(ctrlAfter)
	env, err := measure.ReadEnviron(ctrl.Pid())
	if err != nil {
		return err
	}
	f.goRuntime = goMemorySettings(env, ctrlAfter.Gauge("go_gc_gomemlimit_bytes"))
	return nil
}

// goHeap is what a Go program's heap holds, in bytes, by the Go collector's
// metrics (client_golang's go_memstats_*): what splits its anonymous RSS.
type goHeap struct {
	// inUse: spans holding objects, live or not yet collected; goal: the
	// heap size at which the next collection starts (at GOGC=100, twice the
	// heap live after the last one); idle: free spans the runtime has not
	// returned to the OS yet; stacks: goroutine stacks.
	inUse, goal, idle, stacks float64
}

func goHeapOf(m measure.Metrics) goHeap {
	v := m.Gauge
	return goHeap{inUse: v("go_memstats_heap_inuse_bytes"), goal: v("go_memstats_next_gc_bytes"),
		idle: v("go_memstats_heap_idle_bytes") - v("go_memstats_heap_released_bytes"), stacks: v("go_memstats_stack_inuse_bytes")}
}

// goMemorySettings says how a Go program's garbage collector is set: GOGC
// as its environment sets it, and its soft memory limit, as the environment
// sets it or as the runtime reports it (limit, go_gc_gomemlimit_bytes: the
// controller sets one from its container's memory limit, if it has one).
func goMemorySettings(env map[string]string, limit float64) string {
	gogc, soft := "GOGC=100 (Go's default)", "no GOMEMLIMIT"
	if v, ok := env["GOGC"]; ok {
		gogc = "GOGC=" + v
	}
	if v, ok := env["GOMEMLIMIT"]; ok {
		soft = "GOMEMLIMIT=" + v
	} else if limit > 0 && limit < math.MaxInt64 {
		soft = fmt.Sprintf("a soft memory limit of %.1f MiB (--memory-limit-ratio of its container's)", limit/(1<<20))
	}
	return gogc + ", " + soft
}

// atRestResources are the resources whose writes and watch events the
// at-rest table shows one by one; the rest are summed.
var atRestResources = []string{"leases", "nodes", "pods"}

func atRestTable(p params, f atRestFigures) table {
	perSecond := func(n float64) string { return fmt.Sprintf("%.1f/s", n/f.window.Seconds()) }
	cpuPct := 100 * f.cpu.Seconds() / f.window.Seconds()
	per1000 := cpuPct * 1000 / float64(p.nodes)
	rows := []row{
		{"controller CPU, % of one core", fmt.Sprintf("%.2f %%", cpuPct), "", "", "", ""},
		{"… per 1,000 nodes", fmt.Sprintf("%.2f %%", per1000), "", "", fmt.Sprintf("≤ %.2f %%", atRestCPUTarget), verdict(per1000 <= atRestCPUTarget)},
		controllerRSSRow("controller peak RSS (VmHWM, since it started)", f.memory),
		{"controller RSS at the end (VmRSS; of which anonymous)", fmt.Sprintf("%s (%s)", mib(f.memory.RSS), mib(f.memory.AnonRSS)), "", "", "", ""},
		{"… its Go heap at the end: in use, next GC's goal, idle not returned, stacks", fmt.Sprintf("%s, %s, %s, %s",
			mib(int64(f.goHeap.inUse)), mib(int64(f.goHeap.goal)), mib(int64(f.goHeap.idle)), mib(int64(f.goHeap.stacks))), "", "", "", ""},
	}
	// The controller's informers, busiest first: where its watching goes.
	informers := slices.SortedFunc(maps.Keys(f.watchEvents), func(a, b string) int {
		return cmp.Or(cmp.Compare(f.watchEvents[b], f.watchEvents[a]), cmp.Compare(a, b))
	})
	for i, resource := range informers {
		figure := "controller watch events: " + resource
		if i == 0 && f.watchEvents[resource] > 0 {
			figure += " (the busiest informer)"
		}
		rows = append(rows, row{figure, perSecond(f.watchEvents[resource]), "", "", "", ""})
	}
	rows = append(rows, row{"controller writes (conditions written, pods deleted)", fmt.Sprint(int(f.controllerWrites)), "", "", "", ""})
	// The API server: writes of every client, and the events it sent.
	lease := kubeletHeartbeat(p)
	expectedLeases := float64(p.nodes) / lease.Period().Seconds()
	for _, r := range atRestResources {
		figure := "API server writes: " + r
		baseline := ""
		if r == "leases" {
			figure += " (node Lease renewals, and any other Lease)"
			baseline = fmt.Sprintf("≥ %.1f/s (N / %s)", expectedLeases, lease.Period())
		}
		rows = append(rows, row{figure, perSecond(f.apiWrites[r]), baseline, "", "", ""})
	}
	rows = append(rows, row{"API server writes: everything else", perSecond(sumExcept(f.apiWrites, atRestResources)), "", "", "", ""})
	for _, r := range atRestResources {
		rows = append(rows, row{"API server watch events sent: " + r, perSecond(f.apiWatchEvents[r]), "", "", "", ""})
	}
	notes := []string{
		fmt.Sprintf("nodes heartbeat: %s; nothing rolls, nothing is cut off; the controller is sampled for %s from /proc (utime+stime, VmRSS, VmHWM), "+
			"after it settled every DaemonSet and two Lease periods more", lease, f.window),
		fmt.Sprintf("DaemonSets: %d, each on every node, %d pods: %s", len(atRestDaemonSets), f.pods,
			strings.Join(pick(atRestDaemonSets, func(d atRestDaemonSet) string { return d.name + " " + d.strategy }), ", ")),
		"controller memory: " + f.goRuntime,
		"controller watch events: its informers' adds, updates and deletes (edgeota_controller_watch_events_total); " +
			"API server writes: apiserver_request_total's POST, PUT, PATCH, APPLY and DELETE answered, every client's (kwok-controller's Lease renewals above all); " +
			"watch events sent: apiserver_watch_events_total, each change counted once per watcher (kube-controller-manager, kube-scheduler, kwok-controller, ota-controller)",
	}
	title := fmt.Sprintf("At rest: %d nodes on node Leases, %d DaemonSets settled, %s", p.nodes, len(atRestDaemonSets), f.window)
	switch {
	case p.atRestOverdue:
		title += ", with every offer overdue outside its window"
		notes = append(notes, fmt.Sprintf("BENCH_ATREST_TIMED=2 (issue 25): %s %q on every DaemonSet (closed throughout); "+
			"%d pods held (%s on the pod, through pods/status, for %s); the OTA DaemonSets' image changed, %d pods holding an offer nobody takes, "+
			"with %s %d: every offer overdue before the sampling starts, none carried out outside the window", rollout.MaintenanceWindowAnnotation, f.maintenance,
			f.held, rollout.HoldAnnotation, holdFor, f.offered, rollout.UpgradeDeadlineAnnotation, int(f.deadline.Seconds())))
	case p.atRestTimed:
		title += ", with windows, holds and offers"
		notes = append(notes, fmt.Sprintf("BENCH_ATREST_TIMED=1 (issue 19): %s %q on every DaemonSet; "+
			"%d pods held (%s on the pod, through pods/status, for %s); the OTA DaemonSets' image changed, %d pods holding an offer nobody takes, "+
			"with %s %d", rollout.MaintenanceWindowAnnotation, f.maintenance, f.held, rollout.HoldAnnotation, holdFor, f.offered,
			rollout.UpgradeDeadlineAnnotation, int(f.deadline.Seconds())))
	}
	return table{title: title, rows: rows, notes: notes}
}

// sumExcept adds the values of every key but those listed.
func sumExcept(m map[string]float64, except []string) float64 {
	var total float64
	for k, v := range m {
		if !slices.Contains(except, k) {
			total += v
		}
	}
	return total
}
