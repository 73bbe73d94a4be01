package server

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/appreason"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
)

// revisionLabel is the label the DaemonSet controller puts on each pod with
// the hash of the ControllerRevision it was created from.
const revisionLabel = "controller-revision-hash"

// appKey names an app: a DaemonSet, by namespace and name.
type appKey struct{ namespace, daemonSet string }

func (k appKey) less(o appKey) int {
	return cmp.Or(cmp.Compare(k.namespace, o.namespace), cmp.Compare(k.daemonSet, o.daemonSet))
}

// appMemory is what the agent remembers of an app between two looks at its
// pods: what it takes to follow the app across the replacement of its pod,
// which no single look at the cache shows.
type appMemory struct {
	// owner is the DaemonSet's UID: a DaemonSet deleted and recreated under
	// the same name is another app.
	owner types.UID
	// ota is set once any of the app's pods carried PodNeedUpgrade: the
	// controller marks every pod of an OTA DaemonSet, and a new pod is
	// marked only a moment after it is created.
	ota bool
	// pod, podName and revision are the current pod seen last, and its
	// revision; offered is the newer revision it was offered, if any, with
	// the offer's progress deadline.
	pod      types.UID
	podName  string
	revision string
	offered  targetInfo
	// generation, images and containers are that pod's metadata.generation,
	// its containers' images (by name, from its spec) and their IDs
	// (health.ContainerID, from its status): what an upgrade in place,
	// which keeps the pod, is told and judged by.
	generation int64
	images     map[string]string
	containers map[string]uint64
	// upgrade follows a replacement of the app's pod; nil when none is under
	// way or shown.
	upgrade *replacement
	// phase, reason and message are the last answer; since is when the
	// phase last changed.
	phase           edgeotav1.UpgradePhase
	reason, message string
	since           time.Time
}

// replacement is an upgrade in flight: the old pod was seen deleted (or a pod
// of another revision took its place), and the new one is judged by
// health.Judge from since on; or the pod was seen patched to another
// revision (inPlace), and it is judged by health.JudgeInPlace.
type replacement struct {
	old     types.UID // the replaced pod (in place: the pod itself)
	oldName string    // and its name
	target  string    // the revision it was replaced for, "" if unknown
	// deadline is the progress deadline the offer of that revision carried
	// (the DaemonSet's); zero leaves the agent's.
	deadline time.Duration
	since    time.Time // when the agent saw the replacement start
	settled  bool      // the new pod has been available: UPGRADED
	// inPlace is, for an upgrade in place, what the patched pod is judged
	// against: the generation the patch made, the containers before it.
	inPlace *health.InPlace
}

// appInput is one app's pods as the cache holds them.
type appInput struct {
	key   appKey
	owner types.UID
	// current is the newest pod not being deleted, nil if none.
	current *corev1.Pod
	// deleting is the newest pod being deleted, nil if none.
	deleting *corev1.Pod
}

// groupApps sorts the node's pods into apps: every pod controlled by a
// DaemonSet belongs to the app named after its owner, whatever the pod's own
// name. Pods controlled by anything else are not apps.
func groupApps(pods []*corev1.Pod) map[appKey]*appInput {
	apps := map[appKey]*appInput{}
	for _, pod := range pods {
		owner := metav1.GetControllerOfNoCopy(pod)
		if owner == nil || ownerGroupKind(owner) != daemonSetKind {
			continue
		}
		key := appKey{pod.Namespace, owner.Name}
		in := apps[key]
		if in == nil {
			in = &appInput{key: key, owner: owner.UID}
			apps[key] = in
		}
		slot := &in.current
		if pod.DeletionTimestamp != nil {
			slot = &in.deleting
		}
		if *slot == nil || newer(pod, *slot) {
			*slot = pod
		}
	}
	return apps
}

// newer reports whether a was created after b (by name when created in the
// same second).
func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// phaseRule evaluates the app's state into its phase.
type phaseRule struct {
	// deadline is how long a new pod may take to become available.
	deadline time.Duration
	// queued returns the owner's actions queued for the pod, pre-pull
	// first; nil when queuing is not available.
	queued func(namespace, pod string) []*edgeotav1.QueuedAction
}

