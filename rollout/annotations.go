package rollout

// Annotations an operator writes on a DaemonSet. The first three are spelt as
// OpenYurt spells them, so that manifests written for its upgrade model work
// unchanged; the rest are edgeota's own. An invalid value gets a Warning
// event naming the annotation and the value (once, not at every sync), and
// nothing of the DaemonSet is deleted or newly offered until it is fixed.
const (
	// StrategyAnnotation opts a DaemonSet in and names its strategy: OTA,
	// AdvancedRollingUpdate or its alias auto, in any case.
	// The DaemonSet's spec.updateStrategy.type must be OnDelete; with
	// another, or an unknown value, the DaemonSet is left alone, with a
	// Warning event that says why.
	StrategyAnnotation = "apps.openyurt.io/update-strategy"
	// LegacyStrategyAnnotation is the key as OpenYurt's original design
	// proposal spelt it: accepted, with a Normal event naming
	// apps.openyurt.io/update-strategy, which wins when both are set.
	LegacyStrategyAnnotation = "apps.openyurt.io/upgrade-strategy"
	// MaxUnavailableAnnotation bounds how many nodes a rollout takes down at
	// once: an integer, or a percentage of the nodes running the DaemonSet
	// (NotReady ones included), rounded up. Absent, 0 or
	// 0%: 10%. Invalid: a Warning event and no deletions. For
	// AdvancedRollingUpdate; for OTA it bounds only the upgrades the
	// controller carries out past a deadline (the owners' own upgrades in
	// flight count against it, and are never blocked by it).
	MaxUnavailableAnnotation = "apps.openyurt.io/max-unavailable"

	// MaxFailedAnnotation is how many nodes may fail for the target revision
	// before the rollout halts: an integer or a percentage of the nodes,
	// rounded up, at least 1. Absent: the max-unavailable budget.
	MaxFailedAnnotation = "edgeota.io/max-failed"
	// ProgressDeadlineAnnotation is how many seconds an upgraded node may
	// stay in flight before it counts as failed. Absent: 600. The node agent
	// reads it too, through the offer on its pods: past it an owner's
	// upgrade shows FAILED.
	ProgressDeadlineAnnotation = "edgeota.io/progress-deadline-seconds"
	// PausedAnnotation: "true" stops deletions (AdvancedRollingUpdate) and
	// new offers (OTA); what is under way goes on. kubectl edgeota rollout
	// pause and resume write and remove it.
	PausedAnnotation = "edgeota.io/paused"
	// RolloutNodeSelectorAnnotation is a label selector in kubectl's syntax
	// (fleet=canary, region in (eu,us),!lab): only pods on matching nodes
	// are upgraded or offered; a node leaving it keeps its pod.
	RolloutNodeSelectorAnnotation = "edgeota.io/rollout-node-selector"
	// PartitionAnnotation is how many of the nodes the rollout may touch (an
	// integer, or a percentage of the nodes the selector lets it touch,
	// rounded up) stay on the old revision; the others are taken in name
	// order, Ready ones only, never reverted. A node the partition lets
	// through whose window is closed, or that its owner holds, waits for
	// its turn, and the next one does not take its place.
	PartitionAnnotation = "edgeota.io/partition"
	// MaintenanceWindowAnnotation holds the DaemonSet's maintenance windows,
	// when its nodes may be upgraded, in each node's local time
	// (Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00; package
	// window reads them). With AdvancedRollingUpdate a node's old pod is
	// deleted only while its window is open; with OTA the window bounds only
	// the upgrades the controller carries out itself.
	MaintenanceWindowAnnotation = "edgeota.io/maintenance-window"
	// MaxHoldAnnotation bounds an owner's hold: seconds from the moment the
	// controller first saw the revision as the target (a time no owner and
	// no rollback can reset), past which a hold is no longer honoured.
	// Absent: 86400, a day; 0: holds are ignored.
	MaxHoldAnnotation = "edgeota.io/max-hold-seconds"
	// UpgradeDeadlineAnnotation is, on an OTA DaemonSet, how many seconds
	// after the controller first offered the target revision to a node it
	// upgrades the node itself if its owner has not: within max-unavailable,
	// the node's window and any hold's limit, under the failure brake.
	// Absent: never, the owners alone upgrade.
	UpgradeDeadlineAnnotation = "edgeota.io/upgrade-deadline-seconds"
	// PreDownloadAnnotation: "true" has the controller pull the target
	// revision's images on nodes before their turn (the same Jobs as the
	// owner's imagepull), and take a node only once its pull succeeded.
	// AdvancedRollingUpdate and OTA. Absent: off.
	PreDownloadAnnotation = "edgeota.io/pre-download"
	// PreDownloadParallelismAnnotation bounds the pulls under way at once
	// for the DaemonSet, and so the controller's pull Jobs (a finished
	// pull's Job holds its place until it is deleted): an integer, or a
	// percentage of its nodes, rounded up. Absent: ten times the
	// max-unavailable budget, a lookahead of ten waves (a pull may last many
	// times as long as a wave).
	PreDownloadParallelismAnnotation = "edgeota.io/pre-download-parallelism"
	// PreDownloadCanaryAnnotation is how many nodes must run the target,
	// settled, before any pre-download starts (an integer; those first nodes
	// upgrade as without pre-download): a bad version does not spend the
	// fleet's bandwidth. Absent: 0.
	PreDownloadCanaryAnnotation = "edgeota.io/pre-download-canary"
	// PreDownloadTimeoutAnnotation is how many seconds a node's pull may
	// take before the controller gives up waiting for it. Absent: 1800. It
	// bounds the owner's imagepull too: a pull error a retry may fix waits
	// for the kubelet's retries up to it.
	PreDownloadTimeoutAnnotation = "edgeota.io/pre-download-timeout-seconds"
	// PreDownloadOnTimeoutAnnotation says what happens to a node whose pull
	// timed out: "take" (default: it is upgraded in its turn, pulling as it
	// starts, as without pre-download) or "skip" (it is passed over until
	// its pull succeeds).
	PreDownloadOnTimeoutAnnotation = "edgeota.io/pre-download-on-timeout"
	// AgentProofAnnotation: "false" has the controller take no answer from
	// node agents as proof of life (it then writes no challenge): each
	// upgraded node is proven by its Lease alone. Absent or "true": the
	// first of the agent's answer and the Lease renewal proves it (an
	// answer can only make a wave shorter, and proves what a Lease does).
	AgentProofAnnotation = "edgeota.io/agent-proof"
	// UpdateMethodAnnotation says how a node's pod moves to the target
	// revision (UpdateMethod): recreated (the default), or its images
	// patched in place when only images changed, as OpenKruise's
	// InPlaceIfPossible does. Both strategies.
	UpdateMethodAnnotation = "edgeota.io/update-method"
	// PinAnnotation: "false" has the controller pass the template's tags on
	// as they are; "true" pins every later node to the digests each
	// architecture's canary ran: patched in place to
	// repository@digest, and, recreated, failed when it runs another
	// digest. The default is "true" with update-method InPlaceIfPossible,
	// "false" otherwise. Both strategies.
	PinAnnotation = "edgeota.io/pin"
	// PinCanariesAnnotation is how many nodes of each architecture
	// (kubernetes.io/arch) the rollout upgrades with the template's tags
	// before the first of them settled and its digests are pinned: the
	// first wave of each architecture is that many nodes at most. 1 by
	// default.
	PinCanariesAnnotation = "edgeota.io/pin-canaries"

	// RolloutStatusAnnotation is written by the controller, never by an
	// operator: its JSON summary of the rollout (a Status), at most once a
	// second, which kubectl edgeota rollout status reads. The only key the
	// controller may write on a DaemonSet.
	RolloutStatusAnnotation = "edgeota.io/rollout-status"
)

