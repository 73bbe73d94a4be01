package decision

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// A rollout's cost must follow what changes, not the size of the fleet: a
// 1,000-node rollout syncs its DaemonSet about 800 times, and judging every
// node at every sync made it O(nodes × syncs). So a Rollout keeps, per node,
// its verdict, and the counts and ordered sets a decision needs, and updates
// them from events:
//   - the controller marks a node dirty on an event about its pods, the node,
//     its heartbeats or its deletions;
//   - Refresh judges again the dirty nodes and those whose verdict the clock
//     changes now (a timer per node: deadlines, minReadySeconds, windows,
//     holds), then Decide decides from the counts and the ordered sets;
//   - a change to the DaemonSet itself (its template, annotations, target)
//     builds a new Rollout over the same ledger, as a fresh controller does.
//
// Invariants, checked by TestIncrementalEqualsRebuilt over random event
// orders: after Refresh, the Rollout equals the one Build computes from the
// same facts and ledger at the same instant; and no timer is set at or
// before the instant it was set (nothing spins).

// Rollout is one DaemonSet's rollout of its target revision: every node's
// verdict, and the aggregates the decision reads. Not safe for concurrent
// use: the controller holds its DaemonSet's lock around each call.
type Rollout struct {
	cfg    Settings
	target Target
	ledger *Ledger
	adopt  bool

	nodes map[string]*nodeInfo
	// counts of nodes per state, and of the skipped ones running the
	// target (settled, then went offline).
	counts         [numStates]int
	skippedUpdated int
	// eligible counts the nodes the rollout may touch (the node selector);
	// taken those of them on, or moving to, the target revision, or
	// offered it: the partition's quota is eligible - partition - taken.
	eligible, taken int
	// outside counts the candidates the node selector leaves out.
	outside int
	// olds are the eligible nodes whose old pod the rollout may replace, in
	// name order (the partition takes nodes in that order): Ready, an old
	// pod, not in flight or failed.
	olds *btree.BTreeG[string]
	// takeable are the olds with an available old pod that nothing holds
	// back by the clock, in name order; downs those whose old pod is down
	// anyway.
	takeable *btree.BTreeG[string]
	// takeableChanges counts the insertions into takeable and removals
	// from it: unchanged, the next wave's nodes are those seen last.
	takeableChanges uint64
	// takeablePulled are the takeable nodes the pre-download gate lets
	// through (see ready), in name order.
	takeablePulled *btree.BTreeG[string]
	downs          map[string]bool
	// timers are the nodes whose verdict the clock changes, by when.
	timers timerHeap
	// awaiting are the nodes waiting for a proof of life.
	awaiting map[string]Awaiting
	// proven counts the settled nodes by the proof that settled them, as
	// their entries record it (entries of an older controller name none).
	proven map[Proof]int
	// held, waiting count the candidates the clock holds (by the end of
	// their hold, the opening of their window); zoneInvalid those whose node
	// names an invalid zone; heldNodes names the held.
	held, waiting timeCounts
	zoneInvalid   int
	heldNodes     map[string]bool
	// settledDown names the settled nodes whose pod is down while Ready.
	settledDown map[string]bool
	// offered counts, for OTA, the standing offers not taken yet, by their
	// first offer; unoffered are the eligible nodes with a live old pod
	// and no offer, in name order (the partition offers in that order).
	offered   timeCounts
	unoffered *btree.BTreeG[string]
	// shown caches the failures as the status shows them, by count.
	shown shownFailures
	// toPull are the candidates whose images the rollout may pre-download
	// (eligible, Ready, an old pod, neither pulled nor pulling; for OTA,
	// offered), in name order; pulling counts the pulls under way, pulled
	// the candidates whose images are on their node, pullTimedOut those
	// whose pull outlasted its timeout; pullJobs counts the nodes not
	// pulling whose Job of the controller's is still there (done, failed or
	// timed out, not deleted yet): each holds its place in the parallelism
	// until it is gone, so that there are never more Jobs than it allows.
	toPull                                  *btree.BTreeG[string]
	pulling, pulled, pullTimedOut, pullJobs int
	// notices are what the last Build or Refresh saw change, for events;
	// each starts a new slice, since a Build's can name every node (each
	// proven at a fresh controller's start) and would otherwise stay
	// allocated, and keep its pods, for the Rollout's life.
	notices []Notice
	// ahead is what the last Decide wrote ahead (see Decide).
	ahead aheadMark
	// plans are how pods of each revision move to the target, by the
	// revision's hash (planFor), worked out once.
	plans map[string]inplace.Plan
	// recreate counts, when the settings ask for upgrades in place, the
	// nodes to upgrade whose pod is recreated instead, by why.
	recreate map[string]int
	// requested are the OTA nodes whose owner asked for the upgrade in
	// place offered (verdict.requested).
	requested map[string]bool
	// archs counts the nodes by architecture (kubernetes.io/arch), and
	// inFlightArch those in flight: with pinning on, an architecture
	// without a pin takes no more than its canaries.
	archs, inFlightArch map[string]int
}

