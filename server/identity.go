package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/edgeota/edgeota/apiidentity"
)

// APIIdentity is who the agent is to the API server, and the Client that acts as
// it. The agent may start in a dead zone, where nothing can settle who it is
// (package apiidentity), so it serves before: until Settle, every call of the
// Client fails as an unreachable API server does (Unavailable, 503; queued
// with queue_if_offline), the stored view is served and queued actions wait.
type APIIdentity struct {
	settled atomic.Pointer[settledIdentity]
	// modes is the metric edgeota_agent_identity, set by Settle.
	modes *identityMetric
}

type settledIdentity struct {
	apiidentity.Settled
	client Client
}

// NewAPIIdentity returns an APIIdentity not settled yet.
func NewAPIIdentity() *APIIdentity { return &APIIdentity{modes: newIdentityMetric()} }

// Settle puts the identity in force, with the client that carries it. It
// is called once; a second call changes nothing.
func (i *APIIdentity) Settle(s apiidentity.Settled, client Client) {
	if i.settled.CompareAndSwap(nil, &settledIdentity{Settled: s, client: client}) {
		i.modes.set(s.Mode)
	}
}

// Pods makes APIIdentity the agent's Client.
func (i *APIIdentity) Pods(namespace string) Pods {
	if s := i.settled.Load(); s != nil {
		return s.client.Pods(namespace)
	}
	return unsettledPods{}
}

// describe says which identity is in force, for /readyz.
func (i *APIIdentity) describe() string {
	s := i.settled.Load()
	switch {
	case s == nil:
		return "identity not settled yet (the API server has not answered since the agent started)"
	case s.Mode == apiidentity.Node:
		return fmt.Sprintf("acting as %s (--identity=%s: reads and writes scoped to this node by the API server)", s.User, s.Mode)
	case s.FellBack != "":
		return fmt.Sprintf("acting as the service account %s (--identity=auto fell back: reads are not node-scoped)", s.User)
	default:
		return fmt.Sprintf("acting as the service account (--identity=%s: reads are not node-scoped)", s.Mode)
	}
}

// errUnsettled is every API call's error before the identity is settled: no
// API status, so it reads as the API server out of reach.
var errUnsettled = errors.New("the agent's identity is not settled yet: the API server has not answered since the agent started")

// unsettledPods is the Client's answer before Settle.
type unsettledPods struct{}

func (unsettledPods) List(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	return nil, errUnsettled
}

func (unsettledPods) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errUnsettled
}

func (unsettledPods) Delete(context.Context, string, metav1.DeleteOptions) error { return errUnsettled }

func (unsettledPods) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.Pod, error) {
	return nil, errUnsettled
}
