package decision

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// TestIncrementalEqualsRebuilt drives a DaemonSet's nodes through random
// sequences of events, each marking the node it changed dirty as the
// controller's handlers do, and checks after every refresh that the
// incremental Rollout equals one built afresh from the same facts and
// ledger at the same instant (counts, ordered candidates, timers, every
// node's verdict), and that no timer is ever set at or before the instant
// it was set: a verdict's next change is always in the future, so nothing
// spins.
func TestIncrementalEqualsRebuilt(t *testing.T) {
	for seed := range uint64(150) {
		for _, strategy := range []rollout.Strategy{rollout.StrategyAdvancedRollingUpdate, rollout.StrategyOTA} {
			t.Run(fmt.Sprintf("%s/seed-%d", strategy, seed), func(t *testing.T) {
				runEvents(t, strategy, rand.New(rand.NewPCG(seed, 17)), 80)
			})
		}
	}
}

func runEvents(t *testing.T, strategy rollout.Strategy, r *rand.Rand, steps int) {
	annotations := map[string]string{rollout.MaxUnavailableAnnotation: "3", rollout.ProgressDeadlineAnnotation: "30"}
	if r.IntN(3) == 0 {
		annotations[rollout.PartitionAnnotation] = fmt.Sprint(r.IntN(5))
	}
	if r.IntN(3) == 0 {
		annotations[rollout.RolloutNodeSelectorAnnotation] = "fleet!=b"
	}
	if r.IntN(3) == 0 {
		annotations[rollout.MaintenanceWindowAnnotation] = "daily 12:02-12:05; daily 12:07-12:09 Asia/Tokyo"
	}
	if r.IntN(2) == 0 {
		annotations[rollout.UpgradeDeadlineAnnotation] = fmt.Sprint(20 + r.IntN(70))
		annotations[rollout.MaxHoldAnnotation] = "7200"
	}
	if r.IntN(4) == 0 {
		annotations[rollout.MaxFailedAnnotation] = "2"
	}
	if r.IntN(2) == 0 {
		annotations[rollout.UpdateMethodAnnotation] = string(rollout.MethodInPlaceIfPossible)
	}
	if r.IntN(3) == 0 {
		annotations[rollout.PreDownloadAnnotation] = "true"
		annotations[rollout.PreDownloadParallelismAnnotation] = "3"
		annotations[rollout.PreDownloadTimeoutAnnotation] = "50"
		annotations[rollout.PreDownloadOnTimeoutAnnotation] = []string{"take", "skip"}[r.IntN(2)]
	}
	w := newWorld(t, 10, strategy, annotations)
	w.cfg.MinReadySeconds = int32(r.IntN(3))
	for name, n := range w.nodes {
		if r.IntN(4) == 0 {
			n.Ready, n.ReadyStatus = false, "Unknown"
		}
		if r.IntN(5) == 0 {
			w.pods[name][0].NeedUpgrade = offeredCondition() // an older edgeota's offer, or a forgery
		}
	}
	w.build(r.IntN(2) == 0)
	for step := range steps {
		what := w.step(r)
		if r.IntN(3) != 0 {
			continue
		}
		w.refresh()
		w.checkAgainstRebuild(t, step, what)
		w.checkTimers(t, step, what)
		d := w.r.Decide(w.now)
		w.startPulls(d)
		w.carryOut(d)
		if r.IntN(2) == 0 {
			w.deliverDeletions()
		}
	}
}

// checkAgainstRebuild compares the Rollout with one built afresh now from
// the same facts and a copy of the ledger.
func (w *world) checkAgainstRebuild(t *testing.T, step int, what string) {
	t.Helper()
	fresh := New(w.cfg, w.target, NewLedger(w.ledger.Entries(), w.ledger.Meta()), false)
	fresh.Build(w.now, slices.Collect(maps.Keys(w.pods)), w.facts)
	if diff := cmp.Diff(snapshotOf(fresh), snapshotOf(w.r)); diff != "" {
		t.Fatalf("after step %d (%s): incremental differs from a rebuild (-rebuild +incremental):\n%s", step, what, diff)
	}
}

// checkTimers fails on a timer at or before now.
func (w *world) checkTimers(t *testing.T, step int, what string) {
	t.Helper()
	for name, n := range w.r.nodes {
		if !n.verdict.at.IsZero() && !n.verdict.at.Time().After(w.now) {
			t.Fatalf("after step %d (%s): node %s's timer at %s, not after now %s", step, what, name, n.verdict.at.Time(), w.now)
		}
	}
	if next := w.r.NextChange(); !next.IsZero() && !next.After(w.now) {
		t.Fatalf("after step %d (%s): the next change at %s, not after now %s", step, what, next, w.now)
	}
}

