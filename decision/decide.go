package decision

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// Decision is what a Rollout decides at one instant, for both strategies:
// the one place where the failure brake halts, where the budget admits
// nodes, and where offers are made. The controller acts on it and reports
// it; it never decides anything itself.
type Decision struct {
	// Status is where the rollout stands, for the rollout status annotation,
	// the metrics and the events.
	Status rollout.Status
	// Take are the old pods to take now, each deleted or patched in place
	// as its Take says (AdvancedRollingUpdate, OTA offers past their
	// deadline, and OTA owners' requests for an upgrade in place): the
	// owners' requests first, whatever the budget, then within the budget
	// down ones, then available ones in node name order. Each node has an
	// in-flight entry in the ledger, maybe written ahead: it must be written
	// before the pod is deleted or patched.
	Take []Take
	// Offered are the nodes offered the target in this decision (OTA): their
	// entries are in the ledger, and PodNeedUpgrade=True may be written once
	// they are.
	Offered []string
	// Pull are the old pods whose node should start pre-downloading the
	// target's images now, within the parallelism.
	Pull []Take
	// Wake is when a verdict next changes by the clock alone, after now; zero
	// when only an event can change one (budget, pause, halt, a node's
	// return).
	Wake time.Time
	// Unavailable and Allowed are the budget: nodes unavailable now, and how
	// many more the rollout may take.
	Unavailable, Allowed int
	// MaxUnavailable and MaxFailed are the settings resolved over the nodes.
	MaxUnavailable, MaxFailed int
	// Waiting names the settled nodes whose pod is down while their node is
	// Ready, when the rollout waits for the budget they hold: a Warning
	// names them.
	Waiting []string
	// WaitingForPull counts the nodes the budget would take now but for
	// their download.
	WaitingForPull int
}

// Take is an old pod the rollout replaces: deleted (the native DaemonSet
// controller creates its replacement from the template), or, when InPlace
// is set, patched: its images as InPlace.Images says, and its two revision
// labels, the pod staying.
type Take struct {
	Node    string
	Pod     *Pod
	InPlace *inplace.Plan
	// Recreate says why a pod of a DaemonSet that upgrades in place
	// (edgeota.io/update-method InPlaceIfPossible) is deleted instead;
	// empty for a patch, or when the DaemonSet recreates anyway.
	Recreate string
}

// aheadMark is what the last Decide wrote ahead: unchanged takeable nodes
// and ledger, the same nodes would be written ahead again.
type aheadMark struct {
	takeableChanges uint64
	limit           int
	taken           int
	pulled          int
	pins            int
}

