//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/controller"
	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// Pre-download (edgeota.io/pre-download) on a cluster whose image pulls are
// modelled (localcluster.ImagePulls): a pull takes a few seconds, a missing
// tag fails at once, and a pod whose node has not pulled its images waits
// in ContainerCreating, so "taken only once pulled" shows on the new pods.

// slowPullDelay is the pull delay of TestPreDownloadPullsNextWaveWhileOneBakes:
// several times one of its waves (bakeSeconds, then the node's next
// heartbeat, every 2-3 s: nodeHeartbeat).
const slowPullDelay = 15 * time.Second

// bakeSeconds is the DaemonSet's minReadySeconds there: a node stays in
// flight, its new pod baking, at least this long after the pod turns Ready.
const bakeSeconds = 3

// prePullByController selects the controller's pre-download Jobs: the label
// value is the contract's, spelled here as the suite spells the contract.
var prePullByController = controller.PrePullByLabel + "=controller"

// preDownloadEnv is a cluster of the nodes whose pulls take delay, with the
// test DaemonSet (annotations, pre-download on) running its old image on
// every node and the controller started.
func preDownloadEnv(t *testing.T, nodes int, delay time.Duration, annotations map[string]string) *env {
	t.Helper()
	return preDownloadEnvWith(t, nodes, delay, annotations, 0)
}

// preDownloadEnvWith is preDownloadEnv with the DaemonSet's minReadySeconds,
// its old pods available (Ready that long) before the controller starts.
func preDownloadEnvWith(t *testing.T, nodes int, delay time.Duration, annotations map[string]string, minReadySeconds int32) *env {
	t.Helper()
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: delay, BackOff: pullBackOff}})
	all := map[string]string{rollout.PreDownloadAnnotation: "true"}
	for k, v := range annotations {
		all[k] = v
	}
	e.createDaemonSetWith(all, func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = minReadySeconds })
	if minReadySeconds > 0 {
		minReady := time.Duration(minReadySeconds) * time.Second
		eventually(t, fmt.Sprintf("every pod Ready for %s", minReady), func(ctx context.Context) (bool, string, error) {
			pods, err := e.podsByNode(ctx)
			if err != nil {
				return false, "", err
			}
			var young []string
			for node, p := range pods {
				if c := podcondition.Get(&p.Status, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue || time.Since(c.LastTransitionTime.Time) < minReady+time.Second {
					young = append(young, node)
				}
			}
			slices.Sort(young)
			return len(young) == 0, fmt.Sprintf("not yet available on %v", young), nil
		})
	}
	e.startController(e.cluster.Kubeconfig, "-v=2")
	return e
}