// step makes one random change, marks what it touched dirty, and says what
// it was.
func (w *world) step(r *rand.Rand) string {
	node := fmt.Sprintf("node-%d", r.IntN(len(w.nodes)))
	pods := w.pods[node]
	anyPod := func() *Pod {
		if len(pods) == 0 {
			return nil
		}
		return pods[r.IntN(len(pods))]
	}
	change := func(p *Pod, f func(*Pod)) {
		q := *p
		f(&q)
		w.seq++
		q.ResourceVersion = fmt.Sprint(w.seq)
		for i := range w.pods[node] {
			if w.pods[node][i] == p {
				w.pods[node][i] = &q
			}
		}
		w.dirty[node] = true
	}
	switch r.IntN(16) {
	case 14:
		// The node's kubelet takes the patch of its pod: a new container,
		// Ready or not.
		for _, p := range pods {
			if p.Hash == newHash && p.Health.Run.ObservedGeneration < p.Health.Run.Generation {
				w.restartInPlace(node, w.now, r.IntN(3) != 0)
				return "restart in place on " + node
			}
		}
	case 15:
		// The owner asks for an upgrade in place of the node's old pod
		// (or a node forges one for another revision).
		if p := anyPod(); p != nil && p.Hash == oldHash {
			change(p, func(q *Pod) {
				rare := RarePod{}
				if q.Rare != nil {
					rare = *q.Rare
				}
				rare.Requested = []string{newHash, "other"}[r.IntN(2)]
				q.Rare = &rare
			})
			return "an upgrade request on " + p.Name
		}
	case 13:
		// A pull moves on: starts, succeeds, or fails for good.
		p := Pull{State: []PullState{PullPending, PullDone, PullFailed}[r.IntN(3)], Since: w.now, ByController: true, Why: "manifest unknown"}
		w.pulls[node] = p
		w.dirty[node] = true
		return "a pull on " + node
	case 0:
		w.advance(time.Duration(r.IntN(40)) * time.Second)
		return "time passes"
	case 1:
		w.setNode(node, func(n *Node) {
			n.Ready = !n.Ready
			n.ReadyStatus = map[bool]string{true: "True", false: "Unknown"}[n.Ready]
			n.Heartbeat = w.now
		})
		return "readiness of " + node
	case 2:
		w.heartbeat(node, w.now.Add(time.Second))
		return "heartbeat of " + node
	case 3:
		w.setNode(node, func(n *Node) { n.Labels = map[string]string{"fleet": []string{"a", "b"}[r.IntN(2)]} })
		return "labels of " + node
	case 4:
		p := w.pod(node, newHash, false)
		p.Created = unixtime.Of(w.now)
		switch r.IntN(4) {
		case 0:
		case 1:
			crashLoop(p)
		case 2:
			p.Bound = false
			setUnscheduled(p, "Unschedulable: 0/10 nodes are available")
		default:
			setReady(p, true, w.now)
		}
		w.pods[node] = append(w.pods[node], p)
		w.dirty[node] = true
		return "replacement on " + node
	case 5:
		if p := anyPod(); p != nil {
			change(p, func(q *Pod) { setReady(q, r.IntN(2) == 0, w.now) })
			return "readiness of pod " + p.Name
		}
	case 6:
		if p := anyPod(); p != nil {
			w.pods[node] = slices.DeleteFunc(w.pods[node], func(q *Pod) bool { return q == p })
			w.dirty[node] = true
			return "pod " + p.Name + " gone"
		}
	case 7:
		if p := anyPod(); p != nil && !p.Terminating {
			change(p, func(q *Pod) { q.Terminating, q.TerminatingSince = true, unixtime.Of(w.now) })
			return "pod " + p.Name + " terminating"
		}
	case 8:
		if p := anyPod(); p != nil && !p.Bound {
			change(p, func(q *Pod) { q.Bound = true; setUnscheduled(q, ""); setReady(q, true, w.now) })
			return "pod " + p.Name + " bound"
		}
	case 9:
		if p := anyPod(); p != nil {
			change(p, func(q *Pod) {
				if q.HoldUntil().IsZero() {
					setHold(q, w.now.Add(time.Duration(1+r.IntN(120))*time.Second))
				} else {
					setHold(q, time.Time{})
				}
			})
			return "hold on pod " + p.Name
		}
	case 10:
		zone := []string{"Asia/Tokyo", "America/New_York", "UTC", "Nowhere/Land"}[r.IntN(4)]
		w.setNode(node, func(n *Node) {
			n.Zone, n.ZoneErr = window.NodeZone(map[string]string{rollout.NodeTimeZoneAnnotation: zone})
		})
		return "zone of " + node
	case 11:
		if p := anyPod(); p != nil {
			w.answer[node] = []types.UID{p.UID, "stranger"}[r.IntN(2)]
			w.dirty[node] = true
			return "an answer on " + node
		}
	case 12:
		if p := anyPod(); p != nil && p.Hash == oldHash {
			change(p, func(q *Pod) { q.NeedUpgrade = offeredCondition() })
			return "a node writes PodNeedUpgrade=True on " + p.Name
		}
	}
	return "nothing"
}