// Decide decides at now, after Refresh. It records in the ledger the offers
// it makes and the in-flight entries it writes ahead for the next wave.
func (r *Rollout) Decide(now time.Time) Decision {
	nodes := len(r.nodes)
	d := Decision{MaxUnavailable: r.cfg.MaxUnavailable(nodes), MaxFailed: r.cfg.MaxFailed(nodes)}
	failed := r.ledger.Failed()
	halted := failed >= d.MaxFailed
	ota := r.cfg.Strategy == rollout.StrategyOTA

	// The budget: in-flight, failed and down nodes count against it (down:
	// an old pod unavailable, or a settled node's pod unavailable, while
	// the node is Ready); the rollout takes within what is left, the down
	// old pods at no cost.
	d.Unavailable = r.counts[StateInFlight] + r.counts[StateFailed] + r.counts[StateOldDown] + r.counts[StateSettledDown]
	// The owners' requests for upgrades in place (OTA) go whatever the
	// budget, pause, windows and holds, as an owner's deletion of a pod
	// would; never once halted (the offers are withdrawn then). In flight,
	// they count against the budget: the controller takes fewer of its own
	// meanwhile.
	var requests []Take
	if !halted {
		for _, node := range r.Requested() {
			requests = append(requests, r.take(node, r.nodes[node].oldPod))
		}
	}
	d.Allowed = max(d.MaxUnavailable-d.Unavailable-len(requests), 0)

	// The pre-download gate: once the canary nodes settled, a node is taken
	// only once its images are on it (or its pull timed out, when the
	// settings say to take it then).
	gate := r.cfg.PreDownload && r.updated() >= r.cfg.PullCanary
	var heldBack, admitted int
	if ota {
		heldBack, admitted, d.Offered = r.offer(now, halted)
		if r.cfg.UpgradeDeadline > 0 && !halted && !r.cfg.Paused {
			// Offers past their deadline are carried out as
			// AdvancedRollingUpdate would: within the budget (the owners'
			// own upgrades in flight count against it), in the node's
			// window, after any hold's limit.
			ch := r.choose(d.Allowed, false, gate)
			d.Take, d.WaitingForPull = r.takes(&ch), ch.waiting
			r.writeAhead(d.MaxUnavailable+len(d.Take), false, gate, len(d.Take))
		}
	} else {
		ch := r.choose(d.Allowed, true, gate)
		heldBack, admitted = ch.heldBack, r.olds.Len()-(ch.heldBack-r.outside-r.zoneInvalid)
		d.WaitingForPull = ch.waiting
		if !halted && !r.cfg.Paused {
			d.Take = r.takes(&ch)
			r.writeAhead(d.MaxUnavailable+len(d.Take), true, gate, len(d.Take))
		}
	}
	d.Take = r.patchable(append(requests, slices.DeleteFunc(d.Take, func(t Take) bool { return r.requested[t.Node] })...))
	if gate && !halted && !r.cfg.Paused {
		d.Pull = r.pulls(nodes)
	}
	if len(r.settledDown) > 0 && d.Allowed == 0 && !halted && !r.cfg.Paused && (!ota || r.cfg.UpgradeDeadline > 0) &&
		len(r.choose(1, !ota, gate).take) > 0 {
		// A node the controls would take now waits for the budget the
		// settled nodes' down pods hold.
		d.Waiting = sortedNames(r.settledDown)
	}
	d.Status = r.status(&d, failed, halted, heldBack, admitted)
	d.Wake = r.NextChange()
	return d
}

// choice is what the operator's controls and the clock let a rollout take
// now.
type choice struct {
	// replace are old pods down anyway: replacing them frees no budget and
	// costs none.
	replace []*nodeInfo
	// take are available old pods, in node name order, at most the limit
	// asked for.
	take []*nodeInfo
	// heldBack counts the candidates the node selector or the partition
	// keep on the old revision.
	heldBack int
	// waiting counts the candidates the limit would take now but for their
	// download (the pre-download gate).
	waiting int
}

// takes are the choice's takes, each a deletion or a patch (Rollout.take).
func (r *Rollout) takes(ch *choice) []Take {
	out := make([]Take, 0, len(ch.replace)+len(ch.take))
	for _, list := range [][]*nodeInfo{ch.replace, ch.take} {
		for _, n := range list {
			out = append(out, r.take(n.name, n.oldPod))
		}
	}
	return out
}

// patchable leaves out of takes the patches the caches do not allow yet:
// while the DaemonSet's template, as cached, is not the target revision's
// (Target.TemplateCurrent), a patch could not label its pod with the
// target's template generation. They wait for the cache that lags, whose
// event syncs the DaemonSet again; deletions go on.
func (r *Rollout) patchable(takes []Take) []Take {
	if r.target.TemplateCurrent {
		return takes
	}
	return slices.DeleteFunc(takes, func(t Take) bool { return t.InPlace != nil })
}

// partitionQuota is how many more of the nodes the rollout may touch may
// move to the target revision under the partition (all but the partition,
// less those already on it, moving to it or offered it); -1 without one.
func (r *Rollout) partitionQuota() int {
	partition := r.cfg.Partition(r.eligible)
	if partition < 0 {
		return -1
	}
	return max(r.eligible-partition-r.taken, 0)
}

