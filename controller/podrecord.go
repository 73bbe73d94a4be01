package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// podRecord is how the controller caches a DaemonSet pod: the facts its
// decisions read (decision.Pod), and nothing else. The informer's transform
// (podRecordOf) builds it from each pod the watch delivers; the store keys
// it through the metav1.Object methods below, which is all client-go's
// caches ask of an object. noMeta comes first: a zero-size last field would
// pad the record by a word.
type podRecord struct {
	noMeta
	decision.Pod
}

// podRecordOf turns a pod into its record; a record (client-go may apply a
// transform twice: its streaming list transforms into a temporary store) is
// returned as it is.
func podRecordOf(obj any) any {
	switch o := obj.(type) {
	case *podRecord:
		return o
	case *corev1.Pod:
		return &podRecord{Pod: factsOfPod(o)}
	}
	return obj
}

// factsOfPod reads what the controller keeps of a pod. The strings every
// pod has its own of (name, UID, resourceVersion) share one allocation; the
// ones pods repeat are interned.
func factsOfPod(pod *corev1.Pod) decision.Pod {
	ident := pod.Name + string(pod.UID) + pod.ResourceVersion
	n, u := len(pod.Name), len(pod.Name)+len(pod.UID)
	p := decision.Pod{
		Namespace: intern(pod.Namespace), Name: ident[:n], UID: types.UID(ident[n:u]), ResourceVersion: ident[u:],
		Node: intern(nodeOfPod(pod)), Bound: pod.Spec.NodeName != "",
		Hash:    intern(pod.Labels[revisionHashLabel]),
		Created: unixtime.Of(pod.CreationTimestamp.Time),
		Health:  health.PodOf(pod, intern),
	}
	p.ImageIDs = imageIDsOf(pod)
	if pod.Labels[rollout.InPlaceLabel] != "true" {
		// What judges an upgrade in place (the generations, every
		// container's ID) is kept for the pods that may be upgraded in
		// place alone: their template carries the operator's consent.
		p.Health.Run = nil
	}
	var rare decision.RarePod
	if p.Hash == "" {
		rare.Generation = intern(pod.Labels[podTemplateGenerationLabel])
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		p.Owner = types.UID(intern(string(ref.UID)))
	}
	if pod.DeletionTimestamp != nil {
		grace := int64(0)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = *pod.DeletionGracePeriodSeconds
		}
		p.Terminating, p.TerminatingSince = true, unixtime.Of(pod.DeletionTimestamp.Add(-time.Duration(grace)*time.Second))
	}
	if c := podcondition.Get(&pod.Status, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && !p.Bound {
		rare.Unscheduled = intern(c.Reason)
		if c.Message != "" {
			rare.Unscheduled += ": " + c.Message
		}
	}
	if c := podcondition.Get(&pod.Status, podcondition.NeedUpgrade); c != nil {
		p.NeedUpgrade = decision.Share(decision.Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	if c := podcondition.Get(&pod.Status, podcondition.ImageReady); c != nil {
		p.ImageReady = decision.Share(decision.Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	if h, err := podchannel.HoldOf(pod); err == nil && h != nil {
		rare.HoldUntil = unixtime.Of(h.Until.Time)
	}
	if r, err := podchannel.RequestOf(pod); err == nil && r != nil && r.UID == pod.UID {
		rare.Requested = intern(r.Revision)
	}
	if v, ok := pod.Annotations[rollout.OfferAnnotation]; ok {
		p.Offer = podchannel.Hash(v)
	}
	if v, ok := pod.Annotations[rollout.ChallengeAnnotation]; ok {
		p.Challenge = podchannel.Hash(v)
	}
	if v, ok := pod.Annotations[rollout.AnswerAnnotation]; ok && len(v) <= maxAnswer {
		p.Answer = podchannel.Hash(v)
	}
	if rare != (decision.RarePod{}) {
		p.Rare = &rare
	}
	return p
}

// imageIDsOf reads the imageIDs the pod's containers run (init
// containers' included), shared with every pod that runs the same.
func imageIDsOf(pod *corev1.Pod) decision.ImageIDs {
	n := len(pod.Status.InitContainerStatuses) + len(pod.Status.ContainerStatuses)
	if n == 0 {
		return decision.ImageIDs{}
	}
	ids := make(map[string]string, n)
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			ids[statuses[i].Name] = statuses[i].ImageID
		}
	}
	return decision.ShareImageIDs(ids)
}

// maxAnswer bounds the proof-of-life answers the controller reads: a
// challenge it issues is far shorter (podchannel.Challenge).
const maxAnswer = 128

// nodeOfPod is the node a DaemonSet pod runs on, or, while unbound, the node
// its required node affinity names (matchFields metadata.name, as the
// DaemonSet controller writes it); "" when neither.
func nodeOfPod(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// ref is the pod's reference for a status patch.
func (p *podRecord) ref() podcondition.Ref {
	return podcondition.Ref{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// The metav1.Object methods the caches read.

func (p *podRecord) GetNamespace() string             { return p.Namespace }
func (p *podRecord) GetName() string                  { return p.Name }
func (p *podRecord) GetUID() types.UID                { return p.UID }
func (p *podRecord) GetResourceVersion() string       { return p.ResourceVersion }
func (p *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record (runtime.Object): the cache's mutation
// detector, when on, compares copies.
func (p *podRecord) DeepCopyObject() runtime.Object {
	return &podRecord{Pod: *p.Pod.DeepCopy()}
}

// noMeta answers the rest of metav1.Object with nothing: a record keeps no
// labels, annotations, owners or finalizers, and is never written back.
type noMeta struct{}

func (noMeta) SetNamespace(string)                           {}
func (noMeta) SetName(string)                                {}
func (noMeta) GetGenerateName() string                       { return "" }
func (noMeta) SetGenerateName(string)                        {}
func (noMeta) SetUID(types.UID)                              {}
func (noMeta) SetResourceVersion(string)                     {}
func (noMeta) GetGeneration() int64                          { return 0 }
func (noMeta) SetGeneration(int64)                           {}
func (noMeta) GetSelfLink() string                           { return "" }
func (noMeta) SetSelfLink(string)                            {}
func (noMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (noMeta) SetCreationTimestamp(metav1.Time)              {}
func (noMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (noMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (noMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (noMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (noMeta) GetLabels() map[string]string                  { return nil }
func (noMeta) SetLabels(map[string]string)                   {}
func (noMeta) GetAnnotations() map[string]string             { return nil }
func (noMeta) SetAnnotations(map[string]string)              {}
func (noMeta) GetFinalizers() []string                       { return nil }
func (noMeta) SetFinalizers([]string)                        {}
func (noMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (noMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (noMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (noMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

var (
	_ metav1.Object  = (*podRecord)(nil)
	_ runtime.Object = (*podRecord)(nil)
)
