package server

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/edgeota/edgeota/podcondition"
)

// Pods is all the agent asks of the API server about the pods of one
// namespace ("" for all): the part of client-go's typed PodInterface it uses,
// so that the typed client (the tests' fake clientset) satisfies it as well.
type Pods interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	podcondition.PodPatcher
}

// Client is the agent's API client: the pods of a namespace.
type Client interface {
	Pods(namespace string) Pods
}

// NewClient returns a Client that speaks core/v1 and nothing else. The agent
// uses it instead of client-go's clientset, whose typed clients for every API
// group, and the scheme registering every k8s.io/api group at start-up, made
// up most of the agent's binary and of its resident memory on the node. It
// sends what the typed pods client sends (protobuf preferred, JSON accepted),
// with the configuration's rate limits.
func NewClient(config *rest.Config) (Client, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering core/v1: %w", err)
	}
	c := rest.CopyConfig(config)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return restClient{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// restClient is NewClient's Client.
type restClient struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

func (c restClient) Pods(namespace string) Pods { return restPods{c, namespace} }

// restPods builds each request as client-go's generated pods client does.
type restPods struct {
	restClient
	namespace string
}

// request starts a request on the namespace's pods.
func (p restPods) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefault().NamespaceIfScoped(p.namespace, p.namespace != "").Resource("pods")
}

func (p restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list := &corev1.PodList{}
	err := p.request(p.rest.Get()).VersionedParams(&opts, p.params).Timeout(timeout(opts)).Do(ctx).Into(list)
	return list, err
}

func (p restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.request(p.rest.Get()).VersionedParams(&opts, p.params).Timeout(timeout(opts)).Watch(ctx)
}

func (p restPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return p.request(p.rest.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (p restPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := p.request(p.rest.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, p.params).
		Body(data).Do(ctx).Into(pod)
	return pod, err
}

// timeout is a list's or watch's own time limit, none when it sets none.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
