package controller

import (
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podcondition"
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

	ds := newDaemonSet(withAnnotation(StrategyAnnotation, "OTA"), withAnnotation("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
		withAnnotation(RolloutStatusAnnotation, "{}"), withAnnotation(PausedAnnotation, "true"))
	got, _ = Transform(ds)
	d := got.(*appsv1.DaemonSet)
	if _, ok := d.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok || d.Annotations[StrategyAnnotation] != "OTA" ||
		d.Annotations[templateGenerationAnnot] != "2" || d.Annotations[RolloutStatusAnnotation] != "{}" || d.Annotations[PausedAnnotation] != "true" {
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
