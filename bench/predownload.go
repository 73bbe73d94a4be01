package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// preDownloadScenario: the rollout scenario's AdvancedRollingUpdate (10%
// unavailable) on modelled image pulls (issue 27): the same DaemonSet rolled
// to an image every node pulls instantly (the pull simulator with no delay),
// without and with edgeota.io/pre-download, to one each node takes slowPull
// to pull with pre-download (the default parallelism: ten waves ahead, the
// whole fleet at 10%), and to one of the same delay without it (each wave
// waits for its downloads), in alternating rounds; and what the pull Jobs
// cost the API server. Opt-in: the session then models image pulls for the run.
var preDownloadScenario = scenario{name: "predownload", heartbeat: rolloutHeartbeat, pullDelays: preDownloadImages, run: runPreDownload}

// badTagScenario: a rollout to a tag that does not exist
// (localcluster.MissingImages) with pre-download, against the same without
// it: how long until the rollout halts, and how many nodes are without
// their app meanwhile. Opt-in, as predownload.
var badTagScenario = scenario{name: "badtag", heartbeat: rolloutHeartbeat, pullDelays: func(params) map[string]time.Duration { return nil }, run: runBadTag}

// Their figures and targets: with pre-download a rollout whose every node
// downloads slowPull takes at most 1.10× the same rollout (pre-download on)
// with instant pulls, plus one pull (the first wave waits for its pulls, the
// later ones find theirs done): the pull Jobs' own cost to the API server is
// in both, and the instant rollout without pre-download shows it; a bad
// tag halts before any pull could time out (badTagPullTimeout) with no node
// without its app.
const (
	slowPull             = 20 * time.Second
	preDownloadWallSlack = 1.10
	badTagPullTimeout    = 60 * time.Second
	// badTagDeadline is the progress deadline of the bad-tag DaemonSet:
	// without pre-download its nodes fail, and the rollout halts, only then.
	badTagDeadline = 60 * time.Second
	// badTagAfterHalt is how long the bad-tag scenario keeps sampling after
	// the halt: nothing more may be deleted.
	badTagAfterHalt = 5 * time.Second
)

// Their namespaces, each with one DaemonSet named pullDaemonSet.
const (
	preDownloadNamespace = "bench-predownload"
	badTagNamespace      = "bench-badtag"
	pullDaemonSet        = "app"
)

// pullVariant is one way the predownload scenario rolls out.
type pullVariant struct {
	name        string        // in the image tag and the report
	delay       time.Duration // each node's pull of its image
	preDownload bool
}

// pullVariants, in the order each round runs them.
var pullVariants = []pullVariant{
	{"instant", 0, false},
	{"instant-predownload", 0, true},
	{"predownload", slowPull, true},
	{"plain", slowPull, false},
}

// pullImage is the image variant v rolls to in triple i: new to every node.
func pullImage(v pullVariant, i int) string {
	return fmt.Sprintf("registry.bench.local/pull:%s-%d", v.name, i)
}

// preDownloadImages are the predownload scenario's images with their pull
// delays (localcluster.ImagePulls.Delays).
func preDownloadImages(p params) map[string]time.Duration {
	delays := map[string]time.Duration{}
	for i := 1; i <= p.pairs; i++ {
		for _, v := range pullVariants {
			delays[pullImage(v, i)] = v.delay
		}
	}
	return delays
}

// preDownloadFigures are the predownload scenario's results, per variant,
// one run per round.
type preDownloadFigures struct {
	runs map[string][]rolloutRun
}

func runPreDownload(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("predownload: %d alternating rounds (instant pulls without and with pre-download, %s pulls with and without)", s.p.pairs, slowPull)
	f, err := benchPreDownload(ctx, s)
	if err != nil {
		return table{}, err
	}
	return preDownloadTable(s.p, f), nil
}

