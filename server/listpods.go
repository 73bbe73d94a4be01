package server

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// ListPods answers from the informer cache: no API request, and the last known
// state while the API server is out of reach. Before the cache's first sync it
// answers from the view the previous run stored, if any, and otherwise
// Unavailable rather than an empty, misleading list. Every answer says how
// fresh it is in SyncedAtHeader: for the stored view, the stored time of last
// contact, not the time of the restart.
func (s *Server) ListPods(ctx context.Context, _ *edgeotav1.ListPodsRequest) (*edgeotav1.ListPodsResponse, error) {
	if !s.synced() {
		if v := s.stored; v != nil {
			setSyncedAt(ctx, v.lastContact)
			return v.list, nil
		}
		return nil, status.Error(codes.Unavailable, "the pod cache has not synced with the API server yet and no stored view could be read")
	}
	setSyncedAt(ctx, s.lastContact())
	generation := s.generation()
	if last := s.lastList.Load(); last != nil && last.generation == generation {
		return last.resp, nil
	}
	resp, err := s.listCached()
	if err != nil {
		return nil, err
	}
	s.lastList.Store(&podList{generation: generation, resp: resp})
	return resp, nil
}

// podList is a ListPods answer and the cache generation it was built from.
// Callers share it, so nothing may modify it: a node's pods change seldom
// and are polled often, and rebuilding (and encoding, see encodingMemo) the
// whole list on every call is most of ListPods' cost.
type podList struct {
	generation uint64
	resp       *edgeotav1.ListPodsResponse
}

// listCached builds the PodList of the node's cached pods. The generation is
// read before the cache, so a change that lands meanwhile shows up as a newer
// generation on the next call.
func (s *Server) listCached() (*edgeotav1.ListPodsResponse, error) {
	pods, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing cached pods: %v", err)
	}
	// The informer is already restricted to this node; the check keeps the
	// promise even if it were not.
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p.Spec.NodeName != s.nodeName })
	return podListResponse(pods), nil
}

// podListResponse is the PodList of pods, sorted by namespace and name. It
// sorts pods in place.
func podListResponse(pods []*corev1.Pod) *edgeotav1.ListPodsResponse {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	items := make([]*edgeotav1.Pod, 0, len(pods))
	for _, p := range pods {
		items = append(items, podToProto(p))
	}
	return &edgeotav1.ListPodsResponse{Kind: "PodList", ApiVersion: "v1", Items: items}
}

// knownPod is the last known state of a pod, without an API request: the
// informer cache's once it has synced, the stored view's before. It is what a
// request to queue is checked against while the API server is unreachable:
// NotFound when the view has no such pod, Unavailable when there is no view.
func (s *Server) knownPod(namespace, name string) (*corev1.Pod, error) {
	lister := s.lister
	if !s.synced() {
		if s.stored == nil {
			return nil, status.Errorf(codes.Unavailable,
				"the API server is unreachable and the agent has no view of pod %s/%s to check the request against", namespace, name)
		}
		lister = s.stored.pods
	}
	pod, err := lister.Pods(namespace).Get(name)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "pod %s/%s not found in the agent's last known view", namespace, name)
	}
	return pod, nil
}

// knownPods is every pod of this node in the agent's last known view: the
// pod cache once synced, the stored view before. Unavailable when there is
// neither.
func (s *Server) knownPods() ([]*corev1.Pod, error) {
	lister, _, ok := s.podSource()
	if !ok {
		return nil, status.Errorf(codes.Unavailable,
			"the API server is unreachable and the agent has no view of node %q's pods to check the request against", s.nodeName)
	}
	pods, err := lister.List(labels.Everything())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "listing the last known pods: %v", err)
	}
	return slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p.Spec.NodeName != s.nodeName }), nil
}
