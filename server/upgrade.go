package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// notUpdatable starts every refusal of an upgrade that depends on the pod's
// state, as OpenYurt's agent words it, so that scripts matching it still do.
const notUpdatable = "Pod is not-updatable"

var daemonSetKind = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}

// Upgrade deletes the pod, with preconditions on its UID and resourceVersion so
// that a pod replaced or changed since the checks is never deleted by mistake;
// the DaemonSet controller (OnDelete) recreates it from the new template. A
// pod whose offer says it moves in place (podchannel.Offer.InPlace) is not
// deleted: the agent writes the owner's request on it instead
// (podchannel.UpgradeRequest, a status patch with the same preconditions),
// which the controller carries out by patching its images, since a node may
// not change a pod's spec; the answer then means "requested", and the owner's
// view follows the upgrade (and shows a refusal). With queue_if_offline, an
// API server found unreachable by the live read queues the upgrade instead
// (see queueAction).
func (s *Server) Upgrade(ctx context.Context, req *edgeotav1.UpgradeRequest) (*edgeotav1.UpgradeResponse, error) {
	pod, err := s.livePod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		if req.GetQueueIfOffline() && status.Code(err) == codes.Unavailable {
			return s.queueUpgrade(ctx, req.GetNamespace(), req.GetName(), err)
		}
		return nil, err
	}
	target, err := s.checkPod(pod)
	if err != nil {
		return nil, err
	}
	if err := prePullGate(pod, target); err != nil {
		return nil, err
	}
	if err := s.startUpgrade(ctx, pod, target, userOf(ownerauth.CallerFrom(ctx).Identity)); err != nil {
		return nil, err
	}
	return &edgeotav1.UpgradeResponse{Message: upgradeStarted(pod.Namespace, pod.Name)}, nil
}

// startUpgrade upgrades the checked pod to target as its offer says: the
// owner's request for an upgrade in place written on it (by, the caller),
// or the pod deleted.
func (s *Server) startUpgrade(ctx context.Context, pod *corev1.Pod, target, by string) error {
	if inPlaceOffered(pod, target) {
		return s.requestInPlace(ctx, pod, target, by)
	}
	return s.deleteForUpgrade(ctx, pod, target)
}

// inPlaceOffered reports whether the pod's offer of target says that it
// moves in place: its owner's upgrade is then a request.
func inPlaceOffered(pod *corev1.Pod, target string) bool {
	offer, err := podchannel.OfferOf(pod)
	return err == nil && offer != nil && offer.Revision == target && offer.InPlace
}

// requestInPlace writes the owner's request to upgrade the pod in place to
// target on its status (WriteUpgradeRequest), with preconditions on the UID
// and resourceVersion the pod was checked at. A write the API server gave
// no definite answer to is resolved as a deletion's is (writeFailed): done
// if the pod with that UID carries the request, or has been patched to
// target already.
func (s *Server) requestInPlace(ctx context.Context, pod *corev1.Pod, target, by string) error {
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	err := WriteUpgradeRequest(actx, s.client, pod, target, by, s.clock.Now())
	if apierrors.IsNotFound(err) {
		return status.Errorf(codes.Aborted, "pod %s was deleted by someone else meanwhile", klog.KObj(pod))
	}
	if err != nil {
		if err := s.writeFailed(ctx, pod, err, podWrite{
			action: fmt.Sprintf("requesting the upgrade of pod %s in place", klog.KObj(pod)), done: requested(target),
			notDone: "the pod does not carry the request", happened: "the request was written",
		}); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Requested the upgrade of the pod in place", "pod", klog.KObj(pod), "revision", target, "by", by)
	return nil
}

// WriteUpgradeRequest writes, as the agent does on its owner's Upgrade of a
// pod offered in place, the owner's request (by, at the API server's time
// at) to upgrade the pod to target: one status patch of the annotation
// rollout.UpgradeRequestAnnotation, conditional on the pod's UID and
// resourceVersion. Exported so that the benchmark's owners ask by the
// agent's very write.
func WriteUpgradeRequest[G podcondition.PodsGetter[P], P podcondition.PodPatcher](ctx context.Context, pods G, pod *corev1.Pod, target, by string, at time.Time) error {
	req := &podchannel.UpgradeRequest{UID: pod.UID, Revision: target, By: by, At: metav1.NewTime(at.Truncate(time.Second))}
	value, err := podchannel.Encode(req)
	if err != nil {
		return fmt.Errorf("encoding the upgrade request of pod %s: %w", klog.KObj(pod), err)
	}
	ref := podcondition.RefOf(pod)
	ref.ResourceVersion = pod.ResourceVersion
	_, err = podcondition.AnnotateRef(ctx, pods, ref, podcondition.Annotations{rollout.UpgradeRequestAnnotation: &value}, FieldManager)
	return err
}

// requested tells a pod (nil: gone) that carries the owner's request to
// upgrade it in place to target, or that the controller patched to target
// already (its revision label, which a node cannot write): what a request
// does.
func requested(target string) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		if pod == nil {
			return false
		}
		if pod.Labels[revisionLabel] == target {
			return true
		}
		r, err := podchannel.RequestOf(pod)
		return err == nil && r.For(pod.UID, target)
	}
}

