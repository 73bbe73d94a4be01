package controller

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// nodeRecord is how the controller caches a Node: what its decisions and
// handlers read (readiness and its heartbeat, labels, the annotations it
// reads, taints), without a corev1.Node's ObjectMeta, spec and status
// around them (the informer's transform, nodeRecordOf, builds it). As
// podRecord, it is keyed through the metav1.Object methods below.
type nodeRecord struct {
	noMeta
	// Name, UID and ResourceVersion identify the node and the state it was
	// read in (one allocation).
	Name            string
	UID             types.UID
	ResourceVersion string
	// Labels are all the node's labels: rollout node selectors and the
	// template's selector and affinity are arbitrary. Keys and values are
	// interned.
	Labels map[string]string
	// Annotations are those the controller reads (rollout.NodeAnnotations,
	// its time zone); nil on most nodes.
	Annotations map[string]string
	// Taints are the node's taints, their key, value and effect: why a
	// template creates no pod there. Nil on most nodes.
	Taints []corev1.Taint
	// Heartbeat is the Ready condition's lastHeartbeatTime, by the node's
	// clock.
	Heartbeat unixtime.Time
	// ReadyStatus is the Ready condition's status, "" when the node has
	// none.
	ReadyStatus corev1.ConditionStatus
}

// nodeRecordOf turns a Node into its record; a record (a transform applied
// twice) is returned as it is.
func nodeRecordOf(obj any) any {
	switch o := obj.(type) {
	case *nodeRecord:
		return o
	case *corev1.Node:
		return newNodeRecord(o)
	}
	return obj
}

func newNodeRecord(node *corev1.Node) *nodeRecord {
	ident := node.Name + string(node.UID) + node.ResourceVersion
	n, u := len(node.Name), len(node.Name)+len(node.UID)
	r := &nodeRecord{Name: ident[:n], UID: types.UID(ident[n:u]), ResourceVersion: ident[u:],
		Annotations: keepKeys(node.Annotations, rollout.NodeAnnotations...)}
	if len(node.Labels) > 0 {
		r.Labels = make(map[string]string, len(node.Labels))
		for k, v := range node.Labels {
			r.Labels[intern(k)] = intern(v)
		}
	}
	for _, t := range node.Spec.Taints {
		r.Taints = append(r.Taints, corev1.Taint{Key: intern(t.Key), Value: intern(t.Value), Effect: corev1.TaintEffect(intern(string(t.Effect)))})
	}
	if c := health.NodeCondition(node, corev1.NodeReady); c != nil {
		r.ReadyStatus, r.Heartbeat = corev1.ConditionStatus(intern(string(c.Status))), unixtime.Of(c.LastHeartbeatTime.Time)
	}
	return r
}

// ready reports whether the node is connected (health.ReadyStatus).
func (n *nodeRecord) ready() bool { return health.StatusReady(n.ReadyStatus) }

// sameButHeartbeat reports whether n and o differ in their heartbeat alone,
// if at all: what a verdict reads of a node besides it (its readiness,
// labels, time zone, taints) is the same.
func (n *nodeRecord) sameButHeartbeat(o *nodeRecord) bool {
	return n.ready() == o.ready() && maps.Equal(n.Labels, o.Labels) && maps.Equal(n.Annotations, o.Annotations) &&
		slices.EqualFunc(n.Taints, o.Taints, taintsEqual)
}

func taintsEqual(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }

// node is the Node the scheduling helpers read (the template's fit: node
// selector, affinity, taints), built when a verdict asks, which is rare:
// for a node without a pod of the DaemonSet.
func (n *nodeRecord) node() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Taints}}
}

// The metav1.Object methods the caches read.

func (n *nodeRecord) GetNamespace() string              { return "" }
func (n *nodeRecord) GetName() string                   { return n.Name }
func (n *nodeRecord) GetUID() types.UID                 { return n.UID }
func (n *nodeRecord) GetResourceVersion() string        { return n.ResourceVersion }
func (n *nodeRecord) GetLabels() map[string]string      { return n.Labels }
func (n *nodeRecord) GetAnnotations() map[string]string { return n.Annotations }
func (n *nodeRecord) GetObjectKind() schema.ObjectKind  { return schema.EmptyObjectKind }

// DeepCopyObject copies the record (runtime.Object): the cache's mutation
// detector, when on, compares copies.
func (n *nodeRecord) DeepCopyObject() runtime.Object {
	c := *n
	c.Labels, c.Annotations, c.Taints = maps.Clone(n.Labels), maps.Clone(n.Annotations), slices.Clone(n.Taints)
	return &c
}

var (
	_ metav1.Object  = (*nodeRecord)(nil)
	_ runtime.Object = (*nodeRecord)(nil)
)