// Awaiting is a node waiting for its proof of life: a heartbeat sent after
// After, or its agent's answer to a challenge about Pod at its Generation
// (a pod upgraded in place is challenged afresh at each upgrade).
type Awaiting struct {
	After      time.Time
	Pod        types.UID
	Generation int64
}

// nodeInfo is what the Rollout knows of one node. A Rollout holds one per
// node and DaemonSet: its flags come last, packed together.
type nodeInfo struct {
	name string
	// arch is the node's kubernetes.io/arch label.
	arch    string
	verdict verdict
	// oldPod is the out-of-date pod a decision may replace or offer.
	oldPod *Pod
	// offeredAt is, for OTA, when the node's standing offer was first made
	// (zero when it has none, or runs the target).
	offeredAt unixtime.Time
	// proof is what proved the node alive, for a node whose entry says it
	// settled.
	proof Proof
	// awaitingSince is when this Rollout first judged the node waiting for
	// its proof of life (about the same pod): by the controller's clock,
	// the start of the wait NoticeProven reports. It is history, not a
	// judgement of the facts: a Rollout built afresh starts it again.
	awaitingSince unixtime.Time
	// timerAt is when the node's timer in Rollout.timers is due, zero
	// without one; an entry of the heap at another time is stale.
	timerAt unixtime.Time
	// unoffered: for OTA, an eligible node with a live old pod and no offer
	// yet. toPull: a candidate for a pre-download (see Rollout.toPull).
	unoffered, toPull bool
	// Memberships, kept so that a node's change is undone in O(1).
	eligible, taken, old, takeable, down bool
}

// New returns the Rollout of target under cfg over ledger, empty until Build.
// adopt says the record is new to this controller: standing offers it finds
// are adopted (see judge).
func New(cfg Settings, target Target, ledger *Ledger, adopt bool) *Rollout {
	less := func(a, b string) bool { return a < b }
	return &Rollout{cfg: cfg, target: target, ledger: ledger, adopt: adopt, nodes: map[string]*nodeInfo{},
		olds: btree.NewG(16, less), takeable: btree.NewG(16, less), takeablePulled: btree.NewG(16, less), downs: map[string]bool{},
		awaiting: map[string]Awaiting{}, proven: map[Proof]int{}, held: timeCounts{}, waiting: timeCounts{}, heldNodes: map[string]bool{},
		settledDown: map[string]bool{}, offered: timeCounts{}, unoffered: btree.NewG(16, less), toPull: btree.NewG(16, less),
		plans: map[string]inplace.Plan{}, recreate: map[string]int{}, requested: map[string]bool{},
		archs: map[string]int{}, inFlightArch: map[string]int{}}
}

// Settings returns the settings the Rollout decides by.
func (r *Rollout) Settings() *Settings { return &r.cfg }

// Target returns the revision rolled out.
func (r *Rollout) Target() *Target { return &r.target }

// Ledger returns the record the Rollout judges by.
func (r *Rollout) Ledger() *Ledger { return r.ledger }

// Build judges every node: nodes (those with a pod of the DaemonSet, and
// those this process is deleting on), and those the ledger names. It returns
// what deserves an event.
func (r *Rollout) Build(now time.Time, nodes []string, facts FactsFunc) []Notice {
	all := map[string]bool{}
	for _, n := range nodes {
		all[n] = true
	}
	for _, n := range r.ledger.Nodes() {
		all[n] = true
	}
	r.notices = nil
	j := r.judgement(now)
	for _, n := range slices.Sorted(maps.Keys(all)) {
		r.rejudge(j, n, facts)
	}
	r.rejudgeAwaitingPin(j, facts)
	// Standing offers are adopted once, at the first sight of a new record:
	// a PodNeedUpgrade=True written later is a node's claim, not an offer.
	r.adopt = false
	return r.notices
}

