package controller

import (
	"sync"
	"time"

	"github.com/edgeota/edgeota/decision"
)

// Proof of life needs one heartbeat from each in-flight node after its new
// pod settled (or its agent's answer, see challenges.go), and nothing from
// the rest of the fleet. A kubelet's heartbeat is its Lease, renewed every
// 10 s; its Node status is written every 5 minutes. Watching every Lease
// would cost the controller an event per node every 10 s whether or not
// anything rolls (1,000 a second at 10,000 nodes), so the controller watches
// only the Leases of the nodes it waits on, one watch each (package leases;
// one of every Lease while it waits on a quarter of the fleet),
// and takes Node status heartbeats from the Node informer it needs anyway
// for readiness (nodes without Leases keep working that way).

// heartbeats remembers the latest heartbeat seen from each node, by either
// way, and which DaemonSets wait for a heartbeat from which nodes, so that a
// heartbeat syncs only the DaemonSets it settles: not those of other nodes,
// nor for one sent before the new pod settled (timestamps in whole seconds
// make that common: a heartbeat in the second the pod settled proves
// nothing).
type heartbeats struct {
	mu     sync.Mutex
	latest map[string]time.Time            // node → the last heartbeat seen
	byKey  map[string]map[string]time.Time // key → node → proof after
	byNode map[string]map[string]time.Time // node → key → proof after
	// reader follows the Leases of the nodes waited on.
	reader leaseFollower
}

// leaseFollower follows the Leases of the nodes it is told to
// (leases.Watcher).
type leaseFollower interface {
	Start(node string)
	Stop(node string)
}

func newHeartbeats(reader leaseFollower) *heartbeats {
	return &heartbeats{latest: map[string]time.Time{}, byKey: map[string]map[string]time.Time{},
		byNode: map[string]map[string]time.Time{}, reader: reader}
}

// seen is the last heartbeat seen from the node, zero if none.
func (h *heartbeats) seen(node string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest[node]
}

// awaits reports whether the DaemonSet key waits for a proof of life from
// the node.
func (h *heartbeats) awaits(key, node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.byKey[key][node]
	return ok
}

// observe records a heartbeat the node sent at sent and returns the
// DaemonSets it settles.
func (h *heartbeats) observe(node string, sent time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The last one seen, not the latest by its time: a node whose clock ran
	// ahead and was set back must not prove its next pods by a renewal
	// stamped in the future.
	h.latest[node] = sent
	var keys []string
	for key, after := range h.byNode[node] {
		if decision.ProvesAlive(sent, after) {
			keys = append(keys, key)
		}
	}
	return keys
}

// set replaces the nodes the DaemonSet key waits on, each with the time after
// which a heartbeat settles it, and has the Leases of exactly the nodes some
// DaemonSet waits on followed: a node no DaemonSet waits on any more stops
// being followed, a node waited on for the first time starts; the others go
// on as they were. It changes its own index in place: a sync calls it every time,
// with up to a wave's worth of nodes.
func (h *heartbeats) set(key string, nodes map[string]decision.Awaiting) {
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := h.byKey[key]
	for node := range mine {
		if _, still := nodes[node]; still {
			continue
		}
		delete(mine, node)
		keys := h.byNode[node]
		delete(keys, key)
		if len(keys) == 0 {
			delete(h.byNode, node)
			h.reader.Stop(node)
		}
	}
	for node, a := range nodes {
		after := a.After
		if cur, ok := mine[node]; ok && cur.Equal(after) {
			continue
		}
		if mine == nil {
			mine = make(map[string]time.Time, len(nodes))
			h.byKey[key] = mine
		}
		mine[node] = after
		if h.byNode[node] == nil {
			h.byNode[node] = map[string]time.Time{}
			h.reader.Start(node)
		}
		h.byNode[node][key] = after
	}
	if len(mine) == 0 {
		delete(h.byKey, key)
	}
}
