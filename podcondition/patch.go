package podcondition

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodPatcher patches the pods of one namespace, as client-go's typed
// PodInterface does.
type PodPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// PodsGetter gives the PodPatcher of a namespace. client-go's typed
// CoreV1Interface is one (P is then its PodInterface), and so is the node
// agent's core/v1-only client: the type parameter spares this package, and
// the agent, the typed clientset and the scheme of every API group it
// registers.
type PodsGetter[P PodPatcher] interface {
	Pods(namespace string) P
}

// statusPatch is the strategic-merge patch body for one pod condition. The
// pod's conditions merge by type, so the patch touches only its own entry.
// The UID makes the API server refuse the patch if the pod was replaced by a
// namesake since it was read.
type statusPatch struct {
	Metadata struct {
		UID             types.UID          `json:"uid"`
		ResourceVersion string             `json:"resourceVersion,omitempty"`
		Annotations     map[string]*string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Status struct {
		Conditions []map[string]any `json:"conditions,omitempty"`
	} `json:"status"`
}

// Annotations are annotation changes a status patch carries beside its
// condition: a value sets the key, nil removes it. The pods/status
// subresource takes annotations (never labels), and NodeRestriction lets a
// node write them on its own pods: that is how edgeota's channel between
// controller and agent (package podchannel) travels in the same write as
// the condition.
type Annotations map[string]*string

// Ref names the pod a status patch is for. A patch carries its UID, so that
// the API server refuses it if the pod was replaced by a namesake since it
// was read; and its ResourceVersion when set, so that it refuses it (a
// conflict) if the pod changed at all since.
type Ref struct {
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
}

// RefOf is the pod's Ref.
func RefOf(pod *corev1.Pod) Ref { return Ref{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID} }

// Set writes condition want onto the pod's status subresource, leaving every
// other condition as it is. LastTransitionTime is kept when the status does not
// change and set to now when it does. The pod is only read, never modified.
func Set[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, pod *corev1.Pod, want corev1.PodCondition, fieldManager string) (*corev1.Pod, error) {
	return SetAnnotated(ctx, pods, pod, want, nil, fieldManager)
}

// SetAnnotated is Set with annotation changes in the same patch: one write
// for the condition and what goes with it.
func SetAnnotated[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, pod *corev1.Pod, want corev1.PodCondition,
	annotations Annotations, fieldManager string) (*corev1.Pod, error) {
	var was corev1.ConditionStatus
	if old := Get(&pod.Status, want.Type); old != nil {
		was = old.Status
	}
	return Write(ctx, pods, RefOf(pod), was, want, annotations, fieldManager)
}

// Write is SetAnnotated for a pod known by its Ref and the status its
// condition had (was; "" when it had none): the condition's
// lastTransitionTime is set to now when its status changes, and left as it
// is (the patch merges by type) when it does not.
func Write[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, ref Ref, was corev1.ConditionStatus, want corev1.PodCondition,
	annotations Annotations, fieldManager string) (*corev1.Pod, error) {
	entry := map[string]any{
		"type":    want.Type,
		"status":  want.Status,
		"reason":  want.Reason,
		"message": want.Message,
	}
	if was != want.Status {
		entry["lastTransitionTime"] = metav1.Now().UTC().Format(metav1.RFC3339Micro)
	}
	return patch(ctx, pods.Pods(ref.Namespace), ref, entry, annotations, fieldManager)
}

// Annotate changes annotations of the pod through its status subresource,
// and no condition.
func Annotate[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, pod *corev1.Pod, annotations Annotations, fieldManager string) (*corev1.Pod, error) {
	return AnnotateRef(ctx, pods, RefOf(pod), annotations, fieldManager)
}

// AnnotateRef is Annotate for a pod known by its Ref.
func AnnotateRef[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, ref Ref, annotations Annotations, fieldManager string) (*corev1.Pod, error) {
	return patch(ctx, pods.Pods(ref.Namespace), ref, nil, annotations, fieldManager)
}

// Remove deletes the pod's condition of type t, leaving every other condition
// as it is.
func Remove[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, pod *corev1.Pod, t corev1.PodConditionType, fieldManager string) (*corev1.Pod, error) {
	return RemoveRef(ctx, pods, RefOf(pod), t, fieldManager)
}

// RemoveRef is Remove for a pod known by its Ref.
func RemoveRef[G PodsGetter[P], P PodPatcher](ctx context.Context, pods G, ref Ref, t corev1.PodConditionType, fieldManager string) (*corev1.Pod, error) {
	return patch(ctx, pods.Pods(ref.Namespace), ref, map[string]any{"type": t, "$patch": "delete"}, nil, fieldManager)
}

// patch sends one condition entry (none when nil) and the annotation
// changes to the pod's status subresource through pods, the patcher of the
// pod's namespace.
func patch(ctx context.Context, pods PodPatcher, ref Ref, entry map[string]any, annotations Annotations, fieldManager string) (*corev1.Pod, error) {
	var p statusPatch
	p.Metadata.UID, p.Metadata.ResourceVersion = ref.UID, ref.ResourceVersion
	p.Metadata.Annotations = annotations
	what := "annotations"
	if entry != nil {
		p.Status.Conditions = []map[string]any{entry}
		what = fmt.Sprintf("condition %v", entry["type"])
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the status patch of pod %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	updated, err := pods.Patch(ctx, ref.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil {
		return nil, fmt.Errorf("patching %s of pod %s/%s: %w", what, ref.Namespace, ref.Name, err)
	}
	return updated, nil
}