// Refresh brings the Rollout up to date at now: the dirty nodes, and those
// whose timer is due, are judged again. It returns what changed that
// deserves an event.
func (r *Rollout) Refresh(now time.Time, dirty map[string]bool, facts FactsFunc) []Notice {
	r.notices = nil
	due := map[string]bool{}
	for at := unixtime.Of(now); r.timers.Len() > 0 && r.timers[0].at <= at; {
		e := heap.Pop(&r.timers).(timerEntry)
		if n, ok := r.nodes[e.node]; ok && n.timerAt == e.at {
			n.timerAt = 0
			due[e.node] = true
		}
	}
	j := r.judgement(now)
	for _, n := range slices.Sorted(maps.Keys(dirty)) {
		r.rejudge(j, n, facts)
		delete(due, n)
	}
	for _, n := range slices.Sorted(maps.Keys(due)) {
		r.rejudge(j, n, facts)
	}
	r.rejudgeAwaitingPin(j, facts)
	return r.notices
}

// rejudgeAwaitingPin judges again, once the judgement set a pin, the nodes
// whose pull by tag awaited one: the pin says now whether it counts. Rare
// (once per architecture and rollout), so a walk of every node.
func (r *Rollout) rejudgeAwaitingPin(j *judgement, facts FactsFunc) {
	if !j.pinned {
		return
	}
	j.pinned = false
	var awaiting []string
	for name, n := range r.nodes {
		if n.verdict.tagPull == TagPullAwaitsPin {
			awaiting = append(awaiting, name)
		}
	}
	slices.Sort(awaiting)
	for _, name := range awaiting {
		r.rejudge(j, name, facts)
	}
}

func (r *Rollout) judgement(now time.Time) *judgement {
	return &judgement{cfg: &r.cfg, target: &r.target, ledger: r.ledger, meta: r.ledger.Meta(), adopt: r.adopt, now: now, plan: r.planFor,
		notify: func(n Notice) { r.notices = append(r.notices, n) }}
}

// rejudge judges one node again and replaces what the Rollout held for it.
func (r *Rollout) rejudge(j *judgement, name string, facts FactsFunc) {
	f := facts(name)
	old, had := r.nodes[name]
	if had {
		r.remove(old)
	}
	v := j.judge(name, &f)
	np := groupPods(&r.target, f.Pods)
	if had && old.verdict.held && !v.held && np.oldPod != nil && old.oldPod != nil &&
		np.oldPod.UID == old.oldPod.UID && !j.now.Before(old.verdict.holdEnd.Time()) {
		// The clock ended the hold: an event, on the transition only.
		r.notices = append(r.notices, Notice{Kind: NoticeHoldEnded, Node: name, Pod: np.oldPod,
			At: old.verdict.holdEnd.Time(), LimitReached: old.verdict.holdUntil > old.verdict.holdEnd})
	}
	if v.zoneInvalid {
		r.notices = append(r.notices, Notice{Kind: NoticeZoneInvalid, Node: name, Err: f.Node.ZoneErr})
	}
	if v.failedNow && v.state == StatePullFailed {
		r.notices = append(r.notices, Notice{Kind: NoticePullFailed, Node: name, Why: v.why()})
	}
	if v.state == StateGone {
		return
	}
	n := &nodeInfo{name: name, arch: archOf(&f.Node), verdict: v, oldPod: np.oldPod}
	entry, _ := r.ledger.Entry(name)
	if entry.Stage == StageSettled {
		n.proof = entry.Proof
	}
	// waitedFor reports whether the node was waiting for the proof of
	// life of its pod uid before this judgement.
	waitedFor := func(uid types.UID) bool { return had && old.verdict.awaitsProof && old.verdict.proofPod() == uid }
	if v.awaitsProof {
		n.awaitingSince = unixtime.Of(j.now)
		if waitedFor(v.proofPod()) {
			n.awaitingSince = old.awaitingSince
		}
	}
	if v.proven() != "" {
		// Settled now: what proved it, and how long this Rollout saw it
		// wait (nothing when it was proven at first sight of its pod
		// settled; unknown to a Rollout that did not hold it before).
		notice := Notice{Kind: NoticeProven, Node: name, Proof: v.proven(), Waited: had}
		if np.newPod != nil && waitedFor(np.newPod.UID) {
			notice.Wait = j.now.Sub(old.awaitingSince.Time())
		}
		r.notices = append(r.notices, notice)
	}
	n.eligible = r.cfg.Matches(f.Node.Labels)
	n.taken = n.eligible && (np.newPod != nil || np.oldPod == nil || v.taking ||
		(r.cfg.Strategy == rollout.StrategyOTA && entry.OfferedAt != nil))
	n.old = n.eligible && (v.state == StateOld || v.state == StateOldDown)
	if r.cfg.Strategy == rollout.StrategyOTA && np.oldPod != nil && !v.taking && v.state != StateFailed && v.state != StatePullFailed {
		if entry.OfferedAt != nil {
			n.offeredAt = unixtime.Of(entry.OfferedAt.Time)
		} else {
			n.unoffered = n.eligible
		}
	}
	clockFree := n.old && v.takeable()
	n.takeable = clockFree && v.state == StateOld
	n.down = clockFree && v.state == StateOldDown
	n.toPull = r.wantsPull(n)
	r.add(n)
}

