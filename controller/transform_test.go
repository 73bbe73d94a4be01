package controller

import (
	"maps"
	"strings"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-cmp/cmp"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// TestPodRecordHoldsWhatTheDecisionReads builds the cache's record of a
// full pod and checks every field a decision or a write reads.
func TestPodRecordHoldsWhatTheDecisionReads(t *testing.T) {
	hold := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	holdValue, _ := podchannel.Encode(&podchannel.Hold{Until: hold, Reason: "driving"})
	deleted := metav1.NewTime(time.Now().Truncate(time.Second))
	finished := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	pod := newPod("p", "node-0", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash)),
		withCondition(corev1.PodCondition{Type: podcondition.ImageReady, Status: corev1.ConditionFalse, Reason: podcondition.ReasonPullImageRequested, Message: "controllerrevision: " + newHash}),
		withCondition(corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}))
	pod.Labels[podTemplateGenerationLabel] = "2"
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.Annotations = map[string]string{"big": "x", rollout.HoldAnnotation: holdValue, rollout.OfferAnnotation: `{"revision":"x"}`,
		rollout.ChallengeAnnotation: "p-uid/abc", rollout.AnswerAnnotation: "p-uid/abc"}
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &deleted, new(int64(30))
	pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, "Evicted", "low memory"
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "i", ImageID: "docker.io/library/i@sha256:" + strings.Repeat("0", 64), State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: finished}}}}
	got := podRecordOf(pod).(*podRecord)
	want := decision.Pod{
		Namespace: testNamespace, Name: "p", UID: "p-uid", ResourceVersion: "1", Owner: testDSUID, Node: "node-0", Bound: true,
		Hash: oldHash, Created: unixtime.Of(pod.CreationTimestamp.Time), Terminating: true, TerminatingSince: unixtime.Of(deleted.Add(-30 * time.Second)),
		Health: health.Pod{Failed: true,
			Ready: true, ReadySince: unixtime.Of(pod.Status.Conditions[0].LastTransitionTime.Time),
			ContainersReady: true, ContainersReadySince: unixtime.Of(pod.Status.Conditions[1].LastTransitionTime.Time),
			LastFinished: unixtime.Of(finished.Time),
			Detail: &health.Detail{Reason: "Evicted", Message: "low memory",
				Waiting: []health.Waiting{{Container: "init", Reason: "PodInitializing"}, {Container: "c", Reason: "ImagePullBackOff", Message: "not found"}}}},
		NeedUpgrade: decision.Share(decision.Condition{Status: "True", Message: "controllerrevision: " + newHash}),
		ImageReady:  decision.Share(decision.Condition{Status: "False", Reason: podcondition.ReasonPullImageRequested, Message: "controllerrevision: " + newHash}),
		Offer:       podchannel.Hash(`{"revision":"x"}`), Challenge: podchannel.Hash("p-uid/abc"), Answer: podchannel.Hash("p-uid/abc"),
		ImageIDs: decision.ShareImageIDs(map[string]string{"c": "docker.io/library/i@sha256:" + strings.Repeat("0", 64)}),
		// The template generation is read only without a hash.
		Rare: &decision.RarePod{HoldUntil: unixtime.Of(hold.Time)},
	}
	if diff := cmp.Diff(want, got.Pod, sharedConditions, sharedImageIDs); diff != "" {
		t.Errorf("got a record differing from what the pod says (-want +got):\n%s", diff)
	}
	if again := podRecordOf(got); again != got {
		t.Errorf("got a record transformed again into %p, want the same record %p (client-go may transform twice)", again, got)
	}
	// An unbound pod names its node by affinity, and says why it is not
	// scheduled.
	unbound := newPod("u", "", newHash, meantFor("node-7"),
		withCondition(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}))
	if r := podRecordOf(unbound).(*podRecord); r.Node != "node-7" || r.Bound || r.Unscheduled() != "Unschedulable: 0/3 nodes" {
		t.Errorf("got node %q bound %v unscheduled %q, want node-7, unbound, the scheduler's reason", r.Node, r.Bound, r.Unscheduled())
	}
	// A pod from before revision hashes is judged by its template
	// generation.
	unhashed := newPod("g", "node-1", "")
	delete(unhashed.Labels, revisionHashLabel)
	unhashed.Labels[podTemplateGenerationLabel] = "2"
	if r := podRecordOf(unhashed).(*podRecord); r.Hash != "" || r.Generation() != "2" {
		t.Errorf("got hash %q generation %q, want no hash and generation 2", r.Hash, r.Generation())
	}
}