// choose picks, in node name order, the old pods the rollout may replace
// now, taking at most limit available ones; partitioned says whether the
// partition applies to these deletions (for OTA it bounds the offers
// instead). Without a partition it reads only the nodes it takes (the
// ordered set of takeable nodes), so that its cost follows the wave, not
// the fleet. With one, it walks the candidates in name order: each node the
// partition lets through uses up one of its quota, whether the clock lets it
// go now or not (a node whose window is closed waits; the next one does not
// take its place), so the partition keeps its exact meaning.
func (r *Rollout) choose(limit int, partitioned, gate bool) choice {
	ch := choice{heldBack: r.outside + r.zoneInvalid}
	canaries := r.canaries()
	quota := -1
	if partitioned {
		quota = r.partitionQuota()
	}
	if quota < 0 {
		for _, node := range sortedNames(r.downs) {
			if n := r.nodes[node]; r.ready(n, gate) && canaries.allows(n) {
				canaries.take(n)
				ch.replace = append(ch.replace, n)
			}
		}
		takeable := r.takeable
		if gate {
			takeable = r.takeablePulled // the gate passes only these
		}
		takeable.Ascend(func(node string) bool {
			if len(ch.take) >= limit || canaries.open == 0 {
				return false
			}
			if n := r.nodes[node]; canaries.allows(n) {
				// Its architecture's pin exists, or its canaries are
				// not all in flight yet.
				canaries.take(n)
				ch.take = append(ch.take, n)
			}
			return true
		})
		if gate {
			ch.waiting = min(limit-len(ch.take), r.takeable.Len()-r.takeablePulled.Len())
		}
		return ch
	}
	visited := 0
	r.olds.Ascend(func(node string) bool {
		if quota == 0 {
			return false
		}
		quota--
		visited++
		switch n := r.nodes[node]; {
		case !r.ready(n, gate):
			// Its images are not on it yet: it waits for them, in its
			// turn.
			if n.takeable && len(ch.take)+ch.waiting < limit {
				ch.waiting++
			}
		case !canaries.allows(n):
			// Its architecture's canaries are in flight, its pin not
			// written yet: it waits for it, in its turn.
		case n.down:
			// Down anyway: replaced, in the quota.
			canaries.take(n)
			ch.replace = append(ch.replace, n)
		case n.takeable && len(ch.take) < limit:
			// Within the quota, in name order.
			canaries.take(n)
			ch.take = append(ch.take, n)
		}
		return true
	})
	ch.heldBack += r.olds.Len() - visited
	return ch
}

// ready reports whether the gate of pre-downloads lets the node be taken:
// always without it; with it, once its images are on it, or once its pull
// timed out if the settings take such nodes.
func (r *Rollout) ready(n *nodeInfo, gate bool) bool {
	return !gate || n.verdict.pulled || n.verdict.pullTimedOut && r.cfg.TakeOnPullTimeout
}

// updated counts the nodes that run the target, settled.
func (r *Rollout) updated() int {
	return r.counts[StateSettled] + r.counts[StateSettledDown] + r.skippedUpdated
}

// pulls picks the nodes to start pre-downloading now, in the order their
// turns come (name order), as many as the parallelism leaves (the pulls
// under way, and the controller's Jobs of finished pulls not deleted yet,
// hold their places): for
// AdvancedRollingUpdate the candidates the partition lets through (those
// whose window is closed, or whose owner holds them, included: their turn
// comes, and the window is spent upgrading, not downloading); for OTA the
// offered nodes.
func (r *Rollout) pulls(nodes int) []Take {
	room := r.cfg.PullParallelism(nodes) - r.pulling - r.pullJobs
	if room <= 0 {
		return nil
	}
	quota := -1
	if r.cfg.Strategy != rollout.StrategyOTA {
		quota = r.partitionQuota()
	}
	var out []Take
	if quota < 0 {
		r.toPull.Ascend(func(node string) bool {
			out = append(out, Take{Node: node, Pod: r.nodes[node].oldPod})
			return len(out) < room
		})
		return out
	}
	r.olds.Ascend(func(node string) bool {
		if quota == 0 || len(out) >= room {
			return false
		}
		quota--
		if n := r.nodes[node]; n.toPull {
			out = append(out, Take{Node: node, Pod: n.oldPod})
		}
		return true
	})
	return out
}

