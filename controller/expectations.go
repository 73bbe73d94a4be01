package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectations are what this process wrote or deleted and has not seen in
// its caches yet, as the native controllers' ControllerExpectations are
// (keyed here by object, as its UIDTrackingControllerExpectations): until a
// cache shows a write, the cache is stale about it, and the write is the
// truth.
//
// Invariant: an expectation is set BEFORE its write is sent, and a sync
// reads expectations, never the write's goroutine. So a write that outlives
// the sync that started it (writes go in the background, and the next sync
// of the same DaemonSet may run before the answer) is covered: the next
// sync sees the deletion as done (its node in flight, its budget spent) and
// the condition as written (not written twice), whether the answer came or
// not. An expectation ends when the cache shows the write's effect
// (observed), when the write fails (lowered at once: nothing changed), or
// after expectationTimeout (a lost watch event must not hold a node for
// ever).
type expectations struct {
	mu sync.Mutex
	// deleting are the old pods taken (deleted, or patched in place), by
	// DaemonSet and node.
	deleting map[string]map[string]deletion
	// writes are the status writes made on pods, by pod and kind: the
	// resourceVersion of the pod as cached when the write was decided.
	// Any later version of the pod shows the write (a pod's events arrive in
	// order), or a change that makes the next sync decide again.
	writes map[writeKey]string
	// statuses are the DaemonSets whose rollout status write is under way.
	statuses map[string]bool
}

// deletion is an old pod's take issued by this process: its deletion, or
// the patch of its images (patch), which the cache shows once the pod is up
// to date (or gone).
type deletion struct {
	pod   types.UID
	until time.Time
	patch bool
}

// writeKey names one kind of write on one pod.
type writeKey struct {
	pod  types.UID
	kind writeKind
}

// writeKind is what a status write on a pod sets.
type writeKind int

const (
	writeNeedUpgrade writeKind = iota // PodNeedUpgrade, with the offer
	writeImageReady                   // PodImageReady
	writeOffer                        // the offer alone (a held pod's hold limit)
	writeChallenge                    // the proof-of-life challenge
)

// expectationTimeout bounds the wait for a deletion's watch event.
const expectationTimeout = 5 * time.Minute

func newExpectations() *expectations {
	return &expectations{deleting: map[string]map[string]deletion{}, writes: map[writeKey]string{}, statuses: map[string]bool{}}
}

// expectDeletion notes that the node's old pod is about to be deleted, or
// patched in place (patch).
func (e *expectations) expectDeletion(key, node string, pod types.UID, patch bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.deleting[key]
	if m == nil {
		m = map[string]deletion{}
		e.deleting[key] = m
	}
	m[node] = deletion{pod: pod, until: now.Add(expectationTimeout), patch: patch}
}

// deletionFailed lowers the expectation of a deletion that was refused.
func (e *expectations) deletionFailed(key, node string, pod types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d, ok := e.deleting[key][node]; ok && d.pod == pod {
		delete(e.deleting[key], node)
	}
}

// deletingOn returns the pod being taken on the node, "" when none: an
// expectation the cache has met (the pod is terminating or gone, or shows
// the patch: observed tells) or that timed out is dropped.
func (e *expectations) deletingOn(key, node string, now time.Time, observed func(pod types.UID, patch bool) bool) types.UID {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.deleting[key][node]
	if !ok {
		return ""
	}
	if now.After(d.until) || observed(d.pod, d.patch) {
		delete(e.deleting[key], node)
		return ""
	}
	return d.pod
}

// deletingNodes returns the nodes with a deletion expected.
func (e *expectations) deletingNodes(key string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	nodes := make([]string, 0, len(e.deleting[key]))
	for n := range e.deleting[key] {
		nodes = append(nodes, n)
	}
	return nodes
}

// deletingOnNode reports whether the DaemonSet has a deletion expected on
// the node.
func (e *expectations) deletingOnNode(key, node string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.deleting[key][node]
	return ok
}

// deletes reports whether the deletion of the pod on the node is expected:
// sent, or about to be, by this sync or an earlier one, and not yet met.
func (e *expectations) deletes(key, node string, pod types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.deleting[key][node]
	return ok && d.pod == pod
}

// expectWrite notes that a write of kind is about to be made on the pod as
// cached at resourceVersion.
func (e *expectations) expectWrite(pod types.UID, kind writeKind, resourceVersion string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writes[writeKey{pod, kind}] = resourceVersion
}

// writeFailed lowers the expectation of a write that was refused.
func (e *expectations) writeFailed(pod types.UID, kind writeKind) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropWrite(writeKey{pod, kind})
}

// dropWrite drops one expected write (e.mu held). Emptied, the map is made
// anew: Go's maps keep their buckets, and a fresh controller writing a
// fleet's conditions at once would hold room for all of them for good.
func (e *expectations) dropWrite(k writeKey) {
	if _, ok := e.writes[k]; !ok {
		return
	}
	delete(e.writes, k)
	if len(e.writes) == 0 {
		e.writes = map[writeKey]string{}
	}
}

// pendingWrite reports whether a write of kind on the pod, cached at
// resourceVersion, is not in the cache yet; one the cache has moved past is
// dropped.
func (e *expectations) pendingWrite(pod types.UID, kind writeKind, resourceVersion string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := writeKey{pod, kind}
	rv, ok := e.writes[k]
	if ok && rv != resourceVersion {
		e.dropWrite(k)
		return false
	}
	return ok
}

// observed drops the writes expected of a pod that its cache now shows at
// resourceVersion, a state past the one they were made from, as
// pendingWrite would when next asked: an expectation a sync never asks
// about again (the pod carries what was written) would otherwise stay, and
// keep the record it was made from, for as long as the pod lives.
func (e *expectations) observed(pod types.UID, resourceVersion string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := writeNeedUpgrade; k <= writeChallenge; k++ {
		if rv, ok := e.writes[writeKey{pod, k}]; ok && rv != resourceVersion {
			e.dropWrite(writeKey{pod, k})
		}
	}
}

// forgetPod drops what is expected of a pod gone or terminating.
func (e *expectations) forgetPod(pod types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := writeNeedUpgrade; k <= writeChallenge; k++ {
		e.dropWrite(writeKey{pod, k})
	}
}

// expectStatus claims the DaemonSet's rollout status write; false when one
// is under way already (two must never race to land out of order).
func (e *expectations) expectStatus(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.statuses[key] {
		return false
	}
	e.statuses[key] = true
	return true
}

// statusDone ends the claim.
func (e *expectations) statusDone(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.statuses, key)
}

// forget drops everything about a DaemonSet.
func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.deleting, key)
	delete(e.statuses, key)
}
