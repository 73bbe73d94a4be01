package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/podcondition"
)

// PodAvailable reports whether the pod has been Ready for minReadySeconds at
// now, as the native controllers judge availability (and count budgets); when
// Ready but not yet long enough, wait is how long until it will be, so the
// caller can requeue.
func PodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	return heldFor(podcondition.Get(&pod.Status, corev1.PodReady), minReadySeconds, now)
}

// heldFor reports whether the condition has been True for minReadySeconds at
// now, or how long until it will have been.
func heldFor(c *corev1.PodCondition, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	if c == nil || c.Status != corev1.ConditionTrue {
		return false, 0
	}
	if minReadySeconds <= 0 {
		return true, 0
	}
	at := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
	if !at.After(now) {
		return true, 0
	}
	return false, at.Sub(now)
}
