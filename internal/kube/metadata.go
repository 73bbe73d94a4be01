package kube

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// partialObjectMetadata is the Accept header that has the API server answer
// with an object's metadata alone, as client-go's metadata client asks.
const partialObjectMetadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

var configMapsResource = corev1.SchemeGroupVersion.WithResource("configmaps")

// addMetadata adds to c the metadata clients, over the same HTTP client and
// rate limiter as the typed ones.
func (c *clientset) addMetadata(config *rest.Config, httpClient *http.Client) error {
	mc := metadata.ConfigFor(config)
	var err error
	if c.metadata, err = metadata.NewForConfigAndClient(mc, httpClient); err != nil {
		return fmt.Errorf("creating the metadata client: %w", err)
	}
	// Creates go to the core group's path; the answer decodes as
	// PartialObjectMetadata with the metadata client's codecs.
	mc.GroupVersion, mc.APIPath = &corev1.SchemeGroupVersion, "/api"
	if c.metadataCore, err = rest.RESTClientForConfigAndClient(mc, httpClient); err != nil {
		return fmt.Errorf("creating the core metadata client: %w", err)
	}
	return nil
}

// configMapMetadata is ConfigMapMetadata on the API server.
type configMapMetadata struct {
	c         *clientset
	namespace string
}

func (m configMapMetadata) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return m.c.metadata.Resource(configMapsResource).Namespace(m.namespace).List(ctx, opts)
}

func (m configMapMetadata) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return m.c.metadata.Resource(configMapsResource).Namespace(m.namespace).Watch(ctx, opts)
}

// Create sends cm as protobuf and takes the answer's metadata alone.
func (m configMapMetadata) Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*metav1.PartialObjectMetadata, error) {
	enc, err := protobufEncoder()
	if err != nil {
		return nil, err
	}
	body, err := runtime.Encode(enc, cm)
	if err != nil {
		return nil, fmt.Errorf("encoding configmap %s: %w", cm.Name, err)
	}
	obj, err := m.c.metadataCore.Post().Namespace(m.namespace).Resource("configmaps").
		VersionedParams(&opts, m.c.params).
		SetHeader("Content-Type", runtime.ContentTypeProtobuf).
		SetHeader("Accept", partialObjectMetadata).
		Body(body).Do(ctx).Get()
	if err != nil {
		return nil, err
	}
	partial, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("creating configmap %s: got a %T answer, want PartialObjectMetadata", cm.Name, obj)
	}
	return partial, nil
}

// protobufEncoder encodes the controller's objects as the API server stores
// them in etcd: protobuf, at their group's version (v1 for every resource
// here).
var protobufEncoder = sync.OnceValues(func() (runtime.Encoder, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		return nil, fmt.Errorf("no protobuf serializer")
	}
	return codecs.EncoderForVersion(info.Serializer, schema.GroupVersions{corev1.SchemeGroupVersion}), nil
})

// StoredSize is how many bytes etcd holds for cm as the API server stores it:
// its protobuf encoding (a magic number, its kind, then every field, its
// metadata and managedFields included), without the resourceVersion, which
// the API server leaves out of what it stores (etcd's revision is it). It
// is what one write of cm costs etcd's history until compaction, the key
// aside.
func StoredSize(cm *corev1.ConfigMap) (int, error) {
	enc, err := protobufEncoder()
	if err != nil {
		return 0, err
	}
	stored := *cm // the resourceVersion is cleared on a copy; the maps are only read
	stored.ResourceVersion = ""
	var n countingWriter
	if err := enc.Encode(&stored, &n); err != nil {
		return 0, fmt.Errorf("encoding configmap %s: %w", cm.Name, err)
	}
	return int(n), nil
}

// countingWriter counts the bytes written to it.
type countingWriter int

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}
