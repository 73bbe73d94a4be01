// Package kubetest serves package kube's Interface from a client-go
// clientset: the tests' fake clientset, whose reactors and object tracker
// they script. Only tests import it: it links the clientset, and with it the
// scheme of every API group, which package kube exists to keep out of the
// controller's binary.
package kubetest

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedauthenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	typedauthorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/edgeota/edgeota/internal/kube"
)

// Wrap serves c as a kube.Interface. Informers over it stream their
// initial lists only if c does (the fake clientset does not).
func Wrap(c kubernetes.Interface) kube.Interface { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

// IsWatchListSemanticsUnSupported tells client-go's reflector what c
// itself tells it.
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.c)
}

func (c clientset) CoreV1() kube.CoreV1                 { return coreV1{c.c.CoreV1()} }
func (c clientset) AppsV1() kube.AppsV1                 { return appsV1{c.c.AppsV1()} }
func (c clientset) BatchV1() kube.BatchV1               { return batchV1{c.c.BatchV1()} }
func (c clientset) CoordinationV1() kube.CoordinationV1 { return coordinationV1{c.c.CoordinationV1()} }
func (c clientset) AuthorizationV1() kube.AuthorizationV1 {
	return authorizationV1{c.c.AuthorizationV1()}
}
func (c clientset) AuthenticationV1() kube.AuthenticationV1 {
	return authenticationV1{c.c.AuthenticationV1()}
}

type coreV1 struct{ c typedcorev1.CoreV1Interface }

func (g coreV1) Pods(ns string) kube.Pods             { return g.c.Pods(ns) }
func (g coreV1) Nodes() kube.Nodes                    { return g.c.Nodes() }
func (g coreV1) ConfigMaps(ns string) kube.ConfigMaps { return g.c.ConfigMaps(ns) }
func (g coreV1) Events(ns string) kube.Events         { return g.c.Events(ns) }
func (g coreV1) ConfigMapMetadata(ns string) kube.ConfigMapMetadata {
	return configMapMetadata{g.c.ConfigMaps(ns)}
}

type appsV1 struct{ c typedappsv1.AppsV1Interface }

func (g appsV1) DaemonSets(ns string) kube.DaemonSets { return g.c.DaemonSets(ns) }
func (g appsV1) ControllerRevisions(ns string) kube.ControllerRevisions {
	return g.c.ControllerRevisions(ns)
}

type batchV1 struct{ c typedbatchv1.BatchV1Interface }

func (g batchV1) Jobs(ns string) kube.Jobs { return g.c.Jobs(ns) }

type coordinationV1 struct {
	c typedcoordinationv1.CoordinationV1Interface
}

func (g coordinationV1) Leases(ns string) kube.Leases { return g.c.Leases(ns) }

type authorizationV1 struct {
	c typedauthorizationv1.AuthorizationV1Interface
}

func (g authorizationV1) SelfSubjectAccessReviews() kube.Creator[*authorizationv1.SelfSubjectAccessReview] {
	return g.c.SelfSubjectAccessReviews()
}

type authenticationV1 struct {
	c typedauthenticationv1.AuthenticationV1Interface
}

func (g authenticationV1) SelfSubjectReviews() kube.Creator[*authenticationv1.SelfSubjectReview] {
	return g.c.SelfSubjectReviews()
}
