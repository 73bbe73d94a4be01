//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// Proof of life by the agents' answers (issue 28), end to end: nodes that
// heartbeat as kubelets do (a Lease every 10 s, so that a proof from the
// Lease alone takes seconds), bin/ota-controller, and a bin/ota-server per
// node acting as its node with the token deploy/'s agent pod would mount
// there, under NodeRestriction.

// answerWaveBound is how long after a node settles its agent's answer may
// let the next wave start: about a second of work (the controller's pod
// event batch, its challenge, the agent's answer), where a Lease renewed
// every 10 s would take 5 s on average; measured between two timestamps in
// whole seconds, so a second more.
const answerWaveBound = 2 * time.Second

// startNodeAgents applies deploy/ and runs the agent of each of nodes, as
// its node.
func (e *env) startNodeAgents(nodes ...string) {
	e.t.Helper()
	e.applyDeploy("deploy")
	for _, n := range nodes {
		e.startAgent(n, e.agentKubeconfig(n, ""), "--identity", "node")
	}
}

// waveLog records, from a watch of the test DaemonSet's pods, when each
// node's new pod settled (its ContainersReady transition) and when its old
// pod's deletion was asked for (its deletionTimestamp less its grace
// period): the API server's and the node's stamps, in whole seconds.
type waveLog struct {
	mu      sync.Mutex
	image   string
	settled map[string]time.Time
	deleted map[string]time.Time
}

// startWaveLog watches the test DaemonSet's pods until the test ends,
// recording the waves of the rollout to image.
func startWaveLog(t *testing.T, e *env, image string) *waveLog {
	t.Helper()
	w := &waveLog{image: image, settled: map[string]time.Time{}, deleted: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.record(p)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return w
}

func (w *waveLog) record(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	node := p.Spec.NodeName
	switch {
	case node == "":
	case imageOf(p) != w.image && p.DeletionTimestamp != nil:
		if _, seen := w.deleted[node]; !seen {
			grace := time.Duration(0)
			if p.DeletionGracePeriodSeconds != nil {
				grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
			}
			w.deleted[node] = p.DeletionTimestamp.Add(-grace)
		}
	case imageOf(p) == w.image && p.DeletionTimestamp == nil:
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue {
				if _, seen := w.settled[node]; !seen {
					w.settled[node] = c.LastTransitionTime.Time
				}
			}
		}
	}
}

// gaps returns, for each node but the last to be deleted, in the order
// their old pods were deleted, the time from its new pod settling to the
// next deletion.
func (w *waveLog) gaps(t *testing.T) map[string]time.Duration {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	order := make([]string, 0, len(w.deleted))
	for n := range w.deleted {
		order = append(order, n)
	}
	slices.SortFunc(order, func(a, b string) int { return w.deleted[a].Compare(w.deleted[b]) })
	out := map[string]time.Duration{}
	for i, n := range order[:max(len(order)-1, 0)] {
		settled, ok := w.settled[n]
		if !ok {
			t.Fatalf("node %s's new pod never seen settled (deletions in order %v)", n, order)
		}
		out[n] = w.deleted[order[i+1]].Sub(settled)
	}
	return out
}

// TestAnswersAdmitEachWave: with every node's agent answering, an
// AdvancedRollingUpdate of one node at a time on kubelet-like Leases admits
// each next wave within 2 s of the last node settling, from its new pod's
// ContainersReady transition to the next old pod's deletion: faster than
// any Lease could, renewed every 10 s, and the rollout status counts every
// node proven by its agent's answer.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestAnswersAdmitEachWave(t *testing.T) {
	const nodes = 4
	e := newKubeletEnv(t, nodes)
	e.startNodeAgents(allNodes(nodes)...)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	e.startController(e.cluster.Kubeconfig, "-v=4")
	first := e.waitRolloutStatus("the first revision settled", func(s *rollout.Status) bool { return s.Updated == nodes && s.InFlight == 0 })

	waves := startWaveLog(t, e, newImage)
	e.setImage(newImage)
	done := e.waitRolloutStatus("the rollout settled", func(s *rollout.Status) bool {
		return s.Hash != first.Hash && s.Updated == nodes && s.InFlight == 0
	})
	if want := (rollout.ProvenNodes{Answer: nodes}); done.Proven == nil || *done.Proven != want {
		t.Errorf("got proven %+v, want %+v: every node by its agent's answer", done.Proven, want)
	}
	gaps := waves.gaps(t)
	if len(gaps) != nodes-1 {
		t.Fatalf("got %d waves timed, want %d", len(gaps), nodes-1)
	}
	for node, gap := range gaps {
		t.Logf("node %s settled → next deletion: %s", node, gap)
		if gap > answerWaveBound {
			t.Errorf("node %s settled %s before the next deletion, want at most %s", node, gap, answerWaveBound)
		}
	}
}

