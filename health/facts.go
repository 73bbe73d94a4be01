package health

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/internal/unixtime"
)

// Pod is what the health rules read of a pod: 40 bytes, against the
// kilobytes of a corev1.Pod. The controller caches pods as records holding
// one (its informers' transform builds it), thousands of them, so the common
// case (a pod running, or starting without trouble) holds times of 8 bytes
// and flags, and what only a failed or waiting pod has is behind Detail; the
// node agent builds one from the pod it has (PodOf). Either way one Judge
// decides.
type Pod struct {
	// ReadySince and ContainersReadySince are the lastTransitionTimes of
	// the pod's Ready and ContainersReady conditions; Ready and
	// ContainersReady their status (True, or anything else).
	ReadySince, ContainersReadySince unixtime.Time
	// LastFinished is when a container's last run ended, the latest of
	// them: a restart after it turned ready unsettles a pod.
	LastFinished unixtime.Time
	// Detail is what a pod that failed or waits says why: nil for one that
	// does neither, the common case.
	Detail                 *Detail
	Ready, ContainersReady bool
	// Failed: the pod's phase is Failed.
	Failed bool
}

// Detail is why a pod failed or is not running yet.
type Detail struct {
	// Reason and Message are the kubelet's words for a Failed pod.
	Reason, Message string
	// Waiting are the containers (init containers first) that wait, with
	// the kubelet's reason.
	Waiting []Waiting
}

// Waiting is a container that is not running, and why.
type Waiting struct {
	Container, Reason, Message string
}

// Waits returns the pod's waiting containers: usually none.
func (p *Pod) Waits() []Waiting {
	if p.Detail == nil {
		return nil
	}
	return p.Detail.Waiting
}

// PodOf reads a pod's facts. intern, when not nil, shares the strings many
// pods repeat (the controller's cache holds thousands).
func PodOf(pod *corev1.Pod, intern func(string) string) Pod {
	if intern == nil {
		intern = func(s string) string { return s }
	}
	var p Pod
	var d Detail
	if pod.Status.Phase == corev1.PodFailed {
		p.Failed = true
		d.Reason, d.Message = intern(pod.Status.Reason), intern(pod.Status.Message)
	}
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			p.Ready, p.ReadySince = c.Status == corev1.ConditionTrue, unixtime.Of(c.LastTransitionTime.Time)
		case corev1.ContainersReady:
			p.ContainersReady, p.ContainersReadySince = c.Status == corev1.ConditionTrue, unixtime.Of(c.LastTransitionTime.Time)
		}
	}
	var lastFinished time.Time
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			st := &statuses[i]
			if w := st.State.Waiting; w != nil && w.Reason != "" {
				d.Waiting = append(d.Waiting, Waiting{Container: intern(st.Name), Reason: intern(w.Reason), Message: intern(w.Message)})
			}
			if term := st.LastTerminationState.Terminated; term != nil && term.FinishedAt.After(lastFinished) {
				lastFinished = term.FinishedAt.Time
			}
		}
	}
	p.LastFinished = unixtime.Of(lastFinished)
	if p.Failed || len(d.Waiting) > 0 {
		d.Waiting = slices.Clip(d.Waiting)
		p.Detail = &d
	}
	return p
}

// DeepCopy returns a copy of p that shares nothing it could change.
func (p Pod) DeepCopy() Pod {
	if p.Detail != nil {
		d := *p.Detail
		d.Waiting = slices.Clone(d.Waiting)
		p.Detail = &d
	}
	return p
}
