package health

import (
	"fmt"
	"time"
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
	var waiting Verdict // the first container's reason for not running, if any
	for _, w := range pod.Waits() {
		message := fmt.Sprintf("container %s: %s", w.Container, w.Reason)
		if w.Message != "" {
			message += ": " + w.Message
		}
		if failsAtOnce[w.Reason] {
			return Verdict{State: Failed, Reason: w.Reason, Message: message}
		}
		if waiting.Reason == "" || pullErrors[w.Reason] && !pullErrors[waiting.Reason] {
			waiting = Verdict{Reason: w.Reason, Message: message}
		}
	}

	ok, wait := heldFor(pod.ContainersReady, pod.ContainersReadySince, minReadySeconds, now)
	if ok && pod.LastFinished <= pod.ContainersReadySince {
		// Ready long enough, and no container ended a run since it turned
		// ready: one that restarted since has not proven it stays up.
		return Verdict{State: Settled}
	}

	verdict := Verdict{State: Progressing, Reason: waiting.Reason, Message: waiting.Message, Recheck: wait}
	if deadline <= 0 {
		return verdict
	}
	left := since.Add(deadline).Sub(now)
	if left > 0 {
		if verdict.Recheck == 0 || left < verdict.Recheck {
			verdict.Recheck = left
		}
		return verdict
	}
	verdict.State, verdict.Recheck = Failed, 0
	if verdict.Reason == "" || !pullErrors[verdict.Reason] {
		verdict.Reason = ReasonProgressDeadlineExceeded
	}
	cause := ""
	if verdict.Message != "" {
		cause = "; " + verdict.Message
	}
	verdict.Message = fmt.Sprintf("not available within %s%s", deadline, cause)
	return verdict
}

// SettledAt is when a pod whose ContainersReady is True has held it for
// minReadySeconds: after it, a sign of life from its node proves that the
// node survived the pod's start. Zero when it is not ready.
func SettledAt(pod *Pod, minReadySeconds int32) time.Time {
	if !pod.ContainersReady {
		return time.Time{}
	}
	return pod.ContainersReadySince.Time().Add(time.Duration(minReadySeconds) * time.Second)
}
