package localcluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CutOffLabel, set to "true" on a node, cuts it off. Without node Leases the
// node-cut-off stage (stages/node-cut-off.yaml) stops its status heartbeats
// and reports every condition Unknown within a second, as the node lifecycle
// controller does for a node that went silent; that controller then taints
// it unreachable. With node Leases kwok-controller forgets the node
// altogether: its Lease is no longer renewed, and the node lifecycle
// controller reports it Unknown after its grace period (see Heartbeat): a
// real node's silence, but 40 s slower, so tests that cut nodes off to see
// what the controller does run on status heartbeats, and the Lease mode's
// cut-off has a test of its own. Removing the label reconnects it. It is a label rather than an API so that
// `make run` users can do the same with kubectl.
const CutOffLabel = "edgeota.io/cut-off"

// CutOff cuts the node off from the cluster and waits until it is reported
// Ready=Unknown: within a second without node Leases, after the node
// lifecycle controller's grace period with them.
func (c *Cluster) CutOff(ctx context.Context, node string) error {
	if err := c.BeginCutOff(ctx, node); err != nil {
		return err
	}
	timeout := nodeReadyTimeout
	if c.heartbeat.Leases {
		timeout += nodeMonitorGracePeriod
	}
	return c.waitNodeReady(ctx, node, corev1.ConditionUnknown, timeout)
}

// Reconnect undoes CutOff and waits until the node is Ready again.
func (c *Cluster) Reconnect(ctx context.Context, node string) error {
	if err := c.BeginReconnect(ctx, node); err != nil {
		return err
	}
	return c.WaitNodeReady(ctx, node, corev1.ConditionTrue)
}

// BeginCutOff labels the node cut off without waiting for it to be reported
// Ready=Unknown: to cut many nodes off at once and wait for them together.
func (c *Cluster) BeginCutOff(ctx context.Context, node string) error {
	return c.SetNodeLabel(ctx, node, CutOffLabel, "true")
}

// BeginReconnect removes the cut-off label without waiting for the node to
// be Ready again.
func (c *Cluster) BeginReconnect(ctx context.Context, node string) error {
	return c.SetNodeLabel(ctx, node, CutOffLabel, nil)
}

// SetNodeLabel sets the node's label key to value, or removes it when value
// is nil: the one way the harness marks nodes (cut off, joining), and the
// bench its own marks (its agents' cut links).
func (c *Cluster) SetNodeLabel(ctx context.Context, node, key string, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if err != nil {
		return fmt.Errorf("encoding the label patch: %w", err)
	}
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting label %s=%v on node %s: %w", key, value, node, err)
	}
	return nil
}
