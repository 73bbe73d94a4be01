package controller

import (
	"fmt"
	"maps"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podcondition"
)

// nodeState is where one node stands in the rollout of the target revision.
type nodeState int

const (
	// nodeOld: Ready, running an available old pod; deleted within budget.
	nodeOld nodeState = iota
	// nodeOldDown: Ready, running an old pod that is not available. Its node
	// counts against the budget; replacing the pod frees none.
	nodeOldDown
	// nodeInFlight: being upgraded, from the old pod's deletion until the new
	// pod settled and the node sent a heartbeat since.
	nodeInFlight
	// nodeSettled: runs the target revision, proven alive.
	nodeSettled
	// nodeFailed: left Ready while in flight, or in flight past the deadline.
	nodeFailed
	// nodeSkipped: NotReady and not in flight (untouched, or offline after
	// settling); upgraded when it returns.
	nodeSkipped
)

// nodeVerdict is judgeNode's answer.
type nodeVerdict struct {
	state nodeState
	// why a node failed.
	why string
	// recheck is when the state can change by the clock alone.
	recheck time.Duration
	// awaitsHeartbeat: the new pod settled, the node has not proven since
	// that it still reaches the API server; a heartbeat sent after
	// proofAfter will.
	awaitsHeartbeat bool
	proofAfter      time.Time
}

// judgeNode applies the proof-of-life rule to one node's pods, for the target
// revision. It reads only the caches, so a restarted controller judges every
// node exactly as its predecessor did:
//   - a node running a new pod is in flight until health.Judge says the pod
//     settled AND the node sent a heartbeat after it settled (a node the new
//     version cut off from the API server never does);
//   - an in-flight node whose Ready condition is not True has failed, as has
//     one whose pod health.Judge fails (crash loop at once, not available by
//     the deadline after the pod's creation);
//   - a NotReady node not in flight is skipped.
func (c *Controller) judgeNode(name string, np nodePods, minReadySeconds int32, deadline time.Duration, now time.Time) nodeVerdict {
	node, err := c.nodeLister.Get(name)
	if err != nil {
		return nodeVerdict{state: nodeSkipped} // gone from the cache: nothing to upgrade
	}
	ready := health.NodeReady(node)
	switch {
	case np.newPod != nil:
		// A new pod exists: in flight, settled or failed.
		v := health.Judge(np.newPod, np.newPod.CreationTimestamp.Time, minReadySeconds, deadline, now)
		var settled time.Time
		if v.State == health.Settled && np.oldPod == nil && !np.several {
			if settled = settledAt(np.newPod, minReadySeconds); lastHeartbeat(node, c.leaseRenewTime(name)).After(settled) {
				if !ready {
					return nodeVerdict{state: nodeSkipped} // offline after proving itself: not the version's fault
				}
				return nodeVerdict{state: nodeSettled}
			}
		}
		if !ready {
			return nodeVerdict{state: nodeFailed, why: fmt.Sprintf("NotReady after the upgrade (Ready=%s)", readyStatus(node))}
		}
		if v.State == health.Failed {
			return nodeVerdict{state: nodeFailed, why: fmt.Sprintf("%s: %s", v.Reason, v.Message)}
		}
		return nodeVerdict{state: nodeInFlight, recheck: v.Recheck, awaitsHeartbeat: v.State == health.Settled, proofAfter: settled}
	case !ready:
		// Untouched, or its pod is terminating on a node that cannot confirm
		// it: skipped, as the native controller cannot skip it.
		return nodeVerdict{state: nodeSkipped}
	case np.oldPod == nil:
		// Ready, only a terminating pod: its replacement is on the way.
		return nodeVerdict{state: nodeInFlight}
	default:
		// Ready, an old pod: a candidate if available.
		if ok, _ := health.PodAvailable(np.oldPod, minReadySeconds, now); ok {
			return nodeVerdict{state: nodeOld}
		}
		return nodeVerdict{state: nodeOldDown}
	}
}

// settledAt is when a ready pod's ContainersReady has held for
// minReadySeconds.
func settledAt(pod *corev1.Pod, minReadySeconds int32) time.Time {
	c := podcondition.Get(&pod.Status, corev1.ContainersReady)
	if c == nil {
		return time.Time{}
	}
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
}

// lastHeartbeat is the node's latest sign of life: its Lease's renewTime or
// its Ready condition's lastHeartbeatTime (nodes without leases), the later.
func lastHeartbeat(node *corev1.Node, leaseRenew time.Time) time.Time {
	hb := leaseRenew
	if c := health.NodeCondition(node, corev1.NodeReady); c != nil && c.LastHeartbeatTime.After(hb) {
		hb = c.LastHeartbeatTime.Time
	}
	return hb
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if c := health.NodeCondition(node, corev1.NodeReady); c != nil {
		return c.Status
	}
	return "missing"
}

// leaseRenewTime is the renewTime of the node's Lease, zero without one. It
// reads the informer's store, not a lister: a lister builds a NotFound error
// for every node without a Lease, on every node of every sync.
func (c *Controller) leaseRenewTime(node string) time.Time {
	obj, ok, err := c.leases.GetByKey(corev1.NamespaceNodeLease + "/" + node)
	if err != nil || !ok {
		return time.Time{}
	}
	lease, isLease := obj.(*coordinationv1.Lease)
	if !isLease || lease.Spec.RenewTime == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Time
}

// heartbeatWaiters remembers which DaemonSets wait for a heartbeat from which
// nodes, and from when on a heartbeat proves the node alive, so that a
// heartbeat (a node status or Lease update, thousands a minute on a large
// cluster) syncs only the DaemonSets it settles: not those of other nodes,
// nor for one sent before the new pod settled (timestamps in whole seconds
// make that common: a heartbeat in the second the pod settled proves
// nothing).
type heartbeatWaiters struct {
	mu     sync.Mutex
	byKey  map[string]map[string]time.Time // key → node → proof after
	byNode map[string]map[string]time.Time // node → key → proof after
}

func newHeartbeatWaiters() *heartbeatWaiters {
	return &heartbeatWaiters{byKey: map[string]map[string]time.Time{}, byNode: map[string]map[string]time.Time{}}
}

// set replaces the nodes the DaemonSet key waits on, each with the time after
// which a heartbeat settles it.
func (w *heartbeatWaiters) set(key string, nodes map[string]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if maps.EqualFunc(w.byKey[key], nodes, time.Time.Equal) {
		return // as most syncs find it: nothing to re-index
	}
	for node := range w.byKey[key] {
		if keys := w.byNode[node]; keys != nil {
			delete(keys, key)
			if len(keys) == 0 {
				delete(w.byNode, node)
			}
		}
	}
	if len(nodes) == 0 {
		delete(w.byKey, key)
		return
	}
	w.byKey[key] = nodes
	for node, after := range nodes {
		if w.byNode[node] == nil {
			w.byNode[node] = map[string]time.Time{}
		}
		w.byNode[node][key] = after
	}
}

// settledBy returns the DaemonSets that a heartbeat the node sent at sent
// settles.
func (w *heartbeatWaiters) settledBy(node string, sent time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for key, after := range w.byNode[node] {
		if sent.After(after) {
			keys = append(keys, key)
		}
	}
	return keys
}