// cutOffNodesAsTheyRun cuts off each node whose pod of image appears, as a
// version that breaks its node's link as it starts: cut, called with the
// node as soon as the watch sees that pod, cuts the link of its agent,
// before the pod settles, so before any challenge; the node's label cuts
// its heartbeat (localcluster.CutOffLabel) once the watch sees the pod
// Ready, since KWOK stops running a cut-off node's pods, where a real node so
// cut would never report its pod Ready at all. (Cut at Ready, the agent's
// link raced its answer, and a node that won the race had rightly proven
// life.)
func (e *env) cutOffNodesAsTheyRun(image string, cut func(node string)) {
	e.t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	var mu sync.Mutex
	agentCut, nodeCut := map[string]bool{}, map[string]bool{}
	handle := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || imageOf(p) != image {
			return
		}
		node := p.Spec.NodeName
		mu.Lock()
		defer mu.Unlock()
		if !agentCut[node] {
			agentCut[node] = true
			cut(node)
		}
		if !podReady(p) || nodeCut[node] {
			return
		}
		nodeCut[node] = true
		if err := e.cluster.BeginCutOff(context.Background(), node); err != nil {
			e.t.Errorf("cutting off node %s: %v", node, err)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		e.t.Fatal(err)
	}
	stop := make(chan struct{})
	e.t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
}

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestCutOffVersionHaltsUnanswered: a version that cuts off every node it
// runs on, its agent's link included (the proxy in front of the API server
// black-holed, as a dead zone does), halts at max-unavailable failed nodes
// with agents on every node: each cut-off node's new pod carries the
// controller's challenge and no answer, its Lease stops, and the node fails
// when the node lifecycle controller reports it NotReady.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestCutOffVersionHaltsUnanswered(t *testing.T) {
	const nodes, budget = 4, 2
	e := newKubeletEnv(t, nodes)
	e.applyDeploy("deploy")
	proxies := map[string]*harness.Proxy{}
	for _, n := range allNodes(nodes) {
		proxy, server := e.proxyTo()
		proxies[n] = proxy
		e.startRestartableAgent(n, e.agentKubeconfig(n, server), "--identity", "node", "--apiserver-timeout", "2s")
	}
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: fmt.Sprint(budget)})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	first := e.waitRolloutStatus("the first revision settled", func(s *rollout.Status) bool { return s.Updated == nodes && s.InFlight == 0 })
	if first.Proven == nil || first.Proven.Answer == 0 {
		t.Fatalf("got the first revision proven %+v, want by the agents' answers: they must be able to answer", first.Proven)
	}

	e.cutOffNodesAsTheyRun(cutOffImage, func(node string) { proxies[node].Cut() })
	e.setImage(cutOffImage)
	halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
	if halted.Failed.Count != budget || len(halted.Failed.Nodes) != budget {
		t.Fatalf("got failed %+v, want %d nodes", halted.Failed, budget)
	}
	e.expectStaysHalted(halted.Failed.Nodes, 5*time.Second)
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range halted.Failed.Nodes {
		p := pods[n]
		challenge, answer := p.Annotations[rollout.ChallengeAnnotation], p.Annotations[rollout.AnswerAnnotation]
		if challenge == "" {
			t.Errorf("cut-off node %s's pod %s carries no challenge, want one: its pod settled before the node was cut off", n, p.Name)
		}
		if answer != "" {
			t.Errorf("cut-off node %s's pod %s carries the answer %q, want none", n, p.Name, answer)
		}
	}
	if halted.Proven != nil && halted.Proven.Answer+halted.Proven.Heartbeat != 0 {
		t.Errorf("got proven %+v for the cut-off version, want none", halted.Proven)
	}
}

