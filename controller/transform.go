package controller

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
)

// Transform trims objects before the informers store them, keeping only the
// fields the controller reads: at 500 nodes the pod and node caches would
// otherwise hold managedFields, node image lists and pod specs it never looks
// at. Pass it to informers.WithTransform. It changes objects in place (the
// informer hands it freshly decoded ones) and is idempotent.
func Transform(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		trimPod(o)
	case *corev1.Node:
		trimNode(o)
	case *appsv1.DaemonSet:
		o.Annotations = keepKeys(o.Annotations, daemonSetAnnotations...)
		trimTemplateSpec(&o.Spec.Template.Spec)
	case *appsv1.ControllerRevision:
		o.Data = trimRevisionData(o.Data)
	case *batchv1.Job:
		o.Annotations = nil
		trimPodSpec(&o.Spec.Template.Spec)
	}
	return obj, nil
}

// daemonSetAnnotations are the DaemonSet annotations the controller reads.
var daemonSetAnnotations = []string{StrategyAnnotation, LegacyStrategyAnnotation, MaxUnavailableAnnotation, templateGenerationAnnot,
	MaxFailedAnnotation, ProgressDeadlineAnnotation, PausedAnnotation, RolloutNodeSelectorAnnotation, PartitionAnnotation,
	RolloutStatusAnnotation, MaintenanceWindowAnnotation, MaxHoldAnnotation, UpgradeDeadlineAnnotation}

// podLabels and podConditions are the pod labels and condition types the
// controller reads: a pod's revision; its readiness, health and scheduling;
// the OTA conditions. The rest, however many a template carries, is not
// kept: at tens of thousands of pods each one costs memory.
var (
	podLabels     = []string{revisionHashLabel, podTemplateGenerationLabel}
	podConditions = []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled,
		podcondition.NeedUpgrade, podcondition.ImageReady}
)

// trimPod keeps identity, the labels and conditions the controller reads,
// owners, node, phase and container states with the end of their last run:
// what tells a daemon pod's revision, availability and health (health.Judge)
// and a pre-pull pod's outcome; and edgeota's channel annotations (package
// podchannel).
func trimPod(pod *corev1.Pod) {
	pod.Annotations = keepKeys(pod.Annotations, podchannel.OfferAnnotation, podchannel.HoldAnnotation)
	pod.Labels = keepKeys(pod.Labels, podLabels...)
	conditions := pod.Status.Conditions[:0]
	for _, c := range pod.Status.Conditions {
		if slices.Contains(podConditions, c.Type) {
			conditions = append(conditions, c)
		}
	}
	pod.Status.Conditions = conditions
	spec := corev1.PodSpec{NodeName: pod.Spec.NodeName}
	if spec.NodeName == "" {
		spec.Affinity = pod.Spec.Affinity // names the node of an unbound DaemonSet pod (nodeOfPod)
	}
	pod.Spec = spec
	pod.Status = corev1.PodStatus{
		Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message,
		Conditions:            pod.Status.Conditions,
		InitContainerStatuses: trimContainerStatuses(pod.Status.InitContainerStatuses),
		ContainerStatuses:     trimContainerStatuses(pod.Status.ContainerStatuses),
	}
}

func trimContainerStatuses(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i, st := range statuses {
		statuses[i] = corev1.ContainerStatus{Name: st.Name, Image: st.Image, State: st.State}
		if term := st.LastTerminationState.Terminated; term != nil {
			statuses[i].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: term.FinishedAt}
		}
	}
	return statuses
}

// trimNode keeps the labels (rollout node selectors, the template's node
// selector), the annotations the controller reads, the taints (why a
// template creates no pod there) and the Ready condition with its heartbeat.
func trimNode(node *corev1.Node) {
	node.Annotations = keepKeys(node.Annotations, nodeAnnotations...)
	var ready []corev1.NodeCondition
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = append(ready, c)
		}
	}
	node.Spec = corev1.NodeSpec{Taints: node.Spec.Taints}
	node.Status = corev1.NodeStatus{Conditions: ready}
}

// nodeAnnotations are the Node annotations the controller reads.
var nodeAnnotations = []string{NodeTimeZoneAnnotation}

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

// trimPodSpec keeps what a pre-pull Job copies: images and pull secrets.
func trimPodSpec(spec *corev1.PodSpec) {
	*spec = corev1.PodSpec{
		InitContainers:   trimContainers(spec.InitContainers),
		Containers:       trimContainers(spec.Containers),
		ImagePullSecrets: spec.ImagePullSecrets,
		NodeName:         spec.NodeName,
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
