//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/localcluster"
)

// TestClusterListensOnLoopbackOnly proves every component of the local
// cluster listens on loopback and nowhere else.
func TestClusterListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	listeners, err := e.cluster.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range localcluster.Components {
		ips := listeners[component]
		if len(ips) == 0 {
			t.Errorf("%s listens nowhere that /proc shows; cannot check it", component)
		}
		for _, ip := range ips {
			if !ip.IsLoopback() {
				t.Errorf("%s listens on %s, not loopback", component, ip)
			}
		}
	}
}

// TestCutOffNode proves a cut-off node goes silent as a real one does: Ready
// turns Unknown, its heartbeats stop, the node lifecycle controller taints it
// unreachable; reconnected, it is Ready and heartbeating again.
func TestCutOffNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	node := localcluster.NodeName(2)
	if err := e.cluster.CutOff(e.ctx(), node); err != nil {
		t.Fatal(err)
	}
	eventually(t, node+" tainted unreachable by kube-controller-manager", func(ctx context.Context) (bool, string, error) {
		n, err := e.cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }),
			fmt.Sprintf("taints %v", n.Spec.Taints), nil
	})
	// KWOK's heartbeat stage runs every few seconds (nodeHeartbeat): a longer silence proves it
	// skips the cut-off node, while the other node keeps beating.
	cutBeat, otherBeat := heartbeat(t, e, node), heartbeat(t, e, localcluster.NodeName(1))
	consistently(t, "cut-off "+node+" sends no heartbeat", 20*time.Second, func(context.Context) (bool, string, error) {
		got := heartbeat(t, e, node)
		return got.Equal(cutBeat), fmt.Sprintf("heartbeat %s then %s", cutBeat, got), nil
	})
	if got := heartbeat(t, e, localcluster.NodeName(1)); got.Equal(otherBeat) {
		t.Errorf("connected %s stopped heartbeating at %s", localcluster.NodeName(1), got)
	}

	if err := e.cluster.Reconnect(e.ctx(), node); err != nil {
		t.Fatal(err)
	}
	if got := heartbeat(t, e, node); !got.After(cutBeat) {
		t.Errorf("reconnected %s reports no new heartbeat: %s", node, got)
	}
}

// heartbeat is the node's last Ready heartbeat.
func heartbeat(t *testing.T, e *env, node string) time.Time {
	t.Helper()
	n, err := e.cluster.Client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := health.NodeCondition(n, corev1.NodeReady)
	if c == nil {
		t.Fatalf("node %s has no Ready condition", node)
	}
	return c.LastHeartbeatTime.Time
}