// ImagePull records the owner's request on the pod as PodImageReady=False,
// reason PullImageRequested, for the target revision; the controller's
// pre-pull acts on it. A request already made, or already fulfilled, for the
// same revision changes nothing; one after a failed pull asks again. With
// queue_if_offline, an API server found unreachable by the live read queues
// the request instead (see queueAction).
func (s *Server) ImagePull(ctx context.Context, req *edgeotav1.ImagePullRequest) (*edgeotav1.ImagePullResponse, error) {
	pod, err := s.livePod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		if req.GetQueueIfOffline() && status.Code(err) == codes.Unavailable {
			return s.queueImagePull(ctx, req.GetNamespace(), req.GetName(), err)
		}
		return nil, err
	}
	target, err := s.checkPod(pod)
	if err != nil {
		return nil, err
	}
	if err := s.requestPull(ctx, pod, target); err != nil {
		return nil, err
	}
	return &edgeotav1.ImagePullResponse{Message: pullRequested(pod.Namespace, pod.Name)}, nil
}

// The sentences of a successful Upgrade and ImagePull, as OpenYurt's agent
// wrote them.
func upgradeStarted(namespace, name string) string {
	return fmt.Sprintf("Start updating pod %s/%s", namespace, name)
}

func pullRequested(namespace, name string) string {
	return fmt.Sprintf("Image pre-pull requested for pod %s/%s", namespace, name)
}

// livePod validates the pod's namespace and name and reads the pod live from
// the API server, which doubles as the connectivity check: Unavailable means
// the API server is unreachable or too slow. A pod that is not on this node
// is NotFound, or PermissionDenied when it exists on another node (see
// elsewhere).
func (s *Server) livePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if err := validatePodRef(namespace, name); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	pod, err := s.podOnNode(actx, namespace, name)
	if err != nil {
		return nil, apiError(fmt.Sprintf("reading pod %s/%s", namespace, name), s.apiTimeout, err)
	}
	if pod == nil {
		return nil, s.elsewhere(actx, namespace, name)
	}
	return pod, nil
}

// podOnNode reads the pod of that name if it is bound to this node, nil if
// none is. It lists the node's pods by name (field selector
// spec.nodeName=<node>,metadata.name=<name>) rather than getting the pod:
// acting as its node, the agent may list its node's pods, and the answer is
// an empty list once the pod is gone, where a GET of a pod the node no longer
// runs is refused (403: the Node authorizer has forgotten it) and would read
// as a refusal, not as the pod gone. The API server serves such a list from
// one key, as it does a GET. The answer is checked all the same: what is
// returned is the pod asked for, on this node.
func (s *Server) podOnNode(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("spec.nodeName", s.nodeName),
		fields.OneTermEqualSelector("metadata.name", name)).String()
	list, err := s.client.Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Namespace == namespace && p.Name == name && p.Spec.NodeName == s.nodeName {
			return p, nil
		}
	}
	return nil, nil
}

// probeUID is a UID no pod has (the API server gives pods UUIDs): a delete
// with it as precondition deletes nothing.
const probeUID types.UID = "edgeota-probe-matches-no-pod"

// elsewhere answers for a pod that is not on this node: NotFound when no pod
// of that name exists, PermissionDenied when it runs on another node. Acting
// as its node the agent may not read other nodes' pods (and the API server
// refuses a GET of a pod the node is not related to whether it exists or
// not), so it asks with a dry-run delete whose precondition names probeUID:
// the API server answers 404 when there is no such pod and 409 (the
// precondition) when there is one, before any admission plugin and without
// deleting anything. The same question serves the service account, whose
// answer is the same.
func (s *Server) elsewhere(ctx context.Context, namespace, name string) error {
	uid := probeUID
	err := s.client.Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	ref := klog.KRef(namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return status.Errorf(codes.NotFound, "reading pod %s: not found", ref)
	case apierrors.IsConflict(err):
		return status.Errorf(codes.PermissionDenied, "pod %s runs on another node, not on this node %q", ref, s.nodeName)
	case err == nil:
		return status.Errorf(codes.Internal, "pod %s is not on this node %q, and the API server accepted a dry-run delete of it that no pod can pass", ref, s.nodeName)
	default:
		return apiError(fmt.Sprintf("looking for pod %s on other nodes", ref), s.apiTimeout, err)
	}
}