// add counts a node in the Rollout.
func (r *Rollout) add(n *nodeInfo) {
	r.nodes[n.name] = n
	r.counts[n.verdict.state]++
	r.archs[n.arch]++
	if n.verdict.state == StateInFlight {
		r.inFlightArch[n.arch]++
	}
	if n.verdict.updated {
		r.skippedUpdated++
	}
	if n.eligible {
		r.eligible++
	}
	if n.taken {
		r.taken++
	}
	if !n.eligible && (n.verdict.state == StateOld || n.verdict.state == StateOldDown) {
		r.outside++
	}
	if n.old {
		r.olds.ReplaceOrInsert(n.name)
	}
	if n.takeable {
		r.takeable.ReplaceOrInsert(n.name)
		r.takeableChanges++
		if r.ready(n, true) {
			r.takeablePulled.ReplaceOrInsert(n.name)
		}
	}
	if n.down {
		r.downs[n.name] = true
	}
	if n.verdict.awaitsProof {
		r.awaiting[n.name] = Awaiting{After: n.verdict.proofAfter.Time(), Pod: n.verdict.proofPod(), Generation: n.verdict.proofGeneration()}
	}
	if why, ok := r.recreateReason(n); ok {
		r.recreate[why]++
	}
	if n.verdict.requested {
		r.requested[n.name] = true
	}
	if n.proof != "" {
		r.proven[n.proof]++
	}
	if n.verdict.state == StateSettledDown {
		r.settledDown[n.name] = true
	}
	if !n.offeredAt.IsZero() {
		r.offered.add(n.offeredAt, 1)
	}
	if n.unoffered {
		r.unoffered.ReplaceOrInsert(n.name)
	}
	r.countPull(n, 1)
	r.countClock(n, 1)
	if !n.verdict.at.IsZero() {
		n.timerAt = n.verdict.at
		heap.Push(&r.timers, timerEntry{at: n.timerAt, node: n.name})
	}
}

// remove undoes add; the node's timer is dropped lazily.
func (r *Rollout) remove(n *nodeInfo) {
	delete(r.nodes, n.name)
	r.counts[n.verdict.state]--
	if r.archs[n.arch]--; r.archs[n.arch] == 0 {
		delete(r.archs, n.arch)
	}
	if n.verdict.state == StateInFlight {
		if r.inFlightArch[n.arch]--; r.inFlightArch[n.arch] == 0 {
			delete(r.inFlightArch, n.arch)
		}
	}
	if n.verdict.updated {
		r.skippedUpdated--
	}
	if n.eligible {
		r.eligible--
	}
	if n.taken {
		r.taken--
	}
	if !n.eligible && (n.verdict.state == StateOld || n.verdict.state == StateOldDown) {
		r.outside--
	}
	if n.old {
		r.olds.Delete(n.name)
	}
	if n.takeable {
		r.takeable.Delete(n.name)
		r.takeablePulled.Delete(n.name)
		r.takeableChanges++
	}
	delete(r.downs, n.name)
	delete(r.awaiting, n.name)
	if why, ok := r.recreateReason(n); ok {
		if r.recreate[why]--; r.recreate[why] == 0 {
			delete(r.recreate, why)
		}
	}
	delete(r.requested, n.name)
	if n.proof != "" {
		if r.proven[n.proof]--; r.proven[n.proof] == 0 {
			delete(r.proven, n.proof)
		}
	}
	delete(r.settledDown, n.name)
	if !n.offeredAt.IsZero() {
		r.offered.add(n.offeredAt, -1)
	}
	if n.unoffered {
		r.unoffered.Delete(n.name)
	}
	r.countPull(n, -1)
	r.countClock(n, -1)
	n.timerAt = 0
}

