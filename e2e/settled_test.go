//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// TestSettledNodePowerCycleIsNoFailure: a node that settled on the new
// revision is power-cycled (cut off, then back with its pod not Ready and its
// container restarted after it settled) while the rest of the rollout waits:
// with max-failed 1 and a progress deadline of 20 s that passes meanwhile,
// nothing is failed and nothing halts; the status names the node as settled
// and unavailable, it holds the budget (the next node waits for it instead
// of being taken), and the rollout completes once its pod is back up.
func TestSettledNodePowerCycleIsNoFailure(t *testing.T) {
	t.Parallel()
	const nodes = 3
	const deadline = 20 * time.Second
	e := newEnv(t, nodes)
	node1 := localcluster.NodeName(1)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		rollout.MaxFailedAnnotation: "1", rollout.ProgressDeadlineAnnotation: fmt.Sprint(int(deadline.Seconds())),
		// Node 1 alone goes first; the partition is lifted once it has
		// been power-cycled.
		rollout.PartitionAnnotation: fmt.Sprint(nodes - 1)})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	e.waitRolloutStatus(node1+" settled, the rest held back", func(s *rollout.Status) bool {
		return s.Updated == 1 && s.InFlight == 0 && s.HeldBack == nodes-1
	})
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	settled := pods[node1]
	if imageOf(settled) != newImage {
		t.Fatalf("%s runs %s once settled, want %s", node1, describePod(settled), newImage)
	}

	// The power cycle: the node goes silent, its pod shows a container
	// restarted after the node settled, then the node is back.
	if err := e.cluster.CutOff(e.ctx(), node1); err != nil {
		t.Fatal(err)
	}
	e.waitRolloutStatus(node1+" skipped while NotReady", func(s *rollout.Status) bool { return s.Skipped == 1 })
	e.powerCycled(settled)
	if err := e.cluster.Reconnect(e.ctx(), node1); err != nil {
		t.Fatal(err)
	}
	noFailure := func(s *rollout.Status) string {
		if s.Failed.Count != 0 || s.Halted {
			return fmt.Sprintf("got failed %+v, halted %t; want no failure", s.Failed, s.Halted)
		}
		return ""
	}
	down := func(s *rollout.Status) bool {
		return s.SettledUnavailable != nil && slices.Equal(s.SettledUnavailable.Nodes, []string{node1}) && s.Skipped == 0
	}
	s := e.waitRolloutStatus(node1+" settled and unavailable", down)
	if why := noFailure(&s); why != "" {
		t.Fatal(why)
	}

	// The rest may go now, but node 1 holds the budget of 1: the rollout
	// waits for it, past the progress deadline of its pod, and fails
	// nothing.
	e.annotate(rollout.PartitionAnnotation, nil)
	wait := max(10*time.Second, time.Until(settled.CreationTimestamp.Add(deadline+5*time.Second)))
	consistently(t, "the rollout waits for "+node1+", failing nothing", wait, func(ctx context.Context) (bool, string, error) {
		s, err := e.rolloutStatus(ctx)
		if err != nil || s == nil {
			return false, "no rollout status", err
		}
		if why := noFailure(s); why != "" {
			return false, why, nil
		}
		if !down(s) {
			return false, fmt.Sprintf("got status %+v, want %s settled and unavailable", *s, node1), nil
		}
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes-1, fmt.Sprintf("%d nodes on %s, want %d", n, oldImage, nodes-1), err
	})
	warnings := e.eventsOf(rollout.ReasonSettledUnavailable)
	if len(warnings) == 0 || !strings.Contains(warnings[0].Message, node1) {
		t.Errorf("got %s events %v, want one naming %s", rollout.ReasonSettledUnavailable, warnings, node1)
	}

	e.backUp(settled)
	e.waitAllNodes(newImage)
	s = e.waitRolloutStatus("the rollout complete", func(s *rollout.Status) bool {
		return s.Complete() && s.Total == nodes && s.SettledUnavailable == nil
	})
	if why := noFailure(&s); why != "" {
		t.Error(why)
	}
	if got := e.eventsOf(rollout.ReasonRolloutHalted); len(got) != 0 {
		t.Errorf("got %d %s events, want none: %v", len(got), rollout.ReasonRolloutHalted, got)
	}
	if got := len(e.waitEventsOf(rollout.ReasonRolloutCompleted, 1)); got == 0 {
		t.Errorf("got no %s event", rollout.ReasonRolloutCompleted)
	}
}

// powerCycled writes on the pod what a kubelet reports after its node's
// power cycle: not Ready, its containers restarted once, the last run ended
// now, the new one not ready yet. KWOK's stages leave it so.
func (e *env) powerCycled(pod *corev1.Pod) {
	e.t.Helper()
	now := metav1.Now()
	statuses := slices.Clone(pod.Status.ContainerStatuses)
	for i := range statuses {
		c := &statuses[i]
		started := pod.CreationTimestamp
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.Ready, c.RestartCount, c.Started = false, c.RestartCount+1, new(true)
		c.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 255, Reason: "Unknown", StartedAt: started, FinishedAt: now}}
		c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	}
	e.patchPodStatus(pod, corev1.ConditionFalse, statuses)
}

// backUp writes on a power-cycled pod that its restarted containers are
// ready again.
func (e *env) backUp(pod *corev1.Pod) {
	e.t.Helper()
	p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx(), pod.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	statuses := slices.Clone(p.Status.ContainerStatuses)
	for i := range statuses {
		statuses[i].Ready = true
	}
	e.patchPodStatus(p, corev1.ConditionTrue, statuses)
}

// patchPodStatus sets the pod's Ready and ContainersReady conditions to
// status, and its container statuses (a list the API server replaces
// whole), in one strategic merge patch of its status, as a kubelet would.
func (e *env) patchPodStatus(pod *corev1.Pod, status corev1.ConditionStatus, containers []corev1.ContainerStatus) {
	e.t.Helper()
	now := metav1.Now().UTC().Format(time.RFC3339)
	var reason string
	if status != corev1.ConditionTrue {
		reason = "ContainersNotReady"
	}
	var conditions []map[string]any
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		conditions = append(conditions, map[string]any{"type": t, "status": status, "reason": reason, "lastTransitionTime": now})
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": conditions, "containerStatuses": containers},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.cluster.Client.CoreV1().Pods(e.ns).Patch(e.ctx(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		e.t.Fatalf("patching the status of pod %s: %v", pod.Name, err)
	}
}
