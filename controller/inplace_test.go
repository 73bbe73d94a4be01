package controller

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	core "k8s.io/client-go/testing"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// inPlaceCluster is an in-place DaemonSet (edgeota.io/update-method
// InPlaceIfPossible, its template opted in) whose target revision changes
// its nginx image only, its revisions carrying their templates, with the
// nodes of ready each running an old pod whose kubelet reports its
// generation and its containers' IDs.
func inPlaceCluster(t *testing.T, strategy string, ready []corev1.ConditionStatus, opts ...dsOption) []runtime.Object {
	t.Helper()
	opts = append(opts, withAnnotation(rollout.StrategyAnnotation, strategy), withAnnotation(rollout.UpdateMethodAnnotation, "InPlaceIfPossible"))
	ds := newDaemonSet(opts...)
	ds.Spec.Template.Labels = map[string]string{"app": "web", rollout.InPlaceLabel: "true"}
	old := ds.Spec.Template.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "nginx:1.19.5"
	objs := cluster(ds, ready)
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.ControllerRevision:
			tpl := *old
			if o.Labels[revisionHashLabel] == newHash {
				tpl = ds.Spec.Template
			}
			o.Data = templateData(t, tpl)
		case *corev1.Pod:
			runningKubelet(o)
		}
	}
	return objs
}

// runningKubelet makes the pod one of an opted-in template whose status a
// Kubernetes 1.35 kubelet reports: its generation observed, its nginx
// container's ID.
func runningKubelet(pod *corev1.Pod) {
	pod.Labels[rollout.InPlaceLabel] = "true" // its template's, opted in
	pod.Generation, pod.Status.ObservedGeneration = 1, 1
	pod.Spec.Containers = []corev1.Container{{Name: "nginx", Image: "nginx:1.19.4"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", ContainerID: "containerd://" + pod.Name + "-1", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}
}

// patchesLikeTheAPIServer has the fake clientset apply strategic merge
// patches of pods (not their status) as the API server does, raising the
// pod's generation when its spec changes; refuse, when set, answers the
// patch instead.
func (f *fixture) patchesLikeTheAPIServer(refuse error) {
	f.client.PrependReactor("patch", "pods", func(action core.Action) (bool, runtime.Object, error) {
		p := action.(core.PatchAction)
		if p.GetSubresource() != "" {
			return false, nil, nil
		}
		if refuse != nil {
			return true, nil, refuse
		}
		obj, err := f.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		before, _ := json.Marshal(pod)
		after, err := strategicpatch.StrategicMergePatch(before, p.GetPatch(), &corev1.Pod{})
		if err != nil {
			return true, nil, err
		}
		var patched corev1.Pod
		if err := json.Unmarshal(after, &patched); err != nil {
			return true, nil, err
		}
		if patched.ResourceVersion != pod.ResourceVersion || patched.UID != pod.UID {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, pod.Name, nil)
		}
		patched.Generation = pod.Generation + 1
		return true, &patched, f.client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, &patched, p.GetNamespace())
	})
}

// podPatches returns the patches of pods themselves (not their status), by
// pod name.
func (f *fixture) podPatches() map[string][]string {
	out := map[string][]string{}
	for _, a := range f.allWrites() {
		if p, ok := a.(core.PatchAction); ok && a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
			out[p.GetName()] = append(out[p.GetName()], string(p.GetPatch()))
		}
	}
	return out
}

