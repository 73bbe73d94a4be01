package rollout

// HaltReason says, in one word a dashboard, an alert or a script can match,
// why a rollout is halted: the kind of failure that took it to max-failed.
// Status.Reason is the same halt in words for people, with counts that a
// label must never carry.
type HaltReason string

// The reasons of a halt, from the most serious down: a rollout halted by
// failures of several kinds takes the first that applies, so that a version
// that broke a node is never reported as a registry problem.
const (
	// HaltNodesFailed: nodes failed after their old pod was deleted or their
	// owner upgraded (a new pod that crash-loops or is never available, a
	// node that left Ready after the upgrade, a replacement never created or
	// scheduled): the version may be what broke them.
	HaltNodesFailed HaltReason = "nodes_failed"
	// HaltPullsFailed: only pre-downloads failed (edgeota.io/pre-download):
	// the nodes' images could not be pulled, and no pod was lost.
	HaltPullsFailed HaltReason = "pulls_failed"
	// HaltRecordLost: only failures the rollout status once published and
	// the rollout record no longer holds (deleted while no controller ran,
	// RolloutRecordLost): they are counted, but cannot be named.
	HaltRecordLost HaltReason = "record_lost"
)

// HaltReasons are every HaltReason, in the order above: a metric exports
// each, so that a query for any of them always finds its series.
var HaltReasons = []HaltReason{HaltNodesFailed, HaltPullsFailed, HaltRecordLost}

// HaltReason is why the rollout is halted, "" when it is not. It reads only
// the status, so that any reader of the annotation (the plugin, a script)
// gets the controller's answer: the failed nodes less those whose pull
// failed and those lost from the record are failures of the upgrade itself.
func (s *Status) HaltReason() HaltReason {
	if !s.Halted {
		return ""
	}
	pulls := 0
	if s.Pulls != nil {
		pulls = s.Pulls.Failed
	}
	switch {
	case s.Failed.Count-s.Failed.Lost-pulls > 0:
		return HaltNodesFailed
	case pulls > 0:
		return HaltPullsFailed
	case s.Failed.Lost > 0:
		return HaltRecordLost
	}
	// Halted with no failure counted: max-failed cannot be below one, so
	// only a status written by hand gets here; the version is the suspect.
	return HaltNodesFailed
}
