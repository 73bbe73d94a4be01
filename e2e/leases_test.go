//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// kubeletLeaseSeconds is the length of a kubelet's node Lease with its
// defaults (renewed every quarter of it), which the nodes of newKubeletEnv
// hold.
const kubeletLeaseSeconds = 40

// TestCutOffNodeWithLeases: on nodes that heartbeat as kubelets do, a node
// renews its Lease and writes no status; a cut-off node stops renewing its
// Lease, so the node lifecycle controller reports it Ready=Unknown, taints it
// unreachable and marks its pod not Ready, while the other node renews on;
// reconnected, it renews its Lease again, is Ready, and its pod Ready again.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestCutOffNodeWithLeases(t *testing.T) {
	e := newKubeletEnv(t, 2)
	e.createDaemonSet(nil)
	cut, other := localcluster.NodeName(2), localcluster.NodeName(1)

	status := heartbeat(t, e, cut)
	for _, node := range []string{cut, other} {
		lease := nodeLease(t, e, node)
		if got := lease.Spec.LeaseDurationSeconds; got == nil || *got != kubeletLeaseSeconds {
			t.Errorf("node %s's Lease lasts %v s, want %d", node, got, kubeletLeaseSeconds)
		}
		waitLeaseRenewed(t, e, node, lease.Spec.RenewTime.Time)
	}
	if got := heartbeat(t, e, cut); !got.Equal(status) {
		t.Errorf("node %s wrote its status (heartbeat %s, then %s) where only its Lease should beat", cut, status, got)
	}

	if err := e.cluster.CutOff(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	eventually(t, cut+" tainted unreachable", func(ctx context.Context) (bool, string, error) {
		n, err := e.cluster.Client.CoreV1().Nodes().Get(ctx, cut, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }),
			fmt.Sprintf("taints %v", n.Spec.Taints), nil
	})
	e.waitCondition(corev1.PodReady, corev1.ConditionFalse, cut)
	// A renewal is due every 10 s: a longer silence proves the cut-off
	// node's Lease is left alone while the other node's is renewed.
	frozen, otherRenewed := nodeLease(t, e, cut).Spec.RenewTime.Time, nodeLease(t, e, other).Spec.RenewTime.Time
	consistently(t, "cut-off "+cut+" renews no Lease", 15*time.Second, func(context.Context) (bool, string, error) {
		got := nodeLease(t, e, cut).Spec.RenewTime.Time
		return got.Equal(frozen), fmt.Sprintf("renewed at %s, then at %s", frozen, got), nil
	})
	if got := nodeLease(t, e, other).Spec.RenewTime.Time; !got.After(otherRenewed) {
		t.Errorf("connected %s stopped renewing its Lease at %s", other, got)
	}

	if err := e.cluster.Reconnect(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	waitLeaseRenewed(t, e, cut, frozen)
	e.waitCondition(corev1.PodReady, corev1.ConditionTrue, cut)
}

// TestAdvancedRollingUpdateOnLeases: on nodes that heartbeat as kubelets do
// (node Leases every 10 s, the status every 5 minutes), an
// AdvancedRollingUpdate of 6 nodes with max-unavailable 2 completes, its
// proof of life drawn from the Leases: no node writes its status during the
// rollout, so a controller waiting for one would not finish. No sample sees
// more than 2 nodes without an available pod, and the rollout status and
// events report completion.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestAdvancedRollingUpdateOnLeases(t *testing.T) {
	e := rollOutOnLeases(t, "-v=4")
	if log := processLog(t, e, harness.ControllerBinary); !strings.Contains(log, `"Following the node's Lease"`) || strings.Contains(log, leaseWatchEvery) {
		t.Errorf("the controller did not follow the Leases by name alone (--lease-watch auto, 2 of 6 nodes in flight); see %s", e.h.LogPath(harness.ControllerBinary))
	}
}