// TestPatchesInPlace: an image-only revision is carried out by one patch of
// each pod the budget takes: only the changed image and the two revision
// labels, conditional on the pod's UID and resourceVersion; its in-flight
// entry is written before it, and completed with the generation it
// returned; no pod is deleted.
func TestPatchesInPlace(t *testing.T) {
	f := newFixture(t, inPlaceCluster(t, "AdvancedRollingUpdate", readyNodes(3), withAnnotation(rollout.MaxUnavailableAnnotation, "1"))...)
	f.patchesLikeTheAPIServer(nil)
	f.sync()
	patches := f.podPatches()
	if len(patches) != 1 || len(patches["pod-0"]) != 1 || len(f.deletedPods()) != 0 {
		t.Fatalf("got patches %v and deletions %v, want one patch of pod-0 and no deletion", patches, f.deletedPods())
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(patches["pod-0"][0]), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"uid": "pod-0-uid", "resourceVersion": "1",
			"labels": map[string]any{revisionHashLabel: newHash, podTemplateGenerationLabel: "2"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.19.5"}}},
	}
	if got, _ := json.Marshal(body); string(got) != mustJSON(t, want) {
		t.Errorf("got patch %s, want %s", got, mustJSON(t, want))
	}
	// The record before the patch.
	var order []string
	for _, a := range f.allWrites() {
		switch {
		case a.GetResource().Resource == "configmaps" && len(order) == 0:
			order = append(order, "record")
		case a.GetResource().Resource == "pods" && a.GetSubresource() == "":
			order = append(order, "patch")
		}
	}
	if len(order) < 2 || !slices.Equal(order[:2], []string{"record", "patch"}) {
		t.Errorf("got writes in order %v, want the record first", order)
	}
	e := f.recordEntries()["node-0"]
	if e.Stage != decision.StageInFlight || e.InPlace == nil || e.InPlace.Before != 1 || e.InPlace.Generation != 2 ||
		!maps.Equal(e.InPlace.Images, map[string]string{"nginx": "nginx:1.19.5"}) || len(e.InPlace.Containers) != 1 {
		t.Errorf("got entry %+v (in place %+v), want in flight, patched from generation 1 to 2, nginx's ID kept", e, e.InPlace)
	}
	events := f.events()
	if countEvents(events, corev1.EventTypeNormal, rollout.ReasonUpdatedInPlace) != 1 {
		t.Errorf("got events %q, want one %s", events, rollout.ReasonUpdatedInPlace)
	}
	if got := f.deletionsIssued(); got != 1 {
		t.Errorf("got %d takes expected, want the patch expected until the cache shows it", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRefusedPatchPutsTheNodeBack: a patch the API server refuses (the pod
// changed since: a conflict) leaves the node a candidate, its entry one
// written ahead, with a Warning.
func TestRefusedPatchPutsTheNodeBack(t *testing.T) {
	f := newFixture(t, inPlaceCluster(t, "AdvancedRollingUpdate", readyNodes(2), withAnnotation(rollout.MaxUnavailableAnnotation, "1"))...)
	f.patchesLikeTheAPIServer(apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "pod-0", nil))
	if err := f.syncErr(); err != nil {
		t.Fatal(err) // the failure is the background write's: it requeues
	}
	if e := f.recordEntries()["node-0"]; e.Stage != decision.StageInFlight || e.Since != nil || e.InPlace == nil {
		t.Errorf("got entry %+v, want one written ahead again (no since)", e)
	}
	if got := f.deletionsIssued(); got != 0 {
		t.Errorf("got %d takes expected, want none after the refusal", got)
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonFailedUpdateInPlace)
}

// TestPatchesWaitForTheTemplate: while the cached DaemonSet's template is
// not the target revision's (the DaemonSet changed again, its revision not
// seen yet), nothing is patched.
func TestPatchesWaitForTheTemplate(t *testing.T) {
	objs := inPlaceCluster(t, "AdvancedRollingUpdate", readyNodes(2), withAnnotation(rollout.MaxUnavailableAnnotation, "1"))
	objs[0].(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Image = "nginx:1.19.6"
	f := newFixture(t, objs...)
	f.patchesLikeTheAPIServer(nil)
	f.sync()
	if patches := f.podPatches(); len(patches) != 0 || len(f.deletedPods()) != 0 {
		t.Errorf("got patches %v, deletions %v; want none while the template is ahead of its revision", patches, f.deletedPods())
	}
}

// TestOwnersRequestPatchedAtOnce: an OTA owner's request for the upgrade in
// place offered syncs the DaemonSet at once (not batched), and the sync
// patches that pod alone, the budget notwithstanding; its offer said in
// place.
func TestOwnersRequestPatchedAtOnce(t *testing.T) {
	objs := withOffers(inPlaceCluster(t, "OTA", readyNodes(2), withAnnotation(rollout.MaxUnavailableAnnotation, "1")), "node-0", "node-1")
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			offeredFor(newHash)(p)
		}
	}
	f := newFixture(t, objs...)
	f.patchesLikeTheAPIServer(nil)
	f.sync()
	if patches := f.podPatches(); len(patches) != 0 {
		t.Fatalf("got patches %v before any request, want none", patches)
	}
	for _, a := range f.allWrites() {
		if p, ok := a.(core.PatchAction); ok && a.GetSubresource() == "status" {
			if o := f.patchAnnotations(p)[rollout.OfferAnnotation]; o != "" && !strings.Contains(o, `"inPlace":true`) {
				t.Errorf("got offer %s on %s, want it to say in place", o, p.GetName())
			}
		}
	}
	f.client.ClearActions()

	var pod *corev1.Pod
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == "pod-1" {
			pod = p
		}
	}
	requested := pod.DeepCopy()
	value, _ := podchannel.Encode(&podchannel.UpgradeRequest{UID: requested.UID, Revision: newHash, At: metav1.Now()})
	requested.Annotations[rollout.UpgradeRequestAnnotation] = value
	requested.ResourceVersion = "2"
	if err := f.client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, requested, testNamespace); err != nil {
		t.Fatal(err)
	}
	f.drainQueue()
	queued := f.queuedBy(func() { f.update(requested) })
	if !slices.Equal(queued, []string{testDSKey}) {
		t.Errorf("got %q queued by the request, want %s at once", queued, testDSKey)
	}
	f.sync()
	if patches := f.podPatches(); len(patches) != 1 || len(patches["pod-1"]) != 1 {
		t.Errorf("got patches %v, want pod-1 patched as its owner asked", patches)
	}
}

// TestRecreatedInsteadOfInPlaceTellsOnce: a revision that changes more
// than images, every node taken in one wave (so no status ever counts a
// node waiting to be recreated), still tells why with one InPlaceNotPossible
// event for the revision, not one per node.
func TestRecreatedInsteadOfInPlaceTellsOnce(t *testing.T) {
	// Not pinned: a pinned rollout's first wave is its canary alone.
	objs := inPlaceCluster(t, "AdvancedRollingUpdate", readyNodes(3), withAnnotation(rollout.MaxUnavailableAnnotation, "3"),
		withAnnotation(rollout.PinAnnotation, "false"))
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			o.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "edge"}}
		case *appsv1.ControllerRevision:
			if o.Labels[revisionHashLabel] == newHash {
				var tpl struct {
					Spec struct {
						Template corev1.PodTemplateSpec `json:"template"`
					} `json:"spec"`
				}
				if err := json.Unmarshal(o.Data.Raw, &tpl); err != nil {
					t.Fatal(err)
				}
				tpl.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "edge"}}
				o.Data = templateData(t, tpl.Spec.Template)
			}
		}
	}
	f := newFixture(t, objs...)
	// A status of this target written a moment ago, before any reason to
	// recreate showed: the next waits its turn, by when no node waits to be
	// recreated any more, so only the deletions can tell why.
	prev := mustJSON(t, rollout.Status{Revision: 2, Hash: newHash, Total: 3})
	for _, obj := range objs {
		if ds, ok := obj.(*appsv1.DaemonSet); ok {
			f.c.statuses.record(testDSKey, ds.UID, prev, f.c.now())
		}
	}
	f.sync()
	if got := len(f.deletedPods()); got != 3 {
		t.Fatalf("got %d pods deleted, want the 3 recreated in one wave", got)
	}
	events := f.events()
	if got := countEvents(events, corev1.EventTypeNormal, rollout.ReasonInPlaceNotPossible); got != 1 {
		t.Errorf("got events %q, want one %s", events, rollout.ReasonInPlaceNotPossible)
	}
	if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, "its env changed") }) {
		t.Errorf("got events %q, want the reason, its env changed", events)
	}
}
