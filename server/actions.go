package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/untrusted"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
)

// queueRetryInterval is how often RunQueue tries the queued actions again
// while the API server stays unreachable or a queued upgrade waits for its
// pre-pull.
const queueRetryInterval = 2 * time.Second

// queueUpgrade and queueImagePull answer a request made with queue_if_offline
// whose live read found the API server unreachable (offline, that read's
// error): see queueAction.
func (s *Server) queueUpgrade(ctx context.Context, namespace, name string, offline error) (*edgeotav1.UpgradeResponse, error) {
	if err := s.queueAction(ctx, namespace, name, ActionUpgrade, offline); err != nil {
		return nil, err
	}
	return &edgeotav1.UpgradeResponse{
		Message: fmt.Sprintf("Upgrade of pod %s/%s queued until the API server is reachable", namespace, name),
		Queued:  true,
	}, nil
}

func (s *Server) queueImagePull(ctx context.Context, namespace, name string, offline error) (*edgeotav1.ImagePullResponse, error) {
	if err := s.queueAction(ctx, namespace, name, ActionImagePull, offline); err != nil {
		return nil, err
	}
	return &edgeotav1.ImagePullResponse{
		Message: fmt.Sprintf("Image pre-pull for pod %s/%s queued until the API server is reachable", namespace, name),
		Queued:  true,
	}, nil
}

// queueAction makes every check of the contract that needs no API call on the
// last known view of the pod, in the contract's order, and then queues the
// action for the target revision the pod waits for, on the disk before it
// returns. The pre-pull gate refuses an upgrade only after a failed pull: a
// queued upgrade waits for a pending one.
func (s *Server) queueAction(ctx context.Context, namespace, name, action string, offline error) error {
	if err := s.canQueue(action, "pod "+namespace+"/"+name, offline); err != nil {
		return err
	}
	pod, err := s.knownPod(namespace, name)
	if err != nil {
		return err
	}
	target, err := s.checkPod(pod)
	if err != nil {
		return err
	}
	if target == "" {
		return status.Errorf(codes.FailedPrecondition,
			"%s: cannot queue the %s of pod %s: its last known condition names no target revision", notUpdatable, action, klog.KObj(pod))
	}
	if action == ActionUpgrade && prePullFailed(pod, target) {
		return prePullGate(pod, target)
	}
	a := s.newQueued(ctx, pod, action)
	a.TargetRevision = target
	return s.enqueue(ctx, a)
}

// queueHold and queueRelease answer a Hold or ReleaseHold made with
// queue_if_offline whose live read found the API server unreachable
// (offline, that read's error): the checks that need no API call are made
// on the last known view of the pod, or of every DaemonSet pod of the node
// (see knownHoldTargets), and one action per pod is queued, on the disk
// before they return. A queued hold keeps the end fixed when it was asked,
// and expires at it.
func (s *Server) queueHold(ctx context.Context, all bool, namespace, name string, h *podchannel.Hold, offline error) (*edgeotav1.HoldResponse, error) {
	queued, err := s.queueHolds(ctx, all, namespace, name, ActionHold, offline, func(a *queuedAction) {
		a.Hold = &queuedHold{Until: h.Until.Time, Reason: h.Reason}
		a.ExpiresAt = minTime(a.ExpiresAt, h.Until.Time)
	})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("pod %s/%s", namespace, name)
	if all {
		what = fmt.Sprintf("%d pods on node %s", len(queued), s.nodeName)
	}
	return &edgeotav1.HoldResponse{
		Message: fmt.Sprintf("Hold of %s until %s queued until the API server is reachable", what, h.Until.UTC().Format(time.RFC3339)),
		Queued:  true,
		Until:   timestamppb.New(h.Until.Time),
		Pods:    queued,
	}, nil
}

func (s *Server) queueRelease(ctx context.Context, all bool, namespace, name string, offline error) (*edgeotav1.ReleaseHoldResponse, error) {
	queued, err := s.queueHolds(ctx, all, namespace, name, ActionReleaseHold, offline, func(*queuedAction) {})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("the hold on pod %s/%s", namespace, name)
	if all {
		what = fmt.Sprintf("the holds on %d pods on node %s", len(queued), s.nodeName)
	}
	return &edgeotav1.ReleaseHoldResponse{
		Message: fmt.Sprintf("Release of %s queued until the API server is reachable", what),
		Queued:  true,
		Pods:    queued,
	}, nil
}

