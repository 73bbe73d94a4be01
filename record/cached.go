package record

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/internal/kube"
)

// Cached is how the records' informer holds a record ConfigMap: its name,
// resourceVersion and labels, which finding a DaemonSet's records and
// telling someone else's change need. The informer watches the records'
// metadata alone (kube.ConfigMapMetadata): their data is read from the API
// server when a record is loaded (Load) and otherwise only written, and
// their managedFields are dropped here.
type Cached struct {
	// ObjectMeta holds the name, namespace, UID, resourceVersion and labels
	// only.
	metav1.ObjectMeta
}

// GetObjectKind is runtime.Object's: a Cached has no kind of its own.
func (c *Cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is runtime.Object's.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := &Cached{}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// Transform turns a record ConfigMap's metadata into its Cached form, for
// the records' informer (SetTransform). A Cached (client-go's streaming
// list may transform its own output) and anything else pass unchanged.
func Transform(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return Summarize(m), nil
	}
	return obj, nil
}

// Summarize is the Cached form of a record ConfigMap, or of its metadata.
func Summarize(obj metav1.Object) *Cached {
	return &Cached{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(), Labels: obj.GetLabels()}}
}

// NewInformer is the informer of the rollout records in namespace: their
// metadata alone (ConfigMaps labelled Label), stored as Cached, indexed by
// ByOwner.
func NewInformer(client kube.Interface, namespace string) cache.SharedIndexInformer {
	narrow := func(opts *metav1.ListOptions) { opts.LabelSelector = Label }
	inf := cache.NewSharedIndexInformerWithOptions(kube.NewListWatch(client, client.CoreV1().ConfigMapMetadata(namespace), narrow),
		&metav1.PartialObjectMetadata{}, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{ByOwner: IndexByOwner}})
	// Only a started informer refuses a transform.
	_ = inf.SetTransform(Transform)
	return inf
}
