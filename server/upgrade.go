package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podcondition"
)

// notUpdatable starts every refusal of an upgrade that depends on the pod's
// state, as OpenYurt's agent words it, so that scripts matching it still do.
const notUpdatable = "Pod is not-updatable"

var daemonSetKind = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}

// Upgrade deletes the pod, with preconditions on its UID and resourceVersion so
// that a pod replaced or changed since the checks is never deleted by mistake;
// the DaemonSet controller (OnDelete) recreates it from the new template.
func (s *Server) Upgrade(ctx context.Context, req *edgeotav1.UpgradeRequest) (*edgeotav1.UpgradeResponse, error) {
	pod, target, err := s.checkedPod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	if c := podcondition.Get(&pod.Status, podcondition.ImageReady); c != nil && target != "" &&
		conditionNames(c, target) && c.Status != corev1.ConditionTrue {
		return nil, status.Errorf(codes.FailedPrecondition,
			"%s: the image pre-pull of revision %s for pod %s has not succeeded (%s=%s, reason %s)",
			notUpdatable, target, klog.KObj(pod), c.Type, c.Status, c.Reason)
	}

	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	err = s.client.Pods(pod.Namespace).Delete(actx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion},
	})
	if apierrors.IsNotFound(err) {
		return nil, status.Errorf(codes.Aborted, "pod %s was deleted by someone else meanwhile", klog.KObj(pod))
	}
	if err != nil {
		return nil, apiError(fmt.Sprintf("deleting pod %s", klog.KObj(pod)), s.apiTimeout, err)
	}
	klog.FromContext(ctx).Info("Deleted pod to upgrade it", "pod", klog.KObj(pod), "revision", target)
	return &edgeotav1.UpgradeResponse{Message: fmt.Sprintf("Start updating pod %s/%s", pod.Namespace, pod.Name)}, nil
}

// ImagePull records the owner's request on the pod as PodImageReady=False,
// reason PullImageRequested, for the target revision; the controller's
// pre-pull acts on it. A request already made, or already fulfilled, for the
// same revision changes nothing; one after a failed pull asks again.
func (s *Server) ImagePull(ctx context.Context, req *edgeotav1.ImagePullRequest) (*edgeotav1.ImagePullResponse, error) {
	pod, target, err := s.checkedPod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	if target == "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"%s: condition %s of pod %s names no target revision", notUpdatable, podcondition.NeedUpgrade, klog.KObj(pod))
	}
	want := corev1.PodCondition{
		Type:    podcondition.ImageReady,
		Status:  corev1.ConditionFalse,
		Reason:  podcondition.ReasonPullImageRequested,
		Message: podcondition.RevisionMessage(target),
	}
	c := podcondition.Get(&pod.Status, podcondition.ImageReady)
	done := c != nil && conditionNames(c, target) && (c.Status == corev1.ConditionTrue || c.Reason == want.Reason)
	if !done {
		actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
		defer cancel()
		if _, err := podcondition.Set(actx, s.client, pod, want, FieldManager); err != nil {
			return nil, apiError(fmt.Sprintf("requesting an image pre-pull for pod %s", klog.KObj(pod)), s.apiTimeout, err)
		}
		klog.FromContext(ctx).Info("Requested image pre-pull", "pod", klog.KObj(pod), "revision", target)
	}
	return &edgeotav1.ImagePullResponse{Message: fmt.Sprintf("Image pre-pull requested for pod %s/%s", pod.Namespace, pod.Name)}, nil
}

// checkedPod validates the request, reads the pod live from the API server
// (which doubles as the connectivity check) and runs the checks common to
// Upgrade and ImagePull, in the contract's order. It returns the pod and the
// target revision hash named by its PodNeedUpgrade condition ("" if none).
func (s *Server) checkedPod(ctx context.Context, namespace, name string) (*corev1.Pod, string, error) {
	if err := validatePodRef(namespace, name); err != nil {
		return nil, "", status.Error(codes.InvalidArgument, err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	pod, err := s.client.Pods(namespace).Get(actx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", apiError(fmt.Sprintf("reading pod %s/%s", namespace, name), s.apiTimeout, err)
	}
	ref := klog.KObj(pod)
	if pod.Spec.NodeName != s.nodeName {
		return nil, "", status.Errorf(codes.PermissionDenied, "pod %s runs on node %q, not on this node %q", ref, pod.Spec.NodeName, s.nodeName)
	}
	if pod.DeletionTimestamp != nil {
		return nil, "", status.Errorf(codes.FailedPrecondition, "%s: pod %s is being deleted", notUpdatable, ref)
	}
	if owner := metav1.GetControllerOfNoCopy(pod); owner == nil || ownerGroupKind(owner) != daemonSetKind {
		return nil, "", status.Errorf(codes.InvalidArgument, "pod %s is not controlled by a DaemonSet", ref)
	}
	need := podcondition.Get(&pod.Status, podcondition.NeedUpgrade)
	if need == nil || need.Status != corev1.ConditionTrue {
		state := "missing"
		if need != nil {
			state = string(need.Status)
		}
		return nil, "", status.Errorf(codes.FailedPrecondition, "%s: pod %s has no newer version (condition %s is %s)",
			notUpdatable, ref, podcondition.NeedUpgrade, state)
	}
	target, _ := podcondition.Revision(need.Message)
	return pod, target, nil
}

// conditionNames reports whether an OTA condition is about revision target,
// whatever failure cause its message may also carry.
func conditionNames(c *corev1.PodCondition, target string) bool {
	rev, ok := podcondition.Revision(c.Message)
	return ok && rev == target
}

func ownerGroupKind(ref *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}