// TestPodRecordOfARunningPodHoldsNothingRare: a pod that runs, the common
// case, holds neither the rare facts nor a health detail: nothing beyond the
// record and its one string of identity is allocated for it.
func TestPodRecordOfARunningPodHoldsNothingRare(t *testing.T) {
	r := podRecordOf(newPod("p", "node-0", oldHash)).(*podRecord)
	if r.Rare != nil || r.Health.Detail != nil {
		t.Errorf("got rare facts %+v and health detail %+v, want neither", r.Rare, r.Health.Detail)
	}
	if unsafe.Add(unsafe.Pointer(unsafe.StringData(r.Name)), len(r.Name)) != unsafe.Pointer(unsafe.StringData(string(r.UID))) {
		t.Errorf("got name and UID in separate allocations, want one")
	}
}

// sharedConditions compares shared conditions by their values.
var sharedConditions = cmp.Transformer("Get", func(s decision.SharedCondition) decision.Condition { return s.Get() })

// sharedImageIDs compares the shared imageIDs by what they hold.
var sharedImageIDs = cmp.Transformer("ImageIDs", func(i decision.ImageIDs) map[string]string {
	ids := map[string]string{}
	for _, name := range i.Names() {
		ids[name] = i.Get(name)
	}
	return ids
})

func TestTransformKeepsWhatTheControllerReads(t *testing.T) {
	node := newNode("n", corev1.ConditionTrue)
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure})
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"nginx"}}}
	got, _ := Transform(node)
	if again, _ := Transform(got); again != got {
		t.Errorf("got a node record transformed again into %p, want the same record %p", again, got)
	}

	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
		withAnnotation(rollout.RolloutStatusAnnotation, "{}"), withAnnotation(rollout.PausedAnnotation, "true"))
	got, _ = Transform(ds)
	d := got.(*appsv1.DaemonSet)
	if _, ok := d.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok || d.Annotations[rollout.StrategyAnnotation] != "OTA" ||
		d.Annotations[templateGenerationAnnot] != "2" || d.Annotations[rollout.RolloutStatusAnnotation] != "{}" || d.Annotations[rollout.PausedAnnotation] != "true" {
		t.Errorf("got annotations %v, want only the ones the controller reads", d.Annotations)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx:1.19.4" || d.Spec.Template.Spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("got template %+v, want images and pull secrets kept", d.Spec.Template.Spec)
	}

}

// TestTransformKeepsARevisionsImages: of a ControllerRevision's data (the
// whole pod template) the cache keeps the containers' names and images,
// which offers name, and nothing else; trimming twice changes nothing.
func TestTransformKeepsARevisionsImages(t *testing.T) {
	ds := newDaemonSet()
	ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SECRET", Value: "x"}}
	r := &appsv1.ControllerRevision{Data: templateData(t, ds.Spec.Template)}
	if _, err := Transform(r); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"init": "busybox:1.36", "nginx": "nginx:1.19.4"}
	if got := revisionImages(r); !maps.Equal(got, want) {
		t.Errorf("got images %v, want %v", got, want)
	}
	if strings.Contains(string(r.Data.Raw), "SECRET") || strings.Contains(string(r.Data.Raw), "regcred") {
		t.Errorf("got data %s, want only names and images", r.Data.Raw)
	}
	once := string(r.Data.Raw)
	if _, err := Transform(r); err != nil || string(r.Data.Raw) != once {
		t.Errorf("trimmed again: got %s, %v; want %s", r.Data.Raw, err, once)
	}

	for _, raw := range []string{"", "not json", `{"spec":{}}`} {
		r := &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(raw)}}
		if _, err := Transform(r); err != nil || len(r.Data.Raw) != 0 || revisionImages(r) != nil {
			t.Errorf("data %q: got %s, %v, images %v; want no data and no images", raw, r.Data.Raw, err, revisionImages(r))
		}
	}
}

