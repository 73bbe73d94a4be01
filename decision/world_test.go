package decision

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// t0 is the tests' clock at start: a Monday, 12:00 UTC.
var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const (
	oldHash = "old111"
	newHash = "new222"
)

// world is a DaemonSet's nodes and pods as a decision sees them: the test
// changes it, marks what it changed dirty, and asks.
type world struct {
	t      *testing.T
	now    time.Time
	nodes  map[string]*Node
	pods   map[string][]*Pod
	lease  map[string]time.Time
	answer map[string]types.UID
	pulls  map[string]Pull
	// deleting are the deletions "the controller" issued, not yet seen;
	// patching those of them that are patches in place.
	deleting map[string]types.UID
	patching map[string]*Take
	target   Target
	cfg      Settings
	ledger   *Ledger
	r        *Rollout
	dirty    map[string]bool
	seq      int
}

// newWorld is n Ready nodes (node-0 ...), each running an available old pod,
// under the strategy and annotations, the target first seen at t0.
func newWorld(t *testing.T, n int, strategy rollout.Strategy, annotations map[string]string) *world {
	t.Helper()
	cfg, err := ParseSettings(strategy, annotations, 0)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	w := &world{t: t, now: t0, nodes: map[string]*Node{}, pods: map[string][]*Pod{}, lease: map[string]time.Time{},
		answer: map[string]types.UID{}, pulls: map[string]Pull{}, deleting: map[string]types.UID{}, patching: map[string]*Take{},
		target: Target{Hash: newHash, Number: 2, Templates: templates(), TemplateCurrent: true}, cfg: cfg,
		ledger: NewLedger(nil, Meta{TargetSince: metav1.NewTime(t0)}), dirty: map[string]bool{}}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		w.nodes[name] = &Node{Name: name, Exists: true, Ready: true, ReadyStatus: "True", Labels: map[string]string{}}
		w.pods[name] = []*Pod{w.pod(name, oldHash, true)}
	}
	return w
}

// pod is a bound pod of the DaemonSet on the node at the hash, created now,
// ready (or not) since now.
func (w *world) pod(node, hash string, ready bool) *Pod {
	w.seq++
	p := &Pod{Namespace: "default", Name: fmt.Sprintf("%s-%s-%d", node, hash, w.seq), UID: types.UID(fmt.Sprintf("uid-%d", w.seq)),
		ResourceVersion: fmt.Sprint(w.seq), Node: node, Bound: true, Hash: hash, Created: unixtime.Of(w.now.Add(-time.Hour))}
	if hash == newHash {
		p.Created = unixtime.Of(w.now)
	}
	setReady(p, ready, w.now.Add(-time.Minute))
	return p
}

func setReady(p *Pod, ready bool, since time.Time) {
	p.Health = health.Pod{Ready: ready, ContainersReady: ready, ReadySince: unixtime.Of(since), ContainersReadySince: unixtime.Of(since),
		Run: &health.Run{Generation: 1, ObservedGeneration: 1,
			Containers: []health.Container{{Name: "app", ID: health.ContainerID(string(p.UID) + "/1"), Running: true, Ready: ready, Started: unixtime.Of(since)}}}}
}

// facts is the world's FactsFunc.
func (w *world) facts(node string) NodeFacts {
	n, ok := w.nodes[node]
	if !ok {
		n = &Node{Name: node}
	}
	return NodeFacts{Node: *n, Pods: slices.Clone(w.pods[node]), Taking: w.deleting[node], LeaseRenewed: w.lease[node], Answered: w.answer[node],
		Pull: w.pulls[node]}
}

// build builds the Rollout afresh (a new controller, or a changed basis).
func (w *world) build(adopt bool) {
	w.r = New(w.cfg, w.target, w.ledger, adopt)
	w.r.Build(w.now, slices.Collect(maps.Keys(w.pods)), w.facts)
	clear(w.dirty)
}

// refresh judges the dirty nodes and the due timers again, as a sync does.
func (w *world) refresh() []Notice {
	if w.r == nil {
		w.build(false)
		return nil
	}
	n := w.r.Refresh(w.now, w.dirty, w.facts)
	clear(w.dirty)
	return n
}

// decide refreshes, decides, and carries out the decision's deletions as
// the controller would: recorded, and expected until the cache shows them.
func (w *world) decide() Decision {
	w.refresh()
	d := w.r.Decide(w.now)
	w.carryOut(d)
	return d
}

// carryOut does the decision's takes as the controller does: recorded
// ahead, then deleted or patched (its generation recorded), and expected
// until the cache shows them.
func (w *world) carryOut(d Decision) {
	for _, take := range d.Take {
		w.ledger.TakeAhead(take.Node, take.Pod, take.InPlace)
		w.ledger.Taken(take.Node, take.Pod, w.now)
		w.deleting[take.Node] = take.Pod.UID
		if take.InPlace != nil {
			w.ledger.Patched(take.Node, take.Pod.UID, take.Pod.Health.Generation()+1)
			w.patching[take.Node] = &take
		}
		w.dirty[take.Node] = true
	}
}

// deliverDeletions has the deletions and patches reach the cache: the old
// pods are gone, or patched (the target's hash, a generation more, its
// kubelet not told yet).
func (w *world) deliverDeletions() {
	for node, uid := range w.deleting {
		if take := w.patching[node]; take != nil {
			if slices.ContainsFunc(w.pods[node], func(p *Pod) bool { return p.UID == uid }) {
				w.changePodUID(node, uid, func(q *Pod) {
					q.Hash = newHash
					q.Health.Run.Generation++
				})
			}
			delete(w.patching, node)
		} else {
			w.pods[node] = slices.DeleteFunc(w.pods[node], func(p *Pod) bool { return p.UID == uid })
		}
		delete(w.deleting, node)
		w.dirty[node] = true
	}
}

