// Package kube is the controller's API client: typed clients for the few
// resources it reads and writes, over a scheme of their API groups alone.
//
// client-go's clientset, its informer factory and every one of its typed
// clients import client-go's scheme, which registers all ~57 API groups at
// start-up. That keeps every group's types, conversions and generated
// methods in the binary and in its resident pages (bench/README: ~5 MB of
// k8s.io/api alone for groups the controller never reads). Here each
// resource is client-go's generic client (gentype), as the generated typed
// clients are, over a scheme of seven groups; the interfaces are exactly
// the typed clients' methods the controller calls, so the tests' fake
// clientset serves them too (package kubetest).
package kube

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is every API call the controller makes, by group as the
// clientset's.
type Interface interface {
	CoreV1() CoreV1
	AppsV1() AppsV1
	BatchV1() BatchV1
	CoordinationV1() CoordinationV1
	AuthorizationV1() AuthorizationV1
	AuthenticationV1() AuthenticationV1
}

// CoreV1 is the controller's part of core/v1.
type CoreV1 interface {
	Pods(namespace string) Pods
	Nodes() Nodes
	ConfigMaps(namespace string) ConfigMaps
	// ConfigMapMetadata serves the same ConfigMaps by their metadata alone.
	ConfigMapMetadata(namespace string) ConfigMapMetadata
	Events(namespace string) Events
}

// AppsV1 is the controller's part of apps/v1.
type AppsV1 interface {
	DaemonSets(namespace string) DaemonSets
	ControllerRevisions(namespace string) ControllerRevisions
}

// BatchV1 is the controller's part of batch/v1: the pre-pull Jobs.
type BatchV1 interface {
	Jobs(namespace string) Jobs
}

// CoordinationV1 is the controller's part of coordination/v1: node Leases
// (proof of life) and its own leader-election Lease.
type CoordinationV1 interface {
	Leases(namespace string) Leases
}

// AuthorizationV1 asks the API server what the controller may do (the
// start-up checks' remedies).
type AuthorizationV1 interface {
	SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview]
}

// AuthenticationV1 asks the API server who the controller is (the start-up
// checks' remedies).
type AuthenticationV1 interface {
	SelfSubjectReviews() Creator[*authenticationv1.SelfSubjectReview]
}

// ListWatcher lists and watches a resource: what an informer needs.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewListWatch is what an informer or a watch tool lists and watches
// through, as client-go's informers make it: lw's objects as narrow sets the
// options (a selector), the initial list streamed unless client (a fake
// clientset) says it cannot.
func NewListWatch[L runtime.Object](client any, lw ListWatcher[L], narrow func(*metav1.ListOptions)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			narrow(&opts)
			return lw.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			narrow(&opts)
			return lw.Watch(ctx, opts)
		},
	}, client)
}

