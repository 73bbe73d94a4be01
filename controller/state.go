package controller

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgeota/edgeota/rollout"
	"github.com/google/btree"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A rollout's cost must follow what changes, not the size of the fleet: a
// 1,000-node rollout syncs its DaemonSet about 800 times, and judging every
// node at every sync made it O(nodes × syncs). So the controller keeps, per
// DaemonSet, what it knows of each node (its pods, its verdict) and the
// counts and ordered sets a decision needs, and updates them from events:
//   - an event about a pod, a node, or a heartbeat marks that node dirty;
//   - a sync re-judges the dirty nodes and those whose verdict the clock
//     changes now (a timer per node: deadlines, minReadySeconds, windows,
//     holds), then decides from the counts and the ordered sets;
//   - a change to the DaemonSet itself (its template, annotations, target
//     revision) rebuilds the view from the caches, as a fresh controller
//     does. The rollout record and the deletions issued but not yet seen are
//     kept across such a rebuild: they are what this process knows and the
//     caches may not show yet.
//
// Invariant, checked by TestIncrementalStateEqualsRebuild over random event
// orders: after refresh, the view equals the one a rebuild from the same
// caches, record and deletions computes at the same instant.

// tracker is everything the controller keeps about one DaemonSet.
type tracker struct {
	mu  sync.Mutex
	key string
	uid types.UID
	// record is the rollout record of the target revision; nil before the
	// first sync.
	record *rolloutRecord
	// deleting are the deletions issued and not yet seen in the cache, by
	// node: until then the cache may still show the old pod running, or
	// may have lost it before the handler ran.
	deleting map[string]deletion
	// view is the incremental view of the nodes; nil until built.
	view *dsView
	// dirty are the nodes to judge again at the next sync.
	dirty map[string]bool
	// intents is what the last writeIntents scanned; only the sync worker
	// of the DaemonSet reads and writes it.
	intents intentsMark
}

// deletion is an old pod deletion issued by this process.
type deletion struct {
	pod types.UID
	// until is when the wait for its watch event stops: a lost event cannot
	// hold a node in flight forever.
	until time.Time
}

// deletionWait bounds the wait for a deletion's watch event.
const deletionWait = 5 * time.Minute

// dsView is the incremental view of one DaemonSet's nodes for its target
// revision and settings.
type dsView struct {
	// basis identifies what the view was built for; a DaemonSet whose basis
	// changed is rebuilt.
	basis string
	nodes map[string]*nodeInfo
	// counts of nodes per verdict state, and of the skipped ones running
	// the target (upgraded, then went offline).
	counts         [numNodeStates]int
	skippedUpdated int
	// eligible counts the nodes the rollout may touch (the node selector);
	// taken those of them on, or moving to, the target revision: the
	// partition's quota is eligible - partition - taken.
	eligible, taken int
	// outside counts the candidates the node selector leaves out.
	outside int
	// olds are the eligible nodes whose old pod the rollout may replace,
	// in name order (the partition takes nodes in that order): Ready, an
	// old pod, not in flight or failed.
	olds *btree.BTreeG[string]
	// takeable are the olds with an available old pod that nothing holds
	// back by the clock (their window is open, no hold stands), in name
	// order; downs those whose old pod is down anyway.
	takeable *btree.BTreeG[string]
	// takeableChanges counts the insertions into takeable and removals
	// from it: unchanged, the next wave's nodes are those seen last.
	takeableChanges uint64
	downs           map[string]bool
	// timers are the nodes whose verdict the clock changes, by when.
	timers timerHeap
	// awaiting are the nodes waiting for a heartbeat, with the time after
	// which one proves them alive.
	awaiting map[string]time.Time
	// What the clock holds candidates by, for the status: the held ones
	// (by the end of their hold), those waiting for their window (by its
	// opening), and those whose node names an invalid zone.
	held, waiting timeCounts
	zoneInvalid   int
	// heldNodes names the held candidates: their owners see the hold's
	// limit through the offer on their pod.
	heldNodes map[string]bool
}

// timeCounts counts nodes by a time; candidates of one DaemonSet share few
// distinct times (a window's opening per zone, a hold limit), so its
// earliest and latest are cheap to find.
type timeCounts map[time.Time]int