// appState is one app's answer and what can change it by the clock alone.
type appState struct {
	app *edgeotav1.App
	// recheck is how long until the phase may change with no new event
	// (the upgrade deadline); zero for never.
	recheck time.Duration
}

// evaluate computes the app's entry from its pods and what the agent
// remembers, and updates the memory. in.current and in.deleting may both be
// nil (the gap between the old pod's deletion and the new pod's creation): the
// memory alone then answers, as long as an upgrade is under way.
//
// The phase is the first that holds of FAILED > UPGRADING > QUEUED >
// PULL_FAILED > PULL_REQUESTED > PULLED > UPGRADE_AVAILABLE > UPGRADED >
// UP_TO_DATE; an app whose pods never carried PodNeedUpgrade is MANAGED.
func (r phaseRule) evaluate(in *appInput, mem *appMemory, now time.Time) appState {
	if mem.owner != in.owner {
		*mem = appMemory{owner: in.owner}
	}
	pod := in.current
	if pod == nil {
		pod = in.deleting
	}
	app := &edgeotav1.App{Namespace: in.key.namespace, DaemonSet: in.key.daemonSet}
	var need *corev1.PodCondition
	var holdEnds time.Duration
	if pod != nil {
		app.Pod = pod.Name
		app.CurrentRevision = pod.Labels[revisionLabel]
		app.CurrentImages = podchannel.ImagesOf(&pod.Spec)
		need = podcondition.Get(&pod.Status, podcondition.NeedUpgrade)
		mem.ota = mem.ota || need != nil
		holdEnds = showChannel(app, pod, need, now)
	}
	r.follow(in, mem, need, now)

	var state appState
	var ph phase
	switch {
	case !mem.ota:
		// The cluster upgrades it.
		ph = phase{phase: edgeotav1.UpgradePhase_UPGRADE_PHASE_MANAGED}
		if pod != nil {
			ph.since = pod.CreationTimestamp.Time
		}
	default:
		ph, state.recheck = r.otaPhase(in, mem, need, app, now)
	}
	if ph.phase != mem.phase {
		// On the first look the pod's own record says when the phase began,
		// if it can; any later change happened when the agent saw it.
		mem.since = now
		if mem.phase == edgeotav1.UpgradePhase_UPGRADE_PHASE_UNSPECIFIED && !ph.since.IsZero() {
			mem.since = ph.since
		}
	}
	mem.phase, mem.reason, mem.message = ph.phase, ph.reason, ph.message
	app.Phase, app.Reason, app.Message = ph.phase, ph.reason, ph.message
	app.LastTransitionTime = timestamppb.New(mem.since)
	if holdEnds > 0 && (state.recheck == 0 || holdEnds < state.recheck) {
		// The hold stops showing when it ends.
		state.recheck = holdEnds
	}
	state.app = app
	return state
}

