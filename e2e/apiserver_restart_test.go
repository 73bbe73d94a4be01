//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

// apiServerDowntime is how long the API server stays stopped before it is
// started again: none, as its own start takes seconds, and
// kube-controller-manager exits when the outage nears 10 s (see
// localcluster.RestartAPIServer).
const apiServerDowntime = 0

// TestRolloutSurvivesAPIServerRestart: kube-apiserver restarted after the
// first wave of an AdvancedRollingUpdate (the same process, not restarted),
// the controller reconnects and finishes the rollout without exiting, within
// max-unavailable at every sample, deleting each old pod once and no new one.
//
// The controller runs without leader election here: a leader that cannot
// renew its Lease for the renew deadline (10 s) exits by design, and the
// controller's restart is TestRolloutSurvivesControllerKill's subject; this
// test is about its informers and work queue riding out the outage.
//
// It runs alone (e2e/README.md): it restarts a component of its cluster.
func TestRolloutSurvivesAPIServerRestart(t *testing.T) {
	e := newEnv(t, faultNodes)
	c := e.startKillableController("ota-controller", e.cluster.Kubeconfig)
	e.createSlowRollingDaemonSet()

	deletions := startDeletionWatch(t, e)
	s := startSampler(t, e, faultNodes)
	e.setImage(newImage)
	e.waitFirstWave(faultNodes, faultBudget)
	outage, err := e.cluster.RestartAPIServer(e.ctx(), apiServerDowntime)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API server did not serve for %s", outage.Round(time.Millisecond))
	e.expectComponentsAlive()
	e.expectAlive(c)
	e.expectMidRollout(faultNodes)

	e.waitAllNodes(newImage)
	e.expectAlive(c)
	e.expectWithinBudget(s, faultNodes, faultBudget)
	if deleted := deletions.counts(); deleted[oldImage] != faultNodes || len(deleted) != 1 {
		t.Errorf("got pods deleted by image %v, want the %d old pods only", deleted, faultNodes)
	}
}

// expectComponentsAlive fails the test if a cluster component has exited:
// kube-controller-manager and kube-scheduler give up their leadership, and
// exit, when the API server is away longer than their renew deadline, and the
// rollout would then stall for want of the DaemonSet controller, not ours.
func (e *env) expectComponentsAlive() {
	e.t.Helper()
	for _, component := range localcluster.Components {
		data, err := os.ReadFile(filepath.Join(e.cluster.WorkDir(), "pids", component+".pid"))
		if err != nil {
			e.t.Fatal(err)
		}
		pid := strings.TrimSpace(string(data))
		stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		// The state follows the parenthesised command name: "pid (comm) S ...".
		if err != nil || strings.Contains(string(stat), ") Z ") {
			e.t.Fatalf("cluster component %s (pid %s) exited during the API server restart; see its log in %s", component, pid, e.cluster.WorkDir())
		}
	}
}
