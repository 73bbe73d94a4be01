//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/podcondition"
)

// Faults are injected in the middle of an AdvancedRollingUpdate of
// faultNodes nodes at max-unavailable 30% (faultBudget nodes).
const (
	faultNodes  = 10
	faultBudget = 3
)

// slowRolloutReadySeconds is the DaemonSet's minReadySeconds in fault
// scenarios. KWOK's pod stages have no delays, so a 10-node rollout would end
// in about a second; the controller waits for each new pod to be available
// (Ready for minReadySeconds) before the next wave, so this stretches it to
// four waves of at least 2 s each: a window to inject a fault into.
const slowRolloutReadySeconds = 2

// createSlowRollingDaemonSet creates the AdvancedRollingUpdate DaemonSet
// (max-unavailable 30%) with slowRolloutReadySeconds, and waits until its pod
// on every node is available. A pod Ready for less than minReadySeconds is
// not, and the controller (as the native one) replaces unavailable old pods
// outside the budget: an image change before then would delete them all at
// once.
func (e *env) createSlowRollingDaemonSet() {
	e.t.Helper()
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "30%"})
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"minReadySeconds": slowRolloutReadySeconds}})
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("setting minReadySeconds of DaemonSet %s: %v", dsName, err)
	}
	minReady := slowRolloutReadySeconds * time.Second
	eventually(e.t, fmt.Sprintf("every pod Ready for %s", minReady), func(ctx context.Context) (bool, string, error) {
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
		return len(pods) > 0 && len(young) == 0, fmt.Sprintf("not yet available on %v", young), nil
	})
}

// waitFirstWave waits until the rollout's first wave has replaced the
// budget's worth of pods with Ready new ones, and fails if every node is
// already done: a fault injected then would not be mid-rollout.
func (e *env) waitFirstWave(nodes, budget int) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("%d nodes running a Ready pod with %s", budget, newImage), func(ctx context.Context) (bool, string, error) {
		n, err := e.upgradedNodes(ctx)
		return n >= budget, fmt.Sprintf("%d upgraded", n), err
	})
	e.expectMidRollout(nodes)
}

// expectMidRollout fails the test if every node already runs the new image.
func (e *env) expectMidRollout(nodes int) {
	e.t.Helper()
	n, err := e.upgradedNodes(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	if n >= nodes {
		e.t.Fatalf("got %d of %d nodes upgraded already, want the rollout in progress: it is too fast to inject a fault into", n, nodes)
	}
	e.t.Logf("mid-rollout: %d of %d nodes upgraded", n, nodes)
}

// upgradedNodes counts the nodes whose pod runs the new image and is Ready.
func (e *env) upgradedNodes(ctx context.Context) (int, error) {
	pods, err := e.podsByNode(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if imageOf(p) == newImage && podcondition.IsTrue(&p.Status, corev1.PodReady) {
			n++
		}
	}
	return n, nil
}

// expectWithinBudget stops the sampler and fails the test if any sample saw
// more than budget nodes without an available pod, or none at all (the
// sampler then missed the rollout).
func (e *env) expectWithinBudget(s *sampler, nodes, budget int) {
	e.t.Helper()
	samples, worst := s.stop()
	e.t.Logf("%d samples; at worst %d of %d nodes without an available pod (budget %d)", samples, worst.unavailable, nodes, budget)
	if worst.unavailable > budget {
		e.t.Errorf("got %d nodes without an available pod at %s, want at most %d: %v", worst.unavailable, worst.at.Format("15:04:05.000"), budget, worst.nodes)
	}
	if worst.unavailable == 0 {
		e.t.Errorf("no sample saw a node without an available pod: the sampler missed the rollout")
	}
}