// queueHolds queues action on the pods a hold or release names, as the last
// known view holds them, each set up by fill, and returns them
// ("<namespace>/<name>", sorted).
func (s *Server) queueHolds(ctx context.Context, all bool, namespace, name, action string, offline error, fill func(*queuedAction)) ([]string, error) {
	what := "pod " + namespace + "/" + name
	if all {
		what = "every app on node " + s.nodeName
	}
	if err := s.canQueue(action, what, offline); err != nil {
		return nil, err
	}
	pods, err := s.knownHoldTargets(all, namespace, name)
	if err != nil {
		return nil, err
	}
	actions := make([]queuedAction, 0, len(pods))
	names := make([]string, 0, len(pods))
	for _, pod := range pods {
		a := s.newQueued(ctx, pod, action)
		fill(&a)
		actions = append(actions, a)
		names = append(names, pod.Namespace+"/"+pod.Name)
	}
	slices.Sort(names)
	return names, s.enqueue(ctx, actions...)
}

// knownHoldTargets is holdTargets on the last known view: the pod named,
// checked, or every DaemonSet pod of the node not being deleted.
func (s *Server) knownHoldTargets(all bool, namespace, name string) ([]*corev1.Pod, error) {
	if !all {
		pod, err := s.knownPod(namespace, name)
		if err != nil {
			return nil, err
		}
		if err := s.checkDaemonSetPod(pod, notHoldable); err != nil {
			return nil, err
		}
		return []*corev1.Pod{pod}, nil
	}
	known, err := s.knownPods()
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, p := range known {
		if p.DeletionTimestamp == nil && daemonSetPod(p) {
			pods = append(pods, p)
		}
	}
	return pods, s.someApp(pods)
}

// canQueue refuses to queue when the agent keeps no state directory, saying
// why the request could not be made live (offline).
func (s *Server) canQueue(action, what string, offline error) error {
	if s.queue != nil {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"cannot queue the %s of %s: the agent keeps no state directory (--state-dir is empty); %s",
		action, what, status.Convert(offline).Message())
}

// newQueued is action on pod as the queue keeps it: who asked and when, by
// the API server's clock as last seen, and when it expires.
func (s *Server) newQueued(ctx context.Context, pod *corev1.Pod, action string) queuedAction {
	now := s.queue.now()
	return queuedAction{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		Action:    action,
		PodUID:    pod.UID,
		Caller:    ownerauth.CallerFrom(ctx).Identity,
		QueuedAt:  now,
		ExpiresAt: now.Add(s.queue.ttl),
	}
}