// benchPreDownload rolls one AdvancedRollingUpdate DaemonSet on every node
// through the variants, P times, each rollout timed from the image change
// until every node runs one Ready pod of the image, with the API server's
// writes and the controller's CPU counted; the next starts once the
// controller's rollout status shows the last complete.
func benchPreDownload(ctx context.Context, s *session) (preDownloadFigures, error) {
	f := preDownloadFigures{runs: map[string][]rolloutRun{}}
	client := s.cluster.Client
	pods, err := deploy(ctx, client, preDownloadNamespace, daemonSet(pullDaemonSet, advancedRollingUpdate, nil), s.nodes())
	if err != nil {
		return f, err
	}
	defer pods.close()
	ctrl, err := s.startController(ctx, "ota-controller-predownload", 0)
	if err != nil {
		return f, err
	}
	revision := int64(1)
	for i := 1; i <= s.p.pairs; i++ {
		var line []string
		for _, v := range pullVariants {
			if err := annotateDaemonSet(ctx, client, preDownloadNamespace, pullDaemonSet, rollout.PreDownloadAnnotation, fmt.Sprint(v.preDownload)); err != nil {
				return f, err
			}
			img := pullImage(v, i)
			r, err := countingWrites(ctx, s, func() (rolloutRun, error) {
				r, cpu, err := measureCPU(ctrl, func() (rolloutRun, error) {
					return rollOutPulling(ctx, s, pods, preDownloadNamespace, pullDaemonSet, img, v.delay)
				})
				r.cpu = cpu
				return r, err
			})
			if err != nil {
				return f, err
			}
			revision++
			if err := waitRolloutStatus(ctx, client, preDownloadNamespace, pullDaemonSet, fmt.Sprintf("revision %d complete", revision), func(st rollout.Status) bool {
				return st.Revision == revision && st.Complete()
			}); err != nil {
				return f, err
			}
			f.runs[v.name] = append(f.runs[v.name], r)
			line = append(line, fmt.Sprintf("%s %s", v.name, r.wall.Round(time.Millisecond)))
		}
		progress("predownload round %d: %s", i, strings.Join(line, ", "))
	}
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, preDownloadNamespace))
}

// rollOutPulling is rollOut on every node with a timeout that allows each
// wave its pulls (delay), which rollOut's does not.
func rollOutPulling(ctx context.Context, s *session, pods *podsView, ns, ds, img string, delay time.Duration) (rolloutRun, error) {
	var r rolloutRun
	nodes := s.nodes()
	waves := (len(nodes) + s.p.budget() - 1) / s.p.budget()
	timeout := settleTimeoutFor(len(nodes), 500) + time.Duration(waves)*2*delay
	start := time.Now()
	if err := setImage(ctx, s.cluster.Client, ns, ds, img); err != nil {
		return r, err
	}
	var grouper podGrouper
	err := pods.until(ctx, timeout, fmt.Sprintf("DaemonSet %s/%s to run %s on %d nodes", ns, ds, img, len(nodes)),
		func(now time.Time, items map[string]*corev1.Pod) bool {
			byNode := grouper.group(items)
			r.maxUnavailable = max(r.maxUnavailable, unavailable(byNode, nodes))
			r.wall = now.Sub(start)
			return allUpToDate(byNode, nodes, img)
		})
	return r, err
}

// podsView is a view of pods.
type podsView = view[*corev1.Pod]

// annotateDaemonSet sets one annotation of the DaemonSet.
func annotateDaemonSet(ctx context.Context, client kubernetes.Interface, ns, name, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return fmt.Errorf("encoding the annotation patch: %w", err)
	}
	if _, err := client.AppsV1().DaemonSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating DaemonSet %s/%s with %s=%s: %w", ns, name, key, value, err)
	}
	return nil
}

// writesByKind says what the runs wrote through the API server per node and
// rollout, on average: Jobs, pods (the pull Jobs' pods included: their
// creation, status, finalizer removal and deletion), events, and the rest
// but the heartbeats.
func writesByKind(p params, runs []rolloutRun) (jobs, pods, events, other float64) {
	for _, r := range runs {
		jobs += r.apiWrites["jobs"]
		pods += r.apiWrites["pods"]
		events += r.apiWrites["events"]
		other += sumExcept(r.apiWrites, append([]string{"jobs", "pods", "events"}, heartbeatResources...))
	}
	per := float64(p.nodes * max(len(runs), 1))
	return jobs / per, pods / per, events / per, other / per
}

