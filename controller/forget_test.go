package controller

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

// namesake is the objects of cluster(...) for another DaemonSet, named
// name, of UID uid, over the same nodes: its own revisions and pods, the
// nodes left out (they are shared).
func namesake(objs []runtime.Object, name string, uid types.UID) []runtime.Object {
	var ds *appsv1.DaemonSet
	for _, obj := range objs {
		if d, ok := obj.(*appsv1.DaemonSet); ok {
			ds = d.DeepCopy()
			ds.Name, ds.UID = name, uid
		}
	}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	out := []runtime.Object{ds}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.ControllerRevision:
			cr := o.DeepCopy()
			cr.Name, cr.UID, cr.OwnerReferences = name+"-"+o.Labels[revisionHashLabel], types.UID(string(uid)+"-"+string(o.UID)), owner
			out = append(out, cr)
		case *corev1.Pod:
			pod := o.DeepCopy()
			pod.Name, pod.UID, pod.OwnerReferences = name+"-"+o.Name, types.UID(string(uid)+"-"+string(o.UID)), owner
			out = append(out, pod)
		}
	}
	return out
}

// TestDeletedDaemonSetsLeaveNothingBehind: DaemonSets deleted mid-rollout
// (nodes in flight, one awaiting its proof of life, challenged and its
// Lease followed, an OTA one with offers standing), then their pods (as
// the garbage collector deletes them), leave no entry in any of the
// controller's maps, no rollout record and no metric series.
func TestDeletedDaemonSetsLeaveNothingBehind(t *testing.T) {
	base := upgradedNode(cluster(advancedDaemonSet("1"), readyNodes(4), newHash), "0",
		corev1.ConditionTrue, 200*time.Second)
	ota := cluster(newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA")), readyNodes(4), newHash)
	var objs []runtime.Object
	for _, obj := range base {
		if _, ok := obj.(*corev1.Node); ok {
			objs = append(objs, obj)
		}
	}
	names := []string{"a", "b", "c"}
	for i, name := range names {
		from := base
		if i == 2 {
			from = ota
		}
		objs = append(objs, namesake(from, name, types.UID("uid-"+name))...)
	}
	f := newFixture(t, objs...)
	for _, name := range names {
		if err := f.c.sync(f.ctx, testNamespace+"/"+name); err != nil {
			t.Fatalf("syncing %s: %v", name, err)
		}
	}
	f.c.background.Wait()
	// What the rollouts left: the cache of the records is the informer's.
	for _, obj := range f.records() {
		if err := f.indexer(obj).Add(cached(obj)); err != nil {
			t.Fatal(err)
		}
	}
	before := f.leftBehind(names)
	for _, want := range []string{"tracker", "rollout record", "record followed", "status", "heartbeats", "challenge", "series"} {
		if !slices.ContainsFunc(before, func(s string) bool { return len(s) >= len(want) && s[:len(want)] == want }) {
			t.Fatalf("before the deletions: got %v, want at least a %s of theirs (the test would prove nothing)", before, want)
		}
	}

	// A refused pre-download, as checkPodless records it.
	f.c.rejections.why[f.c.rejections.key("uid-a", newHash)] = "pods \"x\" is forbidden"
	f.c.rejections.checked["job-uid"] = "uid-a"

	for _, name := range names {
		ds, _ := f.c.dsByKey(testNamespace + "/" + name)
		if err := f.inf.DaemonSets.GetIndexer().Delete(ds); err != nil {
			t.Fatal(err)
		}
		if err := f.c.sync(f.ctx, testNamespace+"/"+name); err != nil {
			t.Fatalf("syncing deleted %s: %v", name, err)
		}
	}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			f.remove(pod)
		}
	}
	f.c.background.Wait()
	if got := f.leftBehind(names); len(got) != 0 {
		t.Errorf("after the deletions: got %v left behind, want nothing", got)
	}
}