// writeAhead records in-flight entries ahead for the nodes the rollout
// takes next (as many as limit), so that when a proof of life frees the
// budget the deletions go at once, without waiting for a write; taking are
// the nodes being taken now. A decision that changed none of the takeable
// nodes (most of a rollout's: a new pod's progress, a heartbeat) finds the
// same nodes with their entries as the last left them, and skips the scan.
func (r *Rollout) writeAhead(limit int, partitioned, gate bool, taking int) {
	mark := aheadMark{takeableChanges: r.takeableChanges, limit: limit, taken: taking, pulled: r.pulled, pins: len(r.ledger.Meta().Pins)}
	if taking == 0 && r.ahead == mark {
		return
	}
	r.ahead = mark
	for _, n := range r.choose(limit, partitioned, gate).take {
		r.ledger.TakeAhead(n.name, n.oldPod, r.take(n.name, n.oldPod).InPlace)
	}
}

// TakeAhead records an in-flight entry written ahead of the deletion of the
// node's old pod, or of the patch of its images (plan; nil: a deletion),
// unless it holds that very entry already: the one place such an entry is
// made. An upgrade in place keeps the pod's generation and containers as
// cached, which its patch is conditional on (the pod's resourceVersion): a
// pod that changed since has its entry made again, and written again before
// the patch. It keeps the node's first offer.
func (l *Ledger) TakeAhead(node string, pod *Pod, plan *inplace.Plan) {
	e, ok := l.Entry(node)
	var in *InPlace
	if plan != nil {
		in = inPlaceOf(pod, plan)
	}
	if ok && e.Stage == StageInFlight && e.Pod == pod.UID && e.InPlace.Equal(in) {
		return
	}
	l.Set(node, Entry{Stage: StageInFlight, Pod: pod.UID, OfferedAt: e.OfferedAt, InPlace: in}, false)
}

// Taken records that the deletion of the node's old pod (or the patch of
// its images) was issued at now: the deadline of a node whose replacement
// never comes, or whose patched containers never settle, counts from it.
func (l *Ledger) Taken(node string, pod *Pod, now time.Time) {
	e, _ := l.Entry(node)
	in := e.InPlace
	if e.Pod != pod.UID {
		in = nil
	}
	l.Set(node, Entry{Stage: StageInFlight, Pod: pod.UID, Since: timeOf(now), OfferedAt: e.OfferedAt, InPlace: in}, false)
}

// Patched records the generation the patch of the node's pod returned: the
// kubelet has taken the patch once it reports it observed.
func (l *Ledger) Patched(node string, pod types.UID, generation int64) {
	e, ok := l.Entry(node)
	if !ok || e.Stage != StageInFlight || e.Pod != pod || e.InPlace == nil || e.InPlace.Generation == generation {
		return
	}
	in := *e.InPlace
	in.Generation = generation
	e.InPlace = &in
	l.Set(node, e, false)
}

// Untaken puts back an entry written ahead when a deletion or patch failed:
// the old pod is a candidate again.
func (l *Ledger) Untaken(node string, pod *Pod) {
	e, _ := l.Entry(node)
	in := e.InPlace
	if e.Pod != pod.UID {
		in = nil
	}
	l.Set(node, Entry{Stage: StageInFlight, Pod: pod.UID, OfferedAt: e.OfferedAt, InPlace: in}, false)
}

