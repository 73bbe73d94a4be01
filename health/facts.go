package health

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Pod is what the health rules read of a pod: a few dozen bytes, against the
// kilobytes of a corev1.Pod. The controller caches pods as records holding
// one (its informers' transform builds it); the node agent builds one from
// the pod it has (PodOf). Either way one Judge decides.
type Pod struct {
	// Phase is the pod's phase; Reason and Message the kubelet's words when
	// it is Failed.
	Phase           corev1.PodPhase
	Reason, Message string
	// Ready and ContainersReady are the pod's conditions of those types.
	Ready, ContainersReady Condition
	// Waiting are the containers (init containers first) that wait, with
	// the kubelet's reason: usually none.
	Waiting []Waiting
	// LastFinished is when a container's last run ended, the latest of
	// them: a restart after it turned ready unsettles a pod.
	LastFinished time.Time
}

// Condition is a pod condition as the rules read it.
type Condition struct {
	// True is its status: True, or anything else.
	True bool
	// Since is its lastTransitionTime.
	Since time.Time
}

// Waiting is a container that is not running, and why.
type Waiting struct {
	Container, Reason, Message string
}

// PodOf reads a pod's facts. intern, when not nil, shares the strings many
// pods repeat (the controller's cache holds thousands).
func PodOf(pod *corev1.Pod, intern func(string) string) Pod {
	if intern == nil {
		intern = func(s string) string { return s }
	}
	p := Pod{Phase: corev1.PodPhase(intern(string(pod.Status.Phase)))}
	if p.Phase == corev1.PodFailed {
		p.Reason, p.Message = intern(pod.Status.Reason), intern(pod.Status.Message)
	}
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			p.Ready = Condition{True: c.Status == corev1.ConditionTrue, Since: c.LastTransitionTime.Time}
		case corev1.ContainersReady:
			p.ContainersReady = Condition{True: c.Status == corev1.ConditionTrue, Since: c.LastTransitionTime.Time}
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			st := &statuses[i]
			if w := st.State.Waiting; w != nil && w.Reason != "" {
				p.Waiting = append(p.Waiting, Waiting{Container: intern(st.Name), Reason: intern(w.Reason), Message: intern(w.Message)})
			}
			if term := st.LastTerminationState.Terminated; term != nil && term.FinishedAt.After(p.LastFinished) {
				p.LastFinished = term.FinishedAt.Time
			}
		}
	}
	return p
}
