package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
	"github.com/google/go-cmp/cmp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refreshedView brings the incremental view up to date, as the next sync
// would before deciding anything, and returns it.
func (f *fixture) refreshedView(strategy rollout.Strategy) viewSnapshot {
	f.t.Helper()
	t := f.c.existingTracker(testDSKey)
	in := f.judgeInput(strategy, t)
	t.mu.Lock()
	defer t.mu.Unlock()
	in.deleting = t.deleting
	f.c.refresh(t, in)
	return t.view.snapshot()
}

// judgeInput is what a sync of the test DaemonSet judges by, now.
func (f *fixture) judgeInput(strategy rollout.Strategy, t *tracker) *judgeInput {
	f.t.Helper()
	ds, err := f.c.dsLister.DaemonSets(testNamespace).Get(testDSName)
	if err != nil {
		f.t.Fatal(err)
	}
	target, err := f.c.targetRevision(ds, testDSKey)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg, err := rolloutSettings(ds, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return &judgeInput{ds: ds, strategy: strategy, target: target, cfg: &cfg, record: t.record, now: f.c.now()}
}

// rebuiltView is the view a rebuild from the fixture's caches, the record
// and the deletions issued computes now: what the incremental view must
// equal.
func (f *fixture) rebuiltView(strategy rollout.Strategy) viewSnapshot {
	f.t.Helper()
	t := f.c.existingTracker(testDSKey)
	in := f.judgeInput(strategy, t)
	t.mu.Lock()
	defer t.mu.Unlock()
	in.deleting = maps.Clone(t.deleting)
	return f.c.buildView(t.view.basis, in).snapshot()
}

// TestIncrementalStateEqualsRebuild drives a DaemonSet's nodes through
// random sequences of events, delivered as the informers deliver them, and
// checks after every sync that the incremental view equals a rebuild from
// the same caches at the same instant: counts, ordered candidates, timers,
// every node's verdict.
func TestIncrementalStateEqualsRebuild(t *testing.T) {
	for seed := range uint64(40) {
		for _, strategy := range []rollout.Strategy{rollout.StrategyAdvancedRollingUpdate, rollout.StrategyOTA} {
			t.Run(fmt.Sprintf("%s/seed-%d", strategy, seed), func(t *testing.T) {
				runEvents(t, strategy, rand.New(rand.NewPCG(seed, 17)), 60)
			})
		}
	}
}

// eventWorld is the cluster a property test drives, as the test sees it.
type eventWorld struct {
	t     *testing.T
	f     *fixture
	r     *rand.Rand
	now   time.Time
	nodes int
	pods  map[string]*corev1.Pod // by name, live in the cache
	seq   int
}

func runEvents(t *testing.T, strategy rollout.Strategy, r *rand.Rand, steps int) {
	const nodes = 10
	opts := []dsOption{withAnnotation(rollout.StrategyAnnotation, string(strategy)), withAnnotation(rollout.MaxUnavailableAnnotation, "3"),
		withAnnotation(rollout.ProgressDeadlineAnnotation, "30"), func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = int32(r.IntN(3)) }}
	if r.IntN(3) == 0 {
		opts = append(opts, withAnnotation(rollout.PartitionAnnotation, fmt.Sprint(r.IntN(5))))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, withAnnotation(rollout.RolloutNodeSelectorAnnotation, "fleet!=b"))
	}
	if r.IntN(3) == 0 {
		opts = append(opts, withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 12:02-12:05; daily 12:07-12:09 Asia/Tokyo"))
	}
	if r.IntN(2) == 0 {
		opts = append(opts, withAnnotation(rollout.UpgradeDeadlineAnnotation, "90"), withAnnotation(rollout.MaxHoldAnnotation, "7200"))
	}
	ds := newDaemonSet(opts...)
	ready := make([]corev1.ConditionStatus, nodes)
	for i := range ready {
		ready[i] = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionUnknown}[r.IntN(4)]
	}
	objs := cluster(ds, ready)
	w := &eventWorld{t: t, r: r, now: t0, nodes: nodes, pods: map[string]*corev1.Pod{}, seq: 100} // past the seeded resourceVersions
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
			setReady(p, corev1.ConditionTrue, t0.Add(-time.Hour))
			w.pods[p.Name] = p
		}
		if n, ok := obj.(*corev1.Node); ok && len(n.Status.Conditions) > 0 {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0)
		}
	}
	w.f = newFixture(t, objs...)
	w.f.clockAt(w.now)
	w.f.sync()
	w.deliverDeletions()
	for step := range steps {
		what := w.step()
		if r.IntN(3) == 0 {
			w.f.sync()
			got, want := w.f.refreshedView(strategy), w.f.rebuiltView(strategy)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("after step %d (%s): incremental view differs from a rebuild (-rebuild +incremental):\n%s", step, what, diff)
			}
			w.deliverDeletions()
		}
	}
}

// deliverDeletions has the controller's deletions reach the cache.
func (w *eventWorld) deliverDeletions() {
	for _, name := range w.f.deletedPods() {
		if p, ok := w.pods[name]; ok && p.DeletionTimestamp == nil {
			q := p.DeepCopy()
			q.DeletionTimestamp = &metav1.Time{Time: w.now}
			w.put(q)
		}
	}
	w.f.drainQueue()
}

