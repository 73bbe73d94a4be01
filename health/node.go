package health

import corev1 "k8s.io/api/core/v1"

// NodeReady reports whether the node is connected: its Ready condition is
// True. False, Unknown (the node controller's mark of a lost heartbeat) and
// missing all mean the node cannot take an upgrade now.
func NodeReady(node *corev1.Node) bool {
	c := NodeCondition(node, corev1.NodeReady)
	return c != nil && StatusReady(c.Status)
}

// StatusReady is NodeReady on the Ready condition's status alone ("" when
// the node has none), for a caller that keeps only that (the controller's
// compact node records).
func StatusReady(status corev1.ConditionStatus) bool {
	return status == corev1.ConditionTrue
}

// NodeCondition returns the node's condition of type t, or nil. The pointer
// aims into node's status: read only.
func NodeCondition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