// changePodUID changes the node's pod with the UID, as a new version of it.
func (w *world) changePodUID(node string, uid types.UID, change func(*Pod)) {
	for i, p := range w.pods[node] {
		if p.UID == uid {
			q := p.DeepCopy()
			change(q)
			w.seq++
			q.ResourceVersion = fmt.Sprint(w.seq)
			w.pods[node][i] = q
			w.dirty[node] = true
			return
		}
	}
	w.t.Fatalf("no pod %s on %s", uid, node)
}

// restartInPlace has the node's kubelet take the patch of its pod at the
// node's time at: its generation observed, its app container running under
// a new ID since at, Ready or not; its pod's conditions as they were (a
// restart within one sync).
func (w *world) restartInPlace(node string, at time.Time, ready bool) {
	for _, p := range w.pods[node] {
		if p.Hash != newHash || p.Health.Run.ObservedGeneration >= p.Health.Run.Generation {
			continue
		}
		w.changePodUID(node, p.UID, func(q *Pod) {
			q.Health.Run.ObservedGeneration = q.Health.Run.Generation
			q.Health.Run.Containers = []health.Container{{Name: "app", ID: health.ContainerID(fmt.Sprintf("%s/%d", q.UID, q.Health.Run.Generation)),
				Running: true, Ready: ready, Started: unixtime.Of(at)}}
			q.Health.LastFinished = unixtime.Of(at.Add(-time.Second))
			if !ready {
				q.Health.ContainersReady, q.Health.ContainersReadySince = false, unixtime.Of(at)
			}
		})
		return
	}
	w.t.Fatalf("no patched pod on %s", node)
}

// Images of the world's two revisions; templates are their digests, the
// target's opted in to upgrades in place, the one image changed.
const (
	oldImage = "registry.test/app:v1"
	newImage = "registry.test/app:v2"
)

func templates() map[string]*inplace.Template {
	tpl := func(image string) *inplace.Template {
		t, err := inplace.TemplateOf(&corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", rollout.InPlaceLabel: "true"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		})
		if err != nil {
			panic(err)
		}
		return &t
	}
	return map[string]*inplace.Template{oldHash: tpl(oldImage), newHash: tpl(newImage)}
}

// replace gives the node a new pod of the target, ready or not, created now.
func (w *world) replace(node string, ready bool) *Pod {
	p := w.pod(node, newHash, ready)
	if ready {
		setReady(p, true, w.now)
	}
	w.pods[node] = append(slices.DeleteFunc(w.pods[node], func(p *Pod) bool { return p.Hash == newHash }), p)
	w.dirty[node] = true
	return p
}

// heartbeat renews the node's Lease at the node's time at.
func (w *world) heartbeat(node string, at time.Time) {
	w.lease[node] = at
	w.dirty[node] = true
}

// advance moves the clock.
func (w *world) advance(d time.Duration) { w.now = w.now.Add(d) }

// setNode changes a node.
func (w *world) setNode(node string, change func(*Node)) {
	change(w.nodes[node])
	w.dirty[node] = true
}

// changePod changes the node's newest pod of the hash, as a new version of
// it.
func (w *world) changePod(node, hash string, change func(*Pod)) {
	pods := w.pods[node]
	for i := len(pods) - 1; i >= 0; i-- {
		if pods[i].Hash == hash {
			q := pods[i].DeepCopy()
			change(q)
			w.seq++
			q.ResourceVersion = fmt.Sprint(w.seq)
			pods[i] = q
			w.dirty[node] = true
			return
		}
	}
	w.t.Fatalf("no pod of %s on %s", hash, node)
}

// offeredCondition is PodNeedUpgrade True naming the target.
func offeredCondition() SharedCondition {
	return Share(Condition{Status: "True", Message: podcondition.RevisionMessage(newHash)})
}

// setUnscheduled records why the scheduler refused a pod ("": it did not).
func setUnscheduled(p *Pod, why string) {
	rare := RarePod{}
	if p.Rare != nil {
		rare = *p.Rare
	}
	rare.Unscheduled = why
	p.Rare = &rare
}

// setHold records the end of the owner's hold on a pod (zero: none).
func setHold(p *Pod, until time.Time) {
	rare := RarePod{}
	if p.Rare != nil {
		rare = *p.Rare
	}
	rare.HoldUntil = unixtime.Of(until)
	p.Rare = &rare
}

func deleted(d Decision) []string {
	var nodes []string
	for _, t := range d.Take {
		nodes = append(nodes, t.Node)
	}
	return nodes
}

// crashLoop makes a pod's container wait in CrashLoopBackOff.
func crashLoop(p *Pod) {
	setReady(p, false, p.Created.Time())
	p.Health.Detail = &health.Detail{Waiting: []health.Waiting{{Container: "app", Reason: "CrashLoopBackOff"}}}
}

// powerCycle is what a reboot shows on a running pod: not ready, a
// container restarted.
func powerCycle(at time.Time) func(*Pod) {
	return func(p *Pod) {
		setReady(p, false, at)
		p.Health.LastFinished = unixtime.Of(at)
	}
}