// put changes a pod in the cache, delivering the event.
func (w *eventWorld) put(p *corev1.Pod) {
	w.seq++
	p.ResourceVersion = fmt.Sprint(w.seq)
	w.pods[p.Name] = p
	w.f.update(p)
	w.f.mirror(p)
}

// step makes one random change and says what it was.
func (w *eventWorld) step() string {
	r := w.r
	node := fmt.Sprintf("node-%d", r.IntN(w.nodes))
	switch r.IntN(11) {
	case 9:
		// An owner holds a pod, or releases it.
		p := w.anyPod()
		if p == nil {
			return "nothing"
		}
		q := p.DeepCopy()
		if _, held := q.Annotations[rollout.HoldAnnotation]; held {
			delete(q.Annotations, rollout.HoldAnnotation)
		} else {
			heldUntil(w.now.Add(time.Duration(1+r.IntN(120)) * time.Second))(q)
		}
		w.put(q)
		return "hold on pod " + p.Name
	case 10:
		// A node moves to another zone, a valid one or not.
		old, _ := w.f.c.nodeLister.Get(node)
		n := old.DeepCopy()
		inZone(n, []string{"Asia/Tokyo", "America/New_York", "UTC", "Nowhere/Land"}[r.IntN(4)])
		w.updateNode(n)
		return "zone of " + node
	case 0:
		w.now = w.now.Add(time.Duration(r.IntN(40)) * time.Second)
		w.f.clockAt(w.now)
		return "time passes"
	case 1:
		// A node's readiness flips, with a heartbeat.
		n := newNode(node, []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionUnknown}[r.IntN(2)])
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(w.now)
		w.updateNode(n)
		return "readiness of " + node
	case 2:
		// A heartbeat alone.
		old, _ := w.f.c.nodeLister.Get(node)
		n := old.DeepCopy()
		if len(n.Status.Conditions) > 0 {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(w.now.Add(time.Second))
		}
		w.updateNode(n)
		return "heartbeat of " + node
	case 3:
		// Labels change: the rollout node selector moves.
		old, _ := w.f.c.nodeLister.Get(node)
		n := old.DeepCopy()
		n.Labels = map[string]string{"fleet": []string{"a", "b"}[r.IntN(2)]}
		w.updateNode(n)
		return "labels of " + node
	case 4:
		// A replacement appears: bound or not, healthy, slow or crashing.
		name := fmt.Sprintf("new-%s-%d", node, w.seq)
		p := newPod(name, node, newHash, createdAt(w.now))
		switch r.IntN(4) {
		case 0:
			setReady(p, corev1.ConditionFalse, w.now)
		case 1:
			crashLooping(p)
		case 2:
			meantFor(node)(p)
			unschedulable(p)
		default:
			setReady(p, corev1.ConditionTrue, w.now)
		}
		w.put(p)
		return "replacement on " + node
	case 5:
		// A pod turns ready or unready.
		p := w.anyPod()
		if p == nil {
			return "nothing"
		}
		q := p.DeepCopy()
		setReady(q, []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[r.IntN(2)], w.now)
		w.put(q)
		return "readiness of pod " + p.Name
	case 6:
		// A terminating pod leaves the cache, or any pod is deleted.
		p := w.anyPod()
		if p == nil {
			return "nothing"
		}
		delete(w.pods, p.Name)
		w.f.remove(p)
		_ = w.f.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name)
		return "pod " + p.Name + " gone"
	case 7:
		// Someone else starts deleting a pod (an owner's upgrade, for OTA).
		p := w.anyPod()
		if p == nil || p.DeletionTimestamp != nil {
			return "nothing"
		}
		q := p.DeepCopy()
		q.DeletionTimestamp = &metav1.Time{Time: w.now}
		w.put(q)
		return "pod " + p.Name + " terminating"
	default:
		// A pod settles at the scheduler: an unbound one is bound.
		for _, name := range slices.Sorted(maps.Keys(w.pods)) {
			if p := w.pods[name]; p.Spec.NodeName == "" {
				q := p.DeepCopy()
				q.Spec.NodeName = nodeOfPod(p)
				setReady(q, corev1.ConditionTrue, w.now)
				w.put(q)
				return "pod " + p.Name + " bound"
			}
		}
		return "nothing"
	}
}

func (w *eventWorld) updateNode(n *corev1.Node) {
	if old, err := w.f.c.nodeLister.Get(n.Name); err == nil && n.Labels == nil {
		n.Labels = old.Labels // a readiness change keeps the labels
	}
	w.seq++
	n.ResourceVersion = fmt.Sprint(w.seq)
	w.f.update(n)
}

// anyPod returns a random pod of the cache, nil when there is none.
func (w *eventWorld) anyPod() *corev1.Pod {
	if len(w.pods) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(w.pods))
	return w.pods[names[w.r.IntN(len(names))]]
}

// setReady sets a pod's Ready and ContainersReady conditions, turned at.
func setReady(p *corev1.Pod, status corev1.ConditionStatus, at time.Time) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(at)},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: metav1.NewTime(at)},
	}
	p.Status.ContainerStatuses = nil
}

// mirror puts a pod the test changed in the cache into the fake API too, so
// that the controller's writes find it.
func (f *fixture) mirror(p *corev1.Pod) {
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	if _, err := f.client.Tracker().Get(gvr, p.Namespace, p.Name); err != nil {
		_ = f.client.Tracker().Add(p.DeepCopy())
		return
	}
	_ = f.client.Tracker().Update(gvr, p.DeepCopy(), p.Namespace)
}
