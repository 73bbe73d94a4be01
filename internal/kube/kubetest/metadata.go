package kubetest

import (
	"context"
	"strconv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// configMapMetadata serves kube.ConfigMapMetadata from a typed client, as
// the API server does: every object by its metadata alone.
type configMapMetadata struct {
	c typedcorev1.ConfigMapInterface
}

func (m configMapMetadata) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := m.c.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: list.ListMeta, Items: make([]metav1.PartialObjectMetadata, len(list.Items))}
	for i := range list.Items {
		out.Items[i] = *Partial(&list.Items[i])
	}
	return out, nil
}

func (m configMapMetadata) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := m.c.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if cm, ok := e.Object.(*corev1.ConfigMap); ok {
			e.Object = Partial(cm)
		}
		return e, true
	}), nil
}

// Create gives the ConfigMap a resourceVersion of its own, which the fake
// clientset leaves empty and the API server never does.
func (m configMapMetadata) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*metav1.PartialObjectMetadata, error) {
	cm = cm.DeepCopy()
	cm.ResourceVersion = NextResourceVersion()
	out, err := m.c.Create(ctx, cm, opts)
	if err != nil {
		return nil, err
	}
	return Partial(out), nil
}

// resourceVersions counts the resourceVersions given to ConfigMaps created
// through ConfigMapMetadata.
var resourceVersions atomic.Int64

// NextResourceVersion is a resourceVersion newer than any this package gave
// before, as a test's own write of a ConfigMap would get from the API
// server.
func NextResourceVersion() string {
	return strconv.FormatInt(1000+resourceVersions.Add(1), 10)
}

// Partial is cm's metadata as the API server answers it to a client that
// asks for metadata alone.
func Partial(cm *corev1.ConfigMap) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: *cm.ObjectMeta.DeepCopy()}
}
