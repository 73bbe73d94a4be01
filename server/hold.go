package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/holdtime"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// notHoldable starts every refusal of a hold or release that depends on the
// pod's state, as notUpdatable does for upgrades.
const notHoldable = "Pod cannot be held"

// Hold writes the owner's hold (podchannel.Hold: its end, computed with the
// API server's clock, the reason, who asked and when) on the pod, or on
// every DaemonSet pod of the node when the request names none. The pod is
// read live and goes through the contract's checks (on this node, not being
// deleted, controlled by a DaemonSet); no newer version need be offered,
// since a hold is for whatever comes. With queue_if_offline, an API server
// found unreachable queues the hold instead (see queueHold).
func (s *Server) Hold(ctx context.Context, req *edgeotav1.HoldRequest) (*edgeotav1.HoldResponse, error) {
	all, err := wholeNode(req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	h, err := s.holdAsked(ctx, req)
	if err != nil {
		return nil, err
	}
	pods, err := s.holdTargets(ctx, all, req.GetNamespace(), req.GetName())
	if err != nil {
		if req.GetQueueIfOffline() && status.Code(err) == codes.Unavailable {
			return s.queueHold(ctx, all, req.GetNamespace(), req.GetName(), h, err)
		}
		return nil, err
	}
	held, errs := s.eachPod(ctx, all, pods, func(ctx context.Context, pod *corev1.Pod) (bool, error) {
		return true, s.writeHold(ctx, pod, h)
	})
	if len(errs) > 0 {
		return nil, partly(errs, "held", held, len(pods))
	}
	return &edgeotav1.HoldResponse{
		Message: heldMessage(all, s.nodeName, req.GetNamespace(), req.GetName(), len(held), h.Until.Time),
		Until:   timestamppb.New(h.Until.Time),
		Pods:    held,
	}, nil
}

// ReleaseHold removes the owner's hold from the pod, or from every DaemonSet
// pod of the node when the request names none, after the same live read and
// checks as Hold. A pod without a hold is left as it is. With
// queue_if_offline, an API server found unreachable queues the release
// instead.
func (s *Server) ReleaseHold(ctx context.Context, req *edgeotav1.ReleaseHoldRequest) (*edgeotav1.ReleaseHoldResponse, error) {
	all, err := wholeNode(req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	pods, err := s.holdTargets(ctx, all, req.GetNamespace(), req.GetName())
	if err != nil {
		if req.GetQueueIfOffline() && status.Code(err) == codes.Unavailable {
			return s.queueRelease(ctx, all, req.GetNamespace(), req.GetName(), err)
		}
		return nil, err
	}
	released, errs := s.eachPod(ctx, all, pods, s.releaseHold)
	if len(errs) > 0 {
		return nil, partly(errs, "released", released, len(pods))
	}
	return &edgeotav1.ReleaseHoldResponse{
		Message: releasedMessage(all, s.nodeName, req.GetNamespace(), req.GetName(), len(released)),
		Pods:    released,
	}, nil
}

// wholeNode reads whom a hold or release is for: the whole node when both
// namespace and name are empty, else the pod they name, which must be valid.
func wholeNode(namespace, name string) (bool, error) {
	if namespace == "" && name == "" {
		return true, nil
	}
	if err := validatePodRef(namespace, name); err != nil {
		return false, status.Errorf(codes.InvalidArgument, "%v (leave both namespace and name empty to name every app on this node)", err)
	}
	return false, nil
}

// holdAsked checks a hold's end and reason and returns the hold to write: its
// end as given (until) or from now (duration), now being the API server's
// time as the agent last heard it (see APIServerClock), never the node's own
// clock, which may be wrong after a power cycle. Ends are whole seconds, as
// the annotation keeps them: until's fraction is dropped, and duration's end
// is rounded up so that the hold lasts at least as long as asked.
func (s *Server) holdAsked(ctx context.Context, req *edgeotav1.HoldRequest) (*podchannel.Hold, error) {
	now := s.clock.Now()
	var until time.Time
	switch {
	case req.GetUntil() != nil && req.GetDuration() != "":
		return nil, status.Error(codes.InvalidArgument, "give the hold's end (until) or its duration, not both")
	case req.GetUntil() == nil && req.GetDuration() == "":
		return nil, status.Errorf(codes.InvalidArgument,
			"give the hold's end (until, RFC 3339: ?until=2026-11-25T18:00:00Z) or its duration (?duration=2h: %s)", holdtime.Syntax)
	case req.GetUntil() != nil:
		if err := req.GetUntil().CheckValid(); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "until: %v", err)
		}
		until = req.GetUntil().AsTime().Truncate(time.Second)
		switch {
		case !until.After(now):
			return nil, status.Errorf(codes.InvalidArgument, "until %s has passed: it is %s by the API server's clock",
				until.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		case until.Sub(now) > holdtime.Max:
			return nil, status.Errorf(codes.InvalidArgument, "until %s is more than %s ahead of %s (the API server's time): the longest hold",
				until.Format(time.RFC3339), holdtime.MaxText, now.UTC().Format(time.RFC3339))
		}
	default:
		d, err := holdtime.ParseDuration(req.GetDuration())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		until = now.Add(d + time.Second - 1).Truncate(time.Second)
	}
	h := &podchannel.Hold{
		Until:  metav1.NewTime(until.UTC()),
		Reason: req.GetReason(),
		By:     userOf(ownerauth.CallerFrom(ctx).Identity),
		At:     metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
	if err := h.Validate(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "the hold's %v", err)
	}
	return h, nil
}

// userOf is who asked, as a hold records it: "" for an anonymous caller.
func userOf(identity *ownerauth.Identity) string {
	if identity == nil {
		return ""
	}
	return identity.User
}

// holdTargets reads, live, the pods a hold or release acts on, after the
// contract's checks: the one pod named (see livePod, checkDaemonSetPod), or
// every DaemonSet pod of the node not being deleted (NotFound when there is
// none). Unavailable means the API server is out of reach.
func (s *Server) holdTargets(ctx context.Context, all bool, namespace, name string) ([]*corev1.Pod, error) {
	if !all {
		pod, err := s.livePod(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		if err := s.checkDaemonSetPod(pod, notHoldable); err != nil {
			return nil, err
		}
		return []*corev1.Pod{pod}, nil
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	list, err := s.client.Pods(metav1.NamespaceAll).List(actx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String(),
	})
	if err != nil {
		return nil, apiError(fmt.Sprintf("listing the pods of node %q", s.nodeName), s.apiTimeout, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName == s.nodeName && p.DeletionTimestamp == nil && daemonSetPod(p) {
			pods = append(pods, p)
		}
	}
	return pods, s.someApp(pods)
}

// someApp refuses a request for every app of a node that runs none.
func (s *Server) someApp(pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return status.Errorf(codes.NotFound, "no app on this node %q: no DaemonSet pod runs here (or every one is being deleted)", s.nodeName)
	}
	return nil
}

// eachPod runs act on the pods, concurrently, each write within its own API
// time limit, and returns the pods act changed ("<namespace>/<name>",
// sorted) and the failures, in the pods' order. For every app of the node, a
// pod gone meanwhile is passed by: it no longer runs here.
func (s *Server) eachPod(ctx context.Context, all bool, pods []*corev1.Pod,
	act func(context.Context, *corev1.Pod) (bool, error)) ([]string, []error) {
	did := make([]bool, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() { did[i], errs[i] = act(ctx, pod) })
	}
	wg.Wait()
	var changed []string
	var failed []error
	for i, pod := range pods {
		switch {
		case errs[i] != nil && !(all && status.Code(errs[i]) == codes.NotFound):
			failed = append(failed, errs[i])
		case errs[i] == nil && did[i]:
			changed = append(changed, pod.Namespace+"/"+pod.Name)
		}
	}
	slices.Sort(changed)
	return changed, failed
}

// partly answers a hold or release that failed on some of its pods: one
// pod's failure as it is; for several, the first failure's code (they are
// alike: one API server, one node's rights), what was done anyway (asking
// again is safe) and why each failed.
func partly(errs []error, done string, changed []string, of int) error {
	if of == 1 {
		return errs[0]
	}
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		msgs = append(msgs, status.Convert(err).Message())
	}
	return status.Errorf(status.Code(errs[0]), "%s %d of %d pods %v, asking again is safe; %s",
		done, len(changed), of, changed, strings.Join(msgs, "; "))
}