// snapshot is a Rollout in a comparable form.
type snapshot struct {
	Nodes                           map[string]nodeSnapshot
	Counts                          [numStates]int
	SkippedUpdated, Eligible, Taken int
	Outside, ZoneInvalid            int
	Olds, Takeable, Unoffered       []string
	ToPull, TakeablePulled          []string
	Pulling, Pulled, PullTimedOut   int
	Downs, HeldNodes, SettledDown   map[string]bool
	Awaiting                        map[string]Awaiting
	Proven                          map[Proof]int
	Held, Waiting, Offered          map[unixtime.Time]int
	Recreate                        map[string]int
	Requested                       map[string]bool
	NextChange                      time.Time
}

// nodeSnapshot is one node's part of a snapshot. A node's awaitingSince is
// left out: it is when this Rollout first saw the node wait, history that a
// rebuild cannot know and no decision reads.
type nodeSnapshot struct {
	State                                                State
	Why                                                  string
	At, ProofAfter, HoldEnd, Opens, HoldUntil, OfferedAt unixtime.Time
	ProofPod                                             types.UID
	AwaitsProof, Taking, Updated, Requested              bool
	Held, WindowClosed, ZoneInvalid, NotDue              bool
	Eligible, Taken, Old, Takeable, Down, Unoffered      bool
	ToPull, Pulled, Pulling, PullTimedOut                bool
	OldPod                                               types.UID
	Proof                                                Proof
}

func snapshotOf(r *Rollout) snapshot {
	s := snapshot{Nodes: map[string]nodeSnapshot{}, Counts: r.counts, SkippedUpdated: r.skippedUpdated, Eligible: r.eligible,
		Taken: r.taken, Outside: r.outside, ZoneInvalid: r.zoneInvalid, Downs: maps.Clone(r.downs), HeldNodes: maps.Clone(r.heldNodes),
		SettledDown: maps.Clone(r.settledDown), Awaiting: maps.Clone(r.awaiting), Proven: maps.Clone(r.proven), Held: maps.Clone(r.held),
		Waiting: maps.Clone(r.waiting), Offered: maps.Clone(r.offered), Recreate: maps.Clone(r.recreate), Requested: maps.Clone(r.requested),
		NextChange: r.NextChange()}
	for name, n := range r.nodes {
		v := n.verdict
		ns := nodeSnapshot{State: v.state, Why: v.why(), At: v.at, ProofAfter: v.proofAfter, HoldEnd: v.holdEnd, Opens: v.opens,
			HoldUntil: v.holdUntil, OfferedAt: n.offeredAt, ProofPod: v.proofPod(), AwaitsProof: v.awaitsProof, Taking: v.taking,
			Updated: v.updated, Requested: v.requested, Held: v.held, WindowClosed: v.windowClosed, ZoneInvalid: v.zoneInvalid, NotDue: v.notDue,
			Eligible: n.eligible, Taken: n.taken, Old: n.old, Takeable: n.takeable, Down: n.down, Unoffered: n.unoffered,
			ToPull: n.toPull, Pulled: v.pulled, Pulling: v.pulling, PullTimedOut: v.pullTimedOut, Proof: n.proof}
		if n.oldPod != nil {
			ns.OldPod = n.oldPod.UID
		}
		s.Nodes[name] = ns
	}
	r.olds.Ascend(func(n string) bool { s.Olds = append(s.Olds, n); return true })
	r.takeable.Ascend(func(n string) bool { s.Takeable = append(s.Takeable, n); return true })
	r.unoffered.Ascend(func(n string) bool { s.Unoffered = append(s.Unoffered, n); return true })
	r.toPull.Ascend(func(n string) bool { s.ToPull = append(s.ToPull, n); return true })
	r.takeablePulled.Ascend(func(n string) bool { s.TakeablePulled = append(s.TakeablePulled, n); return true })
	s.Pulling, s.Pulled, s.PullTimedOut = r.pulling, r.pulled, r.pullTimedOut
	return s
}
