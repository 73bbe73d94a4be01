package controller

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/window"
)

// factsOf gathers, for the DaemonSet's decision at now, one node's facts
// from the caches and from what this process knows the caches may not show
// yet (its deletions, its challenges, the Leases it read).
func (c *Controller) factsOf(ds *appsv1.DaemonSet, key string, target decision.Target, now time.Time) decision.FactsFunc {
	return func(name string) decision.NodeFacts {
		node := c.nodeByName(name)
		f := decision.NodeFacts{Node: nodeFacts(name, node), Pods: c.podsOnNode(ds.UID, name), LeaseRenewed: c.heartbeats.seen(name)}
		f.Taking = c.expect.deletingOn(key, name, now, func(uid types.UID, patch bool) bool {
			// The cache shows the deletion once the pod is terminating or
			// gone, the patch once the pod is up to date (or gone).
			for _, p := range f.Pods {
				if p.UID == uid && !p.Terminating && (!patch || !target.UpToDate(p)) {
					return false
				}
			}
			return true
		})
		for _, p := range f.Pods {
			if p.Answer != 0 && c.challenges.answered(p.UID, p.Health.Generation(), p.Answer) {
				f.Answered = p.UID
			}
			if !p.Terminating && !target.UpToDate(p) {
				f.Pull = c.pullOf(p, target.Hash)
			}
		}
		if node != nil {
			f.Fit = func() (bool, string) {
				n := node.node()
				return templateSelects(ds, n), untoleratedTaint(ds, n)
			}
		}
		return f
	}
}

// nodeByName returns the cached record of the node, nil when the cluster
// has none.
func (c *Controller) nodeByName(name string) *nodeRecord {
	obj, ok, _ := c.nodeIndexer.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*nodeRecord)
}

// nodeFacts reads what a decision needs of a Node (nil: not in the cluster).
func nodeFacts(name string, node *nodeRecord) decision.Node {
	n := decision.Node{Name: name}
	if node == nil {
		return n
	}
	n.Exists, n.Ready, n.Labels = true, node.ready(), node.Labels
	n.ReadyStatus = "missing"
	if node.ReadyStatus != "" {
		n.ReadyStatus, n.Heartbeat = string(node.ReadyStatus), node.Heartbeat.Time()
	}
	n.Zone, n.ZoneErr = window.NodeZone(node.Annotations)
	return n
}

// podsOnNode returns the DaemonSet's pods on the node (bound to it, or
// meant for it by their node affinity while unbound).
//
// It reads the node's pods of every DaemonSet (a handful) rather than an
// index by DaemonSet and node, which would cost a set per pod: at 2,000
// nodes and four DaemonSets, more memory than all the sets else.
func (c *Controller) podsOnNode(uid types.UID, node string) []*decision.Pod {
	objs, _ := c.podIndexer.ByIndex(byNode, node)
	var pods []*decision.Pod
	for _, obj := range objs {
		if p := obj.(*podRecord); p.Owner == uid {
			pods = append(pods, &p.Pod)
		}
	}
	return pods
}

// podsOf returns the cached pods of the DaemonSet with the UID. Read only.
func (c *Controller) podsOf(uid types.UID) []*podRecord {
	// ByIndex fails only for an index that does not exist; NewController
	// registers this one.
	objs, _ := c.podIndexer.ByIndex(byControllerUID, string(uid))
	pods := make([]*podRecord, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*podRecord))
	}
	return pods
}

// nodesOf returns the nodes a rebuild judges: those with a pod of the
// DaemonSet, and those this process is deleting on (the ledger's are added
// by the decision).
func (c *Controller) nodesOf(uid types.UID, key string) []string {
	seen := map[string]bool{}
	for _, p := range c.podsOf(uid) {
		if p.Node != "" {
			seen[p.Node] = true
		}
	}
	for _, n := range c.expect.deletingNodes(key) {
		seen[n] = true
	}
	nodes := make([]string, 0, len(seen))
	for n := range seen {
		nodes = append(nodes, n)
	}
	return nodes
}

// templateSelects reports whether the DaemonSet's template lets its pod run
// on the node by node selector and required node affinity, as the
// DaemonSet controller decides where pods belong.
func templateSelects(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

// untoleratedTaint names a taint of the node that the template does not
// tolerate: why the DaemonSet controller creates no pod there. The
// node.kubernetes.io taints are left out: the DaemonSet controller adds
// tolerations for them to every pod it creates.
func untoleratedTaint(ds *appsv1.DaemonSet, node *corev1.Node) string {
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			taints = append(taints, t)
		}
	}
	taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, ds.Spec.Template.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	if !found {
		return ""
	}
	return fmt.Sprint(taint.ToString())
}