// TestAdvancedRollingUpdateWatchingEveryLease: the same rollout under
// --lease-watch=every-lease completes alike, its proofs from the one
// watch of every Lease and from no watch by name.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestAdvancedRollingUpdateWatchingEveryLease(t *testing.T) {
	e := rollOutOnLeases(t, "-v=4", "--lease-watch=every-lease")
	if log := processLog(t, e, harness.ControllerBinary); strings.Contains(log, `"Following the node's Lease"`) || !strings.Contains(log, leaseWatchEvery) {
		t.Errorf("the controller did not follow the Leases with one watch of every Lease alone; see %s", e.h.LogPath(harness.ControllerBinary))
	}
}

// leaseWatchEvery is what the controller logs (-v=2) when one watch of
// every Lease starts.
const leaseWatchEvery = `"Following the nodes with one watch of every Lease"`

// rollOutOnLeases is the rollout of TestAdvancedRollingUpdateOnLeases under
// a controller started with flags, checked as that test says.
func rollOutOnLeases(t *testing.T, flags ...string) *env {
	t.Helper()
	const nodes, budget = 6, 2
	e := newKubeletEnv(t, nodes)
	e.startController(e.cluster.Kubeconfig, flags...)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: fmt.Sprint(budget)})
	first := e.waitRolloutStatus("the first revision settled", func(s *rollout.Status) bool { return s.Updated == nodes })

	status := map[string]time.Time{}
	for _, n := range allNodes(nodes) {
		status[n] = heartbeat(t, e, n)
	}
	s := startSampler(t, e, nodes)
	changed := time.Now()
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	done := e.waitRolloutStatus("the rollout completed", func(s *rollout.Status) bool {
		return s.Hash != first.Hash && s.Updated == nodes && s.InFlight == 0
	})
	samples, worst := s.stop()

	t.Logf("%d samples; at worst %d of %d nodes without an available pod (budget %d)", samples, worst.unavailable, nodes, budget)
	if worst.unavailable > budget {
		t.Errorf("%d nodes without an available pod at %s (budget %d): %v", worst.unavailable, worst.at.Format(time.StampMilli), budget, worst.nodes)
	}
	if worst.unavailable == 0 {
		t.Errorf("no sample saw a node without an available pod: the sampler missed the rollout")
	}
	if done.Total != nodes || done.Halted || done.Failed.Count != 0 || done.Skipped != 0 {
		t.Errorf("got rollout status %+v, want all %d nodes updated, none failed or skipped", done, nodes)
	}
	if got := len(e.waitEventsOf(rollout.ReasonRolloutCompleted, 1)); got == 0 {
		t.Errorf("no %s event", rollout.ReasonRolloutCompleted)
	}
	for _, n := range allNodes(nodes) {
		if got := heartbeat(t, e, n); !got.Equal(status[n]) {
			t.Errorf("node %s wrote its status during the rollout (heartbeat %s, then %s): the rollout may have drawn its proof of life from it", n, status[n], got)
		}
		if renewed := nodeLease(t, e, n).Spec.RenewTime.Time; !renewed.After(changed) {
			t.Errorf("node %s renewed its Lease last at %s, before the image change at %s", n, renewed, changed)
		}
	}
	return e
}

// nodeLease reads the node's Lease in kube-node-lease.
func nodeLease(t *testing.T, e *env, node string) *coordinationv1.Lease {
	t.Helper()
	lease, err := e.cluster.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease of node %s: %v", node, err)
	}
	if lease.Spec.RenewTime == nil {
		t.Fatalf("the Lease of node %s has no renewTime", node)
	}
	return lease
}

// waitLeaseRenewed waits until the node renews its Lease after since.
func waitLeaseRenewed(t *testing.T, e *env, node string, since time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %s to renew its Lease after %s", node, since), func(context.Context) (bool, string, error) {
		got := nodeLease(t, e, node).Spec.RenewTime.Time
		return got.After(since), "renewed at " + got.String(), nil
	})
}