// TestPreDownloadPullsNextWaveWhileOneBakes: an AdvancedRollingUpdate of 4
// nodes at max-unavailable 1, one pull at a time, each pull several waves
// long: every node's old pod is deleted only after its pull Job was created
// (by the API server's timestamps) and its pull finished (the Job's pod
// started its containers, in the same watch as the deletion), no new pod
// waits for a pull, and while each node is in flight, its new pod baking
// (minReadySeconds), the next node's Job is pulling.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadPullsNextWaveWhileOneBakes(t *testing.T) {
	const nodes = 4
	e := preDownloadEnvWith(t, nodes, slowPullDelay, map[string]string{strategyAnnotation: "AdvancedRollingUpdate",
		maxUnavailableAnnotation: "1", rollout.PreDownloadParallelismAnnotation: "1"}, bakeSeconds)
	log := e.recordPreDownload()
	s := startSampler(t, e, nodes)
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	_, worst := s.stop()
	if worst.unavailable > 1 {
		t.Errorf("got %d nodes without an available pod at once, want at most 1: %v", worst.unavailable, worst.nodes)
	}

	for i, node := range allNodes(nodes) {
		old, fresh := log.dsPod(node, oldImage), log.dsPod(node, newImage)
		if old == nil || fresh == nil || old.deletedSeq == 0 {
			t.Fatalf("node %s: got old pod %v, new pod %v; want the old one deleted and a new one", node, old, fresh)
		}
		jobs := log.jobsOn(node)
		if len(jobs) != 1 {
			t.Fatalf("node %s: got %d pre-download Jobs, want 1: %s", node, len(jobs), describeJobs(jobs))
		}
		job := jobs[0]
		deleted := old.deletionIssued()
		if job.created.After(deleted) {
			t.Errorf("node %s: got its Job %s created at %s, after its old pod's deletion at %s", node, job.name, job.created.Format(time.TimeOnly), deleted.Format(time.TimeOnly))
		}
		pulled := log.pullSeq(node)
		if pulled == 0 || pulled > old.deletedSeq {
			t.Errorf("node %s: got its pull finished at watch event %d and its old pod deleted at %d, want the pull first", node, pulled, old.deletedSeq)
		}
		if fresh.waitedForPull {
			t.Errorf("node %s: got its new pod %s waiting for a pull (ContainerCreating), want it started at once on pulled images", node, fresh.name)
		}
		if i == nodes-1 {
			continue
		}
		// The next wave's node pulls while this one bakes: halfway through
		// minReadySeconds after its new pod turned Ready, it is in flight.
		next, baking := allNodes(nodes)[i+1], fresh.readySeen.Add(bakeSeconds*time.Second/2)
		if !log.jobAliveAt(next, baking) {
			t.Errorf("node %s: got no pre-download Job on %s while %s's new pod baked, at %s; Jobs on %s: %s",
				node, next, node, baking.Format(time.StampMilli), next, describeJobs(log.jobsOn(next)))
		}
	}
	if got := log.maxJobs(); got != 1 {
		t.Errorf("got at most %d pre-download Jobs at once, want 1 (the parallelism)", got)
	}
	e.waitNoPrePullJobs()
}

// TestPreDownloadBeforeWindowOpens: with the maintenance window closed now,
// every node pulls the target (PodImageReady=True, the rollout status's
// pulls done) and no pod is deleted; once the window opens the rollout runs
// on images already there.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadBeforeWindowOpens(t *testing.T) {
	const nodes = 3
	e := preDownloadEnv(t, nodes, pullDelay, map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		rollout.MaintenanceWindowAnnotation: utcWindow(time.Now().Add(3*time.Hour), time.Hour)})
	log := e.recordPreDownload()
	e.setImage(newImage)
	e.waitRolloutStatus("every node pulled, waiting for its window", func(s *rollout.Status) bool {
		return s.Pulls != nil && s.Pulls.Done == nodes && s.Pulls.InFlight == 0 &&
			s.WaitingForWindow != nil && s.WaitingForWindow.Count == nodes
	})
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, allNodes(nodes)...)
	consistently(t, "no pod deleted while the window is closed", 2*pullDelay, func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		deleted := log.deletedPods()
		return n == nodes && len(deleted) == 0, fmt.Sprintf("%d nodes on %s, deleted %v", n, oldImage, deleted), err
	})

	e.annotate(rollout.MaintenanceWindowAnnotation, "daily 00:00-24:00")
	e.waitAllNodes(newImage)
	for _, node := range allNodes(nodes) {
		if p := log.dsPod(node, newImage); p == nil || p.waitedForPull {
			t.Errorf("node %s: got new pod %v, want one started at once on the images pulled before the window", node, p)
		}
	}
	e.waitNoPrePullJobs()
}

