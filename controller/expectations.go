package controller

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationsTTL bounds how long a DaemonSet waits for deletions it issued to
// show up in the pod informer, so that a lost watch event cannot block its
// rollout forever.
const expectationsTTL = 5 * time.Minute

// expectations remembers, per DaemonSet key, the pod deletions the controller
// issued but has not yet seen in its informer, and the nodes whose pod it
// deleted and whose replacement it has not yet seen. Until both are observed
// the cache under-counts unavailable nodes, so a sync counts those nodes as
// in flight from here instead of from the cache.
type expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	byKey map[string]*expectation
}

type expectation struct {
	pending   map[types.UID]string // pod UID → node, deletions not yet observed
	replacing map[string]time.Time // node → when its replacement stops being awaited
	deadline  time.Time            // when pending stops being awaited
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, byKey: map[string]*expectation{}}
}

// expectDeletions records deletions about to be issued (pod UID → node name);
// call it before deleting, so that a fast informer cannot observe a deletion
// that is not yet expected.
func (e *expectations) expectDeletions(key string, pods map[types.UID]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.get(key)
	for uid, node := range pods {
		x.pending[uid] = node
	}
	x.deadline = e.now().Add(expectationsTTL)
}

// deletionObserved records that a pod is gone, or that its deletion failed and
// will not be observed; its node now awaits a replacement when replace is set.
func (e *expectations) deletionObserved(key string, uid types.UID, replace bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.byKey[key]
	if !ok {
		return
	}
	node, ok := x.pending[uid]
	if !ok {
		return
	}
	delete(x.pending, uid)
	if replace {
		x.replacing[node] = e.now().Add(expectationsTTL)
	}
}

// pendingDeletions returns the deletions issued for key and not yet observed
// (pod UID → node), none once the wait for them timed out. The map is a copy.
func (e *expectations) pendingDeletions(key string) map[types.UID]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.byKey[key]
	if !ok || len(x.pending) == 0 || e.now().After(x.deadline) {
		return nil
	}
	return maps.Clone(x.pending)
}

// awaitingReplacement returns the nodes that lost a pod of key to a deletion
// and whose replacement has not been seen yet: between the old pod leaving the
// cache and the new one entering it, such a node has no pod to count.
func (e *expectations) awaitingReplacement(key string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.byKey[key]
	if !ok {
		return nil
	}
	now := e.now()
	var nodes []string
	for node, deadline := range x.replacing {
		if now.Before(deadline) {
			nodes = append(nodes, node)
		} else {
			delete(x.replacing, node)
		}
	}
	return nodes
}

// replaced records that the node runs a pod of key again.
func (e *expectations) replaced(key, node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.byKey[key]; ok {
		delete(x.replacing, node)
	}
}

// forget drops everything about key, when its DaemonSet is deleted.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

func (e *expectations) get(key string) *expectation {
	x, ok := e.byKey[key]
	if !ok {
		x = &expectation{pending: map[types.UID]string{}, replacing: map[string]time.Time{}}
		e.byKey[key] = x
	}
	return x
}
