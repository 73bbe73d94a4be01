package rollout

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ShownNodes is how many nodes the rollout status names in a list (failed
// nodes, settled nodes that are down); past it, only their count is kept: the
// status is for people, and the rollout record holds every failure.
const ShownNodes = 10

// Status is the JSON in RolloutStatusAnnotation: where the rollout of the
// target revision stands, for `kubectl describe ds` and `kubectl edgeota
// rollout status`. The controller writes it from its decision and never reads
// it back for one, but for the count of failures it published (a restarted
// controller never counts fewer).
type Status struct {
	// Revision is the target ControllerRevision's number; Hash its hash. A
	// rollback reuses a hash under a new number, and starts a new record.
	Revision int64  `json:"revision"`
	Hash     string `json:"hash"`
	// Updated counts the nodes whose pod runs the target revision and has
	// settled (available, and its node proven alive since).
	Updated int `json:"updated"`
	// Total counts the nodes running the DaemonSet.
	Total int `json:"total"`
	// InFlight counts the nodes being upgraded: old pod deleted, new pod not
	// settled yet, or not proven alive yet.
	InFlight int `json:"inFlight"`
	// Skipped counts NotReady nodes that are not in flight: untouched, or
	// settled before they went offline. They are upgraded when they return.
	Skipped int `json:"skipped"`
	// Failed are the nodes that failed for this revision.
	Failed FailedNodes `json:"failed"`
	// HeldBack counts the nodes the operator's controls keep on the old
	// revision (node selector, partition, pause).
	HeldBack int `json:"heldBack"`
	// Paused is edgeota.io/paused.
	Paused bool `json:"paused"`
	// Halted: max-failed nodes failed, nothing more is deleted or offered.
	Halted bool `json:"halted"`
	// Reason says why the rollout is halted, paused or waiting, if it is.
	Reason string `json:"reason,omitempty"`
	// Strategy is the DaemonSet's strategy: OTA or AdvancedRollingUpdate.
	Strategy Strategy `json:"strategy,omitempty"`
	// Held counts the nodes whose owner holds the upgrade (edgeota.io/hold
	// on the pod, within edgeota.io/max-hold-seconds), with when the last
	// hold ends; absent when none.
	Held *TimedNodes `json:"held,omitempty"`
	// WaitingForWindow counts the nodes the rollout would take now but for
	// their maintenance window, closed at their local time, with when the
	// next opens; absent when none.
	WaitingForWindow *TimedNodes `json:"waitingForWindow,omitempty"`
	// Offered counts, for OTA, the nodes holding an offer their owner has
	// not taken yet, with the earliest upgrade deadline among them; absent
	// when none.
	Offered *TimedNodes `json:"offered,omitempty"`
	// SettledUnavailable are nodes that settled on the target revision (so
	// they never count as failed) whose pod is unavailable now while the
	// node is Ready: a reboot, a restart, a crash after settling. They hold
	// the budget like any Ready node with an unavailable pod; absent when
	// none.
	SettledUnavailable *NodeList `json:"settledUnavailable,omitempty"`
	// Pulls counts the pre-downloads of the target's images
	// (edgeota.io/pre-download); absent when none was started.
	Pulls *Pulls `json:"pulls,omitempty"`
	// Proven counts the updated nodes by what proved them alive after
	// their pod settled: an operator sees whether the node agents' answers
	// carry the rollout, or whether it waits for heartbeats (no agent, an
	// agent that cannot write, edgeota.io/agent-proof "false"); absent
	// before the first node settles.
	Proven *ProvenNodes `json:"proven,omitempty"`
	// UpdateMethod is the DaemonSet's edgeota.io/update-method when it
	// asks for in-place upgrades (InPlaceIfPossible); absent for Recreate.
	UpdateMethod UpdateMethod `json:"updateMethod,omitempty"`
	// Recreate counts, when in-place upgrades are asked for, the nodes
	// still to upgrade whose pod is recreated instead, with why; absent
	// when none.
	Recreate *Recreated `json:"recreate,omitempty"`
	// Pins are, with pinning on (edgeota.io/pin), what each
	// architecture's canary ran, by kubernetes.io/arch ("" for nodes
	// without the label): later nodes are patched to those digests, and
	// fail when recreated onto others. Absent before the first canary
	// settled.
	Pins map[string]Pin `json:"pins,omitempty"`
}

// Pin is one architecture's pin as the status shows it.
type Pin struct {
	// Canary is the node whose run was pinned.
	Canary string `json:"canary"`
	// Images are the pinned containers' images, repository@digest, by
	// container name.
	Images map[string]string `json:"images,omitempty"`
	// Unpinnable says, by container name, why a container's digest could
	// not be pinned (an image with no registry digest): it goes on with
	// the template's tag.
	Unpinnable map[string]string `json:"unpinnable,omitempty"`
}

// Recreated counts the nodes of an in-place rollout whose pod is
// recreated instead, by why: the reason names the revision the pods run
// when it is about the revision (more changed than images), or the node
// when it is about the node (a kubelet that reports no observedGeneration).
type Recreated struct {
	// Count is how many nodes.
	Count int `json:"count"`
	// Reasons counts them by why.
	Reasons map[string]int `json:"reasons,omitempty"`
}

// Pulls counts where a rollout's pre-downloads stand, over the nodes not
// upgraded yet.
type Pulls struct {
	// InFlight counts the pulls under way.
	InFlight int `json:"inFlight"`
	// Done counts the nodes whose images are on them, waiting for their turn.
	Done int `json:"done"`
	// Failed counts the nodes whose pull failed for good: failures of the
	// rollout that lost no pod.
	Failed int `json:"failed"`
	// TimedOut counts the nodes whose pull outlasted
	// edgeota.io/pre-download-timeout-seconds.
	TimedOut int `json:"timedOut,omitempty"`
	// Waiting counts the nodes the rollout would take now but for their
	// download.
	Waiting int `json:"waiting,omitempty"`
}

// ProvenNodes counts updated nodes by their proof of life. Nodes that an
// older controller recorded settled, without saying how, count in neither.
type ProvenNodes struct {
	// Answer counts the nodes proven by their agent's answer to the
	// controller's challenge (edgeota.io/alive-answer).
	Answer int `json:"answer"`
	// Heartbeat counts the nodes proven by a heartbeat: their Lease's
	// renewal, or their Node status without Leases.
	Heartbeat int `json:"heartbeat"`
}

// Complete reports whether every node runs the target revision, proven
// alive, and none failed: when RolloutCompleted is recorded, and when
// `kubectl edgeota rollout status` exits 0.
func (s *Status) Complete() bool {
	return s.Updated == s.Total && s.InFlight == 0 && s.Failed.Count == 0
}

// FailedNodes is a rollout's failures as people read them; the rollout
// record holds every one of them, however many.
type FailedNodes struct {
	// Count is how many nodes failed.
	Count int `json:"count"`
	// Nodes names the first ShownNodes of them, in name order.
	Nodes []string `json:"nodes,omitempty"`
	// Reasons says why each node in Nodes failed.
	Reasons map[string]string `json:"reasons,omitempty"`
	// Lost counts failures the controller published once but no longer
	// finds in the rollout record (deleted while no controller ran): they
	// are counted, but cannot be named.
	Lost int `json:"lost,omitempty"`
}

// NodeList counts nodes, naming the first ShownNodes in name order.
type NodeList struct {
	// Count is how many nodes.
	Count int `json:"count"`
	// Nodes names the first ShownNodes of them.
	Nodes []string `json:"nodes,omitempty"`
}

// TimedNodes counts nodes in a state that ends by the clock, with the time
// that matters to people: when the next window opens, when the last hold
// ends, when the first deadline falls.
type TimedNodes struct {
	// Count is how many nodes are in the state.
	Count int `json:"count"`
	// At is the time of the state's next change (see each use).
	At *metav1.Time `json:"at,omitempty"`
}