// DaemonSetAnnotations are the DaemonSet annotations the controller reads:
// the only ones its cache keeps.
var DaemonSetAnnotations = []string{
	StrategyAnnotation, LegacyStrategyAnnotation, MaxUnavailableAnnotation,
	MaxFailedAnnotation, ProgressDeadlineAnnotation, PausedAnnotation, RolloutNodeSelectorAnnotation,
	PartitionAnnotation, MaintenanceWindowAnnotation, MaxHoldAnnotation, UpgradeDeadlineAnnotation,
	PreDownloadAnnotation, PreDownloadParallelismAnnotation, PreDownloadCanaryAnnotation, PreDownloadTimeoutAnnotation,
	PreDownloadOnTimeoutAnnotation, AgentProofAnnotation, UpdateMethodAnnotation, PinAnnotation, PinCanariesAnnotation,
	RolloutStatusAnnotation,
}

// Annotations on Nodes.
const (
	// NodeTimeZoneAnnotation is the IANA zone the node's maintenance windows
	// are read in, set by the operator (from the fleet's inventory, say),
	// overriding each window's own: vehicles cross zones. A zone
	// that is not known holds that node back alone, with a Warning event on
	// the Node.
	NodeTimeZoneAnnotation = "edgeota.io/time-zone"
)

