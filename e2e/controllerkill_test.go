//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// TestRolloutSurvivesControllerKill: the controller, SIGKILLed after the
// first wave of an AdvancedRollingUpdate and started again, finishes the
// rollout from what the cluster shows (its expectations died with it), and no
// sample from before the image change to the end sees more than
// max-unavailable nodes without an available pod.
func TestRolloutSurvivesControllerKill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, faultNodes)
	first := e.startKillableController("ota-controller-1", e.cluster.Kubeconfig)
	e.createSlowRollingDaemonSet()

	s := startSampler(t, e, faultNodes)
	start := time.Now()
	e.setImage(newImage)
	e.waitFirstWave(faultNodes, faultBudget)
	e.kill(first)
	e.expectMidRollout(faultNodes)

	second := e.startKillableController("ota-controller-2", e.cluster.Kubeconfig)
	e.waitAllNodes(newImage)
	t.Logf("rollout done %s after the image change", time.Since(start).Round(time.Millisecond))
	e.expectWithinBudget(s, faultNodes, faultBudget)
	if got := e.mustMetric(second, podsDeletedMetric); got < 1 {
		t.Errorf("the restarted controller deleted %g pods, want at least 1: it did not finish the rollout", got)
	}
}
