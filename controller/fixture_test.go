package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/kube/kubetest"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

const (
	testNamespace = "default"
	testDSName    = "ds"
	testDSKey     = testNamespace + "/" + testDSName
	testDSUID     = types.UID("ds-uid")
	oldHash       = "old111"
	newHash       = "new222"
)

// fixture is a controller over a fake clientset and informer caches seeded
// with the same objects; tests call sync directly and check client actions.
type fixture struct {
	t        testing.TB
	ctx      context.Context
	client   *fake.Clientset
	inf      *Informers
	recorder *record.FakeRecorder
	c        *Controller
}

// testRecordNamespace is where the fixture's controller keeps its records.
const testRecordNamespace = "edgeota-system"

func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	inf := NewInformers(kubetest.Wrap(client), testRecordNamespace)
	recorder := record.NewFakeRecorder(1000)
	c, err := NewController(ctx, kubetest.Wrap(client), inf, recorder, NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, inf: inf, recorder: recorder, c: c}
	for _, obj := range objs {
		if _, isLease := obj.(*coordinationv1.Lease); isLease {
			continue // no informer: the controller reads Leases by name
		}
		if err := f.indexer(obj).Add(cached(obj)); err != nil {
			t.Fatalf("seeding the cache: %v", err)
		}
	}
	return f
}

// cached is the object as the controller's informers store it: a
// DaemonSet pod as its record, the rest trimmed.
func cached(obj runtime.Object) any {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Labels[PrePullLabel] != "true" {
		return podRecordOf(pod.DeepCopy())
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		return recordstore.Summarize(cm)
	}
	out, _ := Transform(obj.DeepCopyObject())
	return out
}

func (f *fixture) indexer(obj runtime.Object) cache.Indexer {
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		return f.inf.DaemonSets.GetIndexer()
	case *appsv1.ControllerRevision:
		return f.inf.ControllerRevisions.GetIndexer()
	case *corev1.Pod:
		if o.Labels[PrePullLabel] == "true" {
			return f.inf.PrePullPods.GetIndexer()
		}
		return f.inf.DaemonPods.GetIndexer()
	case *corev1.Node:
		return f.inf.Nodes.GetIndexer()
	case *batchv1.Job:
		return f.inf.Jobs.GetIndexer()
	case *corev1.ConfigMap:
		return f.inf.Records.GetIndexer()
	}
	f.t.Fatalf("no informer for %T", obj)
	return nil
}

// update changes an object in the cache and delivers the event as its
// informer would; a node event's enqueues are left in the queue.
func (f *fixture) update(obj runtime.Object) {
	f.t.Helper()
	idx := f.indexer(obj)
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	old, exists, _ := idx.GetByKey(key)
	stored := cached(obj)
	if err := idx.Update(stored); err != nil {
		f.t.Fatal(err)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		if o.Labels[PrePullLabel] == "true" {
			return
		}
		if !exists {
			f.c.addPod(stored)
			return
		}
		f.c.updatePod(old, stored)
	case *corev1.Node:
		if !exists {
			old = &nodeRecord{}
		}
		f.c.updateNode(old, stored)
	case *appsv1.DaemonSet:
		if exists {
			f.c.updateDaemonSet(old, o)
		}
	}
}

// remove deletes a pod from the cache and delivers the event.
func (f *fixture) remove(pod *corev1.Pod) {
	f.t.Helper()
	stored := cached(pod)
	if err := f.indexer(pod).Delete(stored); err != nil {
		f.t.Fatal(err)
	}
	f.c.deletePod(stored)
}

// drainQueue empties the work queue.
func (f *fixture) drainQueue() {
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
		f.c.queue.Forget(key)
	}
}

