package localcluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/edgeota/edgeota/health"
)

// Node readiness is polled at this interval, within this bound: KWOK reports a
// new node within a second or so; a minute means it never will.
const (
	pollInterval     = 200 * time.Millisecond
	nodeReadyTimeout = time.Minute
)

// NodeName is the stable name of the i-th edge node (1-based), so that tests
// and `make run`'s printed commands can name nodes without looking them up.
func NodeName(i int) string {
	return "edge-node-" + strconv.Itoa(i)
}

// AddNodes creates simulated amd64 edge nodes managed by KWOK and waits
// until each is Ready. With node Leases they join one by one over a
// renewal interval (joinLeases).
func (c *Cluster) AddNodes(ctx context.Context, names ...string) error {
	return c.AddNodesArch(ctx, "amd64", names...)
}

// AddNodesArch is AddNodes for nodes of the architecture (their
// kubernetes.io/arch label): a mixed fleet.
func (c *Cluster) AddNodesArch(ctx context.Context, arch string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	for _, name := range names {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     arch,
			},
		}}
		if c.heartbeat.Leases {
			node.Labels[joiningLabel] = "true"
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	if c.heartbeat.Leases {
		if err := c.joinLeases(ctx, names); err != nil {
			return err
		}
	}
	for _, name := range names {
		if err := c.WaitNodeReady(ctx, name, corev1.ConditionTrue); err != nil {
			return err
		}
	}
	return nil
}

// WaitNodeReady waits until the node's Ready condition has the given status.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string, want corev1.ConditionStatus) error {
	return c.waitNodeReady(ctx, name, want, nodeReadyTimeout)
}

// waitNodeReady is WaitNodeReady within timeout.
func (c *Cluster) waitNodeReady(ctx context.Context, name string, want corev1.ConditionStatus, timeout time.Duration) error {
	var last corev1.ConditionStatus
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = ""
		if cond := health.NodeCondition(node, corev1.NodeReady); cond != nil {
			last = cond.Status
		}
		return last == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s to be Ready=%s (last seen %q): %w", name, want, last, err)
	}
	return nil
}
