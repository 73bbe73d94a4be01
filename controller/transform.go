package controller

import (
	"slices"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/rollout"
)

// Transform trims objects before the informers store them, keeping only the
// fields the controller reads: at 500 nodes the pod and node caches would
// otherwise hold managedFields, node image lists and pod specs it never looks
// at. Nodes and Jobs become records of the controller's own (nodeRecord,
// jobRecord); DaemonSet pods have an informer and a transform of their own
// (TransformDaemonPod). NewInformers sets both as the informers'
// transforms. It changes objects in place (the informer hands it freshly
// decoded ones) and accepts its own output (client-go may apply it twice).
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return nodeRecordOf(o), nil
	case *batchv1.Job:
		return jobRecordOf(o), nil
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		trimPod(o)
	case *appsv1.DaemonSet:
		digest, transformed := o.Annotations[templateDigestKey]
		if !transformed {
			digest = templateDigest(&o.Spec.Template)
		}
		o.Annotations = keepKeys(o.Annotations, daemonSetAnnotations...)
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[templateDigestKey] = digest
		trimTemplateSpec(&o.Spec.Template.Spec)
	case *appsv1.ControllerRevision:
		o.Data = trimRevisionData(o.Data)
	}
	return obj, nil
}

// TransformDaemonPod turns a DaemonSet pod into the record the controller
// caches (podRecord); a record is returned as it is.
func TransformDaemonPod(obj any) (any, error) { return podRecordOf(obj), nil }

// daemonSetAnnotations are the DaemonSet annotations the controller reads:
// the rollout's (rollout.DaemonSetAnnotations), and the native controller's
// template generation, by which pods from before revision hashes are judged
// and a pod patched in place is labelled. (The cache adds the template's
// digest, templateDigestKey.)
var daemonSetAnnotations = append(slices.Clone(rollout.DaemonSetAnnotations), templateGenerationAnnot)

// trimPod keeps of a pre-pull Job's pod what tells the pull's outcome
// (judgePull): its identity, owners and labels, node, phase and its
// containers' images, imageIDs (what a tag resolved to, Pull.ByTag) and
// states. DaemonSet pods are cached as podRecords
// instead (podRecordOf).
func trimPod(pod *corev1.Pod) {
	pod.Annotations = nil
	internMeta(&pod.ObjectMeta)
	pod.Spec = corev1.PodSpec{NodeName: intern(pod.Spec.NodeName)}
	pod.Status = corev1.PodStatus{
		Phase:             corev1.PodPhase(intern(string(pod.Status.Phase))),
		ContainerStatuses: trimContainerStatuses(pod.Status.ContainerStatuses),
	}
}

func trimContainerStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i, st := range statuses {
		statuses[i] = corev1.ContainerStatus{Name: intern(st.Name), Image: intern(st.Image), ImageID: intern(st.ImageID), State: st.State}
		if term := st.LastTerminationState.Terminated; term != nil {
			statuses[i].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: term.FinishedAt}
		}
	}
	return statuses
}

// intern returns the one copy of s that every cached object shares: the
// cache holds thousands of pods whose namespace, owner, labels, condition
// types and images are the same few strings, each decoded into a copy of
// its own. A copy no object holds any more is freed (package unique).
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// Shared values of an owner reference's flags, which would otherwise take
// an allocation each per object.
var (
	flagTrue, flagFalse = true, false
)

// internMeta interns what an object's metadata shares with others: its
// namespace and name prefix, its owners, its labels' and annotations'
// values (keepKeys's keys are the controller's own strings already).
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace, m.GenerateName = intern(m.Namespace), intern(m.GenerateName)
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion, ref.Kind, ref.Name, ref.UID = intern(ref.APIVersion), intern(ref.Kind), intern(ref.Name), types.UID(intern(string(ref.UID)))
		ref.Controller, ref.BlockOwnerDeletion = sharedFlag(ref.Controller), sharedFlag(ref.BlockOwnerDeletion)
	}
	for k, v := range m.Labels {
		m.Labels[k] = intern(v)
	}
	for k, v := range m.Annotations {
		m.Annotations[k] = intern(v)
	}
}

// sharedFlag points at flagTrue or flagFalse as b does; nil stays nil.
// Cached objects are never written to, so the values are never changed.
func sharedFlag(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &flagTrue
	default:
		return &flagFalse
	}
}

// trimTemplateSpec keeps what a pre-pull Job copies (images and pull
// secrets), what tells the nodes the template runs on (node selector,
// affinity, tolerations) and the images an offer names.
func trimTemplateSpec(spec *corev1.PodSpec) {
	*spec = corev1.PodSpec{
		InitContainers:   trimContainers(spec.InitContainers),
		Containers:       trimContainers(spec.Containers),
		ImagePullSecrets: spec.ImagePullSecrets,
		NodeSelector:     spec.NodeSelector,
		Affinity:         spec.Affinity,
		Tolerations:      spec.Tolerations,
	}
}

func trimContainers(containers []corev1.Container) []corev1.Container {
	for i, c := range containers {
		containers[i] = corev1.Container{Name: c.Name, Image: c.Image, ImagePullPolicy: c.ImagePullPolicy}
	}
	return containers
}

// keepKeys returns the entries of m (annotations, labels) under keys, nil
// when none is there.
func keepKeys(m map[string]string, keys ...string) map[string]string {
	var kept map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if kept == nil {
				kept = make(map[string]string, len(keys))
			}
			kept[k] = v
		}
	}
	return kept
}
