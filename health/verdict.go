package health

import (
	"fmt"
	"time"

	"github.com/edgeota/edgeota/internal/unixtime"
)

// State is where a new pod stands after an upgrade.
type State int

const (
	// Progressing: not available yet, and nothing says it will not be.
	Progressing State = iota
	// Settled: ContainersReady for minReadySeconds, with no container
	// restarted since it turned ready.
	Settled
	// Failed: the new version does not run (see Judge).
	Failed
)

func (s State) String() string {
	switch s {
	case Progressing:
		return "Progressing"
	case Settled:
		return "Settled"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ReasonProgressDeadlineExceeded is a failed pod's reason when it was simply
// not available by the deadline, as Deployments name the same failure.
const ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

// ReasonPodFailed is a failed pod's reason when its phase is Failed and the
// kubelet gave no reason of its own.
const ReasonPodFailed = "PodFailed"

// DefaultDeadline is how long a new pod may take to become available before
// it counts as failed, unless its DaemonSet or the agent says otherwise:
// generous, because an edge node pulls images over a slow, flaky link.
const DefaultDeadline = 10 * time.Minute

// failsAtOnce are the container waiting reasons that no amount of waiting
// fixes: the container runs and dies, or can never be created as specified.
var failsAtOnce = map[string]bool{
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"InvalidImageName":           true,
	"RunContainerError":          true,
	"ErrImageNeverPull":          true,
	"PreStartHookError":          true,
	"PostStartHookError":         true,
}

// pullErrors are the waiting reasons of an image pull that has not worked
// yet. On an edge link they are usually transient, so they fail a pod only at
// the deadline, and then name the cause.
var pullErrors = map[string]bool{
	"ErrImagePull":              true,
	"ImagePullBackOff":          true,
	"RegistryUnavailable":       true,
	"SignatureValidationFailed": true,
}

// Verdict is Judge's answer.
type Verdict struct {
	State State
	// Reason and Message say why a pod failed, or what a progressing pod is
	// waiting on, in the container's own words where it has any
	// (CrashLoopBackOff, ImagePullBackOff, ...); empty when settled.
	Reason, Message string
	// Recheck is, for a progressing pod, how long until the verdict can
	// change by the clock alone (minReadySeconds elapsing, or the deadline);
	// zero when only a change to the pod can change it.
	Recheck time.Duration
	// SettledAt is, for a settled pod, when it settled by the node's clock
	// (the start of its readiness, plus minReadySeconds): after it, a sign
	// of life from its node proves that the node survived the new version.
	SettledAt time.Time
}

// Judge is the one rule that decides whether a new pod has settled, is still
// progressing, or has failed, shared by the controller's failure brake and the
// node agent's owner view:
//   - a container waiting in CrashLoopBackOff or with a configuration error
//     (CreateContainerConfigError, InvalidImageName, ...), or a pod in phase
//     Failed, fails at once;
//   - a pod whose ContainersReady condition has been True for minReadySeconds,
//     with no container restarted since, has settled;
//   - anything else, image pull errors included (transient on edge links), is
//     progressing until deadline after since (when the pod was created, or
//     the upgrade was asked for), and fails then. A deadline of zero never
//     expires.
//
// Judge reads the pod's facts (PodOf, or the controller's cached record).
func Judge(pod *Pod, since time.Time, minReadySeconds int32, deadline time.Duration, now time.Time) Verdict {
	if v := failsNow(pod); v.State == Failed {
		return v
	}
	ok, wait := heldFor(pod.ContainersReady, pod.ContainersReadySince, minReadySeconds, now)
	if ok && pod.LastFinished <= pod.ContainersReadySince {
		// Ready long enough, and no container ended a run since it turned
		// ready: one that restarted since has not proven it stays up.
		return Verdict{State: Settled, SettledAt: pod.ContainersReadySince.Time().Add(time.Duration(minReadySeconds) * time.Second)}
	}
	return progressing(pod, Verdict{State: Progressing, Recheck: wait}, since, deadline, now)
}

// failsNow is the verdict of a pod that fails at once (Failed phase, a
// container in CrashLoopBackOff or with a configuration error); a zero
// Verdict for any other.
func failsNow(pod *Pod) Verdict {
	if pod.Failed {
		var reason, message string
		if pod.Detail != nil {
			reason, message = pod.Detail.Reason, pod.Detail.Message
		}
		if reason == "" {
			reason = ReasonPodFailed
		}
		if message != "" {
			message = "the pod's phase is Failed: " + message
		} else {
			message = "the pod's phase is Failed"
		}
		return Verdict{State: Failed, Reason: reason, Message: message}
	}
	for _, w := range pod.Waits() {
		if failsAtOnce[w.Reason] {
			return Verdict{State: Failed, Reason: w.Reason, Message: waitingMessage(w)}
		}
	}
	return Verdict{}
}

func waitingMessage(w Waiting) string {
	message := fmt.Sprintf("container %s: %s", w.Container, w.Reason)
	if w.Message != "" {
		message += ": " + w.Message
	}
	return message
}

// progressing is the verdict v of a pod not settled (a Recheck set when
// the clock alone settles it), with what its first waiting container waits
// on (a pull error first), until deadline after since: failed then. A
// deadline of zero never expires.
func progressing(pod *Pod, v Verdict, since time.Time, deadline time.Duration, now time.Time) Verdict {
	var waiting Waiting
	for _, w := range pod.Waits() {
		if waiting.Reason == "" || pullErrors[w.Reason] && !pullErrors[waiting.Reason] {
			waiting = w
		}
	}
	if waiting.Reason != "" {
		v.Reason, v.Message = waiting.Reason, waitingMessage(waiting)
	}
	if deadline <= 0 {
		return v
	}
	left := since.Add(deadline).Sub(now)
	if left > 0 {
		if v.Recheck == 0 || left < v.Recheck {
			v.Recheck = left
		}
		return v
	}
	v.State, v.Recheck = Failed, 0
	if v.Reason == "" || !pullErrors[v.Reason] {
		v.Reason = ReasonProgressDeadlineExceeded
	}
	cause := ""
	if v.Message != "" {
		cause = "; " + v.Message
	}
	v.Message = fmt.Sprintf("not available within %s%s", deadline, cause)
	return v
}

// InPlace is what a pod upgraded in place is judged against: what its patch
// made (the generation) and what ran before it (the containers' IDs). The
// controller keeps both in its rollout record, written before the patch;
// the node agent keeps them in its memory. Neither reads them from the pod,
// which a node may rewrite.
type InPlace struct {
	// Generation is the pod's metadata.generation that the patch made: the
	// kubelet has taken the patch once it reports an observedGeneration at
	// least as high.
	Generation int64
	// Before are the IDs (Container.ID) of the pod's containers before the
	// patch, by name; Changed names those whose image the patch changed.
	Before  map[string]uint64
	Changed []string
}

// JudgeInPlace is Judge for a pod whose images were patched at since (its
// upgrade in place): the same failures, at once or at the deadline after
// since, but a different rule for settled, since the pod's conditions tell
// nothing of the patch (a kubelet that restarts a container within one
// sync never reports it not Ready, and the pod's ContainersReady keeps the
// time the old containers turned ready):
//   - the kubelet took the patch: its observedGeneration is at least
//     up.Generation;
//   - every changed container runs under a new container ID, and is Ready;
//     a container the patch did not change that has a new ID (restarted
//     meanwhile) must run and be Ready too, and counts as started then;
//   - the pod is ContainersReady, and has been for minReadySeconds since
//     the latest of those starts (Verdict.SettledAt, by the node's clock,
//     as a Lease's renewTime: a proof of life counts only after it), with
//     no container's run ended since (a restart since proves nothing).
//
// A same-digest tag (a new tag of the same image) settles like any other:
// the kubelet starts a new container for it, whatever its imageID. The
// restart count, one higher after each upgrade in place, is never read.
func JudgeInPlace(pod *Pod, up *InPlace, since time.Time, minReadySeconds int32, deadline time.Duration, now time.Time) Verdict {
	if v := failsNow(pod); v.State == Failed {
		return v
	}
	started, ok := upgradedInPlace(pod, up)
	var wait time.Duration
	if ok && pod.ContainersReady && pod.LastFinished <= started {
		at := started.Time().Add(time.Duration(minReadySeconds) * time.Second)
		if !at.After(now) {
			return Verdict{State: Settled, SettledAt: at}
		}
		wait = at.Sub(now)
	}
	return progressing(pod, Verdict{State: Progressing, Recheck: wait}, since, deadline, now)
}

// upgradedInPlace reports whether the kubelet took the patch up describes and
// every container it changed (and any other with a new ID) runs, Ready,
// under a new ID; started is the latest of their starts.
func upgradedInPlace(pod *Pod, up *InPlace) (started unixtime.Time, ok bool) {
	run := pod.Run
	if run == nil || run.ObservedGeneration < up.Generation {
		return 0, false
	}
	for _, name := range up.Changed {
		c := run.Container(name)
		if c == nil || c.ID == 0 || c.ID == up.Before[name] {
			return 0, false
		}
	}
	for i := range run.Containers {
		c := &run.Containers[i]
		before, known := up.Before[c.Name]
		if !known || c.ID == before {
			continue
		}
		if !c.Running || !c.Ready {
			return 0, false
		}
		started = max(started, c.Started)
	}
	return started, true
}