// writeHold writes the hold on the pod's status (annotation edgeota.io/hold,
// the pod's UID as precondition), replacing any hold it carries. A write
// whose answer was lost is resolved as the other writes are (writeFailed):
// the pod read again carries this very hold, or it does not.
func (s *Server) writeHold(ctx context.Context, pod *corev1.Pod, h *podchannel.Hold) error {
	value, err := podchannel.Encode(h)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding the hold of pod %s: %v", klog.KObj(pod), err)
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	if _, err := podcondition.Annotate(actx, s.client, pod, podcondition.Annotations{rollout.HoldAnnotation: &value}, FieldManager); err != nil {
		carries := func(p *corev1.Pod) bool { return p != nil && p.Annotations[rollout.HoldAnnotation] == value }
		if err := s.writeFailed(ctx, pod, err, podWrite{
			action: fmt.Sprintf("holding pod %s", klog.KObj(pod)), done: carries,
			notDone: "the pod does not carry the hold", happened: "the hold was written",
		}); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Held pod", "pod", klog.KObj(pod), "until", h.Until.Time, "reason", h.Reason, "by", h.By)
	return nil
}

// releaseHold removes the hold from the pod's status, reporting whether it
// had one; a pod without one is not written to.
func (s *Server) releaseHold(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if _, held := pod.Annotations[rollout.HoldAnnotation]; !held {
		return false, nil
	}
	actx, cancel := context.WithTimeout(ctx, s.apiTimeout)
	defer cancel()
	if _, err := podcondition.Annotate(actx, s.client, pod, podcondition.Annotations{rollout.HoldAnnotation: nil}, FieldManager); err != nil {
		free := func(p *corev1.Pod) bool {
			if p == nil {
				return true
			}
			_, held := p.Annotations[rollout.HoldAnnotation]
			return !held
		}
		if err := s.writeFailed(ctx, pod, err, podWrite{
			action: fmt.Sprintf("releasing the hold on pod %s", klog.KObj(pod)), done: free,
			notDone: "the pod still carries the hold", happened: "the hold was removed",
		}); err != nil {
			return false, err
		}
	}
	klog.FromContext(ctx).Info("Released the hold on pod", "pod", klog.KObj(pod))
	return true, nil
}

// The sentences of Hold and ReleaseHold.
func heldMessage(all bool, node, namespace, name string, n int, until time.Time) string {
	if all {
		return fmt.Sprintf("Held %d pods on node %s until %s", n, node, until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("Held pod %s/%s until %s", namespace, name, until.UTC().Format(time.RFC3339))
}

func releasedMessage(all bool, node, namespace, name string, n int) string {
	switch {
	case all && n == 0:
		return fmt.Sprintf("No pod on node %s has a hold", node)
	case all:
		return fmt.Sprintf("Released the holds on %d pods on node %s", n, node)
	case n == 0:
		return fmt.Sprintf("Pod %s/%s has no hold", namespace, name)
	}
	return fmt.Sprintf("Released the hold on pod %s/%s", namespace, name)
}

// holdEnded is the outcome of a queued hold whose end passed before it
// could be written.
func holdEnded(until time.Time) string {
	return fmt.Sprintf("the hold ended at %s, before the API server was reachable: not written", until.UTC().Format(time.RFC3339))
}