// NodeAnnotations are the Node annotations the controller reads.
var NodeAnnotations = []string{NodeTimeZoneAnnotation}

// Annotations on DaemonSet pods: the channel between the controller and the
// node agent (package podchannel has their content), which neither an
// operator nor an owner writes by hand. Each is written through the
// pods/status subresource, which a node's identity may write for its own
// pods: so whatever the controller reads there is the node's claim.
const (
	// OfferAnnotation carries the controller's offer (the target revision,
	// its images by container, the progress deadline, when it was first
	// offered, the upgrade deadline, the hold limit), written in the status patch that sets
	// PodNeedUpgrade: a copy, for the agent to show, of what the
	// controller's rollout record holds. The controller never reads it back
	// for a decision; one a node rewrote or deleted is written again.
	OfferAnnotation = "edgeota.io/offer"
	// HoldAnnotation carries the owner's hold (until when, why, who asked),
	// written by the node agent on the owner's Hold; a pod replaced by its
	// upgrade carries none.
	HoldAnnotation = "edgeota.io/hold"
	// ChallengeAnnotation carries the controller's proof-of-life challenge
	// on a pod it judged settled: a fresh random nonce, tied to the pod's UID
	// (pod UID/nonce; package podchannel has the form). A copy for the
	// agent: the controller keeps the nonce it issued and never reads this
	// one back.
	ChallengeAnnotation = "edgeota.io/alive-challenge"
	// AnswerAnnotation carries the node agent's answer: the challenge, echoed
	// on the same pod, written as its node. It proves that the node reached
	// the API server after the controller judged the pod settled.
	AnswerAnnotation = "edgeota.io/alive-answer"
	// UpgradeRequestAnnotation carries the owner's request to upgrade a pod
	// in place, written by the node agent (which may not change a pod's
	// spec) for the controller to carry out: bound to the pod's UID and the
	// revision the owner agreed to (package podchannel has the form).
	UpgradeRequestAnnotation = "edgeota.io/upgrade-request"
)

// PodAnnotations are the pod annotations the controller reads.
var PodAnnotations = []string{OfferAnnotation, HoldAnnotation, ChallengeAnnotation, AnswerAnnotation, UpgradeRequestAnnotation}

// InPlaceLabel, "true" on a DaemonSet's pod template (and so on its pods),
// is the operator's consent that the controller may patch those pods'
// images: the controller's admission policy (charts/edgeota) lets its
// identity patch no pod without it, and the controller's patch may change
// no label but the two revision labels, so it can never add it. Without it
// an in-place DaemonSet's pods are recreated.
const InPlaceLabel = "edgeota.io/in-place"
