package controller

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

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
	// ReasonInvalidAnnotation: one of edgeota's rollout controls does not
	// parse; nothing is deleted or newly offered until it is fixed.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonRolloutStarted: pods are being moved to a new target revision.
	ReasonRolloutStarted = "RolloutStarted"
	// ReasonRolloutHalted: max-failed upgraded nodes failed; the event names
	// why and which.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutPaused: edgeota.io/paused was set.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutResumed: a pause or halt ended.
	ReasonRolloutResumed = "RolloutResumed"
	// ReasonRolloutCompleted: every node runs the target revision, proven
	// alive.
	ReasonRolloutCompleted = "RolloutCompleted"
	// ReasonFailedStatus: writing the rollout status failed; it is retried.
	ReasonFailedStatus = "FailedUpdateRolloutStatus"
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
	// ReasonHoldEnded: an owner's hold on a pod ended, or reached the
	// DaemonSet's edgeota.io/max-hold-seconds; the node is upgraded in its
	// turn.
	ReasonHoldEnded = "HoldEnded"
	// ReasonInvalidTimeZone, on a Node: its edgeota.io/time-zone names no
	// IANA zone; windowed rollouts pass that node by until it is fixed.
	ReasonInvalidTimeZone = "InvalidTimeZone"
)

// eventMemo remembers, per DaemonSet and reason, the message of the last
// event recorded, so that a condition that holds (a deprecated key, an
// invalid value) is reported when it appears or changes, not on every sync:
// a rollout syncs its DaemonSet several times a second. A restarted
// controller reports each once more.
type eventMemo struct {
	mu   sync.Mutex
	last map[eventMemoKey]string
}

type eventMemoKey struct{ key, reason string }

func newEventMemo() *eventMemo {
	return &eventMemo{last: map[eventMemoKey]string{}}
}

// changed records message as the last one of key and reason, and reports
// whether it differs from the one before.
func (m *eventMemo) changed(key, reason, message string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := eventMemoKey{key, reason}
	if last, ok := m.last[k]; ok && last == message {
		return false
	}
	m.last[k] = message
	return true
}

// clear forgets the reasons of key, so that they are reported again should
// they come back.
func (m *eventMemo) clear(key string, reasons ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range reasons {
		delete(m.last, eventMemoKey{key, r})
	}
}

// forget drops everything about key, when its DaemonSet is deleted.
func (m *eventMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.last {
		if k.key == key {
			delete(m.last, k)
		}
	}
}

// nodeEventOnChange records a Warning on the node unless the last one with
// this reason said the same.
func (c *Controller) nodeEventOnChange(node *corev1.Node, reason, message string) {
	if c.eventMemo.changed("node/"+node.Name, reason, message) {
		c.recorder.Event(node, corev1.EventTypeWarning, reason, message)
	}
}

// eventOnChange records the event unless the last one of the DaemonSet with
// this reason said the same.
func (c *Controller) eventOnChange(ds *appsv1.DaemonSet, key, eventType, reason, message string) {
	if c.eventMemo.changed(key, reason, message) {
		c.recorder.Event(ds, eventType, reason, message)
	}
}