// checkPod runs the checks common to Upgrade and ImagePull that need no API
// call, in the contract's order, on a live pod or on the last known one. It
// returns the target revision hash named by the pod's PodNeedUpgrade
// condition ("" if none).
func (s *Server) checkPod(pod *corev1.Pod) (string, error) {
	if err := s.checkDaemonSetPod(pod, notUpdatable); err != nil {
		return "", err
	}
	ref := klog.KObj(pod)
	need := podcondition.Get(&pod.Status, podcondition.NeedUpgrade)
	if need == nil || need.Status != corev1.ConditionTrue {
		state := "missing"
		if need != nil {
			state = string(need.Status)
		}
		return "", status.Errorf(codes.FailedPrecondition, "%s: pod %s has no newer version (condition %s is %s)",
			notUpdatable, ref, podcondition.NeedUpgrade, state)
	}
	target, _ := podcondition.Revision(need.Message)
	return target, nil
}

// checkDaemonSetPod runs the contract's checks of every action on a pod
// that need no API call, in its order: the pod runs on this node, is not
// being deleted, and is controlled by a DaemonSet. refusal starts the
// refusal that depends on the pod's state (notUpdatable, notHoldable).
func (s *Server) checkDaemonSetPod(pod *corev1.Pod, refusal string) error {
	ref := klog.KObj(pod)
	if pod.Spec.NodeName != s.nodeName {
		return status.Errorf(codes.PermissionDenied, "pod %s runs on node %q, not on this node %q", ref, pod.Spec.NodeName, s.nodeName)
	}
	if pod.DeletionTimestamp != nil {
		return status.Errorf(codes.FailedPrecondition, "%s: pod %s is being deleted", refusal, ref)
	}
	if !daemonSetPod(pod) {
		return status.Errorf(codes.InvalidArgument, "pod %s is not controlled by a DaemonSet", ref)
	}
	return nil
}

// daemonSetPod reports whether a DaemonSet controls the pod.
func daemonSetPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOfNoCopy(pod)
	return owner != nil && ownerGroupKind(owner) == daemonSetKind
}

// prePullGate refuses an upgrade while an image pre-pull for the target
// revision is requested but has not succeeded: pending or failed.
func prePullGate(pod *corev1.Pod, target string) error {
	c := podcondition.Get(&pod.Status, podcondition.ImageReady)
	if c == nil || target == "" || !podcondition.Names(c.Message, target) || c.Status == corev1.ConditionTrue {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"%s: the image pre-pull of revision %s for pod %s has not succeeded (%s=%s, reason %s)",
		notUpdatable, target, klog.KObj(pod), c.Type, c.Status, c.Reason)
}

// prePullFailed reports whether the pod's image pre-pull for target has
// failed, as opposed to pending: a queued upgrade waits for a pending pull
// and is refused after a failed one.
func prePullFailed(pod *corev1.Pod, target string) bool {
	c := podcondition.Get(&pod.Status, podcondition.ImageReady)
	return c != nil && podcondition.Names(c.Message, target) && c.Status != corev1.ConditionTrue && c.Reason == podcondition.ReasonPullImageFail
}

// deleteForUpgrade deletes pod with preconditions on the UID and
// resourceVersion it was checked at. A delete the API server gave no definite
// answer to (see ambiguous) may have happened with its answer lost:
// deleteForUpgrade then finds out (see effectOf) and reports the upgrade
// started if the pod with that UID is gone or terminating, and Unavailable
// otherwise, saying whether the pod is known to be still there.
func (s *Server) deleteForUpgrade(ctx context.Context, pod *corev1.Pod, target string) error {
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	err := s.client.Pods(pod.Namespace).Delete(actx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion},
	})
	if apierrors.IsNotFound(err) {
		return status.Errorf(codes.Aborted, "pod %s was deleted by someone else meanwhile", klog.KObj(pod))
	}
	if err != nil {
		if err := s.writeFailed(ctx, pod, err, podWrite{
			action: fmt.Sprintf("deleting pod %s", klog.KObj(pod)), done: deleted,
			notDone: "the pod is still there, not deleted", happened: "it was deleted",
		}); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Deleted pod to upgrade it", "pod", klog.KObj(pod), "revision", target)
	return nil
}

// podWrite is a write to a pod, for writeFailed.
type podWrite struct {
	// action says what the write does, as errors start.
	action string
	// done tells from the pod with the written pod's UID as it is now (nil:
	// gone) whether the write happened.
	done func(*corev1.Pod) bool
	// notDone says that it did not; happened completes "whether ... is
	// not known yet".
	notDone, happened string
}