func preDownloadTable(p params, f preDownloadFigures) table {
	wall := func(name string) []time.Duration { return pick(f.runs[name], rolloutWall) }
	instant, instantPre, pre, plain := wall("instant"), wall("instant-predownload"), wall("predownload"), wall("plain")
	mInstant, mInstantPre, mPre, mPlain := measure.Median(instant), measure.Median(instantPre), measure.Median(pre), measure.Median(plain)
	waves := (p.nodes + p.budget() - 1) / p.budget()
	allowance := time.Duration(float64(mInstantPre)*preDownloadWallSlack) + slowPull
	// extraPerWave is each run's time over its instant counterpart's, per
	// wave, per round, median.
	extraPerWave := func(runs, instant []time.Duration) time.Duration {
		var extra []time.Duration
		for i := range runs {
			extra = append(extra, (runs[i]-instant[i])/time.Duration(waves))
		}
		return measure.Median(extra)
	}
	unavailable := func(name string) int {
		return slices.Max(pick(f.runs[name], func(r rolloutRun) int { return r.maxUnavailable }))
	}
	cpu := func(name string) time.Duration {
		return measure.Median(pick(f.runs[name], func(r rolloutRun) time.Duration { return r.cpu }))
	}
	writes := func(name string) string {
		jobs, pods, events, other := writesByKind(p, f.runs[name])
		return fmt.Sprintf("jobs %.2f, pods %.2f, events %.2f, other %.2f", jobs, pods, events, other)
	}
	preJobs, prePods, preEvents, _ := writesByKind(p, f.runs["predownload"])
	_, plainPods, plainEvents, _ := writesByKind(p, f.runs["plain"])
	return table{
		title: fmt.Sprintf("Pre-download: %d nodes, each pulling the new image in %s, maxUnavailable 10%%", p.nodes, slowPull),
		rows: []row{
			{fmt.Sprintf("wall time, instant pulls, with pre-download (without), median of %d", len(instant)), seconds(mInstantPre), seconds(mInstant), times(measure.Median(measure.PairRatios(instantPre, instant))), "", ""},
			{fmt.Sprintf("wall time, %s pulls, with pre-download (median)", slowPull), seconds(mPre), seconds(mInstantPre), times(measure.Median(measure.PairRatios(pre, instantPre))),
				fmt.Sprintf("≤ %s (1.10× instant, with pre-download, + one pull)", seconds(allowance)), verdict(mPre <= allowance)},
			{fmt.Sprintf("wall time, %s pulls, without pre-download (median)", slowPull), seconds(mPlain), seconds(mInstant), times(measure.Median(measure.PairRatios(plain, instant))), "", ""},
			{fmt.Sprintf("… extra per wave over instant pulls, each against its own (median, %d waves): with pre-download (without)", waves), seconds(extraPerWave(pre, instantPre)), seconds(extraPerWave(plain, instant)), "", fmt.Sprintf("reported (one pull: %s)", slowPull), ""},
			{"most nodes without an available pod, any sample: with pre-download (without; instant)", fmt.Sprint(unavailable("predownload")),
				fmt.Sprintf("%d; %d", unavailable("plain"), unavailable("instant")), "", fmt.Sprintf("≤ %d (budget)", p.budget()), verdict(unavailable("predownload") <= p.budget())},
			{"API server writes per node and rollout, every client's (mean): with pre-download", writes("predownload"), "", "", "", ""},
			{"… without pre-download (instant pulls)", writes("plain"), writes("instant"), "", "", ""},
			{"… the pull Jobs' cost: with minus without, per node: jobs, pods, events", fmt.Sprintf("jobs %.2f, pods %.2f, events %.2f", preJobs, prePods-plainPods, preEvents-plainEvents), "", "", "", ""},
			{"controller CPU per rollout (median): with pre-download (without)", seconds(cpu("predownload")), seconds(cpu("plain")), "", "", ""},
		},
		notes: []string{
			"edgeota: ota-controller, AdvancedRollingUpdate 10%, edgeota.io/pre-download: \"true\" with its default parallelism (ten times the budget: every node at 10%); baseline: the same DaemonSet and controller rolled to an image every node pulls instantly (the pull simulator with no delay: one status write and the release per pod), with pre-download (its pull Jobs, whose own cost to this 2-core API server it then carries too) and without; \"without\": pre-download off, each wave waiting for its own pulls",
			fmt.Sprintf("alternating rounds (instant without and with pre-download, %s with and without), each from the image change until every node runs one Ready pod of the image; the next starts once the rollout status shows the last complete. Ratios: medians of the per-round ratios to the instant run of the same pre-download setting (instant with pre-download against instant without). Rounds (instant without / instant with / with / without): %s", slowPull, roundList(instant, instantPre, pre, plain)),
			fmt.Sprintf("extra per wave: (wall − the instant wall of the same pre-download setting) / %d waves (⌈N / budget⌉), per round, median; with pre-download the first wave waits for its pulls and the later ones find theirs done, so the extra is about one pull in all, not per wave", waves),
			"API server writes: apiserver_request_total's POST, PUT, PATCH, APPLY and DELETE during each rollout (and 0.5 s after), every client's, per node; heartbeats left out. A pre-download adds per node a Job (the controller's create and delete, the Job controller's status updates) and its pod (the Job controller's create and finalizer removal, the kubelet's (here KWOK's and the pull simulator's) status writes, the garbage collector's delete) and the controller's PodImageReady write on the old pod; on this cluster kube-controller-manager runs without client QPS limits (see \"On paper\" in bench/README.md for a real one's)",
			fmt.Sprintf("image pulls modelled by the local cluster's pull simulator (localcluster.ImagePulls): %s per node for each image a node has not pulled, every pull its own delay however many run at once (no shared bandwidth)", slowPull),
		},
	}
}

