//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/harness"
)

// The controller's Lease and timings (cmd/ota-controller/run.go), and the
// metrics the suite reads. The names are spelled here on purpose, as an
// operator's kubectl and Prometheus see them: a black-box check that they
// stay what deployments and dashboards rely on.
const (
	leaseName         = "ota-controller"
	leaseDuration     = 15 * time.Second
	leaseRetryPeriod  = 2 * time.Second
	podsDeletedMetric = "edgeota_controller_pods_deleted_total"
	syncsMetric       = "edgeota_controller_sync_duration_seconds_count"
	// A killed leader's Lease is taken once the standby has seen it
	// unchanged for its duration, then at its next retry (jittered up to
	// 2.2 periods), with a margin for a loaded machine.
	handoverAllowance = leaseDuration + leaseRetryPeriod*22/10 + 10*time.Second
	// A stopped leader's released Lease is taken at the standby's next
	// retry, with a margin for the leader's last work: under the lease
	// duration, which a Lease not released would cost.
	releasedHandoverAllowance = leaseRetryPeriod*22/10 + 6*time.Second
)

// TestLeaderElectionHandover: of two controllers electing a leader through
// the Lease, only the leader syncs and deletes; SIGKILLed mid-rollout (so it
// cannot release the Lease), the standby takes the Lease within the lease
// duration plus a retry period (and a margin for a loaded machine) and
// finishes the rollout. No pod is deleted twice: the deletions both
// replicas counted do not exceed the old pods the rollout replaced, each
// deleted once, no new pod deleted, and max-unavailable holds throughout.
func TestLeaderElectionHandover(t *testing.T) {
	t.Parallel()
	testHandover(t, "killed", (*env).kill, handoverAllowance)
}

// TestLeaderElectionHandoverOnStop: a leader stopped as a Deployment's
// rolling update stops it (SIGTERM) finishes its work, then gives the
// Lease up: the standby takes it at its next retry, well within the lease
// duration it would otherwise wait, and finishes the rollout as above.
func TestLeaderElectionHandoverOnStop(t *testing.T) {
	t.Parallel()
	testHandover(t, "stopped", (*env).stop, releasedHandoverAllowance)
}

// testHandover runs a rollout under two replicas, ends the leader's
// mid-rollout with end, and checks the standby takes the Lease within
// allowance and finishes the rollout, each pod deleted once, within the
// budget throughout.
func testHandover(t *testing.T, ended string, end func(*env, *controllerProcess), allowance time.Duration) {
	e := newEnv(t, faultNodes)
	leader, standby := e.waitLeader(
		e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-a", LeaseNamespace: e.ns}),
		e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-b", LeaseNamespace: e.ns}))
	leaderIdentity := e.leaseHolder(e.ctx())
	e.createSlowRollingDaemonSet()

	deletions := startDeletionWatch(t, e)
	s := startSampler(t, e, faultNodes)
	e.setImage(newImage)
	e.waitFirstWave(faultNodes, faultBudget)

	byLeader := e.mustMetric(leader, podsDeletedMetric)
	if byLeader < 1 {
		t.Errorf("leader %s deleted %g pods in the first wave, want at least 1", leader.Name, byLeader)
	}
	for _, m := range []string{podsDeletedMetric, syncsMetric} {
		if got := e.mustMetric(standby, m); got != 0 {
			t.Errorf("standby %s: got %s %g, want 0: only the leader may act", standby.Name, m, got)
		}
	}

	killed := time.Now()
	end(e, leader)
	e.expectMidRollout(faultNodes)
	eventually(t, "standby "+standby.Name+" to hold Lease "+leaseName, func(ctx context.Context) (bool, string, error) {
		holder := e.leaseHolder(ctx)
		if holder == "" || holder == leaderIdentity {
			return false, "held by " + holder, nil
		}
		ok, err := standby.startedLeading(holder)
		return ok, "held by " + holder + ", which the standby's log does not name", err
	})
	handover := time.Since(killed)
	t.Logf("Lease handed over %s after the leader was %s", handover.Round(time.Millisecond), ended)
	if handover > allowance {
		t.Errorf("got the Lease handed over %s after the leader was %s, want within %s",
			handover.Round(time.Millisecond), ended, allowance)
	}

	e.waitAllNodes(newImage)
	e.expectWithinBudget(s, faultNodes, faultBudget)
	byStandby := e.mustMetric(standby, podsDeletedMetric)
	deleted := deletions.counts()
	t.Logf("deletions: %g by the first leader, %g by the second; pods deleted by image: %v", byLeader, byStandby, deleted)
	if byStandby < 1 {
		t.Errorf("the new leader deleted %g pods, want at least 1: it did not finish the rollout", byStandby)
	}
	if deleted[oldImage] != faultNodes || len(deleted) != 1 {
		t.Errorf("got pods deleted by image %v, want the %d old pods only", deleted, faultNodes)
	}
	// The first leader's count was read just before the kill, so a deletion it
	// made in between is missing from the sum: only a sum above the pods
	// deleted means a pod was deleted twice.
	if total := int(byLeader + byStandby); total > deleted[oldImage] {
		t.Errorf("got %d successful deletions counted by the two replicas for %d pods deleted, want at most one each", total, deleted[oldImage])
	}
}

// waitLeader waits until one of the two controllers holds the Lease and
// returns it first.
func (e *env) waitLeader(a, b *controllerProcess) (leader, standby *controllerProcess) {
	e.t.Helper()
	eventually(e.t, "a leader among "+a.Name+" and "+b.Name, func(ctx context.Context) (bool, string, error) {
		holder := e.leaseHolder(ctx)
		if holder == "" {
			return false, "no holder", nil
		}
		for _, pair := range [][2]*controllerProcess{{a, b}, {b, a}} {
			ok, err := pair[0].startedLeading(holder)
			if err != nil {
				return false, "", err
			}
			if ok {
				leader, standby = pair[0], pair[1]
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("held by %q, which neither log names", holder), nil
	})
	e.t.Logf("leader %s, standby %s", leader.Name, standby.Name)
	return leader, standby
}

// leaseHolder is the holderIdentity of the controller's Lease, "" while it
// has none (or none is readable).
func (e *env) leaseHolder(ctx context.Context) string {
	lease, err := e.cluster.Client.CoordinationV1().Leases(e.ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