// follow updates the memory's view of a replacement of the app's pod.
//
// Assumptions: the agent sees the pods of its node through an informer, so
// it may miss the old pod's deletion (or both the deletion and the creation,
// while cut off), but sees the pods that exist now. Invariants: a replacement
// starts when the pod seen last is being deleted or gone, or when a pod of
// another revision has taken its place; it ends when a new target is offered
// after the new pod settled (the app's next change), or when another
// replacement starts.
func (r phaseRule) follow(in *appInput, mem *appMemory, need *corev1.PodCondition, now time.Time) {
	var target targetInfo
	if in.current != nil {
		target = offeredTarget(in.current, need)
	}
	switch {
	case in.deleting != nil && (mem.upgrade == nil || mem.upgrade.old != in.deleting.UID):
		// The old pod is being deleted: an upgrade starts now, for the
		// revision it was offered.
		old := offeredTarget(in.deleting, podcondition.Get(&in.deleting.Status, podcondition.NeedUpgrade))
		mem.upgrade = &replacement{old: in.deleting.UID, oldName: in.deleting.Name, target: old.revision, deadline: old.deadline, since: now}
	case in.current != nil && mem.pod != "" && in.current.UID != mem.pod &&
		(mem.upgrade == nil || mem.upgrade.old != mem.pod):
		// A new pod replaced the one seen last, its deletion unseen: the
		// last offer seen says how long it may take.
		mem.upgrade = &replacement{old: mem.pod, oldName: mem.podName, deadline: mem.offered.deadline, since: in.current.CreationTimestamp.Time}
		if in.current.Labels[revisionLabel] == mem.revision {
			// The same revision: a restart, not an upgrade.
			mem.upgrade = nil
		}
	case in.current == nil && in.deleting == nil && mem.pod != "" && mem.offered.revision != "" &&
		(mem.upgrade == nil || mem.upgrade.old != mem.pod):
		// The pod seen last is gone, its deletion unseen, while a newer
		// version was offered: an upgrade, whose new pod is yet to come.
		mem.upgrade = &replacement{old: mem.pod, oldName: mem.podName, target: mem.offered.revision, deadline: mem.offered.deadline, since: now}
	case in.current != nil && in.current.UID == mem.pod && in.current.Labels[revisionLabel] != mem.revision &&
		in.current.Generation > mem.generation && mem.generation > 0:
		// The pod seen last was patched to another revision: an upgrade in
		// place (a node cannot change a pod's labels or spec, so it is the
		// controller's), judged against the pod as seen before the patch.
		up := &health.InPlace{Generation: in.current.Generation, Before: mem.containers}
		for name, image := range podchannel.ImagesOf(&in.current.Spec) {
			if mem.images[name] != image {
				up.Changed = append(up.Changed, name)
			}
		}
		slices.Sort(up.Changed)
		mem.upgrade = &replacement{old: mem.pod, oldName: mem.podName, target: in.current.Labels[revisionLabel],
			deadline: mem.offered.deadline, since: now, inPlace: up}
	case mem.upgrade != nil && mem.upgrade.settled && target.revision != "":
		// A newer version is offered after the upgrade: the next change.
		mem.upgrade = nil
	}
	if in.current != nil {
		mem.pod, mem.podName, mem.revision, mem.offered = in.current.UID, in.current.Name, in.current.Labels[revisionLabel], target
		mem.generation, mem.images = in.current.Generation, podchannel.ImagesOf(&in.current.Spec)
		mem.containers = containerIDs(in.current)
	}
}

// containerIDs are the pod's containers' IDs (health.ContainerID), by name.
func containerIDs(pod *corev1.Pod) map[string]uint64 {
	ids := make(map[string]uint64, len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses))
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range statuses {
			ids[c.Name] = health.ContainerID(c.ContainerID)
		}
	}
	return ids
}

// phase is a phase with its reason, message, and when it began as the pod's
// own record says (zero: unknown).
type phase struct {
	phase           edgeotav1.UpgradePhase
	reason, message string
	since           time.Time
}