// TestPreDownloadShowsPulledToOwner: an OTA offer with pre-download reads
// PULLED in the owner's view (ListUpgrades through the node's ota-server)
// while the old pod still runs; the owner's upgrade then starts its new pod
// without a pull.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadShowsPulledToOwner(t *testing.T) {
	const nodes = 2
	e := preDownloadEnv(t, nodes, pullDelay, map[string]string{strategyAnnotation: "OTA"})
	node := localcluster.NodeName(1)
	a := e.startAgent(node, e.cluster.Kubeconfig)
	client := e.grpcClient(a)
	log := e.recordPreDownload()
	before, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	e.setImage(newImage)
	var pulled *edgeotav1.App
	eventually(t, "ListUpgrades on "+node+" to show the offer PULLED", func(ctx context.Context) (bool, string, error) {
		list, err := client.ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			return false, "", err
		}
		pulled = findApp(list.GetApps())
		return pulled.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_PULLED, pulled.String(), nil
	})
	if got := pulled.GetTargetImages()["nginx"]; got != newImage {
		t.Errorf("got PULLED with target images %v, want nginx %s", pulled.GetTargetImages(), newImage)
	}
	e.expectUntouched(before, allNodes(nodes)...)
	// The node without an agent pulled too: every offered node does.
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, allNodes(nodes)...)

	if _, err := client.Upgrade(e.ctx(), &edgeotav1.UpgradeRequest{Namespace: e.ns, Name: before[node].Name}); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	e.waitUpgraded(before, node)
	if p := log.dsPod(node, newImage); p == nil || p.waitedForPull {
		t.Errorf("got the owner's new pod %v, want one started at once on the pre-downloaded images", p)
	}
	e.expectUntouched(before, localcluster.NodeName(2))
}

// TestPreDownloadMissingTagHalts: a tag that does not exist fails every
// node's pull for good; max-failed such failures halt the rollout with every
// node still running its old pod (none deleted, none without its app at any
// sample), a Warning RolloutHalted naming the failed nodes and the image, and
// a Warning PrePullFailed per failed node naming it and the image. The
// failed pulls' Jobs go.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadMissingTagHalts(t *testing.T) {
	const nodes, budget = 4, 2
	missing := localcluster.MissingImages[0]
	e := preDownloadEnv(t, nodes, pullDelay, map[string]string{strategyAnnotation: "AdvancedRollingUpdate",
		maxUnavailableAnnotation: fmt.Sprint(budget)})
	before, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	log := e.recordPreDownload()
	s := startSampler(t, e, nodes)
	e.setImage(missing)
	halted := e.waitRolloutStatus("the rollout halted on failed pulls", func(s *rollout.Status) bool { return s.Halted })
	if halted.Failed.Count < budget || halted.Pulls == nil || halted.Pulls.Failed < budget || halted.InFlight != 0 {
		t.Errorf("got %+v (pulls %+v), want at least %d failed pulls and nothing in flight", halted, halted.Pulls, budget)
	}
	consistently(t, "every node keeps its old pod", 10*time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range allNodes(nodes) {
			if p := pods[n]; p == nil || p.UID != before[n].UID || !podcondition.IsTrue(&p.Status, corev1.PodReady) {
				return false, fmt.Sprintf("%s runs %s", n, describePod(p)), nil
			}
		}
		deleted := log.deletedPods()
		return len(deleted) == 0, fmt.Sprintf("deleted %v", deleted), nil
	})
	if samples, worst := s.stop(); worst.unavailable != 0 {
		t.Errorf("got %d nodes without an available pod at %s (of %d samples), want none: %v", worst.unavailable, worst.at.Format(time.StampMilli), samples, worst.nodes)
	}

	final, err := e.rolloutStatus(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("halted: %d failed (%v), pulls %+v", final.Failed.Count, final.Failed.Nodes, final.Pulls)
	halts := e.eventsOf(rollout.ReasonRolloutHalted)
	if len(halts) != 1 || halts[0].Type != corev1.EventTypeWarning {
		t.Fatalf("got %d %s events (%+v), want 1 Warning", len(halts), rollout.ReasonRolloutHalted, halts)
	}
	t.Logf("%s: %s", rollout.ReasonRolloutHalted, halts[0].Message)
	if !strings.Contains(halts[0].Message, missing) {
		t.Errorf("got %s %q, want it to name the image %s", rollout.ReasonRolloutHalted, halts[0].Message, missing)
	}
	for _, n := range halted.Failed.Nodes {
		if !strings.Contains(halts[0].Message, n) {
			t.Errorf("got %s %q, want it to name the failed node %s", rollout.ReasonRolloutHalted, halts[0].Message, n)
		}
	}
	failedPulls := e.eventsOf(rollout.ReasonPrePullFailed)
	for _, n := range final.Failed.Nodes {
		if !slices.ContainsFunc(failedPulls, func(ev corev1.Event) bool {
			return ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "node "+n+" ") && strings.Contains(ev.Message, missing)
		}) {
			t.Errorf("got no Warning %s naming node %s and image %s; got %d: %v", rollout.ReasonPrePullFailed, n, missing, len(failedPulls), eventMessages(failedPulls))
		}
	}
	e.waitNoPrePullJobs()
}