// badTagRun is one rollout to a tag that does not exist.
type badTagRun struct {
	halted      time.Duration // image change until the rollout status shows it halted
	unavailable int           // most nodes without an available pod, any sample until badTagAfterHalt past the halt
	deleted     int           // DaemonSet pods deleted meanwhile
	status      rollout.Status
}

func runBadTag(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("badtag: a missing tag with pre-download, then without")
	pre, plain, err := benchBadTag(ctx, s)
	if err != nil {
		return table{}, err
	}
	return badTagTable(s.p, pre, plain), nil
}

// benchBadTag rolls an AdvancedRollingUpdate DaemonSet (10%, progress
// deadline badTagDeadline) on every node to a missing tag with
// pre-download (its pull timeout badTagPullTimeout), then, that rollout
// halted, to another missing tag without it.
func benchBadTag(ctx context.Context, s *session) (pre, plain badTagRun, err error) {
	client := s.cluster.Client
	ds := daemonSet(pullDaemonSet, advancedRollingUpdate, nil)
	ds.Annotations[rollout.PreDownloadAnnotation] = "true"
	ds.Annotations[rollout.PreDownloadTimeoutAnnotation] = fmt.Sprint(int(badTagPullTimeout.Seconds()))
	ds.Annotations[rollout.ProgressDeadlineAnnotation] = fmt.Sprint(int(badTagDeadline.Seconds()))
	pods, err := deploy(ctx, client, badTagNamespace, ds, s.nodes())
	if err != nil {
		return pre, plain, err
	}
	defer pods.close()
	ctrl, err := s.startController(ctx, "ota-controller-badtag", 0)
	if err != nil {
		return pre, plain, err
	}
	if pre, err = rollOutBadTag(ctx, s, pods, localcluster.MissingImages[0], 2); err != nil {
		return pre, plain, err
	}
	progress("badtag with pre-download: halted after %s, at most %d nodes without their app", pre.halted.Round(time.Millisecond), pre.unavailable)
	if err := annotateDaemonSet(ctx, client, badTagNamespace, pullDaemonSet, rollout.PreDownloadAnnotation, "false"); err != nil {
		return pre, plain, err
	}
	if plain, err = rollOutBadTag(ctx, s, pods, localcluster.MissingImages[1], 3); err != nil {
		return pre, plain, err
	}
	progress("badtag without pre-download: halted after %s, at most %d nodes without their app", plain.halted.Round(time.Millisecond), plain.unavailable)
	return pre, plain, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, badTagNamespace))
}