// otaPhase is the phase of an OTA app, with how long until the clock alone
// can change it.
func (r phaseRule) otaPhase(in *appInput, mem *appMemory, need *corev1.PodCondition, app *edgeotav1.App, now time.Time) (phase, time.Duration) {
	pod := in.current
	var (
		verdict  health.Verdict
		inPlace  = pod != nil && mem.upgrade != nil && mem.upgrade.inPlace != nil && pod.UID == mem.upgrade.old
		newPod   = pod != nil && mem.upgrade != nil && pod.UID != mem.upgrade.old || inPlace
		deadline = r.deadline
	)
	if mem.upgrade != nil && mem.upgrade.deadline > 0 {
		// The DaemonSet's, as the offer the upgrade was made for carried it.
		deadline = mem.upgrade.deadline
	}
	switch {
	case inPlace && !mem.upgrade.settled:
		// The pod upgraded in place: the one rule for it, from the patch,
		// by what the kubelet reports (its observedGeneration, the new
		// containers), never by the revision label or the images the
		// patch wrote.
		facts := health.PodOf(pod, nil)
		verdict = health.JudgeInPlace(&facts, mem.upgrade.inPlace, mem.upgrade.since, 0, deadline, now)
		mem.upgrade.settled = verdict.State == health.Settled
	case newPod && !mem.upgrade.settled:
		// The upgrade's new pod: the one rule, with the deadline.
		facts := health.PodOf(pod, nil)
		verdict = health.Judge(&facts, mem.upgrade.since, 0, deadline, now)
		mem.upgrade.settled = verdict.State == health.Settled
	case pod == nil && mem.upgrade != nil && !mem.upgrade.settled:
		// The old pod is gone or going and its replacement is not on the
		// node yet: a pod that does not exist has no status, so the one rule
		// judges it on nothing, progressing until the deadline and then
		// ProgressDeadlineExceeded.
		verdict = replacementPending(in, mem.upgrade, health.Judge(&health.Pod{}, mem.upgrade.since, 0, deadline, now))
	case pod != nil:
		// Any other pod fails only at once: it has no deadline to meet.
		facts := health.PodOf(pod, nil)
		verdict = health.Judge(&facts, pod.CreationTimestamp.Time, 0, 0, now)
	}

	var offered string
	if pod != nil {
		target := offeredTarget(pod, need)
		offered = target.revision
		app.TargetRevision, app.TargetImages = target.revision, target.images
	}
	var pull *corev1.PodCondition
	if offered != "" {
		if c := podcondition.Get(&pod.Status, podcondition.ImageReady); c != nil && podcondition.Names(c.Message, offered) {
			pull = c
		}
	}
	if r.queued != nil && pod != nil {
		app.QueuedActions = r.queued(pod.Namespace, pod.Name)
	}
	// Once its new pod settled (or its new containers), an upgrade is
	// over: a restart later (the kill of an upgrade in place leaves one
	// behind, however Ready the pod stays) is no upgrade.
	upgrading := in.deleting != nil || pod == nil || newPod && !mem.upgrade.settled && verdict.State == health.Progressing
	request := pendingRequest(pod, need, offered)

	switch {
	case verdict.State == health.Failed:
		// The new version does not run, in the container's own words.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED, verdict.Reason, verdict.Message, time.Time{}}, 0
	case upgrading:
		// The old pod is gone or going (or patched in place); the new
		// one is not available yet.
		if inPlace && verdict.Reason == "" {
			verdict.Reason, verdict.Message = appreason.UpdatingInPlace, "the pod's images were patched; the kubelet restarts its changed containers"
		}
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING, verdict.Reason, verdict.Message, time.Time{}}, verdict.Recheck
	case request.refused != "":
		// The owner's request for an upgrade in place was not carried out:
		// the rollout halted, or moved on to another revision.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED, appreason.UpgradeRequestRefused, request.refused, time.Time{}}, 0
	case request.pending:
		// The owner asked; the controller patches the pod.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING, appreason.UpgradeRequested,
			fmt.Sprintf("the upgrade in place to revision %s was requested; the controller patches the pod", offered), time.Time{}}, 0
	case len(queuedUpgrades(app.QueuedActions)) > 0:
		// The owner's upgrade or pre-pull waits for the API server.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_QUEUED, reasonQueued, queuedMessage(queuedUpgrades(app.QueuedActions)), time.Time{}}, 0
	case pull != nil && pull.Status != corev1.ConditionTrue && pull.Reason == podcondition.ReasonPullImageFail:
		// The pre-pull failed; the message carries the cause.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_FAILED, pull.Reason, pull.Message, pull.LastTransitionTime.Time}, 0
	case pull != nil && pull.Status != corev1.ConditionTrue:
		// Asked for (PullImageRequested), or under way.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_REQUESTED, pull.Reason, pull.Message, pull.LastTransitionTime.Time}, 0
	case pull != nil:
		// The target's images are on the node.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_PULLED, pull.Reason, pull.Message, pull.LastTransitionTime.Time}, 0
	case offered != "":
		// A newer version waits for the owner.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE, need.Reason, need.Message, need.LastTransitionTime.Time}, 0
	case newPod && mem.upgrade.settled:
		// The new pod is available (or the patched one's new containers
		// run): shown until the app's next change.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED, "", "", time.Time{}}, 0
	default:
		// Nothing newer is offered.
		return phase{edgeotav1.UpgradePhase_UPGRADE_PHASE_UP_TO_DATE, "", "", pod.CreationTimestamp.Time}, 0
	}
}