// skewedAhead is how far ahead the clock of the node in
// TestSkewedNodeClockGivesNoEarlyProof runs.
const skewedAhead = time.Hour

// TestSkewedNodeClockGivesNoEarlyProof: a node whose clock runs an hour
// ahead (its kubelet stamps the new pod's Ready and ContainersReady
// transitions an hour in the future) is not proven by its Lease, renewed on
// a clock an hour behind that, however many times it renews: it stays in
// flight, holding the budget. The proof comes only from its agent's answer,
// an echo of the challenge the controller wrote after it judged the pod
// settled, whatever either clock says. The other node, without an agent,
// then rolls on its Lease.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestSkewedNodeClockGivesNoEarlyProof(t *testing.T) {
	const nodes = 2
	skewed, other := localcluster.NodeName(1), localcluster.NodeName(2)
	e := newKubeletEnv(t, nodes)
	e.applyDeploy("deploy")
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})

	// Before any controller runs: the skewed node's old pod goes, as the
	// rollout's first wave would take it, and its replacement, Ready, gets
	// its transitions stamped an hour ahead.
	e.setImage(newImage)
	old := e.podOn(skewed)
	if err := e.cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx(), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	eventually(t, "the replacement on "+skewed+" Ready", func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		pod = pods[skewed]
		return pod != nil && imageOf(pod) == newImage && podReady(pod), describePod(pod), nil
	})
	ahead := metav1.NewTime(time.Now().Add(skewedAhead))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": map[string]any{"conditions": []map[string]any{
		{"type": string(corev1.PodReady), "status": "True", "lastTransitionTime": ahead},
		{"type": string(corev1.ContainersReady), "status": "True", "lastTransitionTime": ahead},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.Client.CoreV1().Pods(e.ns).Patch(e.ctx(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("stamping %s's transitions an hour ahead: %v", pod.Name, err)
	}

	e.startController(e.cluster.Kubeconfig, "-v=4")
	var challenge string
	eventually(t, "the controller's challenge on "+pod.Name, func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		challenge = p.Annotations[rollout.ChallengeAnnotation]
		return challenge != "", describePod(p), nil
	})
	renewed := nodeLease(t, e, skewed).Spec.RenewTime.Time
	consistently(t, skewed+" in flight, unproven by its Lease", 2*kubeletLeaseSeconds/4*time.Second+time.Second, func(ctx context.Context) (bool, string, error) {
		s, err := e.rolloutStatus(ctx)
		if err != nil || s == nil {
			return false, "no rollout status", err
		}
		running, err := e.nodesRunning(ctx, newImage)
		return s.InFlight == 1 && s.Updated == 0 && running == 1, fmt.Sprintf("%+v, %d nodes on %s", *s, running, newImage), err
	})
	if got := nodeLease(t, e, skewed).Spec.RenewTime.Time; !got.After(renewed) {
		t.Fatalf("node %s renewed its Lease last at %s, as before the wait: the wait proved nothing", skewed, got)
	}

	e.startAgent(skewed, e.agentKubeconfig(skewed, ""), "--identity", "node")
	settled := e.waitRolloutStatus("the skewed node proven by its agent's answer", func(s *rollout.Status) bool {
		return s.Proven != nil && s.Proven.Answer == 1
	})
	if settled.Proven.Heartbeat != 0 {
		t.Errorf("got proven %+v, want the skewed node by its answer and no node by a heartbeat yet", settled.Proven)
	}
	if got, byAgent, err := e.answerOn(e.ctx(), pod); err != nil || got != challenge || !byAgent {
		t.Errorf("got answer %q (by the agent: %t, %v) on %s, want the challenge %q echoed by the agent", got, byAgent, err, pod.Name, challenge)
	}
	done := e.waitRolloutStatus("the other node rolled on its Lease", func(s *rollout.Status) bool { return s.Updated == nodes && s.InFlight == 0 })
	if want := (rollout.ProvenNodes{Answer: 1, Heartbeat: 1}); done.Proven == nil || *done.Proven != want {
		t.Errorf("got proven %+v, want %+v (%s by its agent's answer, %s by its Lease)", done.Proven, want, skewed, other)
	}
}

