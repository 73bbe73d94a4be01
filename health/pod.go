package health

import (
	"time"

	"github.com/edgeota/edgeota/internal/unixtime"
)

// PodAvailable reports whether the pod has been Ready for minReadySeconds at
// now, as the native controllers judge availability (and count budgets); when
// Ready but not yet long enough, wait is how long until it will be, so the
// caller can requeue.
func PodAvailable(pod *Pod, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	return heldFor(pod.Ready, pod.ReadySince, minReadySeconds, now)
}

// heldFor reports whether a condition True since since has been so for
// minReadySeconds at now, or how long until it will have been.
func heldFor(isTrue bool, since unixtime.Time, minReadySeconds int32, now time.Time) (ok bool, wait time.Duration) {
	if !isTrue {
		return false, 0
	}
	if minReadySeconds <= 0 {
		return true, 0
	}
	at := since.Time().Add(time.Duration(minReadySeconds) * time.Second)
	if !at.After(now) {
		return true, 0
	}
	return false, at.Sub(now)
}
