package decision

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// State is where one node stands in the rollout of the target revision.
type State uint8

const (
	// StateOld: Ready, running an available old pod; taken within budget.
	StateOld State = iota
	// StateOldDown: Ready, running an old pod that is not available. Its
	// node counts against the budget; replacing the pod frees none.
	StateOldDown
	// StateInFlight: being upgraded, from the old pod's deletion until the
	// new pod settled and the node proved alive since.
	StateInFlight
	// StateSettled: settled on the target revision, Ready, its pod
	// available.
	StateSettled
	// StateSettledDown: settled on the target revision, Ready, its pod
	// unavailable now (a restart, a power cycle, a crash after settling):
	// never a failure, but it holds the budget as any Ready node with an
	// unavailable pod does.
	StateSettledDown
	// StateFailed: failed for the target revision; it stands.
	StateFailed
	// StateSkipped: NotReady and not in flight (untouched, or offline after
	// settling); upgraded when it returns.
	StateSkipped
	// StatePullFailed: the node's pull of the target's images failed for
	// good before its old pod was touched: a failure of the rollout that
	// lost no pod and holds no budget; never taken for this revision.
	StatePullFailed
	// StateGone: not a node of the DaemonSet (no pod, nothing in flight);
	// never kept in a view.
	StateGone

	numStates = int(StateGone)
)

