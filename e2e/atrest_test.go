//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// syncCount is the controller's count of DaemonSet syncs.
const syncCount = "edgeota_controller_sync_duration_seconds_count"

// TestOverdueOffersOutsideWindowRest: OTA offers past their 5 s deadline
// whose maintenance window is closed (it opens in three hours) wait for it
// with the controller at rest: over 30 s it syncs at most a handful of
// times and uses less than a tenth of a core (a controller that kept
// deciding again on overdue offers spun at more than one core), and deletes
// nothing.
//
// It runs alone (e2e/README.md): it measures the controller's own CPU, syncs
// or threads.
func TestOverdueOffersOutsideWindowRest(t *testing.T) {
	const nodes = 3
	const deadline = 5 * time.Second
	const window, maxSyncs, maxCPU = 30 * time.Second, 5, 0.10
	e := newEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: "100%",
		rollout.UpgradeDeadlineAnnotation:   fmt.Sprint(int(deadline.Seconds())),
		rollout.MaintenanceWindowAnnotation: utcWindow(time.Now().Add(3*time.Hour), time.Hour)})
	c := e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller", Verbosity: 2})
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...)
	var last time.Time
	for node, p := range marked {
		o, err := podchannel.OfferOf(p)
		if err != nil || o == nil || o.UpgradeDeadline == nil {
			t.Fatalf("node %s: got offer %+v (%v), want one with a deadline", node, o, err)
		}
		if o.UpgradeDeadline.After(last) {
			last = o.UpgradeDeadline.Time
		}
	}
	untouched := func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d of %d nodes on %s", n, nodes, oldImage), err
	}
	consistently(t, "nothing deleted until every deadline passed", time.Until(last.Add(2*time.Second)), untouched)
	s := e.waitRolloutStatus("every node waiting for its window", func(s *rollout.Status) bool {
		return s.WaitingForWindow != nil && s.WaitingForWindow.Count == nodes
	})
	t.Logf("%d nodes waiting for the window that opens at %s", s.WaitingForWindow.Count, s.WaitingForWindow.At)

	syncs, cpu, start := e.mustMetric(c, syncCount), cpuTime(t, c.Pid()), time.Now()
	consistently(t, "nothing deleted outside the window", window, untouched)
	total := cpuTime(t, c.Pid())
	syncs, cpu, elapsed := e.mustMetric(c, syncCount)-syncs, total-cpu, time.Since(start)
	share := cpu.Seconds() / elapsed.Seconds()
	t.Logf("over %s at rest: %.0f syncs, %s of CPU (%.1f%% of a core; %s since the controller started)",
		elapsed.Round(time.Millisecond), syncs, cpu, 100*share, total)
	if syncs > maxSyncs {
		t.Errorf("got %.0f syncs in %s at rest, want at most %d", syncs, elapsed.Round(time.Second), maxSyncs)
	}
	if share > maxCPU {
		t.Errorf("got %s of CPU in %s at rest (%.0f%% of a core), want under %.0f%%", cpu, elapsed.Round(time.Second), 100*share, 100*maxCPU)
	}
	if got := len(e.eventsOf(rollout.ReasonDeletedPod)); got != 0 {
		t.Errorf("got %d deletions by the controller, want none", got)
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := measure.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