// noGeneration is why a pod whose kubelet reports no observedGeneration is
// recreated: nothing would tell when its kubelet took a patch.
const noGeneration = "the node's kubelet reports no status.observedGeneration (Kubernetes before 1.35), so an upgrade in place could not be judged"

// noLabel is why a pod of a revision that moves in place is recreated when
// it does not carry the opt-in label its template does (someone removed it).
const noLabel = "the pod does not carry the label " + rollout.InPlaceLabel + ` "true" its template does`

// planFor is how the pod moves to the target: in place when the settings
// ask for it and the rule of package inplace lets its revision (from its
// revision's template to the target's), and its kubelet reports what
// judges it (metadata.generation, status.observedGeneration); recreated
// otherwise, for a reason. The zero Plan (recreated, no reason) when the
// settings ask for recreation.
func (r *Rollout) planFor(p *Pod) inplace.Plan {
	if !r.cfg.InPlace {
		return inplace.Plan{}
	}
	plan, ok := r.plans[p.Hash]
	if !ok {
		plan = r.classify(p.Hash)
		r.plans[p.Hash] = plan
	}
	switch run := p.Health.Run; {
	case !plan.InPlace:
	case run == nil:
		// The cache keeps what judges an upgrade in place for pods that
		// carry the opt-in label alone: this one lost it.
		return inplace.Plan{Reason: noLabel}
	case run.Generation == 0 || run.ObservedGeneration == 0:
		return inplace.Plan{Reason: noGeneration}
	}
	return plan
}

// classify is how pods of revision from move to the target.
func (r *Rollout) classify(from string) inplace.Plan {
	to := r.target.Templates[r.target.Hash]
	f := r.target.Templates[from]
	switch {
	case from == "":
		return inplace.Plan{Reason: "the pod has no controller-revision-hash label (created before revision hashes)"}
	case to == nil:
		return inplace.Plan{Reason: fmt.Sprintf("the template of the target revision %s could not be read", r.target.Hash)}
	case f == nil:
		return inplace.Plan{Reason: fmt.Sprintf("revision %s, which the pod runs, is no longer kept (the DaemonSet's revisionHistoryLimit)", from)}
	}
	plan := inplace.Classify(f, to)
	if !plan.InPlace {
		plan.Reason = fmt.Sprintf("from revision %s: %s", from, plan.Reason)
	}
	return plan
}

// recreateReason says why the node's pod is recreated although the
// settings ask for upgrades in place; ok is false for a node upgraded in
// place, or with nothing left to upgrade.
func (r *Rollout) recreateReason(n *nodeInfo) (why string, ok bool) {
	if !r.cfg.InPlace || n.oldPod == nil {
		return "", false
	}
	switch n.verdict.state {
	case StateOld, StateOldDown, StateSkipped:
	default:
		return "", false
	}
	plan := r.planFor(n.oldPod)
	return plan.Reason, !plan.InPlace
}

// take is the take of the node's old pod: a patch of its images when it
// moves in place, a deletion otherwise. With pinning on, a patch names
// each container its architecture's pin holds by repository@digest.
func (r *Rollout) take(node string, pod *Pod) Take {
	t := Take{Node: node, Pod: pod}
	if plan := r.planFor(pod); plan.InPlace {
		plan.Images = r.pinned(node, plan.Images)
		t.InPlace = &plan
	} else if r.cfg.InPlace {
		t.Recreate = plan.Reason
	}
	return t
}

// pinned is images (container → image) as a patch on the node writes
// them: with pinning on, each container its architecture's pin holds by
// the pinned digest in the image's repository (imageref.Pinned); the
// others, and every one before the pin exists, by the template's tag.
// images itself is never changed (planFor's plans are shared).
//
// A container that runs the pinned digest already (a tag of the same
// bytes rolled out again over pods the last rollout pinned) keeps the
// tag: its pod may name repository@digest already, and a patch that
// changed nothing of its spec would never be taken by its kubelet.
func (r *Rollout) pinned(node string, images map[string]string) map[string]string {
	n, ok := r.nodes[node]
	if !r.cfg.Pin || !ok {
		return images
	}
	pin, ok := r.ledger.Pin(n.arch)
	if !ok || len(pin.Digests) == 0 {
		return images
	}
	out := make(map[string]string, len(images))
	for c, image := range images {
		if d := pin.Digests[c]; d != "" && !n.oldPod.runsDigest(c, d) {
			image = imageref.Pinned(image, d)
		}
		out[c] = image
	}
	return out
}