// Getter reads one object.
type Getter[T runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// Creator creates an object.
type Creator[T runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Updater replaces an object, at its resourceVersion.
type Updater[T runtime.Object] interface {
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Patcher patches an object or one of its subresources.
type Patcher[T runtime.Object] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// Deleter deletes an object.
type Deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Pods are read through informers, deleted to upgrade them, and patched
// (their status: conditions and the controller's annotations).
type Pods interface {
	ListWatcher[*corev1.PodList]
	Patcher[*corev1.Pod]
	Deleter
}

// Nodes are read through an informer.
type Nodes interface {
	ListWatcher[*corev1.NodeList]
}

// ConfigMaps hold the rollout records: read whole when a rollout is
// rebuilt, and deleted.
type ConfigMaps interface {
	ListWatcher[*corev1.ConfigMapList]
	Creator[*corev1.ConfigMap]
	Deleter
}

// ConfigMapMetadata are ConfigMaps seen by their metadata alone, the API
// server's PartialObjectMetadata: listed and watched, and created with an
// answer that carries none of their data back. The rollout records are
// written once each and read whole only when a rollout is rebuilt; their
// data in every answer and watch event would only cost the controller to
// receive and decode.
type ConfigMapMetadata interface {
	ListWatcher[*metav1.PartialObjectMetadataList]
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*metav1.PartialObjectMetadata, error)
}

// Events are recorded (the event sink) and read (why a pre-pull failed).
type Events interface {
	ListWatcher[*corev1.EventList]
	Creator[*corev1.Event]
	Updater[*corev1.Event]
	Patcher[*corev1.Event]
}

// DaemonSets are read through an informer and patched (the status the
// controller publishes in annotations).
type DaemonSets interface {
	ListWatcher[*appsv1.DaemonSetList]
	Patcher[*appsv1.DaemonSet]
}

// ControllerRevisions are read through an informer.
type ControllerRevisions interface {
	ListWatcher[*appsv1.ControllerRevisionList]
}

// Jobs are the pre-pull Jobs: read through an informer, created and
// deleted.
type Jobs interface {
	ListWatcher[*batchv1.JobList]
	Creator[*batchv1.Job]
	Deleter
}

// Leases are the nodes' (read) and the leader election's (read and
// written at their resourceVersion).
type Leases interface {
	ListWatcher[*coordinationv1.LeaseList]
	Getter[*coordinationv1.Lease]
	Creator[*coordinationv1.Lease]
	Updater[*coordinationv1.Lease]
}

// groups are the API groups the controller calls, each with where its
// REST paths start.
var groups = []struct {
	gv       schema.GroupVersion
	apiPath  string
	register func(*runtime.Scheme) error
}{
	{corev1.SchemeGroupVersion, "/api", corev1.AddToScheme},
	{appsv1.SchemeGroupVersion, "/apis", appsv1.AddToScheme},
	{batchv1.SchemeGroupVersion, "/apis", batchv1.AddToScheme},
	{coordinationv1.SchemeGroupVersion, "/apis", coordinationv1.AddToScheme},
	{authorizationv1.SchemeGroupVersion, "/apis", authorizationv1.AddToScheme},
	{authenticationv1.SchemeGroupVersion, "/apis", authenticationv1.AddToScheme},
}

// Scheme is the scheme of the controller's API groups alone, built once
// and only read after: every client's codecs, and the event recorder,
// which names an object's kind from it.
var Scheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, g := range groups {
		if err := g.register(scheme); err != nil {
			return nil, fmt.Errorf("registering %s: %w", g.gv, err)
		}
	}
	return scheme, nil
})

// NewForConfig makes the client as client-go's kubernetes.NewForConfig
// makes the clientset: one HTTP client (and connection pool) for every
// group, and one rate limiter from the configuration's QPS and Burst.
func NewForConfig(config *rest.Config) (Interface, error) {
	c := *config
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("burst must be above 0 when QPS is set and no rate limiter is")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	return newForConfigAndClient(&c, httpClient)
}

func newForConfigAndClient(config *rest.Config, httpClient *http.Client) (*clientset, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	codecs := rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	cs := &clientset{params: runtime.NewParameterCodec(scheme), rest: map[schema.GroupVersion]rest.Interface{}}
	if err := cs.addMetadata(config, httpClient); err != nil {
		return nil, err
	}
	for _, g := range groups {
		c := *config
		c.GroupVersion = &g.gv
		c.APIPath = g.apiPath
		c.NegotiatedSerializer = codecs
		rc, err := rest.RESTClientForConfigAndClient(&c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("creating the %s client: %w", g.gv, err)
		}
		cs.rest[g.gv] = rc
	}
	return cs, nil
}

// clientset is NewForConfig's Interface.
type clientset struct {
	rest   map[schema.GroupVersion]rest.Interface
	params runtime.ParameterCodec
	// metadata lists and watches by metadata alone; metadataCore creates in
	// the core group with an answer of metadata alone (metadata.go).
	metadata     metadata.Interface
	metadataCore rest.Interface
}

func (c *clientset) CoreV1() CoreV1                     { return coreV1{c} }
func (c *clientset) AppsV1() AppsV1                     { return appsV1{c} }
func (c *clientset) BatchV1() BatchV1                   { return batchV1{c} }
func (c *clientset) CoordinationV1() CoordinationV1     { return coordinationV1{c} }
func (c *clientset) AuthorizationV1() AuthorizationV1   { return authorizationV1{c} }
func (c *clientset) AuthenticationV1() AuthenticationV1 { return authenticationV1{c} }

