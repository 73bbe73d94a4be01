package controller

// Event reasons recorded on DaemonSets. They are exported so that tools and
// tests can match them without copying strings.
const (
	// ReasonDeprecatedAnnotation: the DaemonSet opts in with the spelling of
	// the original design proposal; the event names the canonical key.
	ReasonDeprecatedAnnotation = "DeprecatedAnnotation"
	// ReasonUnsupportedUpdateStrategy: the DaemonSet opts in but does not use
	// OnDelete, so the native controller owns its rollout and edgeota keeps out.
	ReasonUnsupportedUpdateStrategy = "UnsupportedUpdateStrategy"
	// ReasonInvalidStrategy: the opt-in annotation names no known strategy.
	ReasonInvalidStrategy = "InvalidUpdateStrategy"
	// ReasonInvalidMaxUnavailable: max-unavailable does not parse; nothing is
	// deleted until it is fixed.
	ReasonInvalidMaxUnavailable = "InvalidMaxUnavailable"
	// ReasonDeletedPod: an out-of-date pod was deleted so that the DaemonSet
	// controller recreates it from the current template.
	ReasonDeletedPod = "SuccessfulDelete"
	// ReasonFailedDelete: deleting an out-of-date pod failed; it is retried.
	ReasonFailedDelete = "FailedDelete"
	// ReasonFailedCondition: writing OTA conditions failed; it is retried.
	ReasonFailedCondition = "FailedUpdateCondition"
	// ReasonPrePullSucceeded: a node pulled the target revision's images.
	ReasonPrePullSucceeded = "PrePullSucceeded"
	// ReasonPrePullFailed: a node could not pull the target revision's images.
	ReasonPrePullFailed = "PrePullFailed"
	// ReasonFailedPrePullJob: creating or deleting a pre-pull Job failed; it
	// is retried.
	ReasonFailedPrePullJob = "FailedPrePullJob"
)