// offer makes the OTA offers the controls admit now: none while paused or
// halted; without a partition, to every eligible node with a live old pod;
// with one, in node name order to Ready ones, up to its quota (a standing
// offer counts as taken). It returns the candidates held back, those
// admitted (offered, or held by a pause) and the nodes offered now.
func (r *Rollout) offer(now time.Time, halted bool) (heldBack, admitted int, offered []string) {
	heldBack = r.outside
	quota := r.partitionQuota()
	var admit []string
	r.unoffered.Ascend(func(node string) bool {
		switch n := r.nodes[node]; {
		case quota < 0:
			// No partition: every eligible node.
			admit = append(admit, node)
		case quota > 0 && n.verdict.state != StateSkipped:
			// Within the partition's quota, in name order, Ready ones.
			quota--
			admit = append(admit, node)
		default:
			// Past the quota, or NotReady: passed over.
			heldBack++
		}
		return true
	})
	if r.cfg.Paused || halted {
		return heldBack, len(admit), nil
	}
	for _, node := range admit {
		e, _ := r.ledger.Entry(node)
		e.Stage, e.OfferedAt = StageOffered, timeOf(now)
		r.ledger.Set(node, e, false)
		// Offered: taken by the partition, counted among the offers, and
		// due at its deadline (the verdict was judged without one).
		n := r.nodes[node]
		r.remove(n)
		n.offeredAt, n.unoffered, n.taken = unixtime.Of(e.OfferedAt.Time), false, n.eligible
		if n.old {
			// Its owner may have asked already (a request this very
			// offer makes good).
			n.verdict.requested = ownerRequested(&r.cfg, &r.target, r.planFor, n.oldPod, true)
		}
		if r.cfg.UpgradeDeadline > 0 && n.old {
			if due := unixtime.Of(e.OfferedAt.Add(r.cfg.UpgradeDeadline)); n.verdict.at.IsZero() || due < n.verdict.at {
				n.verdict.at = due
			}
		}
		n.toPull = r.wantsPull(n)
		r.add(n)
	}
	return heldBack, len(admit), admit
}

// status summarises the rollout; it reports the decision, never makes it.
func (r *Rollout) status(d *Decision, failed int, halted bool, heldBack, admitted int) rollout.Status {
	s := rollout.Status{
		Revision: r.target.Number, Hash: r.target.Hash, Strategy: r.cfg.Strategy,
		Updated: r.counts[StateSettled] + r.counts[StateSettledDown] + r.skippedUpdated, Total: len(r.nodes),
		InFlight: r.counts[StateInFlight], Skipped: r.counts[StateSkipped], Failed: r.shownFailures(failed),
		HeldBack: heldBack, Paused: r.cfg.Paused, Halted: halted,
	}
	if n := r.held.total(); n > 0 {
		s.Held = &rollout.TimedNodes{Count: n, At: &metav1.Time{Time: r.held.latest()}}
	}
	if n := r.waiting.total(); n > 0 {
		s.WaitingForWindow = &rollout.TimedNodes{Count: n, At: &metav1.Time{Time: r.waiting.earliest()}}
	}
	if n := r.offered.total(); n > 0 && !halted {
		s.Offered = &rollout.TimedNodes{Count: n}
		if r.cfg.UpgradeDeadline > 0 {
			s.Offered.At = &metav1.Time{Time: r.offered.earliest().Add(r.cfg.UpgradeDeadline)}
		}
	}
	if r.cfg.PreDownload && (r.pulling+r.pulled+r.counts[StatePullFailed] > 0) {
		s.Pulls = &rollout.Pulls{InFlight: r.pulling, Done: r.pulled, Failed: r.counts[StatePullFailed], TimedOut: r.pullTimedOut,
			Waiting: d.WaitingForPull}
	}
	if n := len(r.settledDown); n > 0 {
		names := sortedNames(r.settledDown)
		s.SettledUnavailable = &rollout.NodeList{Count: n, Nodes: names[:min(n, rollout.ShownNodes)]}
	}
	if answer, heartbeat := r.proven[ProofAnswer], r.proven[ProofHeartbeat]; answer+heartbeat > 0 {
		s.Proven = &rollout.ProvenNodes{Answer: answer, Heartbeat: heartbeat}
	}
	if r.cfg.InPlace {
		s.UpdateMethod = rollout.MethodInPlaceIfPossible
		count := 0
		for _, n := range r.recreate {
			count += n
		}
		if count > 0 {
			s.Recreate = &rollout.Recreated{Count: count, Reasons: maps.Clone(r.recreate)}
		}
	}
	if r.cfg.Pin {
		s.Pins = r.pinStatus()
	}
	what := "node"
	if r.cfg.Strategy == rollout.StrategyOTA {
		what = "upgraded node"
	}
	if failed != 1 {
		what += "s"
	}
	switch {
	case halted:
		s.Reason = fmt.Sprintf("%d %s failed (max-failed %d)", failed, what, d.MaxFailed)
	case r.cfg.Paused:
		s.Reason = rollout.PausedAnnotation + " is true"
		s.HeldBack += admitted
	case len(d.Waiting) > 0:
		s.Reason = fmt.Sprintf("waiting for %d settled %s whose pod is unavailable", len(d.Waiting), plural(len(d.Waiting), "node", "nodes"))
	default:
		canaries := r.canaries()
		if archs := canaries.waiting(); len(archs) > 0 {
			s.Reason = fmt.Sprintf("waiting for the canaries of %s to settle: their digests are pinned first (%s)", archNames(archs), rollout.PinAnnotation)
		}
	}
	return s
}