// rollOutBadTag sets the missing image, the DaemonSet's revision-th, and
// samples, at every pod event and every 100 ms, the nodes without an
// available pod and the pods deleted, until badTagAfterHalt after the
// rollout status shows that revision halted.
func rollOutBadTag(ctx context.Context, s *session, pods *podsView, img string, revision int64) (badTagRun, error) {
	var r badTagRun
	client, nodes := s.cluster.Client, s.nodes()
	before := map[types.UID]bool{}
	for _, p := range pods.snapshot() {
		before[p.UID] = true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var haltedAt atomic.Int64 // unix nanoseconds, 0 until halted
	watchErr := make(chan error, 1)
	start := time.Now()
	if err := setImage(ctx, client, badTagNamespace, pullDaemonSet, img); err != nil {
		return r, err
	}
	go func() {
		watchErr <- waitRolloutStatus(ctx, client, badTagNamespace, pullDaemonSet, "the halt on "+img, func(st rollout.Status) bool {
			if st.Revision != revision || !st.Halted {
				return false
			}
			r.status = st
			haltedAt.Store(time.Now().UnixNano())
			return true
		})
	}()
	deleted := map[types.UID]bool{}
	var grouper podGrouper
	err := pods.until(ctx, badTagDeadline+settleTimeoutFor(len(nodes), 500), "the halt on "+img, func(now time.Time, items map[string]*corev1.Pod) bool {
		r.unavailable = max(r.unavailable, unavailable(grouper.group(items), nodes))
		for _, p := range items {
			if before[p.UID] && p.DeletionTimestamp != nil {
				deleted[p.UID] = true
			}
		}
		at := haltedAt.Load()
		return at != 0 && now.After(time.Unix(0, at).Add(badTagAfterHalt))
	})
	// Pods deleted and gone between two samples count too.
	for uid := range before {
		if _, ok := findPod(pods.snapshot(), uid); !ok {
			deleted[uid] = true
		}
	}
	r.deleted = len(deleted)
	if at := haltedAt.Load(); at != 0 {
		r.halted = time.Unix(0, at).Sub(start)
	}
	cancel()
	if werr := <-watchErr; err == nil && r.halted == 0 {
		err = werr
	}
	return r, err
}

// findPod finds the pod of the UID among items.
func findPod(items map[string]*corev1.Pod, uid types.UID) (*corev1.Pod, bool) {
	for _, p := range items {
		if p.UID == uid {
			return p, true
		}
	}
	return nil, false
}

func badTagTable(p params, pre, plain badTagRun) table {
	failed := func(r badTagRun) string {
		s := fmt.Sprintf("%d failed", r.status.Failed.Count)
		if r.status.Pulls != nil {
			s += fmt.Sprintf(" (pulls: %d failed, %d in flight)", r.status.Pulls.Failed, r.status.Pulls.InFlight)
		}
		return s
	}
	return table{
		title: fmt.Sprintf("Bad tag: %d nodes rolled to %s, maxUnavailable 10%%", p.nodes, localcluster.MissingImages[0]),
		rows: []row{
			{"image change → rollout halted (the status shows it)", seconds(pre.halted), seconds(plain.halted), "",
				fmt.Sprintf("< %s (the pull timeout)", seconds(badTagPullTimeout)), verdict(pre.halted > 0 && pre.halted < badTagPullTimeout)},
			{"most nodes without their app (no available pod), any sample until 5 s after the halt", fmt.Sprint(pre.unavailable), fmt.Sprint(plain.unavailable), "", "0", verdict(pre.unavailable == 0)},
			{"DaemonSet pods deleted", fmt.Sprint(pre.deleted), fmt.Sprint(plain.deleted), "", "0", verdict(pre.deleted == 0)},
			{"at the halt", failed(pre), failed(plain), "", "", ""},
		},
		notes: []string{
			fmt.Sprintf("edgeota: edgeota.io/pre-download \"true\" (default parallelism; pre-download-timeout-seconds %d): each node's pull Job fails at once on the registry's \"not found\", a failure before harm; max-failed (the budget, %d) of them halt the rollout", int(badTagPullTimeout.Seconds()), p.budget()),
			fmt.Sprintf("baseline: the same DaemonSet and controller without pre-download, to another missing tag (%s): a wave's old pods are deleted, their replacements never start (ImagePullBackOff), and they fail at the progress deadline (edgeota.io/progress-deadline-seconds %d), which halts the rollout", localcluster.MissingImages[1], int(badTagDeadline.Seconds())),
			"one rollout each; the halt as the bench's poll of the rollout status (every 100 ms) sees it, the status written at most once a second; samples at every pod event and every 100 ms",
		},
	}
}
