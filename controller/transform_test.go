package controller

import (
	"maps"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

func TestTransformKeepsWhatTheControllerReads(t *testing.T) {
	pod := newPod("p", "node-0", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash)),
		withCondition(corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}))
	pod.Labels["app"], pod.Labels[podTemplateGenerationLabel] = "web", "2"
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.Annotations = map[string]string{"big": "x"}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "A"}}}}
	finished := metav1.Now()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "i", ImageID: "sha", State: running,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: finished, Message: "long log"}}}}
	got, _ := Transform(pod)
	p := got.(*corev1.Pod)
	if p.ManagedFields != nil || p.Annotations != nil || p.Spec.Containers != nil || p.Status.ContainerStatuses[0].ImageID != "" {
		t.Errorf("got %+v, want managedFields, annotations, containers and image IDs dropped", p)
	}
	if p.Spec.NodeName != "node-0" || len(p.Status.Conditions) != 3 || p.Labels[revisionHashLabel] != oldHash ||
		p.Labels[podTemplateGenerationLabel] != "2" || controllerOf(p) == nil || p.Status.ContainerStatuses[0].State.Running == nil ||
		p.Status.Phase != corev1.PodRunning {
		t.Errorf("got %+v, want node, phase, the conditions and labels read, owner and container states kept", p)
	}
	if _, ok := p.Labels["app"]; ok || podcondition.Get(&p.Status, corev1.PodInitialized) != nil {
		t.Errorf("got labels %v and conditions %+v, want only those the controller reads", p.Labels, p.Status.Conditions)
	}
	if term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || !term.FinishedAt.Equal(&finished) || term.Message != "" {
		t.Errorf("got last termination %+v, want only its end kept (health.Judge reads restarts by it)", term)
	}

	node := newNode("n", corev1.ConditionTrue)
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure})
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"nginx"}}}
	got, _ = Transform(node)
	n := got.(*corev1.Node)
	if len(n.Status.Images) != 0 || len(n.Status.Conditions) != 1 || !health.NodeReady(n) {
		t.Errorf("got %+v, want only the Ready condition kept", n.Status)
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

	again, _ := Transform(p)
	if again.(*corev1.Pod).Spec.NodeName != "node-0" {
		t.Error("got a second transform losing fields, want it idempotent")
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
	var cache revisionImageCache
	if got := cache.of(testDSKey, first)["nginx"]; got != "nginx:1.19.4" {
		t.Fatalf("got nginx image %q, want nginx:1.19.4", got)
	}
	// The same revision is not decoded again: data it no longer holds
	// does not matter.
	first.Data = runtime.RawExtension{}
	if got := cache.of(testDSKey, first)["nginx"]; got != "nginx:1.19.4" {
		t.Errorf("got nginx image %q from the same revision, want nginx:1.19.4 as decoded before", got)
	}
	if got := cache.of(testDSKey, second)["nginx"]; got != "nginx:1.20" {
		t.Errorf("got nginx image %q after the target moved, want nginx:1.20", got)
	}
	cache.forget(testDSKey)
	if got := cache.of(testDSKey, first); got != nil {
		t.Errorf("got images %v after forget, want those of the revision as it is now: none", got)
	}
}

// TestTransformSharesRepeatedStrings: two pods decoded apart share one copy
// of what they have in common (namespace, owner, node, condition types,
// images), and keep PodScheduled only while it says why a pod is not bound.
func TestTransformSharesRepeatedStrings(t *testing.T) {
	decoded := func(name string, scheduled corev1.ConditionStatus) *corev1.Pod {
		pod := newPod(name, "node-0", oldHash, withCondition(corev1.PodCondition{Type: corev1.PodScheduled, Status: scheduled, Reason: "Unschedulable"}))
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "registry.example/app:v1", State: running}}
		raw, err := pod.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var out corev1.Pod
		if err := out.Unmarshal(raw); err != nil {
			t.Fatal(err)
		}
		got, _ := Transform(&out)
		return got.(*corev1.Pod)
	}
	a, b := decoded("a", corev1.ConditionTrue), decoded("b", corev1.ConditionFalse)
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("got %s %q and %q apart, want one shared copy", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("owner UID", string(controllerOf(a).UID), string(controllerOf(b).UID))
	same("node", a.Spec.NodeName, b.Spec.NodeName)
	same("revision", a.Labels[revisionHashLabel], b.Labels[revisionHashLabel])
	same("condition type", string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type))
	same("image", a.Status.ContainerStatuses[0].Image, b.Status.ContainerStatuses[0].Image)
	if a.Name == b.Name {
		t.Errorf("got both pods named %q, want their own names", a.Name)
	}
	if c := podcondition.Get(&a.Status, corev1.PodScheduled); c != nil {
		t.Errorf("got PodScheduled %+v kept on a bound pod, want it dropped", c)
	}
	if c := podcondition.Get(&b.Status, corev1.PodScheduled); c == nil || c.Reason != "Unschedulable" {
		t.Errorf("got PodScheduled %+v, want the False one kept with its reason", c)
	}
	if cap(a.Status.Conditions) != len(a.Status.Conditions) {
		t.Errorf("got %d conditions in an array of %d, want an array as long as what is kept", len(a.Status.Conditions), cap(a.Status.Conditions))
	}
}