// enqueue stores the actions in the queue, on the disk before it returns.
func (s *Server) enqueue(ctx context.Context, actions ...queuedAction) error {
	if err := s.queue.add(actions...); err != nil {
		return status.Errorf(codes.Internal, "queuing the %s of pod %s/%s: %v", actions[0].Action, actions[0].Namespace, actions[0].Name, err)
	}
	for _, a := range actions {
		klog.FromContext(ctx).Info("Queued an action until the API server is reachable",
			"pod", klog.KRef(a.Namespace, a.Name), "action", a.Action, "revision", a.TargetRevision, "expires", a.ExpiresAt)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ListActions answers what is queued and how the latest queued actions
// ended. Without a state directory nothing is ever queued.
func (s *Server) ListActions(context.Context, *edgeotav1.ListActionsRequest) (*edgeotav1.ListActionsResponse, error) {
	if s.queue == nil {
		return &edgeotav1.ListActionsResponse{}, nil
	}
	return s.queue.list(), nil
}

// queueable are the actions that can be queued, and so cancelled.
var queueable = []string{ActionUpgrade, ActionImagePull, ActionHold, ActionReleaseHold}

// CancelAction drops a queued action, keeping "cancelled" as its outcome.
func (s *Server) CancelAction(ctx context.Context, req *edgeotav1.CancelActionRequest) (*edgeotav1.CancelActionResponse, error) {
	if err := validatePodRef(req.GetNamespace(), req.GetName()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	action := req.GetAction()
	if !slices.Contains(queueable, action) {
		return nil, status.Errorf(codes.InvalidArgument, "action %s is none of %q", untrusted.Quote(action), queueable)
	}
	if s.queue == nil {
		return nil, status.Errorf(codes.NotFound, "no %s is queued for pod %s/%s: the agent keeps no state directory", action, req.GetNamespace(), req.GetName())
	}
	a, err := s.queue.cancel(req.GetNamespace(), req.GetName(), action, callerName(ownerauth.CallerFrom(ctx).Identity))
	if err != nil {
		return nil, err
	}
	auditQueued(ctx, a, resultCancelled, "cancelled")
	return &edgeotav1.CancelActionResponse{
		Message: fmt.Sprintf("Queued %s of pod %s/%s cancelled", action, a.Namespace, a.Name),
	}, nil
}

// RunQueue carries out the queued actions once the API server answers, until
// ctx is done. It tries them when one is queued and every
// queueRetryInterval.
func (s *Server) RunQueue(ctx context.Context) {
	if s.queue == nil {
		return
	}
	ticker := time.NewTicker(queueRetryInterval)
	defer ticker.Stop()
	for {
		s.runQueued(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.queue.wake:
		case <-ticker.C:
		}
	}
}

// step is what became of one attempt at a queued action.
type step int

const (
	// stepWait: not yet (a pending pre-pull, a lost race); try again later.
	stepWait step = iota
	// stepOffline: the API server is still unreachable; stop this pass.
	stepOffline
	// stepDone: the action ran.
	stepDone
	// stepRefused: a check failed; the action never runs.
	stepRefused
	// stepExpired: a hold that ended before it could be written.
	stepExpired
)

// runQueued expires the actions past their time and tries the others in
// order (for each pod, the pre-pull before the upgrade).
func (s *Server) runQueued(ctx context.Context) {
	logger := klog.FromContext(ctx)
	expired, err := s.queue.expired()
	if err != nil {
		logger.Error(err, "Storing the expiry of queued actions")
	}
	for _, a := range expired {
		auditQueued(ctx, a, resultExpired, "expired")
	}
	for _, a := range s.queue.due() {
		if ctx.Err() != nil {
			return
		}
		st, msg := s.attempt(ctx, a)
		var result string
		switch st {
		case stepOffline:
			return
		case stepWait:
			logger.V(4).Info("Queued action waits", "pod", klog.KRef(a.Namespace, a.Name), "action", a.Action, "reason", msg)
			continue
		case stepDone:
			result = resultDone
		case stepRefused:
			result = resultRefused
		case stepExpired:
			result = resultExpired
		}
		ended, err := s.queue.finish(a, result, msg)
		if err != nil {
			logger.Error(err, "Storing the outcome of a queued action", "pod", klog.KRef(a.Namespace, a.Name), "action", a.Action)
		}
		if ended {
			auditQueued(ctx, a, result, msg)
		}
	}
}

// attempt makes a queued action go through the checks of a live request
// against the live pod, and runs it only if the pod is the one the owner saw
// and still waits for the revision the owner agreed to, and the caller is
// still allowed to act. It returns what became of it, with the message the
// owner reads.
func (s *Server) attempt(ctx context.Context, a queuedAction) (step, string) {
	if a.Action == ActionUpgrade && s.queue.has(a.Namespace, a.Name, ActionImagePull) {
		return stepWait, "the image pre-pull queued for the pod has not run yet"
	}
	pod, err := s.livePod(ctx, a.Namespace, a.Name)
	if a.DeleteSent && s.deleteLanded(a, pod, err) {
		// An earlier pass sent the delete and lost its answer.
		return stepDone, upgradeStarted(a.Namespace, a.Name)
	}
	if err := s.auth.Reauthorize(a.Caller, ownerauth.Upgrade); err != nil {
		return stepRefused, fmt.Sprintf("%s is no longer allowed to act: %s", a.callerName(), status.Convert(err).Message())
	}
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.Unavailable:
		return stepOffline, status.Convert(err).Message()
	case code == codes.NotFound:
		return stepRefused, fmt.Sprintf("pod %s/%s is gone", a.Namespace, a.Name)
	default:
		return stepRefused, status.Convert(err).Message()
	}
	if pod.UID != a.PodUID {
		return stepRefused, fmt.Sprintf("pod %s was replaced since the %s was queued (UID %s, now %s)", klog.KObj(pod), a.Action, a.PodUID, pod.UID)
	}
	if a.Action == ActionHold || a.Action == ActionReleaseHold {
		return s.attemptHold(ctx, a, pod)
	}
	target, err := s.checkPod(pod)
	if err != nil {
		return stepRefused, status.Convert(err).Message()
	}
	if target != a.TargetRevision {
		return stepRefused, fmt.Sprintf("the target revision of pod %s moved from %s to %s since the %s was queued: the owner agreed to %s; ask again to agree to %s",
			klog.KObj(pod), a.TargetRevision, orNone(target), a.Action, a.TargetRevision, orNone(target))
	}
	switch a.Action {
	case ActionUpgrade:
		if err := prePullGate(pod, target); err != nil {
			if prePullFailed(pod, target) {
				return stepRefused, status.Convert(err).Message()
			}
			return stepWait, status.Convert(err).Message()
		}
		if current, err := s.queue.markDeleteSent(a); err != nil {
			// The delete (or request) is sent all the same: only a lost
			// answer followed by a restart would then be misread, as the
			// pod gone.
			klog.FromContext(ctx).Error(err, "Storing that a queued upgrade's delete is sent", "pod", klog.KObj(pod))
		} else if !current {
			return stepWait, "replaced or cancelled meanwhile"
		}
		err = s.startUpgrade(ctx, pod, target, userOf(a.Caller))
	case ActionImagePull:
		err = s.requestPull(ctx, pod, target)
	}
	done := pullRequested(pod.Namespace, pod.Name)
	if a.Action == ActionUpgrade {
		done = upgradeStarted(pod.Namespace, pod.Name)
	}
	return stepOf(err, done)
}

// attemptHold writes or removes a queued hold on the live pod, checked as a
// live request is. A hold whose end has passed by the API server's clock
// (which the live read has just set) expires instead: a hold delivered late
// holds nothing.
func (s *Server) attemptHold(ctx context.Context, a queuedAction, pod *corev1.Pod) (step, string) {
	if err := s.checkDaemonSetPod(pod, notHoldable); err != nil {
		return stepRefused, status.Convert(err).Message()
	}
	if a.Action == ActionReleaseHold {
		released, err := s.releaseHold(ctx, pod)
		n := 0
		if released {
			n = 1
		}
		return stepOf(err, releasedMessage(false, s.nodeName, pod.Namespace, pod.Name, n))
	}
	if !s.clock.Now().Before(a.Hold.Until) {
		return stepExpired, holdEnded(a.Hold.Until)
	}
	h := a.hold()
	return stepOf(s.writeHold(ctx, pod, h), heldMessage(false, s.nodeName, pod.Namespace, pod.Name, 1, h.Until.Time))
}

// stepOf is what became of a queued action whose live call ended with err,
// done being what the owner reads when it ran.
func stepOf(err error, done string) (step, string) {
	switch code := status.Code(err); {
	case err == nil:
		return stepDone, done
	case code == codes.Unavailable:
		return stepOffline, status.Convert(err).Message()
	case code == codes.Aborted || apierrors.IsConflict(err):
		return stepWait, status.Convert(err).Message()
	default:
		return stepRefused, status.Convert(err).Message()
	}
}

// deleteLanded reports whether what a queued upgrade sent landed, as the
// live read found the pod (pod, err) or, while the API server is out of
// reach, as the pod cache saw it: the pod gone or terminating (a delete), or
// carrying the owner's request for an upgrade in place to the revision
// agreed to, or patched to it already (a request). The view follows the
// upgrade from there: the action's "done" is the upgrade started, as a
// delete's is.
func (s *Server) deleteLanded(a queuedAction, pod *corev1.Pod, err error) bool {
	landed := func(p *corev1.Pod) bool { return deleted(p) || requested(a.TargetRevision)(p) }
	switch status.Code(err) {
	case codes.OK:
		if pod.UID != a.PodUID {
			pod = nil
		}
		return landed(pod)
	case codes.NotFound:
		return true
	case codes.Unavailable:
		cached, known := s.cachedPod(a.Namespace, a.Name, a.PodUID)
		return known && landed(cached)
	}
	return false
}

func orNone(revision string) string {
	if revision == "" {
		return "none"
	}
	return revision
}