// leftBehind lists what the controller holds of the named DaemonSets of
// the test namespace.
func (f *fixture) leftBehind(names []string) []string {
	f.t.Helper()
	var out []string
	c := f.c
	keys := map[string]bool{}
	uids := map[types.UID]bool{}
	for _, n := range names {
		keys[testNamespace+"/"+n] = true
		uids[types.UID("uid-"+n)] = true
	}
	c.trackersMu.Lock()
	for key := range c.trackers {
		if keys[key] {
			out = append(out, "tracker "+key)
		}
	}
	c.trackersMu.Unlock()
	if n := c.records.Records(); n > 0 {
		out = append(out, fmt.Sprintf("record followed (%d)", n))
	}
	for _, obj := range f.records() {
		if cm := obj.(*corev1.ConfigMap); uids[types.UID(cm.Labels[recordstore.Label])] {
			out = append(out, "rollout record "+cm.Name)
		}
	}
	c.statuses.mu.Lock()
	for key := range c.statuses.last {
		if keys[key] {
			out = append(out, "status written "+key)
		}
	}
	for key := range c.statuses.parsed {
		if keys[key] {
			out = append(out, "status parsed "+key)
		}
	}
	c.statuses.mu.Unlock()
	c.expect.mu.Lock()
	for key := range c.expect.deleting {
		if keys[key] {
			out = append(out, "expected deletions "+key)
		}
	}
	for key := range c.expect.statuses {
		if keys[key] {
			out = append(out, "expected status "+key)
		}
	}
	for w := range c.expect.writes {
		out = append(out, fmt.Sprintf("expected write %v", w))
	}
	c.expect.mu.Unlock()
	c.eventMemo.mu.Lock()
	for k := range c.eventMemo.last {
		if keys[k.key] {
			out = append(out, "event memo "+k.key+" "+k.reason)
		}
	}
	c.eventMemo.mu.Unlock()
	c.revisions.mu.Lock()
	for key := range c.revisions.byDS {
		if keys[key] {
			out = append(out, "revisions "+key)
		}
	}
	c.revisions.mu.Unlock()
	c.heartbeats.mu.Lock()
	for key := range c.heartbeats.byKey {
		if keys[key] {
			out = append(out, "heartbeats awaited by "+key)
		}
	}
	for node, byKey := range c.heartbeats.byNode {
		for key := range byKey {
			if keys[key] {
				out = append(out, "heartbeats of "+node+" awaited by "+key)
			}
		}
	}
	c.heartbeats.mu.Unlock()
	if n := c.leases.Followed(); n > 0 {
		out = append(out, fmt.Sprintf("Leases followed (%d)", n))
	}
	c.challenges.mu.Lock()
	for pod, v := range c.challenges.issued {
		if keys[v.daemonSet] {
			out = append(out, fmt.Sprintf("challenge of %s (generation %d) by %s", pod.pod, pod.generation, v.daemonSet))
		}
	}
	c.challenges.mu.Unlock()
	c.rejections.mu.Lock()
	for k := range c.rejections.why {
		out = append(out, "pre-download rejection "+k)
	}
	for job := range c.rejections.checked {
		out = append(out, fmt.Sprintf("pre-download job checked %s", job))
	}
	c.rejections.mu.Unlock()
	for _, vec := range []*prometheus.GaugeVec{c.metrics.rolloutNodes, c.metrics.rolloutHalted, c.metrics.rolloutPulls, c.metrics.rolloutProven} {
		for _, labels := range labelSetsOf(vec) {
			if labels["namespace"] == testNamespace && keys[testNamespace+"/"+labels["daemonset"]] {
				out = append(out, fmt.Sprintf("series %v", labels))
			}
		}
	}
	return out
}

// labelSetsOf returns the label sets of a vector's series.
func labelSetsOf(c prometheus.Collector) []map[string]string {
	ch := make(chan prometheus.Metric, 1024)
	go func() { c.Collect(ch); close(ch) }()
	var out []map[string]string
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out = append(out, labels)
	}
	return out
}

// BenchmarkHeapPerDaemonSet reports the controller's heap per DaemonSet it
// tracks mid-rollout, 100 nodes each, a tenth in flight (heap-bytes/
// daemonset: what deleting the DaemonSet frees: its tracker, rollout,
// record, status, expectations; its pods' cache aside, which goes with the
// pods), and what each leaves once deleted, against the heap before its
// first sync (left-bytes/daemonset; the fake API server's copies of what
// the controller wrote to it, such as challenges on pods, included). Run it
// once: go test -run '^$' -bench HeapPerDaemonSet -benchtime 1x ./controller/
func BenchmarkHeapPerDaemonSet(b *testing.B) {
	const daemonSets, nodes = 20, 100
	base := cluster(advancedDaemonSet("10%"), readyNodes(nodes))
	var objs []runtime.Object
	for _, obj := range base {
		if _, ok := obj.(*corev1.Node); ok {
			objs = append(objs, obj)
		}
	}
	var names []string
	for i := range daemonSets {
		name := fmt.Sprintf("ds-%02d", i)
		names = append(names, name)
		objs = append(objs, namesake(base, name, types.UID("uid-"+name))...)
	}
	for b.Loop() {
		f := newFixture(b, objs...)
		// The test logger keeps every line in memory: none is written (a
		// zero Logger discards).
		f.ctx, f.c.logger = klog.NewContext(f.ctx, klog.Logger{}), klog.Logger{}
		// The pods stay in the fake API server (its heap is not the
		// controller's): the deletions are answered, not made.
		f.client.PrependReactor("delete", "pods", func(core.Action) (bool, runtime.Object, error) { return true, nil, nil })
		quiet := func() uint64 {
			f.c.background.Wait()
			f.client.ClearActions()
			f.events()
			return liveHeap()
		}
		before := quiet()
		for _, name := range names {
			if err := f.c.sync(f.ctx, testNamespace+"/"+name); err != nil {
				b.Fatal(err)
			}
		}
		tracked := quiet()
		for _, name := range names {
			ds, _ := f.c.dsByKey(testNamespace + "/" + name)
			if err := f.inf.DaemonSets.GetIndexer().Delete(ds); err != nil {
				b.Fatal(err)
			}
			if err := f.c.sync(f.ctx, testNamespace+"/"+name); err != nil {
				b.Fatal(err)
			}
		}
		gone := quiet()
		b.ReportMetric(float64(int64(tracked)-int64(gone))/daemonSets, "heap-bytes/daemonset")
		b.ReportMetric(float64(int64(gone)-int64(before))/daemonSets, "left-bytes/daemonset")
		goruntime.KeepAlive(f)
	}
}

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}