// resource is the generic client of one resource, as client-gen makes it:
// protobuf preferred where the API serves it (every group here does).
func resource[T interface {
	runtime.Object
	metav1.Object
}, L runtime.Object](c *clientset, gv schema.GroupVersion, name, namespace string, newT func() T, newL func() L) *gentype.ClientWithList[T, L] {
	return gentype.NewClientWithList(name, c.rest[gv], c.params, namespace, newT, newL, gentype.PrefersProtobuf[T]())
}

// newOf is a new, empty O: what a response decodes into.
func newOf[O any]() *O { return new(O) }

type coreV1 struct{ c *clientset }

func (g coreV1) Pods(ns string) Pods {
	return resource(g.c, corev1.SchemeGroupVersion, "pods", ns, newOf[corev1.Pod], newOf[corev1.PodList])
}
func (g coreV1) Nodes() Nodes {
	return resource(g.c, corev1.SchemeGroupVersion, "nodes", "", newOf[corev1.Node], newOf[corev1.NodeList])
}
func (g coreV1) ConfigMaps(ns string) ConfigMaps {
	return resource(g.c, corev1.SchemeGroupVersion, "configmaps", ns, newOf[corev1.ConfigMap], newOf[corev1.ConfigMapList])
}
func (g coreV1) ConfigMapMetadata(ns string) ConfigMapMetadata {
	return configMapMetadata{c: g.c, namespace: ns}
}
func (g coreV1) Events(ns string) Events {
	return resource(g.c, corev1.SchemeGroupVersion, "events", ns, newOf[corev1.Event], newOf[corev1.EventList])
}

type appsV1 struct{ c *clientset }

func (g appsV1) DaemonSets(ns string) DaemonSets {
	return resource(g.c, appsv1.SchemeGroupVersion, "daemonsets", ns, newOf[appsv1.DaemonSet], newOf[appsv1.DaemonSetList])
}
func (g appsV1) ControllerRevisions(ns string) ControllerRevisions {
	return resource(g.c, appsv1.SchemeGroupVersion, "controllerrevisions", ns, newOf[appsv1.ControllerRevision], newOf[appsv1.ControllerRevisionList])
}

type batchV1 struct{ c *clientset }

func (g batchV1) Jobs(ns string) Jobs {
	return resource(g.c, batchv1.SchemeGroupVersion, "jobs", ns, newOf[batchv1.Job], newOf[batchv1.JobList])
}

type coordinationV1 struct{ c *clientset }

func (g coordinationV1) Leases(ns string) Leases {
	return resource(g.c, coordinationv1.SchemeGroupVersion, "leases", ns, newOf[coordinationv1.Lease], newOf[coordinationv1.LeaseList])
}

type authorizationV1 struct{ c *clientset }

func (g authorizationV1) SelfSubjectAccessReviews() Creator[*authorizationv1.SelfSubjectAccessReview] {
	return gentype.NewClient("selfsubjectaccessreviews", g.c.rest[authorizationv1.SchemeGroupVersion], g.c.params, "",
		newOf[authorizationv1.SelfSubjectAccessReview], gentype.PrefersProtobuf[*authorizationv1.SelfSubjectAccessReview]())
}

type authenticationV1 struct{ c *clientset }

func (g authenticationV1) SelfSubjectReviews() Creator[*authenticationv1.SelfSubjectReview] {
	return gentype.NewClient("selfsubjectreviews", g.c.rest[authenticationv1.SchemeGroupVersion], g.c.params, "",
		newOf[authenticationv1.SelfSubjectReview], gentype.PrefersProtobuf[*authenticationv1.SelfSubjectReview]())
}

// EventSink records events through a client, as client-go's EventSinkImpl
// does: each in its own namespace, patched by strategic merge.
type EventSink struct{ Client Interface }

func (s EventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(event.Namespace).Create(context.Background(), event, metav1.CreateOptions{})
}

func (s EventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(event.Namespace).Update(context.Background(), event, metav1.UpdateOptions{})
}

func (s EventSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(event.Namespace).Patch(context.Background(), event.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