// pinStatus is the record's pins as the status shows them: each
// architecture's canary, and its containers by repository@digest (the
// target's repository), or why they could not be pinned.
func (r *Rollout) pinStatus() map[string]rollout.Pin {
	pins := r.ledger.Meta().Pins
	if len(pins) == 0 {
		return nil
	}
	out := make(map[string]rollout.Pin, len(pins))
	for arch, p := range pins {
		shown := rollout.Pin{Canary: p.Canary, Unpinnable: p.Unpinnable}
		for c, d := range p.Digests {
			if shown.Images == nil {
				shown.Images = make(map[string]string, len(p.Digests))
			}
			if image, ok := r.target.Images[c]; ok {
				d = imageref.Pinned(image, d)
			}
			shown.Images[c] = d
		}
		out[arch] = shown
	}
	return out
}

// archNames lists architectures for a message; a node without the label
// is named so.
func archNames(archs []string) string {
	names := make([]string, len(archs))
	for i, a := range archs {
		names[i] = a
		if a == "" {
			names[i] = "nodes without " + corev1.LabelArchStable
		}
	}
	return strings.Join(names, ", ")
}

// shownFailures caches the failures as the status shows them: a sync builds
// the status every time, and failures only ever grow, so the same count is
// the same set.
type shownFailures struct {
	count int
	shown rollout.FailedNodes
	why   string
}

// shownFailures is the record's failures as the status shows them: the
// count, and the first rollout.ShownNodes in name order with why.
func (r *Rollout) shownFailures(failed int) rollout.FailedNodes {
	r.describeFailures(failed)
	return r.shown.shown
}

// FailureSummary names the failed nodes with why, for an event.
func (r *Rollout) FailureSummary() string {
	r.describeFailures(r.ledger.Failed())
	return r.shown.why
}

func (r *Rollout) describeFailures(failed int) {
	if r.shown.count == failed && (failed == 0 || r.shown.shown.Count == failed) {
		return
	}
	names, why := r.ledger.FailedNodes()
	shown := rollout.FailedNodes{Count: failed, Lost: r.ledger.Meta().LostFailures}
	var b strings.Builder
	for _, n := range names[:min(len(names), rollout.ShownNodes)] {
		shown.Nodes = append(shown.Nodes, n)
		if why[n] != "" {
			if shown.Reasons == nil {
				shown.Reasons = map[string]string{}
			}
			shown.Reasons[n] = why[n]
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n)
		if why[n] != "" {
			b.WriteString(" (" + why[n] + ")")
		}
	}
	if more := len(names) - len(shown.Nodes); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	if shown.Lost > 0 {
		fmt.Fprintf(&b, "; and %d no longer in the rollout record", shown.Lost)
	}
	r.shown = shownFailures{count: failed, shown: shown, why: b.String()}
}

