package server

import (
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// podToProto maps the fields of a v1.Pod that the contract promises; the JSON
// of the result decodes with k8s.io/api/core/v1 and keeps them all.
func podToProto(pod *corev1.Pod) *edgeotav1.Pod {
	return &edgeotav1.Pod{
		Metadata: &edgeotav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			Uid:               string(pod.UID),
			Labels:            pod.Labels,
			Annotations:       pod.Annotations,
			OwnerReferences:   ownerRefsToProto(pod.OwnerReferences),
			CreationTimestamp: timeToProto(&pod.CreationTimestamp),
			DeletionTimestamp: timeToProto(pod.DeletionTimestamp),
			ResourceVersion:   pod.ResourceVersion,
		},
		Spec: &edgeotav1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			Containers:     containersToProto(pod.Spec.Containers),
			InitContainers: containersToProto(pod.Spec.InitContainers),
		},
		Status: &edgeotav1.PodStatus{
			Phase:             string(pod.Status.Phase),
			Reason:            pod.Status.Reason,
			Message:           pod.Status.Message,
			HostIp:            pod.Status.HostIP,
			PodIp:             pod.Status.PodIP,
			StartTime:         timeToProto(pod.Status.StartTime),
			Conditions:        conditionsToProto(pod.Status.Conditions),
			ContainerStatuses: containerStatusesToProto(pod.Status.ContainerStatuses),
		},
	}
}

// timeToProto maps an unset time to an absent field, as Kubernetes omits it.
func timeToProto(t *metav1.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Time)
}

// mapEach maps every element of in, in order; nil and empty both give an
// empty, non-nil slice.
func mapEach[T, P any](in []T, f func(*T) P) []P {
	out := make([]P, 0, len(in))
	for i := range in {
		out = append(out, f(&in[i]))
	}
	return out
}

func ownerRefsToProto(refs []metav1.OwnerReference) []*edgeotav1.OwnerReference {
	return mapEach(refs, func(r *metav1.OwnerReference) *edgeotav1.OwnerReference {
		return &edgeotav1.OwnerReference{
			ApiVersion:         r.APIVersion,
			Kind:               r.Kind,
			Name:               r.Name,
			Uid:                string(r.UID),
			Controller:         r.Controller,
			BlockOwnerDeletion: r.BlockOwnerDeletion,
		}
	})
}

func containersToProto(cs []corev1.Container) []*edgeotav1.Container {
	return mapEach(cs, func(c *corev1.Container) *edgeotav1.Container {
		return &edgeotav1.Container{Name: c.Name, Image: c.Image}
	})
}

func conditionsToProto(cs []corev1.PodCondition) []*edgeotav1.PodCondition {
	return mapEach(cs, func(c *corev1.PodCondition) *edgeotav1.PodCondition {
		return &edgeotav1.PodCondition{
			Type:               string(c.Type),
			Status:             string(c.Status),
			Reason:             c.Reason,
			Message:            c.Message,
			LastTransitionTime: timeToProto(&c.LastTransitionTime),
		}
	})
}

func containerStatusesToProto(ss []corev1.ContainerStatus) []*edgeotav1.ContainerStatus {
	return mapEach(ss, func(s *corev1.ContainerStatus) *edgeotav1.ContainerStatus {
		return &edgeotav1.ContainerStatus{
			Name:         s.Name,
			Image:        s.Image,
			ImageId:      s.ImageID,
			Ready:        s.Ready,
			RestartCount: s.RestartCount,
			State:        containerStateToProto(s.State),
		}
	})
}

func containerStateToProto(s corev1.ContainerState) *edgeotav1.ContainerState {
	out := &edgeotav1.ContainerState{}
	if w := s.Waiting; w != nil {
		out.Waiting = &edgeotav1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := s.Running; r != nil {
		out.Running = &edgeotav1.ContainerStateRunning{StartedAt: timeToProto(&r.StartedAt)}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &edgeotav1.ContainerStateTerminated{
			ExitCode:   t.ExitCode,
			Reason:     t.Reason,
			FinishedAt: timeToProto(&t.FinishedAt),
		}
	}
	return out
}