// sync runs one sync of the test DaemonSet, and the writes it left under
// way, and fails the test on error.
func (f *fixture) sync() {
	f.t.Helper()
	if err := f.syncErr(); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// syncErr runs one sync of the test DaemonSet and waits for the writes it
// left under way (inBackground).
func (f *fixture) syncErr() error {
	defer f.c.background.Wait()
	return f.c.sync(f.ctx, testDSKey)
}

// writes returns the actions that changed something, in order, but the
// rollout status patches (see rolloutStatuses), the rollout record's writes
// (see recordWrites) and the proof-of-life challenges (see challenges).
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, a := range f.allWrites() {
		switch {
		case a.GetVerb() == "patch" && a.GetResource().Resource == "daemonsets":
		case a.GetResource().Resource == "configmaps":
		case f.isChallenge(a):
		default:
			out = append(out, a)
		}
	}
	return out
}

// isChallenge reports whether the action writes a proof-of-life challenge.
func (f *fixture) isChallenge(a core.Action) bool {
	p, ok := a.(core.PatchAction)
	return ok && a.GetSubresource() == "status" && strings.Contains(string(p.GetPatch()), rollout.ChallengeAnnotation)
}

// challenges returns the pods a challenge was written on, in order, with
// the value written.
func (f *fixture) challenges() map[string]string {
	out := map[string]string{}
	for _, a := range f.allWrites() {
		if f.isChallenge(a) {
			out[a.(core.PatchAction).GetName()] = f.patchAnnotations(a.(core.PatchAction))[rollout.ChallengeAnnotation]
		}
	}
	return out
}

// allWrites returns the actions that changed something, in order.
func (f *fixture) allWrites() []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

// deletedPods returns the names of the pods deleted, in order.
func (f *fixture) deletedPods() []string { return f.deleted("pods") }

// deleted returns the names of the objects of the resource deleted, in order.
func (f *fixture) deleted(resource string) []string {
	var names []string
	for _, a := range f.allWrites() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == resource {
			names = append(names, a.(core.DeleteAction).GetName())
		}
	}
	return names
}