// NeedUpgrade is the PodNeedUpgrade condition the node's pod should carry:
// False, naming the target, on a pod that runs it; on an out-of-date pod,
// True on a node the controller offered the target (its ledger entry, never
// the pod's own condition), False with why otherwise. durable reports whether
// the node's offer is written in the record: a True is written on a pod only
// then. ok is false when nothing should be written for now (an offer not
// durable yet).
func (r *Rollout) NeedUpgrade(d *Decision, pod *Pod, durable bool) (want Condition, ok bool) {
	want = Condition{Status: "False", Message: podcondition.RevisionMessage(r.target.Hash)}
	if r.target.UpToDate(pod) {
		return want, true
	}
	entry, _ := r.ledger.Entry(pod.Node)
	n := r.nodes[pod.Node]
	switch {
	case d.Status.Halted:
		// Offers not taken yet are withdrawn.
		want.Reason, want.Message = podcondition.ReasonRolloutHalted, podcondition.FailureMessage(r.target.Hash, "rollout halted: "+d.Status.Reason)
	case entry.OfferedAt != nil && !durable:
		// Offered, the record not written yet: wait for it.
		return want, false
	case entry.OfferedAt != nil:
		// An offer made stands, paused or not.
		want.Status = "True"
	default:
		// Held back by pause, selector or partition.
		why := "held back by " + rollout.PartitionAnnotation
		switch {
		case r.cfg.Paused:
			why = rollout.PausedAnnotation + " is true"
		case n != nil && !n.eligible:
			why = "node outside " + rollout.RolloutNodeSelectorAnnotation
		}
		want.Reason, want.Message = podcondition.ReasonNotOffered, podcondition.FailureMessage(r.target.Hash, why)
	}
	return want, true
}

// Offer is the channel entry (podchannel.Offer) that goes with the
// PodNeedUpgrade condition of an out-of-date pod on the node: the target
// revision's images (its own, not the DaemonSet's template, which a cache
// may show a change ahead of its revision; templateImages serves a
// revision whose data names none; for a pod moving in place, those its
// architecture's pin holds by repository@digest) and progress deadline, the first offer
// and the upgrade deadline that follows, as the controller recorded them,
// the limit of holds, and whether the pod moves in place (the owner's
// upgrade is then a request for the controller). A copy for the agent to
// show and act on: the controller never reads it back.
func (r *Rollout) Offer(node string, templateImages func() map[string]string) *podchannel.Offer {
	o := &podchannel.Offer{Revision: r.target.Hash, Images: r.target.Images}
	if o.Images == nil {
		o.Images = templateImages()
	}
	if r.cfg.DeadlineSet {
		o.ProgressDeadlineSeconds = int64(r.cfg.Deadline / time.Second)
	}
	if e, ok := r.ledger.Entry(node); ok && e.OfferedAt != nil {
		o.OfferedAt = e.OfferedAt
		if r.cfg.UpgradeDeadline > 0 {
			o.UpgradeDeadline = &metav1.Time{Time: e.OfferedAt.Add(r.cfg.UpgradeDeadline)}
		}
	}
	o.HoldLimit = &metav1.Time{Time: r.cfg.HoldLimit(r.ledger.Meta().TargetSince.Time)}
	if n, ok := r.nodes[node]; ok && n.oldPod != nil {
		o.InPlace = r.planFor(n.oldPod).InPlace
	}
	if o.InPlace {
		// What the controller's patch will write: the pinned digests,
		// once the node's architecture has a pin.
		o.Images = r.pinned(node, o.Images)
	}
	return o
}

// PinnedImages are the images a pull for the node's old pod names by
// digest (container → repository@digest): the containers its patch will
// write so, once its architecture has a pin, for a pod that moves in
// place; nil otherwise (a recreated pod runs the template's tag, which a
// pull by digest would not serve).
func (r *Rollout) PinnedImages(node string) map[string]string {
	n, ok := r.nodes[node]
	if !ok || n.oldPod == nil {
		return nil
	}
	plan := r.planFor(n.oldPod)
	if !plan.InPlace {
		return nil
	}
	var out map[string]string
	for c, image := range r.pinned(node, plan.Images) {
		if image != plan.Images[c] {
			if out == nil {
				out = map[string]string{}
			}
			out[c] = image
		}
	}
	return out
}

// TagPull is what the pin makes of the node's pre-download, done by the
// controller's Job with images named by tag (TagPullCounts when it is none
// such): whether its Job waits for the pin, is written as the node's, or
// goes.
func (r *Rollout) TagPull(node string) TagPull {
	if n, ok := r.nodes[node]; ok {
		return n.verdict.tagPull
	}
	return TagPullCounts
}

// Arch returns the node's architecture (its kubernetes.io/arch label): the
// offers of nodes of one architecture and method are the same.
func (r *Rollout) Arch(node string) string {
	if n, ok := r.nodes[node]; ok {
		return n.arch
	}
	return ""
}

func sortedNames(set map[string]bool) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
