package health

import "time"

// PodAvailable reports whether the pod has been Ready for minReadySeconds at
// now, as the native controllers judge availability (and count budgets); when
// Ready but not yet long enough, wait is how long until it will be, so the
// caller can requeue.
func PodAvailable(pod *Pod, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	return heldFor(pod.Ready, minReadySeconds, now)
}

// heldFor reports whether the condition has been True for minReadySeconds at
// now, or how long until it will have been.
func heldFor(c Condition, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	if !c.True {
		return false, 0
	}
	if minReadySeconds <= 0 {
		return true, 0
	}
	at := c.Since.Add(time.Duration(minReadySeconds) * time.Second)
	if !at.After(now) {
		return true, 0
	}
	return false, at.Sub(now)
}