// writeFailed answers the failure err of a write to pod. A definite answer
// is mapped as apiError maps it; an ambiguous one is resolved by effectOf:
// nil if the write happened after all, Unavailable saying what is known
// otherwise.
func (s *Server) writeFailed(ctx context.Context, pod *corev1.Pod, err error, w podWrite) error {
	failed := apiError(w.action, s.apiTimeout, err)
	if !ambiguous(err) {
		return failed
	}
	msg := status.Convert(failed).Message()
	switch s.effectOf(ctx, pod, w.done) {
	case effectDone:
		klog.FromContext(ctx).Info("The answer to a write was lost, but the write happened", "pod", klog.KObj(pod), "action", w.action, "err", err)
		return nil
	case effectNone:
		return status.Errorf(codes.Unavailable, "%s; %s", msg, w.notDone)
	default:
		return status.Errorf(codes.Unavailable, "%s; the pod could not be read again, so whether %s is not known yet", msg, w.happened)
	}
}

// ambiguous reports whether a failed write may nevertheless have happened:
// the API server gave no definite answer (a timeout, a reset connection, a
// 5xx), so the request may have been carried out and its answer lost. Only an
// API error of the 4xx class (refused, conflict, not found, too many
// requests) says for sure that nothing was done.
func ambiguous(err error) bool {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return true
	}
	code := apiStatus.Status().Code
	return code < http.StatusBadRequest || code >= http.StatusInternalServerError
}

// effect is what became of a write whose answer was lost.
type effect int

const (
	// effectUnknown: neither the API server nor the pod cache could tell.
	effectUnknown effect = iota
	// effectNone: the API server shows the pod as it was: nothing happened.
	effectNone
	// effectDone: the write happened.
	effectDone
)

// effectOf finds out whether a write to pod whose answer was lost took effect,
// done telling from the pod with pod's UID as it is now (nil: gone) whether it
// did. It reads the pod again from the API server (as livePod does: a pod
// gone is an empty list, not a refusal) (with a time limit of its
// own, even if the caller has gone: the audit log tells the truth too); if
// the API server is still out of reach, the pod cache, which the watch keeps
// current, can confirm the write, never deny it (it may lag behind).
func (s *Server) effectOf(ctx context.Context, pod *corev1.Pod, done func(*corev1.Pod) bool) effect {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.apiTimeout)
	defer cancel()
	now, err := s.podOnNode(actx, pod.Namespace, pod.Name)
	switch {
	case err != nil:
		if cached, known := s.cachedPod(pod.Namespace, pod.Name, pod.UID); known && done(cached) {
			return effectDone
		}
		return effectUnknown
	case now != nil && now.UID != pod.UID:
		now = nil
	}
	if done(now) {
		return effectDone
	}
	return effectNone
}

// cachedPod is the pod with that UID as the synced pod cache holds it, nil
// if the cache holds none (deleted, or replaced by a pod of the same name);
// known is false while the cache has not synced.
func (s *Server) cachedPod(namespace, name string, uid types.UID) (pod *corev1.Pod, known bool) {
	if !s.synced() {
		return nil, false
	}
	pod, err := s.lister.Pods(namespace).Get(name)
	if err != nil || pod.UID != uid {
		return nil, true
	}
	return pod, true
}

// deleted tells a pod deleted (nil) or being deleted: what an upgrade's
// delete does.
func deleted(pod *corev1.Pod) bool { return pod == nil || pod.DeletionTimestamp != nil }

// requestPull writes PodImageReady=False, reason PullImageRequested, for
// target, unless a pull of target is already requested or done.
func (s *Server) requestPull(ctx context.Context, pod *corev1.Pod, target string) error {
	if target == "" {
		return status.Errorf(codes.FailedPrecondition,
			"%s: condition %s of pod %s names no target revision", notUpdatable, podcondition.NeedUpgrade, klog.KObj(pod))
	}
	want := corev1.PodCondition{
		Type:    podcondition.ImageReady,
		Status:  corev1.ConditionFalse,
		Reason:  podcondition.ReasonPullImageRequested,
		Message: podcondition.RevisionMessage(target),
	}
	requested := func(p *corev1.Pod) bool { return p != nil && pullAsked(p, target) }
	if requested(pod) {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	if _, err := podcondition.Set(actx, s.client, pod, want, FieldManager); err != nil {
		if err := s.writeFailed(ctx, pod, err, podWrite{
			action: fmt.Sprintf("requesting an image pre-pull for pod %s", klog.KObj(pod)), done: requested,
			notDone: "the pod does not record the request", happened: "the request was recorded",
		}); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Requested image pre-pull", "pod", klog.KObj(pod), "revision", target)
	return nil
}

// pullAsked reports whether the pod records a pre-pull of target as
// requested or done.
func pullAsked(pod *corev1.Pod, target string) bool {
	c := podcondition.Get(&pod.Status, podcondition.ImageReady)
	return c != nil && podcondition.Names(c.Message, target) && (c.Status == corev1.ConditionTrue || c.Reason == podcondition.ReasonPullImageRequested)
}

func ownerGroupKind(ref *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}