// ReasonReplacementPending is an UPGRADING app's reason while its old pod is
// gone or terminating and no replacement is on the node yet.
const ReasonReplacementPending = "ReplacementPending"

// requestState is where the owner's request to upgrade a pod in place
// stands, as its pod shows it.
type requestState struct {
	// pending: the pod carries the request for the revision offered, and
	// is not patched yet.
	pending bool
	// refused says why a request the pod carries will not be carried out:
	// the offer was withdrawn (the rollout halted), or another revision is
	// offered now; "" when not refused.
	refused string
}

// pendingRequest reads the owner's request on the pod (for its UID), given
// its PodNeedUpgrade condition (need) and the revision it is offered
// (offered, "" if none). A request the pod has carried out (patched to its
// revision) or that nothing waits for any more (the pod up to date, no
// reason given) says nothing.
func pendingRequest(pod *corev1.Pod, need *corev1.PodCondition, offered string) requestState {
	if pod == nil {
		return requestState{}
	}
	r, err := podchannel.RequestOf(pod)
	if err != nil || r == nil || r.UID != pod.UID || pod.Labels[revisionLabel] == r.Revision {
		return requestState{}
	}
	switch {
	case offered == r.Revision:
		return requestState{pending: true}
	case offered != "":
		return requestState{refused: fmt.Sprintf("the upgrade in place to revision %s requested at %s was not carried out: revision %s is offered now; ask again to agree to it",
			r.Revision, r.At.UTC().Format(time.RFC3339), offered)}
	case need != nil && need.Reason != "":
		return requestState{refused: fmt.Sprintf("the upgrade in place to revision %s requested at %s was not carried out: %s: %s",
			r.Revision, r.At.UTC().Format(time.RFC3339), need.Reason, need.Message)}
	}
	return requestState{}
}

// replacementPending words health.Judge's verdict on an app with no current
// pod: the replacement is pending until the deadline, and has failed to
// appear after it.
func replacementPending(in *appInput, up *replacement, v health.Verdict) health.Verdict {
	old := "is gone"
	if in.deleting != nil {
		old = "is terminating"
	}
	if v.State == health.Failed {
		v.Message = fmt.Sprintf("pod %s %s and no replacement appeared on this node: %s", up.oldName, old, v.Message)
		return v
	}
	v.Reason = ReasonReplacementPending
	v.Message = fmt.Sprintf("pod %s %s; its replacement is not on this node yet", up.oldName, old)
	return v
}

// reasonQueued is a QUEUED app's reason.
const reasonQueued = "QueuedUntilReachable"

// queuedUpgrades are the queued actions that make an app QUEUED: a queued
// pre-pull or upgrade. A queued hold or release changes no phase: it is
// about when the cluster upgrades, not the owner.
func queuedUpgrades(actions []*edgeotav1.QueuedAction) []*edgeotav1.QueuedAction {
	return slices.DeleteFunc(slices.Clone(actions), func(a *edgeotav1.QueuedAction) bool {
		return a.GetAction() != ActionImagePull && a.GetAction() != ActionUpgrade
	})
}

// queuedMessage says what waits, e.g. "imagepull, upgrade queued until the
// API server is reachable".
func queuedMessage(actions []*edgeotav1.QueuedAction) string {
	names := make([]string, 0, len(actions))
	for _, a := range actions {
		names = append(names, a.GetAction())
	}
	return strings.Join(names, ", ") + " queued until the API server is reachable"
}

// sortApps orders apps by namespace and DaemonSet name.
func sortApps(apps []*edgeotav1.App) {
	slices.SortFunc(apps, func(a, b *edgeotav1.App) int {
		return appKey{a.Namespace, a.DaemonSet}.less(appKey{b.Namespace, b.DaemonSet})
	})
}