// TestPreDownloadWaitsForNotReadyNode: a node cut off (NotReady) when the
// rollout starts gets no pre-download Job while the others roll; once it
// returns it gets one, and its old pod is deleted only after that pull.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadWaitsForNotReadyNode(t *testing.T) {
	const nodes = 3
	cut := localcluster.NodeName(nodes)
	e := preDownloadEnv(t, nodes, pullDelay, map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	if err := e.cluster.CutOff(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	log := e.recordPreDownload()
	e.setImage(newImage)
	e.waitRolloutStatus("the Ready nodes updated, the cut-off one skipped", func(s *rollout.Status) bool {
		return s.Updated == nodes-1 && s.Skipped == 1 && s.InFlight == 0
	})
	consistently(t, "no pre-download Job on cut-off "+cut, 2*pullDelay, func(context.Context) (bool, string, error) {
		jobs := log.jobsOn(cut)
		return len(jobs) == 0, fmt.Sprintf("Jobs on %s: %s", cut, describeJobs(jobs)), nil
	})
	for _, n := range allNodes(nodes - 1) {
		if len(log.jobsOn(n)) != 1 {
			t.Errorf("node %s: got Jobs %s, want one", n, describeJobs(log.jobsOn(n)))
		}
	}

	returned := time.Now()
	if err := e.cluster.Reconnect(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	e.waitAllNodes(newImage)
	jobs := log.jobsOn(cut)
	if len(jobs) != 1 || jobs[0].seen.Before(returned) {
		t.Fatalf("got Jobs on %s %s, want one, created after it returned at %s", cut, describeJobs(jobs), returned.Format(time.StampMilli))
	}
	old, fresh := log.dsPod(cut, oldImage), log.dsPod(cut, newImage)
	if old == nil || old.deletedSeq == 0 || fresh == nil {
		t.Fatalf("node %s: got old pod %v, new pod %v; want the old one deleted and a new one", cut, old, fresh)
	}
	if pulled := log.pullSeq(cut); pulled == 0 || pulled > old.deletedSeq {
		t.Errorf("node %s: got its pull finished at watch event %d and its old pod deleted at %d, want the pull first", cut, pulled, old.deletedSeq)
	}
	if fresh.waitedForPull {
		t.Errorf("node %s: got its new pod %s waiting for a pull, want it started at once", cut, fresh.name)
	}
}

// TestPreDownloadParallelism: with edgeota.io/pre-download-parallelism 2,
// a watch of the controller's Jobs over the whole rollout of 6 nodes never
// sees more than 2 at once, sees 2, and sees one Job per node.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPreDownloadParallelism(t *testing.T) {
	const nodes, parallelism = 6, 2
	e := preDownloadEnv(t, nodes, pullDelay, map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		rollout.PreDownloadParallelismAnnotation: fmt.Sprint(parallelism)})
	log := e.recordPreDownload()
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	e.waitNoPrePullJobs()
	if got := log.maxJobs(); got != parallelism {
		t.Errorf("got at most %d pre-download Jobs at once, want %d (the parallelism)", got, parallelism)
	}
	for _, n := range allNodes(nodes) {
		if got := log.jobsOn(n); len(got) != 1 {
			t.Errorf("node %s: got Jobs %s, want one", n, describeJobs(got))
		}
	}
}

