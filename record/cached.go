package record

import (
	"encoding/binary"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Cached is how the records' informer holds a record ConfigMap: what finds
// it (its name and labels) and what tells whether its content is the
// controller's own (a digest of its data), not the data itself. The data,
// about 80 bytes per node and DaemonSet, is read from the API server when a
// record is loaded (Load) and otherwise only written; a copy in the cache
// cost more than the decisions about as many nodes (bench/README.md,
// "Controller memory").
type Cached struct {
	// ObjectMeta holds the name, namespace, UID, resourceVersion and labels
	// only.
	metav1.ObjectMeta
	// Keys is how many keys the data holds.
	Keys int
	// Digest sums a hash of each key with its value: the same data, in any
	// order, has the same digest.
	Digest uint64
}

// GetObjectKind is runtime.Object's: a Cached has no kind of its own.
func (c *Cached) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is runtime.Object's.
func (c *Cached) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// Transform turns a record ConfigMap into its Cached form, for the records'
// informer (informers.WithTransform). A Cached (client-go's streaming list
// may transform its own output) and anything else pass unchanged.
func Transform(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		return Summarize(cm), nil
	}
	return obj, nil
}

// Summarize is the Cached form of a record ConfigMap.
func Summarize(cm *corev1.ConfigMap) *Cached {
	c := &Cached{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID,
		ResourceVersion: cm.ResourceVersion, Labels: cm.Labels}, Keys: len(cm.Data)}
	for k, v := range cm.Data {
		c.Digest += entryDigest(k, hashOf(v))
	}
	return c
}

// digestOf is the digest of data whose values are given by their hashes, as
// a shard remembers what its ConfigMap holds.
func digestOf(stored map[string]uint64) uint64 {
	var d uint64
	for k, h := range stored {
		d += entryDigest(k, h)
	}
	return d
}

// entryDigest hashes one key with the hash of its value.
func entryDigest(key string, valueHash uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	var b [9]byte // a separator no key holds, then the value's hash
	binary.LittleEndian.PutUint64(b[1:], valueHash)
	h.Write(b[:])
	return h.Sum64()
}

func hashOf(value string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(value))
	return h.Sum64()
}
