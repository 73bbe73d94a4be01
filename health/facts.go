package health

import (
	"hash/fnv"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/internal/unixtime"
)

// Pod is what the health rules read of a pod: 48 bytes, against the
// kilobytes of a corev1.Pod. The controller caches pods as records holding
// one (its informers' transform builds it), thousands of them, so the
// common case (a pod running, or starting without trouble) holds times of 8
// bytes and flags, what only a failed or waiting pod has is behind Detail,
// and what only a pod that may be upgraded in place needs behind Run; the
// node agent builds one from the pod it has (PodOf). Either way one Judge
// (and JudgeInPlace for a pod upgraded in place) decides.
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
	Detail *Detail
	// Run is what an upgrade in place is judged by; nil when not kept (the
	// controller keeps it only for pods that opted in to upgrades in
	// place, rollout.InPlaceLabel).
	Run                    *Run
	Ready, ContainersReady bool
	// Failed: the pod's phase is Failed.
	Failed bool
}

// Run is what the kubelet reports of a pod's run that an upgrade in place
// is judged by.
type Run struct {
	// Generation is the pod's metadata.generation, which the API server
	// raises at each change of its spec (a patch of an image); the kubelet
	// reports the generation it acted on as ObservedGeneration (Kubernetes
	// 1.35 on; 0 before).
	Generation, ObservedGeneration int64
	// Containers are the pod's containers as the kubelet reports them:
	// init containers first, then the regular ones.
	Containers []Container
}

// Container is one container of a pod as its status reports it: what an
// upgrade in place is judged by (JudgeInPlace), never its image or imageID,
// which may name another tag of the same image or not change at all.
type Container struct {
	// Name is the container's.
	Name string
	// ID is a digest of its containerID (ContainerID), 0 when it has none:
	// a new ID is a new container, started by the kubelet.
	ID uint64
	// Started is when it last started running (state.running.startedAt),
	// by the node's clock; zero when it does not run.
	Started unixtime.Time
	// Running and Ready are its state and readiness; Init says it is an
	// init container (a native sidecar, if it runs).
	Running, Ready, Init bool
}

// ContainerID is the digest of a containerID ("containerd://…") that
// Container.ID holds, never 0 for one that is set: 8 bytes per container
// instead of the 70 of the string, and what the rollout record keeps of
// the containers an upgrade in place replaces.
func ContainerID(id string) uint64 {
	if id == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// Container returns the container of that name, nil if the status has
// none.
func (r *Run) Container(name string) *Container {
	for i := range r.Containers {
		if r.Containers[i].Name == name {
			return &r.Containers[i]
		}
	}
	return nil
}

// Generation is the pod's metadata.generation; 0 when not kept.
func (p *Pod) Generation() int64 {
	if p.Run == nil {
		return 0
	}
	return p.Run.Generation
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
	run := &Run{Generation: pod.Generation, ObservedGeneration: pod.Status.ObservedGeneration}
	if n := len(pod.Status.InitContainerStatuses) + len(pod.Status.ContainerStatuses); n > 0 {
		run.Containers = make([]Container, 0, n)
	}
	for k, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			st := &statuses[i]
			c := Container{Name: intern(st.Name), ID: ContainerID(st.ContainerID), Ready: st.Ready, Init: k == 0}
			if r := st.State.Running; r != nil {
				c.Running, c.Started = true, unixtime.Of(r.StartedAt.Time)
			}
			run.Containers = append(run.Containers, c)
			if w := st.State.Waiting; w != nil && w.Reason != "" {
				d.Waiting = append(d.Waiting, Waiting{Container: intern(st.Name), Reason: intern(w.Reason), Message: intern(w.Message)})
			}
			if term := st.LastTerminationState.Terminated; term != nil && term.FinishedAt.After(lastFinished) {
				lastFinished = term.FinishedAt.Time
			}
		}
	}
	p.LastFinished = unixtime.Of(lastFinished)
	p.Run = run
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
	if p.Run != nil {
		r := *p.Run
		r.Containers = slices.Clone(r.Containers)
		p.Run = &r
	}
	return p
}