// conditionPatches maps pod name to the condition entries it was patched with.
func (f *fixture) conditionPatches() map[string][]map[string]any {
	f.t.Helper()
	out := map[string][]map[string]any{}
	for _, a := range f.writes() {
		p, ok := a.(core.PatchAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		var body struct {
			Status struct {
				Conditions []map[string]any `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			f.t.Fatalf("decoding patch %s: %v", p.GetPatch(), err)
		}
		if len(body.Status.Conditions) == 0 {
			continue // annotations alone
		}
		out[p.GetName()] = append(out[p.GetName()], body.Status.Conditions...)
	}
	return out
}

// expectWritesInBursts syncs twice and checks that the first sync writes
// WriteBurst of the n pods and queues the DaemonSet again for the rest, and
// that the second writes the rest and queues nothing: each pod written once
// in all. writes counts the writes made so far, by pod.
func (f *fixture) expectWritesInBursts(n int, writes func() map[string]int) {
	f.t.Helper()
	queued := f.queuedBy(f.sync)
	if got := len(writes()); got != WriteBurst {
		f.t.Fatalf("first sync: got %d pods written, want %d (WriteBurst)", got, WriteBurst)
	}
	if !slices.Contains(queued, testDSKey) {
		f.t.Errorf("first sync: got keys queued %q, want %s queued for the pods past the burst", queued, testDSKey)
	}
	queued = f.queuedBy(f.sync)
	got := writes()
	if len(got) != n {
		f.t.Fatalf("second sync: got %d pods written in all, want %d", len(got), n)
	}
	for pod, count := range got {
		if count != 1 {
			f.t.Errorf("pod %s: got %d writes, want 1", pod, count)
		}
	}
	if slices.Contains(queued, testDSKey) {
		f.t.Errorf("second sync: got keys queued %q, want none: every pod is written", queued)
	}
}

// writesPerPod counts each pod's writes in a pod's writes.
func writesPerPod[W any](byPod map[string][]W) map[string]int {
	counts := make(map[string]int, len(byPod))
	for pod, w := range byPod {
		counts[pod] = len(w)
	}
	return counts
}

// sentinelKey marks the end of what an event queued; no object has it.
const sentinelKey = "sentinel/end-of-event"

// queuedBy calls event and returns the keys it queued, in order, whether at
// once or batched like pod events. It queues sentinelKey after the event,
// batched, and takes keys off the queue until the sentinel comes out: the
// queue releases keys in the order they are due, so anything the event
// queued has come out by then, and nothing has to be waited for by a fixed
// sleep. A sentinel that never comes (a hung queue) fails the test.
func (f *fixture) queuedBy(event func()) []string {
	f.t.Helper()
	event()
	f.c.enqueueBatched(sentinelKey)
	hung := time.AfterFunc(time.Minute, f.c.queue.ShutDown)
	defer hung.Stop()
	var keys []string
	for {
		key, shutdown := f.c.queue.Get()
		if shutdown {
			f.t.Fatalf("the queue gave no sentinel within a minute; got %q before it", keys)
		}
		f.c.queue.Done(key)
		f.c.queue.Forget(key)
		if key == sentinelKey {
			return keys
		}
		keys = append(keys, key)
	}
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// countEvents counts the events of the type and reason.
func countEvents(events []string, eventType, reason string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, eventType+" "+reason+" ") {
			n++
		}
	}
	return n
}

// wantEvent fails unless an event of the type and reason was recorded.
func (f *fixture) wantEvent(events []string, eventType, reason string) {
	f.t.Helper()
	if countEvents(events, eventType, reason) == 0 {
		f.t.Errorf("got events %q, want one %s %s", events, eventType, reason)
	}
}

type dsOption func(*appsv1.DaemonSet)

func withAnnotation(key, value string) dsOption {
	return func(ds *appsv1.DaemonSet) { ds.Annotations[key] = value }
}

func withUpdateStrategy(t appsv1.DaemonSetUpdateStrategyType) dsOption {
	return func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = t }
}

func newDaemonSet(opts ...dsOption) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: testDSName, UID: testDSUID,
			Annotations: map[string]string{templateGenerationAnnot: "2"},
		},
		Spec: appsv1.DaemonSetSpec{
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers:   []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
				Containers:       []corev1.Container{{Name: "nginx", Image: "nginx:1.19.4", ImagePullPolicy: corev1.PullIfNotPresent}},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
			}},
		},
	}
	for _, o := range opts {
		o(ds)
	}
	return ds
}

// revisionCreated is when the test DaemonSet's current ControllerRevision
// was created: an hour before the tests ran.
var revisionCreated = time.Now().Add(-time.Hour).Truncate(time.Second)

// offeredAt is when offeredFor's offers were first made: an hour before the
// tests ran, as revisionCreated.
var offeredAt = revisionCreated

// revisions are the DaemonSet's old and current ControllerRevisions.
func revisions() []runtime.Object {
	rev := func(hash string, n int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: testNamespace, Name: testDSName + "-" + hash, UID: types.UID("rev-" + hash),
				Labels:            map[string]string{revisionHashLabel: hash},
				CreationTimestamp: metav1.NewTime(revisionCreated.Add(time.Duration(n-2) * time.Hour)),
				OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(newDaemonSet(), appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
			},
			Revision: n,
		}
	}
	return []runtime.Object{rev(newHash, 2), rev(oldHash, 1)}
}

// newNode is a node whose Ready condition has the status and whose last
// heartbeat is now (none when ready is "").
func newNode(name string, ready corev1.ConditionStatus) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now()}}
	}
	return node
}

// heartbeatAgo sets the node's last heartbeat d ago.
func heartbeatAgo(node *corev1.Node, d time.Duration) *corev1.Node {
	node.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(-d))
	return node
}

type podOption func(*corev1.Pod)

// notReady makes the pod and its containers not Ready.
func notReady(pod *corev1.Pod) {
	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	pod.Status.Conditions[1].Status = corev1.ConditionFalse
}

// readySince makes the pod and its containers Ready since d ago.
func readySince(d time.Duration) podOption {
	return func(pod *corev1.Pod) {
		pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-d))
		pod.Status.Conditions[1].LastTransitionTime = metav1.NewTime(time.Now().Add(-d))
	}
}

// createdAgo sets the pod's creation d ago.
func createdAgo(d time.Duration) podOption {
	return func(pod *corev1.Pod) { pod.CreationTimestamp = metav1.NewTime(time.Now().Add(-d)) }
}

// crashLooping makes the pod's container wait in CrashLoopBackOff.
func crashLooping(pod *corev1.Pod) {
	notReady(pod)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
}

func terminating(pod *corev1.Pod) { pod.DeletionTimestamp = &metav1.Time{Time: time.Now()} }

func withCondition(c corev1.PodCondition) podOption {
	return func(pod *corev1.Pod) { pod.Status.Conditions = append(pod.Status.Conditions, c) }
}

// newPod is a pod of the test DaemonSet on node, at the revision hash,
// created two minutes ago and Ready (containers too) for the last 100 s.
func newPod(name, node, hash string, opts ...podOption) *corev1.Pod {
	readyAt := metav1.NewTime(time.Now().Add(-100 * time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * time.Minute)),
			Labels:            map[string]string{revisionHashLabel: hash},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(newDaemonSet(), appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: readyAt},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: readyAt},
		}},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// cluster is a DaemonSet with its revisions, one node per entry of ready
// ("node-0", ...) each running one pod ("pod-0", ...) at the hash in hashes
// (oldHash when hashes is shorter).
func cluster(ds *appsv1.DaemonSet, ready []corev1.ConditionStatus, hashes ...string) []runtime.Object {
	objs := append([]runtime.Object{ds}, revisions()...)
	for i, r := range ready {
		hash := oldHash
		if i < len(hashes) {
			hash = hashes[i]
		}
		node := fmt.Sprintf("node-%d", i)
		objs = append(objs, newNode(node, r), newPod(fmt.Sprintf("pod-%d", i), node, hash))
	}
	return objs
}

func readyNodes(n int) []corev1.ConditionStatus {
	out := make([]corev1.ConditionStatus, n)
	for i := range out {
		out[i] = corev1.ConditionTrue
	}
	return out
}

func needUpgrade(status corev1.ConditionStatus, hash string) corev1.PodCondition {
	return corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: status, Message: podcondition.RevisionMessage(hash)}
}

// offeredFor marks an out-of-date pod as the controller does when it offers
// the test DaemonSet's revision hash: PodNeedUpgrade True, and the offer
// (podchannel.Offer) written with it, offered an hour ago.
func offeredFor(hash string) podOption {
	return func(pod *corev1.Pod) {
		pod.Status.Conditions = append(pod.Status.Conditions, needUpgrade(corev1.ConditionTrue, hash))
		at := metav1.NewTime(offeredAt)
		limit := metav1.NewTime(revisionCreated.Add(decision.DefaultMaxHold))
		value, err := podchannel.Encode(&podchannel.Offer{Revision: hash, Images: podchannel.ImagesOf(&newDaemonSet().Spec.Template.Spec),
			OfferedAt: &at, HoldLimit: &limit})
		if err != nil {
			panic(err)
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[rollout.OfferAnnotation] = value
	}
}

// deletionsIssued counts the deletions the controller issued for the test
// DaemonSet and has not seen in its cache yet.
func (f *fixture) deletionsIssued() int {
	return len(f.c.expect.deletingNodes(testDSKey))
}

// recordEntries returns the test DaemonSet's rollout record as this
// process holds it.
func (f *fixture) recordEntries() map[string]decision.Entry {
	t := f.c.existingTracker(testDSKey)
	if t == nil || t.ledger() == nil {
		return nil
	}
	return t.ledger().Entries()
}

// rollout returns the test DaemonSet's Rollout as the last sync left it.
func (f *fixture) rollout() *decision.Rollout {
	f.t.Helper()
	t := f.c.existingTracker(testDSKey)
	if t == nil || t.rollout == nil {
		f.t.Fatalf("got no rollout of %s, want one after a sync", testDSKey)
	}
	return t.rollout
}

// state returns where the node stands as the last sync judged it.
func (f *fixture) state(node string) decision.State {
	f.t.Helper()
	s, _ := f.rollout().State(node)
	return s
}

// why returns why the node failed, as the last sync judged it.
func (f *fixture) why(node string) string {
	f.t.Helper()
	_, why := f.rollout().State(node)
	return why
}

// count counts the nodes in the state as the last sync judged them.
func (f *fixture) count(s decision.State) int {
	f.t.Helper()
	return f.rollout().Count(s)
}

// meantFor gives an unbound pod the node affinity the DaemonSet controller
// writes: it names the one node the pod is for.
func meantFor(node string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.NodeName = ""
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}},
		}}
	}
}

// inFlightSince is the record entry of a node whose old pod was deleted d
// ago.
func inFlightSince(pod string, d time.Duration) decision.Entry {
	return decision.Entry{Stage: decision.StageInFlight, Pod: types.UID(pod + "-uid"), Since: &metav1.Time{Time: time.Now().Add(-d).Truncate(time.Second)}}
}

// failedEntry is the record entry of a node that failed for why.
func failedEntry(why string) decision.Entry {
	return decision.Entry{Stage: decision.StageFailed, Reason: why}
}

// recordOf is the test DaemonSet's rollout record of the target revision
// (newHash, number 2) holding the entries, as a predecessor wrote it: the
// revision first seen as the target when it was created (revisionCreated).
func recordOf(entries map[string]decision.Entry) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testRecordNamespace, Name: fmt.Sprintf("edgeota-rollout-%s-2-0", testDSUID), ResourceVersion: "1",
			Labels: map[string]string{recordstore.Label: string(testDSUID), "edgeota.io/revision-hash": newHash, "edgeota.io/revision-number": "2"},
		},
		Data: map[string]string{"_meta": fmt.Sprintf(`{"targetSince":%q}`, revisionCreated.UTC().Format(time.RFC3339))},
	}
	for node, e := range entries {
		data, _ := json.Marshal(e)
		cm.Data[node] = string(data)
	}
	return cm
}

// progressRecordOf is the test DaemonSet's rollout record's ConfigMap of
// offered and settled entries, as a predecessor wrote it.
func progressRecordOf(entries map[string]decision.Entry) *corev1.ConfigMap {
	cm := recordOf(entries)
	cm.Name = fmt.Sprintf("edgeota-rollout-%s-2-p0", testDSUID)
	delete(cm.Data, "_meta")
	return cm
}

// withOffers adds to objs the test DaemonSet's rollout record of a
// predecessor that offered the target to the nodes at offeredAt (as
// offeredFor marks their pods), unless objs hold a record already: then
// only the offers.
func withOffers(objs []runtime.Object, nodes ...string) []runtime.Object {
	entries := map[string]decision.Entry{}
	for _, n := range nodes {
		entries[n] = offeredEntry(offeredAt)
	}
	hasRecord := slices.ContainsFunc(objs, func(o runtime.Object) bool {
		cm, ok := o.(*corev1.ConfigMap)
		return ok && strings.HasSuffix(cm.Name, "-2-0")
	})
	if !hasRecord {
		objs = append(objs, recordOf(nil))
	}
	return append(objs, progressRecordOf(entries))
}

// offeredEntry is the record entry of a node first offered the target at.
func offeredEntry(at time.Time) decision.Entry {
	return decision.Entry{Stage: decision.StageOffered, OfferedAt: &metav1.Time{Time: at.Truncate(time.Second)}}
}

// testutilGauge reads a gauge's value.
func testutilGauge(g prometheus.Gauge) float64 { return testutil.ToFloat64(g) }

// patchAnnotations decodes the annotations a patch sets.
func (f *fixture) patchAnnotations(p core.PatchAction) map[string]string {
	f.t.Helper()
	var body struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		f.t.Fatalf("decoding patch %s: %v", p.GetPatch(), err)
	}
	return body.Metadata.Annotations
}