// TestTargetImagesDecodedOncePerRevision: the images of a DaemonSet's
// target revision are decoded once, and again when the target is another
// revision or the DaemonSet was forgotten.
func TestTargetImagesDecodedOncePerRevision(t *testing.T) {
	ds := newDaemonSet()
	first := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{UID: "r1"}, Data: templateData(t, ds.Spec.Template)}
	ds.Spec.Template.Spec.Containers[0].Image = "nginx:1.20"
	second := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{UID: "r2"}, Data: templateData(t, ds.Spec.Template)}
	var cache revisionCache
	of := func(r *appsv1.ControllerRevision) map[string]string {
		images, _ := cache.of(testDSKey, ds.UID, r, []*appsv1.ControllerRevision{r}, false)
		return images
	}
	if got := of(first)["nginx"]; got != "nginx:1.19.4" {
		t.Fatalf("got nginx image %q, want nginx:1.19.4", got)
	}
	// The same revision is not decoded again: data it no longer holds
	// does not matter.
	first.Data = runtime.RawExtension{}
	if got := of(first)["nginx"]; got != "nginx:1.19.4" {
		t.Errorf("got nginx image %q from the same revision, want nginx:1.19.4 as decoded before", got)
	}
	if got := of(second)["nginx"]; got != "nginx:1.20" {
		t.Errorf("got nginx image %q after the target moved, want nginx:1.20", got)
	}
	cache.forget(testDSKey)
	if got := of(first); got != nil {
		t.Errorf("got images %v after forget, want those of the revision as it is now: none", got)
	}
}

// TestRevisionTemplatesForInPlace: a ControllerRevision cached keeps its
// template's digests, computed from the whole template before it is
// trimmed; the cache of an in-place DaemonSet serves them by hash, for its
// own revisions only, and the DaemonSet's cached template digest tells
// whether it is the target's.
func TestRevisionTemplatesForInPlace(t *testing.T) {
	ds := newDaemonSet()
	ds.Spec.Template.Labels = map[string]string{"app": "nginx", rollout.InPlaceLabel: "true"}
	revision := func(uid, hash string, tpl corev1.PodTemplateSpec) *appsv1.ControllerRevision {
		r := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Labels: map[string]string{revisionHashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
			Data: templateData(t, tpl)}
		if _, err := Transform(r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	old := revision("r1", oldHash, ds.Spec.Template)
	next := ds.Spec.Template.DeepCopy()
	next.Spec.Containers[0].Image = "nginx:1.20"
	target := revision("r2", newHash, *next)
	stranger := revision("r3", "other", *next)
	stranger.OwnerReferences = nil

	var cache revisionCache
	_, templates := cache.of(testDSKey, ds.UID, target, []*appsv1.ControllerRevision{old, target, stranger}, true)
	if len(templates) != 2 || templates[oldHash] == nil || templates[newHash] == nil {
		t.Fatalf("got templates %v, want the DaemonSet's two revisions'", templates)
	}
	plan := inplace.Classify(templates[oldHash], templates[newHash])
	if !plan.InPlace || plan.Images["nginx"] != "nginx:1.20" {
		t.Errorf("got plan %+v, want nginx patched in place: digests of the whole templates, before trimming", plan)
	}

	d := newDaemonSet()
	d.Spec.Template = *next
	got, _ := Transform(d)
	if digest := got.(*appsv1.DaemonSet).Annotations[templateDigestKey]; digest != digestString(templates[newHash].Full) {
		t.Errorf("got the DaemonSet's template digest %s, want the target revision's %s", digest, digestString(templates[newHash].Full))
	}
	if again, _ := Transform(got); again.(*appsv1.DaemonSet).Annotations[templateDigestKey] != got.(*appsv1.DaemonSet).Annotations[templateDigestKey] {
		t.Errorf("transformed again, the digest changed: want it kept (the template is trimmed by then)")
	}
}

// TestPodRecordsShareRepeatedStrings: two pods decoded apart share one copy
// of what they have in common (namespace, owner, node, revision, condition
// texts).
func TestPodRecordsShareRepeatedStrings(t *testing.T) {
	decoded := func(name string) *podRecord {
		pod := newPod(name, "node-0", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash)))
		raw, err := pod.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var out corev1.Pod
		if err := out.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		return podRecordOf(&out).(*podRecord)
	}
	a, b := decoded("a"), decoded("b")
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("got %s %q and %q apart, want one shared copy", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("owner UID", string(a.Owner), string(b.Owner))
	same("node", a.Node, b.Node)
	same("revision", a.Hash, b.Hash)
	if a.NeedUpgrade != b.NeedUpgrade || a.NeedUpgrade.Get().Message == "" {
		t.Errorf("got conditions %+v and %+v, want one shared condition", a.NeedUpgrade.Get(), b.NeedUpgrade.Get())
	}
	if a.Name == b.Name {
		t.Errorf("got both pods named %q, want their own names", a.Name)
	}
}