func (tc timeCounts) add(t time.Time, n int) {
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
func (tc timeCounts) earliest() (t time.Time) {
	for at := range tc {
		if t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}

func (tc timeCounts) latest() (t time.Time) {
	for at := range tc {
		if at.After(t) {
			t = at
		}
	}
	return t
}

// nodeInfo is what the view knows of one node.
type nodeInfo struct {
	name    string
	pods    nodePods
	verdict nodeVerdict
	// Memberships, kept so that a node's change can be undone in O(1).
	eligible, taken, old, takeable, down bool
	timerAt                              time.Time
}

func newTracker(key string) *tracker {
	return &tracker{key: key, deleting: map[string]deletion{}, dirty: map[string]bool{}}
}

func newView(basis string) *dsView {
	less := func(a, b string) bool { return a < b }
	return &dsView{basis: basis, nodes: map[string]*nodeInfo{}, olds: btree.NewG(16, less),
		takeable: btree.NewG(16, less), downs: map[string]bool{}, awaiting: map[string]time.Time{},
		held: timeCounts{}, waiting: timeCounts{}, heldNodes: map[string]bool{}}
}

// trackerFor returns the DaemonSet's tracker, creating it.
func (c *Controller) trackerFor(key string) *tracker {
	c.trackersMu.Lock()
	defer c.trackersMu.Unlock()
	t, ok := c.trackers[key]
	if !ok {
		t = newTracker(key)
		c.trackers[key] = t
	}
	return t
}

// existingTracker returns the DaemonSet's tracker, nil if it has none.
func (c *Controller) existingTracker(key string) *tracker {
	c.trackersMu.Lock()
	defer c.trackersMu.Unlock()
	return c.trackers[key]
}

// markDirty has the node judged again at the DaemonSet's next sync.
func (c *Controller) markDirty(key, node string) {
	if t := c.existingTracker(key); t != nil {
		t.mu.Lock()
		t.dirty[node] = true
		t.mu.Unlock()
	}
}

// viewBasis is what a view depends on beyond its nodes: a change to any of
// it rebuilds the view. The rollout status is left out: the controller
// writes it itself.
func viewBasis(ds *appsv1.DaemonSet, strategy rollout.Strategy, target revision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%s|%s|%d|%d", ds.UID, ds.Generation, strategy, target.hash, target.number, ds.Spec.MinReadySeconds)
	for _, k := range slices.Sorted(maps.Keys(ds.Annotations)) {
		if k != rollout.RolloutStatusAnnotation {
			fmt.Fprintf(&b, "|%s=%s", k, ds.Annotations[k])
		}
	}
	return b.String()
}

// judgeInput is what a sync judges its nodes by.
type judgeInput struct {
	ds       *appsv1.DaemonSet
	strategy rollout.Strategy
	target   revision
	cfg      *settings
	record   *rolloutRecord
	deleting map[string]deletion
	now      time.Time
}

// refresh brings the tracker's view up to date at in.now: rebuilt when the
// DaemonSet's basis changed or it has none, else the dirty nodes and those
// whose timer is due are judged again. Called with t.mu held.
func (c *Controller) refresh(t *tracker, in *judgeInput) {
	for node, d := range t.deleting {
		if in.now.After(d.until) {
			delete(t.deleting, node)
			t.dirty[node] = true
		}
	}
	basis := viewBasis(in.ds, in.strategy, in.target)
	if t.view == nil || t.view.basis != basis {
		t.view = c.buildView(basis, in)
		clear(t.dirty)
		return
	}
	v := t.view
	for v.timers.Len() > 0 && !v.timers[0].at.After(in.now) {
		e := heap.Pop(&v.timers).(timerEntry)
		if n, ok := v.nodes[e.node]; ok && n.timerAt.Equal(e.at) {
			n.timerAt = time.Time{}
			t.dirty[e.node] = true
		}
	}
	for node := range t.dirty {
		c.rejudge(v, node, c.podsOnNode(in.ds.UID, node), in)
	}
	clear(t.dirty)
}

// buildView judges every node of the DaemonSet: its pods' nodes and the
// nodes its record names.
func (c *Controller) buildView(basis string, in *judgeInput) *dsView {
	v := newView(basis)
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range c.podsControlledBy(in.ds.UID) {
		if node := nodeOfPod(pod); node != "" {
			byNode[node] = append(byNode[node], pod)
		}
	}
	in.record.mu.Lock()
	for node := range in.record.entries {
		if _, ok := byNode[node]; !ok {
			byNode[node] = nil
		}
	}
	in.record.mu.Unlock()
	for node := range in.deleting {
		if _, ok := byNode[node]; !ok {
			byNode[node] = nil
		}
	}
	for node, pods := range byNode {
		c.rejudge(v, node, pods, in)
	}
	return v
}

// rejudge judges one node again from its pods and replaces what the view
// held for it.
func (c *Controller) rejudge(v *dsView, name string, pods []*corev1.Pod, in *judgeInput) {
	old, had := v.nodes[name]
	if had {
		v.remove(old)
	}
	np := groupPods(in.ds, in.target.hash, pods)
	verdict := c.judgeNode(name, np, in)
	if had && old.verdict.held && !verdict.held && np.oldPod != nil && old.pods.oldPod != nil &&
		np.oldPod.UID == old.pods.oldPod.UID && !in.now.Before(old.verdict.holdEnd) {
		c.holdEnded(in, name, old.verdict, np.oldPod) // the clock ended it, on a transition only
	}
	if verdict.state == nodeGone {
		return
	}
	n := &nodeInfo{name: name, pods: np, verdict: verdict}
	n.eligible = in.cfg.matches(c, name)
	n.taken = n.eligible && (np.newPod != nil || np.oldPod == nil || verdict.deleting)
	n.old = n.eligible && (verdict.state == nodeOld || verdict.state == nodeOldDown)
	clockFree := n.old && verdict.takeable()
	n.takeable = clockFree && verdict.state == nodeOld
	n.down = clockFree && verdict.state == nodeOldDown
	v.add(n)
}

// add counts a node in the view.
func (v *dsView) add(n *nodeInfo) {
	v.nodes[n.name] = n
	v.counts[n.verdict.state]++
	if n.verdict.state == nodeSkipped && n.pods.newPod != nil {
		v.skippedUpdated++
	}
	if n.eligible {
		v.eligible++
	}
	if n.taken {
		v.taken++
	}
	if !n.eligible && (n.verdict.state == nodeOld || n.verdict.state == nodeOldDown) {
		v.outside++
	}
	if n.old {
		v.olds.ReplaceOrInsert(n.name)
	}
	if n.takeable {
		v.takeable.ReplaceOrInsert(n.name)
		v.takeableChanges++
	}
	if n.down {
		v.downs[n.name] = true
	}
	if n.verdict.awaitsHeartbeat {
		v.awaiting[n.name] = n.verdict.proofAfter
	}
	v.countClock(n, 1)
	if !n.verdict.at.IsZero() {
		n.timerAt = n.verdict.at
		heap.Push(&v.timers, timerEntry{at: n.timerAt, node: n.name})
	}
}

// remove undoes add; the node's timer is dropped lazily.
func (v *dsView) remove(n *nodeInfo) {
	delete(v.nodes, n.name)
	v.counts[n.verdict.state]--
	if n.verdict.state == nodeSkipped && n.pods.newPod != nil {
		v.skippedUpdated--
	}
	if n.eligible {
		v.eligible--
	}
	if n.taken {
		v.taken--
	}
	if !n.eligible && (n.verdict.state == nodeOld || n.verdict.state == nodeOldDown) {
		v.outside--
	}
	if n.old {
		v.olds.Delete(n.name)
	}
	if n.takeable {
		v.takeable.Delete(n.name)
		v.takeableChanges++
	}
	delete(v.downs, n.name)
	delete(v.awaiting, n.name)
	v.countClock(n, -1)
	n.timerAt = time.Time{}
}

// countClock counts (by +1 or -1) what the clock holds an eligible
// candidate by.
func (v *dsView) countClock(n *nodeInfo, by int) {
	switch {
	case !n.old:
	case n.verdict.zoneInvalid:
		v.zoneInvalid += by
	case n.verdict.held:
		v.held.add(n.verdict.holdEnd, by)
		if by > 0 {
			v.heldNodes[n.name] = true
		} else {
			delete(v.heldNodes, n.name)
		}
	case n.verdict.windowClosed:
		v.waiting.add(n.verdict.opens, by)
	}
}

// nextChange is when the earliest verdict changes by the clock alone, zero
// if none does.
func (v *dsView) nextChange() time.Time {
	for v.timers.Len() > 0 {
		e := v.timers[0]
		if n, ok := v.nodes[e.node]; ok && n.timerAt.Equal(e.at) {
			return e.at
		}
		heap.Pop(&v.timers) // stale
	}
	return time.Time{}
}

// timerEntry is a node's timer.
type timerEntry struct {
	at   time.Time
	node string
}

// timerHeap orders timers by time (container/heap).
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// podsOnNode returns the DaemonSet's pods on the node (bound to it, or
// meant for it by their node affinity while unbound).
//
// It reads the node's pods of every DaemonSet (a handful) rather than an
// index by DaemonSet and node, which would cost a set per pod: at 2,000
// nodes and four DaemonSets, more memory than all the sets else.
func (c *Controller) podsOnNode(uid types.UID, node string) []*corev1.Pod {
	objs, _ := c.podIndexer.ByIndex(byNode, node)
	var pods []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if ref := controllerOf(pod); ref != nil && ref.UID == uid {
			pods = append(pods, pod)
		}
	}
	return pods
}

// viewSnapshot is a view in a comparable form, for tests.
type viewSnapshot struct {
	Nodes          map[string]nodeSnapshot
	Counts         [numNodeStates]int
	SkippedUpdated int
	Eligible       int
	Taken          int
	Outside        int
	Olds           []string
	Takeable       []string
	Downs          map[string]bool
	NextChange     time.Time
	Awaiting       map[string]time.Time
	Held, Waiting  map[time.Time]int
	ZoneInvalid    int
}

type nodeSnapshot struct {
	State                           nodeState
	Why                             string
	At                              time.Time
	Eligible, Taken, Old, Takeable  bool
	NewPod, OldPod, Terminating     types.UID
	Deleting, Unbound, AwaitsHbeat  bool
	Held, WindowClosed, ZoneInvalid bool
	NotDue                          bool
	HoldEnd, Opens                  time.Time
}

func (v *dsView) snapshot() viewSnapshot {
	s := viewSnapshot{Nodes: map[string]nodeSnapshot{}, Counts: v.counts, SkippedUpdated: v.skippedUpdated,
		Eligible: v.eligible, Taken: v.taken, Outside: v.outside, Downs: maps.Clone(v.downs), NextChange: v.nextChange(),
		Awaiting: maps.Clone(v.awaiting), Held: maps.Clone(v.held), Waiting: maps.Clone(v.waiting), ZoneInvalid: v.zoneInvalid}
	uid := func(p *corev1.Pod) types.UID {
		if p == nil {
			return ""
		}
		return p.UID
	}
	for name, n := range v.nodes {
		s.Nodes[name] = nodeSnapshot{State: n.verdict.state, Why: n.verdict.why, At: n.verdict.at,
			Eligible: n.eligible, Taken: n.taken, Old: n.old, Takeable: n.takeable,
			NewPod: uid(n.pods.newPod), OldPod: uid(n.pods.oldPod), Terminating: uid(n.pods.terminating),
			Deleting: n.verdict.deleting, Unbound: n.pods.unbound, AwaitsHbeat: n.verdict.awaitsHeartbeat,
			Held: n.verdict.held, WindowClosed: n.verdict.windowClosed, ZoneInvalid: n.verdict.zoneInvalid,
			NotDue: n.verdict.notDue, HoldEnd: n.verdict.holdEnd, Opens: n.verdict.opens}
	}
	v.olds.Ascend(func(n string) bool { s.Olds = append(s.Olds, n); return true })
	v.takeable.Ascend(func(n string) bool { s.Takeable = append(s.Takeable, n); return true })
	return s
}