// TestNodeWithoutAgentRollsOnItsLease: in a fleet where one node runs no
// agent, the rollout goes on: that node's challenge stays unanswered and
// its Lease proves it, the others are proven by their agents' answers.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestNodeWithoutAgentRollsOnItsLease(t *testing.T) {
	const nodes = 3
	without := localcluster.NodeName(2)
	e := newKubeletEnv(t, nodes)
	e.startNodeAgents(slices.DeleteFunc(allNodes(nodes), func(n string) bool { return n == without })...)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	first := e.waitRolloutStatus("the first revision settled", func(s *rollout.Status) bool { return s.Updated == nodes && s.InFlight == 0 })

	e.setImage(newImage)
	done := e.waitRolloutStatus("the rollout settled", func(s *rollout.Status) bool {
		return s.Hash != first.Hash && s.Updated == nodes && s.InFlight == 0
	})
	if want := (rollout.ProvenNodes{Answer: nodes - 1, Heartbeat: 1}); done.Proven == nil || *done.Proven != want {
		t.Errorf("got proven %+v, want %+v: %s by its Lease, the others by their agents' answers", done.Proven, want, without)
	}
	p := e.podOn(without)
	if p.Annotations[rollout.ChallengeAnnotation] == "" || p.Annotations[rollout.AnswerAnnotation] != "" {
		t.Errorf("got %s's pod %s with challenge %q and answer %q, want a challenge no one answered", without, p.Name,
			p.Annotations[rollout.ChallengeAnnotation], p.Annotations[rollout.AnswerAnnotation])
	}
}

// TestFreshControllerOnSettledFleetFollowsNoLease: a controller started on
// a fleet whose pods all settled before their nodes' last Lease renewals
// learns those renewals from one list of every Lease before its first sync:
// it settles every node at once, by heartbeat, writes no challenge and
// follows no node's Lease. Followed one by one instead, a fresh controller
// on a settled fleet of 500 nodes with four DaemonSets opened 500 watches
// and wrote 2,000 challenges at start.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestFreshControllerOnSettledFleetFollowsNoLease(t *testing.T) {
	const nodes = 4
	e := newKubeletEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	e.waitAllNodes(oldImage)
	// Every node renews its Lease (every 10 s) after its pod settled.
	time.Sleep(localcluster.Heartbeat{Leases: true}.Period() + time.Second)

	c := e.startKillableController("ota-controller", e.cluster.Kubeconfig, "-v=2")
	settled := e.waitRolloutStatus("the revision settled", func(s *rollout.Status) bool { return s.Updated == nodes && s.InFlight == 0 })
	if want := (rollout.ProvenNodes{Heartbeat: nodes}); settled.Proven == nil || *settled.Proven != want {
		t.Errorf("got proven %+v, want %+v: every node by the renewal the list found", settled.Proven, want)
	}
	if got := e.mustMetric(c, "edgeota_controller_challenges_written_total"); got != 0 {
		t.Errorf("got %v challenges written, want none", got)
	}
	if got := e.mustMetric(c, "edgeota_controller_lease_requests_total"); got != 1 {
		t.Errorf("got %v Lease requests, want 1: the list of every Lease, no node followed", got)
	}
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for node, p := range pods {
		if c := p.Annotations[rollout.ChallengeAnnotation]; c != "" {
			t.Errorf("got node %s's pod %s challenged (%q), want no challenge", node, p.Name, c)
		}
	}
}