// waitNoPrePullJobs waits until no pre-download Job of the controller's is
// left: each goes once its result is read.
func (e *env) waitNoPrePullJobs() {
	e.t.Helper()
	eventually(e.t, "no pre-download Job left", func(ctx context.Context) (bool, string, error) {
		jobs, err := e.cluster.Client.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{LabelSelector: prePullByController})
		if err != nil {
			return false, "", err
		}
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		return len(names) == 0, fmt.Sprintf("Jobs %v", names), nil
	})
}

// describeJobs says when each Job was seen to come and go.
func describeJobs(jobs []jobLife) string {
	var out []string
	for _, j := range jobs {
		gone := "still there"
		if !j.gone.IsZero() {
			gone = "gone at " + j.gone.Format(time.StampMilli)
		}
		out = append(out, fmt.Sprintf("%s on %s seen at %s, %s", j.name, j.node, j.seen.Format(time.StampMilli), gone))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func eventMessages(events []corev1.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Message)
	}
	return out
}

// preDownloadLog records, from one watch of the test namespace's pods (in
// the API server's order, numbered) and one of the controller's
// pre-download Jobs, what a rollout with pre-download did on each node:
// when each Job came and went, how many there were at once at most, when
// each Job's pod had its images (its containers started), and what each
// DaemonSet pod went through.
type preDownloadLog struct {
	mu  sync.Mutex
	seq int
	// pods are the DaemonSet's pods, by UID.
	pods map[types.UID]*dsPodLife
	// pulls are, per node, the first pod event that showed a pre-download
	// Job's pod with its images pulled.
	pulls map[string]int
	// jobs are the controller's Jobs by UID; live counts those that exist,
	// most the most at once.
	jobs       map[types.UID]*jobLife
	live, most int
}

// dsPodLife is what one DaemonSet pod went through.
type dsPodLife struct {
	name, node, image string
	// deletedSeq is the pod event that first showed its deletion (0: none);
	// deletedAt its deletionTimestamp and grace period.
	deletedSeq int
	deletedAt  *metav1.Time
	grace      int64
	// readySeen is when the watch first saw it Ready.
	readySeen time.Time
	// waitedForPull: it was seen waiting in ContainerCreating.
	waitedForPull bool
}

func (p *dsPodLife) String() string {
	if p == nil {
		return "none"
	}
	ready := "never Ready"
	if !p.readySeen.IsZero() {
		ready = "Ready at " + p.readySeen.Format(time.StampMilli)
	}
	return fmt.Sprintf("%s on %s (%s, %s, deleted at pod event %d, waited for a pull: %t)", p.name, p.node, p.image, ready, p.deletedSeq, p.waitedForPull)
}

// deletionIssued is when the API server took the pod's deletion: its
// deletionTimestamp less its grace period.
func (p *dsPodLife) deletionIssued() time.Time {
	return p.deletedAt.Add(-time.Duration(p.grace) * time.Second)
}

// jobLife is one pre-download Job.
type jobLife struct {
	name, node string
	// created is its creationTimestamp; seen and gone when the watch saw it
	// come and go (gone zero while it exists).
	created    time.Time
	seen, gone time.Time
}