// runsDigest reports whether the pod's container runs the digest, as its
// imageID says (false for no pod).
func (p *Pod) runsDigest(container, digest string) bool {
	if p == nil {
		return false
	}
	id, err := imageref.Parse(p.ImageIDs.Get(container))
	return err == nil && id.Digest == digest
}

// canaries is, with pinning on, how many more nodes of each architecture
// without a pin a decision may take: its canaries (Settings.PinCanaries)
// less those in flight. Architectures with a pin, and every one with
// pinning off, are not limited.
type canaries struct {
	left map[string]int
	// open counts the architectures that may still take a node: a choice
	// that finds none stops reading candidates.
	open int
}

// canaries is the canary quota of a decision now.
func (r *Rollout) canaries() canaries {
	q := canaries{open: len(r.archs)}
	if !r.cfg.Pin {
		return q
	}
	for arch := range r.archs {
		if _, ok := r.ledger.Pin(arch); ok {
			continue
		}
		if q.left == nil {
			q.left = map[string]int{}
		}
		left := max(r.cfg.PinCanaries-r.inFlightArch[arch], 0)
		q.left[arch] = left
		if left == 0 {
			q.open--
		}
	}
	return q
}

// allows reports whether the quota lets a node of n's architecture be
// taken.
func (q *canaries) allows(n *nodeInfo) bool {
	left, limited := q.left[n.arch]
	return !limited || left > 0
}

// take counts n taken.
func (q *canaries) take(n *nodeInfo) {
	if left, limited := q.left[n.arch]; limited {
		if q.left[n.arch] = left - 1; left == 1 {
			q.open--
		}
	}
}

// waiting names the architectures whose canaries are in flight without a
// pin yet, in name order: no other node of theirs is taken meanwhile.
func (q *canaries) waiting() []string {
	var archs []string
	for arch, left := range q.left {
		if left == 0 {
			archs = append(archs, arch)
		}
	}
	slices.Sort(archs)
	return archs
}

// Requested returns the OTA nodes whose owner asked for the upgrade in
// place the controller offered, in name order.
func (r *Rollout) Requested() []string { return sortedNames(r.requested) }

// wantsPull reports whether the node is a candidate for a pre-download:
// eligible, Ready, an old pod, neither pulled nor pulling nor timed out;
// for OTA, offered.
func (r *Rollout) wantsPull(n *nodeInfo) bool {
	v := &n.verdict
	if !n.old || v.pulled || v.pulling || v.pullTimedOut {
		return false
	}
	return r.cfg.Strategy != rollout.StrategyOTA || !n.offeredAt.IsZero()
}

// countPull counts (by +1 or -1) where the node's pre-download stands.
func (r *Rollout) countPull(n *nodeInfo, by int) {
	v := &n.verdict
	switch {
	case v.pulling:
		r.pulling += by
	case v.pulled:
		r.pulled += by
	case v.pullTimedOut:
		r.pullTimedOut += by
	}
	if v.pullJob && !v.pulling {
		r.pullJobs += by
	}
	if n.toPull {
		if by > 0 {
			r.toPull.ReplaceOrInsert(n.name)
		} else {
			r.toPull.Delete(n.name)
		}
	}
}

// countClock counts (by +1 or -1) what the clock holds an eligible
// candidate by.
func (r *Rollout) countClock(n *nodeInfo, by int) {
	switch {
	case !n.old:
	case n.verdict.zoneInvalid:
		r.zoneInvalid += by
	case n.verdict.held:
		r.held.add(n.verdict.holdEnd, by)
		if by > 0 {
			r.heldNodes[n.name] = true
		} else {
			delete(r.heldNodes, n.name)
		}
	case n.verdict.windowClosed:
		r.waiting.add(n.verdict.opens, by)
	}
}

