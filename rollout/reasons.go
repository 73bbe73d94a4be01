package rollout

// Reasons of the events the controller records, on DaemonSets unless said
// otherwise. Tools and tests match them by these names; they are never
// renamed.
const (
	// ReasonDeprecatedAnnotation: the DaemonSet opts in with the spelling of
	// the original design proposal; the event names the canonical key.
	ReasonDeprecatedAnnotation = "DeprecatedAnnotation"
	// ReasonUnsupportedUpdateStrategy: the DaemonSet opts in but does not use
	// OnDelete, so the native controller owns its rollout and edgeota keeps
	// out.
	ReasonUnsupportedUpdateStrategy = "UnsupportedUpdateStrategy"
	// ReasonInvalidStrategy: the opt-in annotation names no known strategy.
	ReasonInvalidStrategy = "InvalidUpdateStrategy"
	// ReasonInvalidMaxUnavailable: max-unavailable does not parse; nothing is
	// deleted until it is fixed.
	ReasonInvalidMaxUnavailable = "InvalidMaxUnavailable"
	// ReasonInvalidAnnotation: one of edgeota's rollout controls does not
	// parse; nothing is deleted or newly offered until it is fixed.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonRolloutStarted: pods are being moved to a new target revision.
	ReasonRolloutStarted = "RolloutStarted"
	// ReasonRolloutHalted: max-failed nodes failed for the target revision;
	// the event names why and which.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutPaused: edgeota.io/paused was set.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutResumed: a pause or a halt ended.
	ReasonRolloutResumed = "RolloutResumed"
	// ReasonRolloutCompleted: every node runs the target revision, proven
	// alive.
	ReasonRolloutCompleted = "RolloutCompleted"
	// ReasonSettledUnavailable (Warning): nodes that settled on the target
	// revision have an unavailable pod while Ready; they hold the budget, so
	// the rollout waits for them. The event names them.
	ReasonSettledUnavailable = "SettledNodesUnavailable"
	// ReasonRecordRewritten (Warning): a rollout record was deleted or
	// changed by someone else than the controller, and was written again
	// from what the controller holds.
	ReasonRecordRewritten = "RolloutRecordRewritten"
	// ReasonRecordLost (Warning): the rollout status published more failures
	// for the target revision than the rollout record holds (the record was
	// lost while no controller ran); the rollout stays halted until
	// max-failed is raised or the template changes.
	ReasonRecordLost = "RolloutRecordLost"
	// ReasonFailedStatus: writing the rollout status failed; it is retried.
	ReasonFailedStatus = "FailedUpdateRolloutStatus"
	// ReasonDeletedPod: an out-of-date pod was deleted so that the DaemonSet
	// controller recreates it from the current template.
	ReasonDeletedPod = "SuccessfulDelete"
	// ReasonFailedDelete: deleting an out-of-date pod failed; it is retried.
	ReasonFailedDelete = "FailedDelete"
	// ReasonUpdatedInPlace: an out-of-date pod's images were patched to the
	// target revision's (edgeota.io/update-method InPlaceIfPossible), as
	// OpenKruise names the event.
	ReasonUpdatedInPlace = "SuccessfulUpdatePodInPlace"
	// ReasonFailedUpdateInPlace: patching an out-of-date pod's images
	// failed; it is retried.
	ReasonFailedUpdateInPlace = "FailedUpdatePodInPlace"
	// ReasonInPlaceNotPossible: an in-place DaemonSet's pods move to the
	// target revision by recreation instead, for the reason the event
	// gives (more changed than images, no image changed, a kubelet that
	// reports no observedGeneration, ...); once per reason and revision.
	ReasonInPlaceNotPossible = "InPlaceNotPossible"
	// ReasonPinned: the first node of an architecture settled on the
	// target revision and proved alive (its canary), and the digests it
	// runs were pinned (edgeota.io/pin): the event names them. Once per
	// architecture and revision.
	ReasonPinned = "Pinned"
	// ReasonUnpinnable (Warning): a canary's container reports an imageID
	// that names no registry digest (an image imported onto the node, by
	// ctr import or kind load), so its digest cannot be pinned; the
	// rollout goes on with the template's tag for it. Once per
	// architecture and revision.
	ReasonUnpinnable = "Unpinnable"
	// ReasonDigestMismatch (Warning): a node's new pod runs another digest
	// than its architecture's canary ran (its tag was pushed again): the
	// node failed as it settled, and counts toward max-failed. The event
	// names both digests.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonFailedCondition: writing OTA conditions failed; it is retried.
	ReasonFailedCondition = "FailedUpdateCondition"
	// ReasonPrePullSucceeded: a node pulled the target revision's images.
	ReasonPrePullSucceeded = "PrePullSucceeded"
	// ReasonPrePullFailed: a node could not pull the target revision's
	// images.
	ReasonPrePullFailed = "PrePullFailed"
	// ReasonPrePullRejected: admission refuses the pods of the DaemonSet's
	// pre-download Jobs (a Pod Security level, a quota); the rollout goes on
	// without pre-download. The event names the refusal.
	ReasonPrePullRejected = "PrePullRejected"
	// ReasonFailedPrePullJob: creating or deleting a pre-pull Job failed; it
	// is retried.
	ReasonFailedPrePullJob = "FailedPrePullJob"
	// ReasonHoldEnded: an owner's hold on a pod ended, or reached the
	// DaemonSet's edgeota.io/max-hold-seconds; the node is upgraded in its
	// turn.
	ReasonHoldEnded = "HoldEnded"
	// ReasonInvalidTimeZone, on a Node: its edgeota.io/time-zone names no
	// IANA zone; windowed rollouts pass that node by until it is fixed.
	ReasonInvalidTimeZone = "InvalidTimeZone"
)
