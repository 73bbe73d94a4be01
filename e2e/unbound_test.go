//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestartedControllerHoldsBudgetForUnboundPods: with kube-scheduler
// stopped, the first wave's replacement pods stay unbound (no node), so the
// nodes they are for show no pod at all. A controller started then (after a
// crash, or as a new leader) has no memory of the deletions, yet must count
// those nodes as down and delete nothing more until they are back; once the
// scheduler returns, the rollout completes within max-unavailable.
//
// It runs alone (e2e/README.md): it restarts a component of its cluster.
func TestRestartedControllerHoldsBudgetForUnboundPods(t *testing.T) {
	e := newEnv(t, faultNodes)
	first := e.startKillableController("ota-controller-1", e.cluster.Kubeconfig)
	e.createSlowRollingDaemonSet()
	s := startSampler(t, e, faultNodes)

	startScheduler, err := e.cluster.StopComponent(e.ctx(), "kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	schedulerDown := true
	restartScheduler := func() {
		if schedulerDown {
			schedulerDown = false
			if _, err := startScheduler(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restartScheduler) // so that the cluster is deleted whole

	e.setImage(newImage)
	eventually(t, fmt.Sprintf("%d replacement pods left unbound", faultBudget), func(ctx context.Context) (bool, string, error) {
		n, err := e.unboundPods(ctx)
		return n == faultBudget, fmt.Sprintf("%d unbound", n), err
	})
	e.kill(first)

	second := e.startKillableController("ota-controller-2", e.cluster.Kubeconfig)
	eventually(t, second.Name+" to sync the DaemonSet", func(ctx context.Context) (bool, string, error) {
		n, err := second.metric(ctx, syncsMetric)
		return n >= 1, fmt.Sprintf("%g syncs", n), err
	})
	want := faultNodes - faultBudget
	consistently(t, fmt.Sprintf("%d nodes keep their old pod while %d await theirs", want, faultBudget), 3*time.Second,
		func(ctx context.Context) (bool, string, error) {
			pods, err := e.podsByNode(ctx)
			if err != nil {
				return false, "", err
			}
			old := 0
			for _, p := range pods {
				if imageOf(p) == oldImage {
					old++
				}
			}
			return old == want, fmt.Sprintf("got %d old pods left, want %d: %s deleted past the budget", old, want, second.Name), nil
		})

	restartScheduler()
	e.waitAllNodes(newImage)
	e.expectWithinBudget(s, faultNodes, faultBudget)
}

// unboundPods counts the DaemonSet's live pods that no node is bound to.
func (e *env) unboundPods(ctx context.Context) (int, error) {
	list, err := e.cluster.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + dsName})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}