// String names the state as the status and logs do.
func (s State) String() string {
	names := [...]string{"old", "oldDown", "inFlight", "settled", "settledDown", "failed", "skipped", "pullFailed", "gone"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// verdict is a node's judgement. A Rollout holds one per node and
// DaemonSet, so what few verdicts carry (a failure's reason, the pod whose
// proof of life a node awaits, the proof that settled it) is behind rare,
// and the rest is times and flags: 64 bytes instead of 120.
type verdict struct {
	// at is when the verdict changes by the clock alone, always after the
	// judgement; zero when only an event can change it. The verdict's times
	// are unixtime.Times: a time.Time is three times the size.
	at unixtime.Time
	// proofAfter: see awaitsProof.
	proofAfter unixtime.Time
	// What the clock holds a candidate by: its owner's hold stands (until
	// holdEnd), its node's window is closed (until opens), its node names
	// an invalid zone, or, for OTA, its offer's deadline has not passed
	// (only then may the controller upgrade it).
	holdEnd, opens unixtime.Time
	// holdUntil is the owner's hold as the pod carries it, for the event
	// that says it ended or reached its limit.
	holdUntil unixtime.Time
	// rare holds the verdict's strings; nil for most verdicts.
	rare  *rareVerdict
	state State
	// awaitsProof: the new pod settled, the node has not proven since that
	// it still reaches the API server; a heartbeat sent after proofAfter,
	// or an answer to a challenge about pod proofPod, will.
	awaitsProof bool
	// taking: this process deleted or patched the node's old pod, which
	// the cache still shows as it was.
	taking bool
	// updated: a skipped node that runs the target (settled, then went
	// offline).
	updated bool
	// See holdEnd and opens.
	held, windowClosed, zoneInvalid, notDue bool
	// The node's pre-download: its images are on the node (pulled), a pull
	// is under way (pulling), or it timed out (pullTimedOut); pullJob: the
	// controller's Job for it is still there.
	pulled, pulling, pullTimedOut, pullJob bool
	// tagPull is what the pin makes of a done pull that named images by
	// tag.
	tagPull TagPull
	// failedNow: this judgement failed the node (not an earlier one).
	failedNow bool
	// requested: an OTA node whose owner asked for the upgrade in place
	// offered (podchannel.UpgradeRequest naming the target).
	requested bool
}

// rareVerdict is what few verdicts carry.
type rareVerdict struct {
	// why a node failed.
	why string
	// proofPod: see verdict.awaitsProof; proofGeneration is its
	// metadata.generation, whose challenge an answer must echo (a pod
	// upgraded in place is challenged again at each upgrade).
	proofPod        types.UID
	proofGeneration int64
	// proven: this very judgement settled the node, by this proof (its
	// Rollout reports it, NoticeProven); empty otherwise.
	proven Proof
}

// failedVerdict is the verdict of a node failed (StateFailed) or whose pull
// failed (StatePullFailed) for why.
func failedVerdict(state State, why string) verdict {
	return verdict{state: state, rare: &rareVerdict{why: why}}
}

// why says why a failed node failed.
func (v *verdict) why() string {
	if v.rare == nil {
		return ""
	}
	return v.rare.why
}

// proofPod is the pod whose proof of life the node awaits.
func (v *verdict) proofPod() types.UID {
	if v.rare == nil {
		return ""
	}
	return v.rare.proofPod
}

// proofGeneration is the generation of the pod whose proof of life the node
// awaits.
func (v *verdict) proofGeneration() int64 {
	if v.rare == nil {
		return 0
	}
	return v.rare.proofGeneration
}

// proven is the proof that settled the node in this very judgement.
func (v *verdict) proven() Proof {
	if v.rare == nil {
		return ""
	}
	return v.rare.proven
}

// takeable reports whether the rollout may replace the node's old pod now,
// as far as the clock is concerned.
func (v verdict) takeable() bool {
	return !v.held && !v.windowClosed && !v.zoneInvalid && !v.notDue
}

// nodePods is what a judgement needs of one node's pods: its one live
// up-to-date and one live out-of-date pod, and the newest terminating one.
type nodePods struct {
	newPod, oldPod *Pod
	terminating    *Pod
	several        bool // more than one live pod of a kind
}

// groupPods sorts one node's pods. Where a node has more than one pod of a
// kind, the newest (then the last by name) stands for it, whatever order the
// cache lists them in; a bound new pod tells more than an unbound one.
func groupPods(target *Target, pods []*Pod) nodePods {
	var np nodePods
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *Pod) int {
		if c := cmp.Compare(a.Created, b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, pod := range sorted {
		if pod.Terminating {
			if np.terminating == nil || pod.TerminatingSince > np.terminating.TerminatingSince {
				np.terminating = pod
			}
			continue
		}
		if !target.UpToDate(pod) {
			np.several = np.several || np.oldPod != nil
			np.oldPod = pod
			continue
		}
		switch {
		case np.newPod == nil:
			np.newPod = pod
		case !np.newPod.Bound && pod.Bound:
			np.newPod = pod // a bound one tells more
		case pod.Bound:
			np.several = true
			np.newPod = pod
		}
	}
	return np
}

// judgement is what one node is judged by, beyond its facts.
type judgement struct {
	cfg    *Settings
	target *Target
	ledger *Ledger
	meta   Meta
	// plan is how a pod moves to the target (Rollout.planFor).
	plan func(*Pod) inplace.Plan
	// adopt: the record of the target is new to this controller (no meta
	// found): a standing PodNeedUpgrade=True naming the target is adopted
	// as an offer made now (an older edgeota's, or OpenYurt's).
	adopt bool
	now   time.Time
	// notify reports what deserves an event (Rollout.notices).
	notify func(Notice)
	// pinned: this judgement set a pin, which the pulls by tag judged
	// before it awaited (TagPullAwaitsPin).
	pinned bool
}

// judge applies the failure brake's rule to one node, and records in the
// ledger what the judgement establishes (a failure, a node settled, an
// in-flight entry started or ended). It reads only the node's facts and the
// ledger, so a restarted controller judges every node exactly as its
// predecessor did:
//   - a failed node stays failed, a settled node stays settled: the brake
//     judges the nodes in flight only;
//   - a node running a new pod is in flight until health.Judge says the pod
//     settled AND the node proved alive after it settled (a heartbeat, or
//     its agent's answer to a challenge issued after); it fails when it
//     leaves Ready, or when health.Judge fails the pod (crash loop at once,
//     not available by the deadline after the pod's creation);
//   - a node whose pod this controller patched (upgrade in place) is the
//     same, judged by health.JudgeInPlace against its entry (the
//     generation the patch made, the containers before it), from the
//     patch: its pod's creation and its old readiness tell nothing of it;
//   - a node whose replacement exists but is not bound is in flight from
//     the replacement's creation, and fails at the deadline, naming the
//     scheduler's reason;
//   - a node without a live pod is in flight only if its entry says this
//     controller deleted its old pod (or, for OTA, saw an offered one
//     terminate): it fails at the deadline from that deletion, "no
//     replacement created"; one the current template no longer selects
//     (node selector, affinity) is no node of the DaemonSet any more;
//   - a NotReady node is never failed for lacking a pod of the revision: in
//     flight it keeps its budget until it is Ready past the deadline;
//     otherwise it is skipped.
func (j *judgement) judge(name string, f *NodeFacts) verdict {
	node := &f.Node
	np := groupPods(j.target, f.Pods)
	entry, hasEntry := j.ledger.Entry(name)
	if hasEntry && entry.Stage == StageFailed {
		// Failed for this revision, now or before: it stands, and holds
		// the budget, even if the node recovered; its pod is left alone.
		// A pull that failed before harm holds none.
		if entry.NoPodLost {
			v := failedVerdict(StatePullFailed, entry.Reason)
			v.pullJob = f.Pull.Job
			return v
		}
		return failedVerdict(StateFailed, entry.Reason)
	}
	if hasEntry && entry.Stage == StageSettled {
		return j.settled(node, &np)
	}
	if j.adopt && !hasEntry && j.cfg.Strategy == rollout.StrategyOTA {
		for _, p := range []*Pod{np.oldPod, np.terminating} {
			if p != nil && !j.target.UpToDate(p) && offersTarget(p, j.target) {
				// A standing offer this controller finds no entry for, on
				// its first sight of the record (an older edgeota's, or
				// OpenYurt's): adopted as made now.
				entry, hasEntry = Entry{Stage: StageOffered, OfferedAt: timeOf(j.now)}, true
				j.ledger.Set(name, entry, false)
				break
			}
		}
	}
	taking := f.Taking != "" && np.oldPod != nil && np.oldPod.UID == f.Taking
	fail := func(why string) verdict {
		j.ledger.Set(name, Entry{Stage: StageFailed, Reason: why, At: timeOf(j.now), OfferedAt: entry.OfferedAt}, true)
		return failedVerdict(StateFailed, why)
	}
	deadline := j.cfg.Deadline

	switch {
	case np.newPod != nil && np.newPod.Bound:
		// A new pod runs here: in flight, settled or failed. A pod this
		// controller patched (its in-flight entry says so) is judged from
		// the patch, by what the kubelet reports of it since; any other
		// from its creation, and an in-flight entry has done its work.
		pod := np.newPod
		patched := hasEntry && entry.Stage == StageInFlight && entry.InPlace != nil && entry.Pod == pod.UID
		var v health.Verdict
		switch {
		case patched:
			if entry.Since == nil {
				// Patched by a controller that stopped before it recorded
				// when: the clock starts now, recorded so that it does not
				// start again.
				entry.Since = timeOf(j.now)
				j.ledger.Set(name, entry, false)
			}
			up := entry.InPlace.Expect()
			v = health.JudgeInPlace(&pod.Health, &up, entry.Since.Time, j.cfg.MinReadySeconds, deadline, j.now)
		default:
			if hasEntry && entry.Stage == StageInFlight {
				j.keepOffer(name, entry)
			}
			v = health.Judge(&pod.Health, pod.Created.Time(), j.cfg.MinReadySeconds, deadline, j.now)
		}
		settles := v.State == health.Settled && np.oldPod == nil && !np.several
		if settles && node.Ready && j.cfg.Pin {
			// Part of settling, never after it: a node that runs other
			// bytes than its architecture's canary does not settle.
			if why := j.pinMismatch(node, pod, patched, &entry); why != "" {
				j.notify(Notice{Kind: NoticeDigestMismatch, Node: name, Pod: pod, Why: why})
				return fail(why)
			}
		}
		if settles {
			if proof := proofOf(f, pod.UID, v.SettledAt); proof != "" {
				j.ledger.Set(name, Entry{Stage: StageSettled, At: timeOf(j.now), OfferedAt: entry.OfferedAt, Proof: proof}, false)
				if j.cfg.Pin {
					j.pin(name, node, pod, patched, &entry)
				}
				v := j.settled(node, &np)
				v.rare = &rareVerdict{proven: proof}
				return v
			}
		}
		if !node.Ready {
			return fail(fmt.Sprintf("NotReady after the upgrade (Ready=%s)", readyStatus(node)))
		}
		if v.State == health.Failed {
			return fail(fmt.Sprintf("%s: %s", v.Reason, v.Message))
		}
		out := verdict{state: StateInFlight}
		if settles {
			out.awaitsProof, out.proofAfter = true, unixtime.Of(v.SettledAt)
			out.rare = &rareVerdict{proofPod: pod.UID, proofGeneration: pod.Health.Generation()}
		}
		if v.Recheck > 0 {
			out.at = unixtime.Of(j.now.Add(v.Recheck))
		}
		return out

	case np.newPod != nil:
		// The replacement exists but is not bound: in flight from its
		// creation, failed at the deadline if the scheduler never places it.
		if hasEntry && entry.Stage == StageInFlight {
			j.keepOffer(name, entry)
		}
		return j.podless(np.newPod.Created.Time(), node.Ready, unscheduledWhy(np.newPod), fail)

	case taking:
		// Deleted or patched by this process, shown as it was in a lagging
		// cache: in flight, and not to be taken again.
		return verdict{state: StateInFlight, taking: true}

	case np.oldPod != nil:
		// An old pod runs here: a candidate if Ready and available.
		if f.Pull.State == PullFailed && f.Pull.ByController {
			// Its pre-download failed for good: a failure before harm.
			why := "image pull failed, no pod lost: " + f.Pull.Why
			j.ledger.Set(name, Entry{Stage: StageFailed, Reason: why, At: timeOf(j.now), OfferedAt: entry.OfferedAt, NoPodLost: true}, true)
			v := failedVerdict(StatePullFailed, why)
			v.failedNow, v.pullJob = true, f.Pull.Job
			return v
		}
		if !node.Ready {
			return verdict{state: StateSkipped}
		}
		v := verdict{state: StateOld}
		j.pull(&v, &f.Pull, archOf(&f.Node), np.oldPod)
		if ok, wait := health.PodAvailable(&np.oldPod.Health, j.cfg.MinReadySeconds, j.now); !ok {
			v.state = StateOldDown
			if at := unixtime.Of(j.now.Add(wait)); wait > 0 && (v.at.IsZero() || at < v.at) {
				v.at = at
			}
		}
		j.clockHolds(&v, node, np.oldPod, entry)
		// Its owner may have asked, through the agent, for the upgrade in
		// place the controller offered: carried out as the owner's own
		// upgrades are, whatever the budget, the window or a hold.
		v.requested = ownerRequested(j.cfg, j.target, j.plan, np.oldPod, entry.OfferedAt != nil)
		return v

	case np.terminating != nil:
		// Only a terminating pod: its replacement is on the way, or never
		// comes. For OTA, an offered pod terminating is its owner's
		// upgrade: in flight from now on, recorded so that a restarted
		// controller knows.
		inFlight := hasEntry && entry.Stage == StageInFlight
		if !inFlight && j.cfg.Strategy == rollout.StrategyOTA && hasEntry && entry.Stage == StageOffered {
			entry = Entry{Stage: StageInFlight, Pod: np.terminating.UID, Since: timeOf(np.terminating.TerminatingSince.Time()), OfferedAt: entry.OfferedAt}
			j.ledger.Set(name, entry, true)
			inFlight = true
		}
		if !inFlight {
			if !node.Ready {
				// Untouched by this rollout, on a node that cannot confirm
				// the termination: skipped.
				return verdict{state: StateSkipped}
			}
			return verdict{state: StateInFlight}
		}
		since := np.terminating.TerminatingSince.Time()
		if entry.Since != nil {
			since = entry.Since.Time
		}
		return j.podless(since, node.Ready, "no replacement created", fail)

	case hasEntry && entry.Stage == StageInFlight:
		// No pod at all, and this controller took the node's old pod away
		// (or is about to: an entry written ahead, whose pod is gone).
		if !node.Exists {
			j.ledger.Forget(name) // the node left the cluster
			return verdict{state: StateGone}
		}
		selects, taint := true, ""
		if f.Fit != nil {
			selects, taint = f.Fit()
		}
		if !selects {
			// The DaemonSet no longer runs here: neither in flight nor
			// failed.
			j.ledger.Forget(name)
			return verdict{state: StateGone}
		}
		if entry.Since == nil {
			// No controller saw the termination: the clock starts now,
			// recorded so that it does not start again.
			entry.Since = timeOf(j.now)
			j.ledger.Set(name, entry, false)
		}
		why := "no replacement created"
		if taint != "" {
			why += fmt.Sprintf(" (taint %s not tolerated)", taint)
		}
		return j.podless(entry.Since.Time, node.Ready, why, fail)

	default:
		if hasEntry && entry.Stage == StageOffered && !node.Exists {
			j.ledger.Forget(name)
		}
		return verdict{state: StateGone}
	}
}

// pull reads a candidate's pre-download: pulled, under way (with a timer at
// its timeout), or timed out; with pinning on, a done pull of images by tag
// as the pin makes of it (tagPull).
func (j *judgement) pull(v *verdict, p *Pull, arch string, old *Pod) {
	v.pullJob = p.Job
	if p.State == PullDone && len(p.ByTag) > 0 && j.cfg.Pin && j.plan(old).InPlace {
		switch pin, ok := j.meta.Pins[arch]; {
		case !ok:
			// What the tag named may not be what the canary runs: the
			// pin will say. Meanwhile it counts, for the canaries (the
			// pin needs them; the others wait for it anyway).
			v.tagPull = TagPullAwaitsPin
		case !pin.holds(p.ByTag, old):
			v.tagPull = TagPullStale
			return
		}
	}
	switch p.State {
	case PullDone:
		v.pulled = true
	case PullPending:
		end := p.Since.Add(j.cfg.PullTimeout)
		if j.now.Before(end) {
			v.pulling = true
			v.at = unixtime.Of(end)
		} else {
			v.pullTimedOut = true
		}
	}
}

// settled judges a node whose entry says it settled: final for the
// revision. It counts against the budget while Ready with its pod
// unavailable, and is skipped (upgraded) while NotReady.
func (j *judgement) settled(node *Node, np *nodePods) verdict {
	if !node.Ready {
		return verdict{state: StateSkipped, updated: true}
	}
	if np.newPod == nil || !np.newPod.Bound {
		return verdict{state: StateSettledDown}
	}
	ok, wait := health.PodAvailable(&np.newPod.Health, j.cfg.MinReadySeconds, j.now)
	if ok {
		return verdict{state: StateSettled}
	}
	v := verdict{state: StateSettledDown}
	if wait > 0 {
		v.at = unixtime.Of(j.now.Add(wait))
	}
	return v
}

// keepOffer ends an in-flight entry whose node runs its new pod: what stays
// is the first offer, if there was one.
func (j *judgement) keepOffer(name string, e Entry) {
	if e.OfferedAt != nil {
		j.ledger.Set(name, Entry{Stage: StageOffered, OfferedAt: e.OfferedAt}, false)
		return
	}
	j.ledger.Clear(name)
}

// podless judges a node in flight without a running pod of the revision
// since since: failed once the deadline passed while it is Ready, in flight
// until then, and in flight as long as it is NotReady (no pod of the
// revision ran there, so its going offline proves nothing).
func (j *judgement) podless(since time.Time, ready bool, why string, fail func(string) verdict) verdict {
	if !ready {
		return verdict{state: StateInFlight}
	}
	end := since.Add(j.cfg.Deadline)
	if !j.now.Before(end) {
		return fail(fmt.Sprintf("%s within %s", why, j.cfg.Deadline))
	}
	return verdict{state: StateInFlight, at: unixtime.Of(end)}
}

// ownerRequested reports whether an OTA node's old pod carries its owner's
// request for the upgrade in place to the target, which the controller
// offered it (offered: its entry records the offer; never the pod's own
// copy) and which its plan makes in place: the one rule of what the
// controller carries out for an owner.
func ownerRequested(cfg *Settings, target *Target, plan func(*Pod) inplace.Plan, pod *Pod, offered bool) bool {
	return cfg.Strategy == rollout.StrategyOTA && offered && pod.Requested() == target.Hash && plan(pod).InPlace
}

// offersTarget reports whether the pod carries PodNeedUpgrade True naming the
// target: read only to adopt the offers of an older controller, never as
// this controller's own.
func offersTarget(pod *Pod, target *Target) bool {
	need := pod.NeedUpgrade.Get()
	rev, ok := podcondition.Offered(corev1.ConditionStatus(need.Status), need.Message)
	return ok && rev == target.Hash
}

// unscheduledWhy says why a replacement is not bound: the scheduler's
// PodScheduled=False reason and message, as `kubectl describe` shows them.
func unscheduledWhy(pod *Pod) string {
	why := pod.Unscheduled()
	if why == "" {
		return "replacement " + pod.Name + " not scheduled"
	}
	return "replacement " + pod.Name + " not scheduled: " + why
}

// proofOf says what proves the node alive after its new pod (uid) settled
// at settled: its agent's answer about that pod, else a heartbeat sent
// after; "" when nothing does yet. When both do, the answer is named: it is
// the proof made for this pod, and the one a node with an agent is expected
// to give first.
func proofOf(f *NodeFacts, uid types.UID, settled time.Time) Proof {
	switch {
	case f.Answered == uid:
		return ProofAnswer
	case ProvesAlive(lastHeartbeat(f), settled):
		return ProofHeartbeat
	}
	return ""
}

// lastHeartbeat is the node's latest heartbeat: its Lease's renewal, or its
// Ready condition's lastHeartbeatTime, the later.
func lastHeartbeat(f *NodeFacts) time.Time {
	if f.Node.Heartbeat.After(f.LeaseRenewed) {
		return f.Node.Heartbeat
	}
	return f.LeaseRenewed
}

func readyStatus(node *Node) string {
	if !node.Exists || node.ReadyStatus == "" {
		return "missing"
	}
	return node.ReadyStatus
}

// TagPull is what a pin makes of a pre-download done by the controller's
// Job that named images by tag (Pull.ByTag), for a pod that moves in place:
// its patch will name the pin's digests, so only those bytes on the node
// spare its pull after the kill.
type TagPull uint8

const (
	// TagPullCounts: no pin applies, or each tag resolved to the pin's
	// digest.
	TagPullCounts TagPull = iota
	// TagPullAwaitsPin: the node's architecture has no pin yet: the pull
	// counts for a canary (the pin needs one; the other nodes wait for the
	// pin anyway), but is not written as the node's (PodImageReady), its
	// Job kept, until the pin says whether it holds its bytes.
	TagPullAwaitsPin
	// TagPullStale: a tag resolved to other bytes than the pin's (re-pushed
	// meanwhile): the pull does not count, its Job goes, and the node
	// pulls the pin's digests.
	TagPullStale
)

// holds reports whether a pull by tag (container → the digest it resolved
// to) brought the pin's bytes: each container the pin holds a digest of
// resolved to it, or the old pod runs that digest already (its patch keeps
// the tag).
func (p Pin) holds(byTag map[string]string, old *Pod) bool {
	for c, got := range byTag {
		if want := p.Digests[c]; want != "" && got != want && !old.runsDigest(c, want) {
			return false
		}
	}
	return true
}

// archOf is the node's architecture, as its kubernetes.io/arch label
// says: what its pin is kept by ("" for a node without the label).
func archOf(node *Node) string { return node.Labels[corev1.LabelArchStable] }

// pinnedContainers are the containers a node's pin is read from or checked
// against: those its patch changed, for a node upgraded in place (the
// others run what they ran before the rollout); all the target's, for a
// recreated one.
func (j *judgement) pinnedContainers(pod *Pod, patched bool, entry *Entry) []string {
	if patched {
		return slices.Sorted(maps.Keys(entry.InPlace.Images))
	}
	if j.target.Images != nil {
		return slices.Sorted(maps.Keys(j.target.Images))
	}
	return pod.ImageIDs.Names()
}

// pin records, once per architecture, the digests the first node of it to
// settle on the target runs: the rollout's canary there. A container whose
// imageID names no registry digest is recorded unpinnable, with why.
//
// A DaemonSet's first revision is never pinned: its pods come from its
// creation, not from a rollout.
func (j *judgement) pin(name string, node *Node, pod *Pod, patched bool, entry *Entry) {
	arch := archOf(node)
	if _, ok := j.meta.Pins[arch]; ok || j.target.Number <= 1 {
		return
	}
	p := Pin{Canary: name, At: *timeOf(j.now)}
	for _, c := range j.pinnedContainers(pod, patched, entry) {
		id, err := imageref.Parse(pod.ImageIDs.Get(c))
		if err != nil {
			if p.Unpinnable == nil {
				p.Unpinnable = map[string]string{}
			}
			p.Unpinnable[c] = err.Error()
			continue
		}
		if p.Digests == nil {
			p.Digests = map[string]string{}
		}
		p.Digests[c] = id.Digest
	}
	if j.ledger.SetPin(arch, p) {
		j.meta, j.pinned = j.ledger.Meta(), true
		j.notify(Notice{Kind: NoticePinned, Node: name, Pod: pod, Arch: arch, Pin: &p, Revision: j.target.Hash})
	}
}

// pinMismatch says why a node whose new pod settles runs other bytes than
// its architecture's canary: a container started from a tag since the pin
// (a pod patched to the tag, whenever, or created after the pin) whose
// imageID names another digest than the pin; "" when none does, when its
// architecture has no pin yet, or for a container whose imageID names no
// registry digest (nothing to compare). A pod created before the pin (the
// fleet as the controller found it, a canary) is not this rollout's to
// judge by it. A container patched to repository@digest runs those bytes:
// a runtime may report them by another digest (an index's for a
// platform's), which is never taken for a mismatch.
func (j *judgement) pinMismatch(node *Node, pod *Pod, patched bool, entry *Entry) string {
	pin, ok := j.meta.Pins[archOf(node)]
	if !ok || !patched && pod.Created.Time().Before(pin.At.Time) {
		return ""
	}
	for _, c := range j.pinnedContainers(pod, patched, entry) {
		want := pin.Digests[c]
		if want == "" || patched && imageref.IsPinned(entry.InPlace.Images[c]) {
			continue
		}
		got, err := imageref.Parse(pod.ImageIDs.Get(c))
		if err != nil || got.Digest == want {
			continue
		}
		return fmt.Sprintf("container %s runs digest %s, not %s, which canary node %s ran: its tag now names other bytes (pushed again?)",
			c, got.Digest, want, pin.Canary)
	}
	return ""
}