// NextChange is when the earliest verdict changes by the clock alone, zero
// if none does: the controller wakes then.
func (r *Rollout) NextChange() time.Time {
	for r.timers.Len() > 0 {
		e := r.timers[0]
		if n, ok := r.nodes[e.node]; ok && n.timerAt == e.at {
			return e.at.Time()
		}
		heap.Pop(&r.timers) // stale
	}
	return time.Time{}
}

// Awaiting returns the nodes waiting for a proof of life. Read only.
func (r *Rollout) Awaiting() map[string]Awaiting { return r.awaiting }

// Nodes counts the nodes running the DaemonSet.
func (r *Rollout) Nodes() int { return len(r.nodes) }

// HeldNodes returns the candidates their owner holds. Read only.
func (r *Rollout) HeldNodes() map[string]bool { return r.heldNodes }

// OldPod returns the node's out-of-date pod, nil if none.
func (r *Rollout) OldPod(node string) *Pod {
	if n, ok := r.nodes[node]; ok {
		return n.oldPod
	}
	return nil
}

// Count counts the nodes in state s.
func (r *Rollout) Count(s State) int {
	if int(s) >= numStates {
		return 0
	}
	return r.counts[s]
}

// TimerOf returns when the node's verdict next changes by the clock, zero
// if only an event changes it.
func (r *Rollout) TimerOf(node string) time.Time {
	if n, ok := r.nodes[node]; ok {
		return n.verdict.at.Time()
	}
	return time.Time{}
}

// State returns where the node stands, StateGone for a node the Rollout
// does not hold; why says why a failed node failed.
func (r *Rollout) State(node string) (s State, why string) {
	n, ok := r.nodes[node]
	if !ok {
		return StateGone, ""
	}
	return n.verdict.state, n.verdict.why()
}

// NoticeKind says what a Notice is about.
type NoticeKind int

const (
	// NoticeHoldEnded: an owner's hold stopped holding a node by the
	// clock: it ended, or reached its limit (LimitReached).
	NoticeHoldEnded NoticeKind = iota
	// NoticeZoneInvalid: a candidate's node names an invalid time zone
	// (Err); windowed rollouts pass it by.
	NoticeZoneInvalid
	// NoticePullFailed: a node's pre-download failed for good (Why names
	// the image and the error): a failure of the rollout, no pod lost.
	NoticePullFailed
	// NoticeProven: a node proved alive after its new pod settled, and
	// settled, by Proof; Wait is how long this Rollout saw it waiting for
	// that proof, by the controller's clock (zero when the proof was there
	// at its first sight of the pod settled), measured only when Waited (a
	// Rollout built afresh did not see the wait begin).
	NoticeProven
	// NoticePinned: the first node of an architecture (Arch) settled on
	// the target and proved alive, and its digests were pinned (Pin; its
	// Unpinnable containers go on with their tags).
	NoticePinned
	// NoticeDigestMismatch: a node's new pod runs another digest than its
	// architecture's pin, and failed as it settled (Why names both).
	NoticeDigestMismatch
)

// Notice is a change a judgement saw that deserves an event.
type Notice struct {
	Kind         NoticeKind
	Node         string
	Pod          *Pod
	At           time.Time
	LimitReached bool
	Err          error
	Why          string
	Proof        Proof
	Wait         time.Duration
	Waited       bool
	Arch         string
	Pin          *Pin
	// Revision is the target's hash, for NoticePinned.
	Revision string
}

// timeCounts counts nodes by a time; candidates of one DaemonSet share few
// distinct times (a window's opening per zone, a hold limit), so its
// earliest and latest are cheap to find.
type timeCounts map[unixtime.Time]int

func (tc timeCounts) add(t unixtime.Time, n int) {
	if tc[t] += n; tc[t] == 0 {
		delete(tc, t)
	}
}

func (tc timeCounts) total() int {
	n := 0
	for _, c := range tc {
		n += c
	}
	return n
}

// earliest and latest are zero when there are no nodes.
func (tc timeCounts) earliest() time.Time {
	var t unixtime.Time
	for at := range tc {
		if t.IsZero() || at < t {
			t = at
		}
	}
	return t.Time()
}

func (tc timeCounts) latest() time.Time {
	var t unixtime.Time
	for at := range tc {
		if t.IsZero() || at > t {
			t = at
		}
	}
	return t.Time()
}

// timerEntry is a node's timer.
type timerEntry struct {
	at   unixtime.Time
	node string
}

// timerHeap orders timers by time (container/heap).
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
