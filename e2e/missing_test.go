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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/rollout"
)

// hugeCPU is more CPU than any KWOK node has (they offer 1,000 cores): the
// everyday mistake of a larger request on small edge boxes.
const hugeCPU = "2000"

// setTemplate changes the DaemonSet's container to the image with a CPU
// request (none when cpu is ""), as editing the manifest does.
func (e *env) setTemplate(image, cpu string) {
	e.t.Helper()
	container := map[string]any{"name": "nginx", "image": image, "resources": nil}
	if cpu != "" {
		container["resources"] = map[string]any{"requests": map[string]string{"cpu": cpu}}
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{container}}}}})
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("changing the template of DaemonSet %s: %v", dsName, err)
	}
}

// nodesWithoutPod lists the nodes that run no live pod of the DaemonSet.
func (e *env) nodesWithoutPod(ctx context.Context, nodes []string) ([]string, error) {
	pods, err := e.podsByNode(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range nodes {
		if p := pods[n]; p == nil {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// TestUnschedulableVersionHalts: a version no node can schedule (a larger
// CPU request than any node has) takes max-unavailable nodes, whose new pods
// stay Pending; past the progress deadline those nodes fail, the rollout
// halts with RolloutHalted naming the scheduler's reason, and a fixed
// version then rolls on. The same holds with the controller killed while
// it waits for the deadline: its successor finds the same nodes in flight
// in the cluster and the same deadline.
func TestUnschedulableVersionHalts(t *testing.T) {
	t.Parallel()
	for _, killed := range []bool{false, true} {
		t.Run(fmt.Sprintf("controller killed while waiting=%v", killed), func(t *testing.T) {
			const nodes, budget = 8, 2
			e := brakeEnv(t, nodes, budget, 0, map[string]string{rollout.ProgressDeadlineAnnotation: "20"})
			first := e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-1", Verbosity: 2})
			e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })

			changed := time.Now()
			e.setTemplate(newImage, hugeCPU)
			eventually(t, fmt.Sprintf("%d nodes without a running pod", budget), func(ctx context.Context) (bool, string, error) {
				missing, err := e.nodesWithoutPod(ctx, allNodes(nodes))
				return len(missing) == budget, fmt.Sprint(missing), err
			})
			if killed {
				e.kill(first)
				e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-2", Verbosity: 2})
			}
			halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
			// Not before the deadline, less the second the API server's
			// whole-second creation time may take off.
			if took := time.Since(changed); took < 19*time.Second {
				t.Errorf("halted %s after the change, want no sooner than the 20 s deadline", took)
			}
			if halted.Failed.Count != budget {
				t.Errorf("got %d failed, want %d", halted.Failed.Count, budget)
			}
			for _, node := range halted.Failed.Nodes {
				if why := halted.Failed.Reasons[node]; !strings.Contains(why, "Unschedulable") || !strings.Contains(why, "Insufficient cpu") {
					t.Errorf("got node %s failed because %q, want the scheduler's reason", node, why)
				}
			}
			events := e.waitEventsOf(rollout.ReasonRolloutHalted, 1)
			if len(events) != 1 || !strings.Contains(events[0].Message, "Insufficient cpu") {
				t.Errorf("got %s events %v, want one naming the scheduler's reason", rollout.ReasonRolloutHalted, events)
			}
			consistently(t, fmt.Sprintf("no more than %d nodes lose their pod", budget), 5*time.Second, func(ctx context.Context) (bool, string, error) {
				missing, err := e.nodesWithoutPod(ctx, allNodes(nodes))
				return len(missing) <= budget, fmt.Sprint(missing), err
			})

			// A fixed version rolls on over every node.
			e.setTemplate(newImage, "")
			e.waitAllNodes(newImage)
			e.waitRolloutStatus("the fixed version settled", func(s *rollout.Status) bool {
				return s.Hash != halted.Hash && s.Updated == nodes && !s.Halted
			})
		})
	}
}

// TestMissingTolerationHaltsAtTheBudget: a group of tainted nodes ran the
// DaemonSet by a toleration that the new version drops. The DaemonSet
// controller creates no replacement there, so the first node of the group
// the rollout takes loses the app: it is in flight, holds the budget, fails
// at the deadline ("no replacement created", naming the taint), and the
// rollout halts there. No other node of the group loses the app, neither
// five minutes later nor after a controller restart: the record of the
// deletion is in the cluster, not in the controller's memory.
func TestMissingTolerationHaltsAtTheBudget(t *testing.T) {
	t.Parallel()
	const nodes, budget = 10, 1
	group := allNodes(4) // edge-node-1..4: the first in name order
	e := newEnv(t, nodes)
	taint := corev1.Taint{Key: "edgeota.io/e2e-group", Value: "special", Effect: corev1.TaintEffectNoSchedule}
	for _, n := range group {
		e.taintNode(n, taint)
	}
	e.createDaemonSetWith(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: fmt.Sprint(budget),
		rollout.ProgressDeadlineAnnotation: "30"}, func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	})
	first := e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-1", Verbosity: 2})
	e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })

	// The new version drops the toleration.
	patch := `{"spec":{"template":{"spec":{"tolerations":null,"containers":[{"name":"nginx","image":"` + newImage + `"}]}}}}`
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
	if len(halted.Failed.Nodes) != budget || !slices.Contains(group, halted.Failed.Nodes[0]) {
		t.Fatalf("got failed %v, want %d node of the tainted group", halted.Failed.Nodes, budget)
	}
	failed := halted.Failed.Nodes[0]
	if why := halted.Failed.Reasons[failed]; !strings.Contains(why, "no replacement created") || !strings.Contains(why, taint.Key) {
		t.Errorf("got %s failed because %q, want no replacement created, naming the taint", failed, why)
	}
	stripped := func(ctx context.Context) (bool, string, error) {
		missing, err := e.nodesWithoutPod(ctx, allNodes(nodes))
		return slices.Equal(missing, []string{failed}), fmt.Sprintf("nodes without the app: %v", missing), err
	}
	// Past the five minutes an in-memory wait would have lasted.
	consistently(t, "only "+failed+" lost the app, five minutes on", time.Until(changed.Add(5*time.Minute+10*time.Second)), stripped)
	e.kill(first)
	e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-2", Verbosity: 2})
	consistently(t, "only "+failed+" lost the app after a restart", 15*time.Second, stripped)
	if s := e.waitRolloutStatus("the status", func(*rollout.Status) bool { return true }); !s.Halted || s.Failed.Count != budget {
		t.Errorf("after the restart: got %+v, want still halted with %d failed", s, budget)
	}
}

// taintNode adds a taint to the node.
func (e *env) taintNode(node string, taint corev1.Taint) {
	e.t.Helper()
	n, err := e.cluster.Client.CoreV1().Nodes().Get(e.ctx(), node, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": append(n.Spec.Taints, taint)}})
	if _, err := e.cluster.Client.CoreV1().Nodes().Patch(e.ctx(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("tainting node %s: %v", node, err)
	}
}
