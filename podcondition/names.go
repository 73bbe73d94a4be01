package podcondition

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Condition types and reasons, spelled as OpenYurt spells them so that tools
// written for its upgrade model read edgeota's pods unchanged.
const (
	// NeedUpgrade is True while a pod runs an older revision than its
	// DaemonSet's current one, False when it is up to date.
	NeedUpgrade corev1.PodConditionType = "PodNeedUpgrade"
	// ImageReady tracks the pre-pull of the target revision's images on the
	// pod's node; its message names the revision it is about.
	ImageReady corev1.PodConditionType = "PodImageReady"

	// ReasonPullImageRequested marks PodImageReady=False written by the node
	// agent: the node's owner asked for a pre-pull.
	ReasonPullImageRequested = "PullImageRequested"
	// ReasonPullImageSuccess marks PodImageReady=True: the images are on the
	// node.
	ReasonPullImageSuccess = "PullImageSuccess"
	// ReasonPullImageFail marks PodImageReady=False after a failed pre-pull.
	ReasonPullImageFail = "PullImageFail"
	// ReasonNotOffered marks PodNeedUpgrade=False on an out-of-date pod that the
	// operator's controls (pause, node selector, partition) hold back.
	ReasonNotOffered = "NotOffered"
	// ReasonRolloutHalted marks PodNeedUpgrade=False on an out-of-date pod once
	// the rollout halted: too many pods upgraded to the revision failed.
	ReasonRolloutHalted = "RolloutHalted"
)

// revisionPrefix starts every OTA condition message that names a revision.
const revisionPrefix = "controllerrevision: "

// RevisionMessage is the message of an OTA condition about the DaemonSet
// ControllerRevision whose hash is given, e.g. "controllerrevision: 5d4f7c".
func RevisionMessage(hash string) string {
	return revisionPrefix + hash
}

// causeSeparator sets the cause of a failed pre-pull apart from the revision.
const causeSeparator = "; "

// FailureMessage is the message of a failed pre-pull of the given revision:
// the revision first, so every reader still finds it, then the cause, e.g.
// "controllerrevision: 5d4f7c; ErrImagePull: manifest unknown".
func FailureMessage(hash, cause string) string {
	return RevisionMessage(hash) + causeSeparator + cause
}

// Revision returns the revision hash named by an OTA condition message, with
// or without a failure cause after it, and false when the message names none.
func Revision(message string) (string, bool) {
	rest, ok := strings.CutPrefix(message, revisionPrefix)
	hash, _, _ := strings.Cut(rest, causeSeparator)
	if !ok || hash == "" {
		return "", false
	}
	return hash, true
}

// Names reports whether an OTA condition's message names revision target,
// whatever failure cause it may also carry.
func Names(message, target string) bool {
	rev, ok := Revision(message)
	return ok && rev == target
}

// Offered returns the revision a PodNeedUpgrade condition offers: True, and
// naming it. The one reading of an offer, for the agent (what the owner may
// take) and the controller (which adopts the offers it finds at its first
// sight of a record, and writes back those it never made).
func Offered(status corev1.ConditionStatus, message string) (string, bool) {
	if status != corev1.ConditionTrue {
		return "", false
	}
	return Revision(message)
}

// Get returns the pod's condition of type t, or nil when it has none. The
// result points into the pod: copy it before changing it.
func Get(status *corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// IsTrue reports whether the pod has condition t with status True.
func IsTrue(status *corev1.PodStatus, t corev1.PodConditionType) bool {
	c := Get(status, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// Equal reports whether the pod already carries a condition of want's type
// with the same status, reason and message, so writing want would change
// nothing that matters.
func Equal(status *corev1.PodStatus, want corev1.PodCondition) bool {
	c := Get(status, want.Type)
	return c != nil && c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message
}