// recordPreDownload starts recording until the test ends.
func (e *env) recordPreDownload() *preDownloadLog {
	e.t.Helper()
	l := &preDownloadLog{pods: map[types.UID]*dsPodLife{}, pulls: map[string]int{}, jobs: map[types.UID]*jobLife{}}
	pods := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	jobs := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = prePullByController }))
	podSeen := func(obj any) { l.pod(obj.(*corev1.Pod)) }
	podReg, err := pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podSeen,
		UpdateFunc: func(_, obj any) { podSeen(obj) },
	})
	if err != nil {
		e.t.Fatal(err)
	}
	jobReg, err := jobs.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.job(obj.(*batchv1.Job), false) },
		UpdateFunc: func(_, obj any) { l.job(obj.(*batchv1.Job), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			l.job(obj.(*batchv1.Job), true)
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	stop := make(chan struct{})
	pods.Start(stop)
	jobs.Start(stop)
	e.t.Cleanup(func() { close(stop); pods.Shutdown(); jobs.Shutdown() })
	if !cache.WaitForCacheSync(e.t.Context().Done(), podReg.HasSynced, jobReg.HasSynced) {
		e.t.Fatal("the pod and Job watches never synced")
	}
	return l
}

// pod records a pod event.
func (l *preDownloadLog) pod(p *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if p.Labels[controller.PrePullByLabel] != "" {
		if _, ok := l.pulls[p.Spec.NodeName]; !ok && p.Spec.NodeName != "" && imagesPulled(p) {
			l.pulls[p.Spec.NodeName] = l.seq
		}
		return
	}
	if p.Labels["app"] != dsName {
		return
	}
	life := l.pods[p.UID]
	if life == nil {
		life = &dsPodLife{name: p.Name, image: imageOf(p)}
		l.pods[p.UID] = life
	}
	life.node = p.Spec.NodeName
	if p.DeletionTimestamp != nil && life.deletedSeq == 0 {
		life.deletedSeq, life.deletedAt = l.seq, p.DeletionTimestamp
		if p.DeletionGracePeriodSeconds != nil {
			life.grace = *p.DeletionGracePeriodSeconds
		}
	}
	if life.readySeen.IsZero() && podcondition.IsTrue(&p.Status, corev1.PodReady) {
		life.readySeen = time.Now()
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
			life.waitedForPull = true
		}
	}
}

// imagesPulled says whether every container of a pre-pull Job's pod was
// started, or the pod ran to its end: its node holds the images.
func imagesPulled(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil && s.State.Terminated == nil {
			return false
		}
	}
	return true
}

// job records a Job event.
func (l *preDownloadLog) job(j *batchv1.Job, deleted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	life := l.jobs[j.UID]
	if life == nil {
		life = &jobLife{name: j.Name, node: j.Spec.Template.Spec.NodeName, created: j.CreationTimestamp.Time, seen: time.Now()}
		l.jobs[j.UID] = life
		l.live++
		l.most = max(l.most, l.live)
	}
	if (deleted || j.DeletionTimestamp != nil) && life.gone.IsZero() {
		life.gone = time.Now()
		l.live--
	}
}

// dsPod is the DaemonSet's first pod on the node with the image, nil if
// none was seen.
func (l *preDownloadLog) dsPod(node, image string) *dsPodLife {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found *dsPodLife
	for _, p := range l.pods {
		if p.node == node && p.image == image && (found == nil || p.name < found.name) {
			c := *p
			found = &c
		}
	}
	return found
}

// deletedPods names the DaemonSet's pods seen deleted.
func (l *preDownloadLog) deletedPods() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for _, p := range l.pods {
		if p.deletedSeq != 0 {
			names = append(names, p.name+" on "+p.node)
		}
	}
	slices.Sort(names)
	return names
}

// pullSeq is the pod event that first showed a pre-download Job's pod on
// the node with its images pulled; 0 if none did.
func (l *preDownloadLog) pullSeq(node string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pulls[node]
}

// jobsOn are the Jobs seen for the node, oldest first.
func (l *preDownloadLog) jobsOn(node string) []jobLife {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []jobLife
	for _, j := range l.jobs {
		if j.node == node {
			out = append(out, *j)
		}
	}
	slices.SortFunc(out, func(a, b jobLife) int { return a.seen.Compare(b.seen) })
	return out
}

// jobAliveAt says whether a Job for the node existed at t, by the watch.
func (l *preDownloadLog) jobAliveAt(node string, t time.Time) bool {
	return slices.ContainsFunc(l.jobsOn(node), func(j jobLife) bool {
		return !j.seen.After(t) && (j.gone.IsZero() || j.gone.After(t))
	})
}

// maxJobs is the most Jobs the watch saw at once.
func (l *preDownloadLog) maxJobs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most
}
