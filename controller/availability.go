package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/podcondition"
)

// available reports whether the pod has been Ready for minReadySeconds at now,
// as the native controllers judge availability; when Ready but not yet long
// enough, wait is how long until it will be, so the caller can requeue.
func available(pod *corev1.Pod, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	ready := podcondition.Get(&pod.Status, corev1.PodReady)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return false, 0
	}
	if minReadySeconds <= 0 {
		return true, 0
	}
	at := ready.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
	if !at.After(now) {
		return true, 0
	}
	return false, at.Sub(now)
}

// nodeReady reports whether the node is connected: its Ready condition is True.
// False, Unknown (the node controller's mark of a lost heartbeat) and missing
// all mean the node cannot be upgraded now.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
