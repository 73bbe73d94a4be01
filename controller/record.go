package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeota/edgeota/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// The rollout record is the durable half of the failure brake. For the
// target revision of each DaemonSet it holds every node that failed, and
// every node whose old pod the controller is about to delete or deleted (an
// in-flight entry), so that a restarted controller or a new leader rebuilds
// exactly the same decisions from the cluster: the count of failures is
// exact however many nodes fail, and a node whose replacement never comes
// keeps its share of the budget and fails at the same deadline.
//
// It lives in ConfigMaps of the controller's own namespace (--record-namespace),
// one key per node, at most recordShardBytes per ConfigMap: a namespaced Role
// is all the controller needs, and it can read no one else's ConfigMaps. An
// owner reference cannot point across namespaces, so the controller deletes
// the records itself: those of older revisions when the target moves, all of
// a DaemonSet's when it is deleted, and, at start, those of DaemonSets that
// no longer exist.
const (
	// RecordLabel marks a rollout record ConfigMap; its value is the
	// DaemonSet's UID.
	RecordLabel = "edgeota.io/rollout-record"
	// recordRevisionLabel and recordHashLabel name the revision a record is
	// about (a rollback reuses a hash under a new number).
	recordRevisionLabel = "edgeota.io/revision-number"
	recordHashLabel     = "edgeota.io/revision-hash"
	// recordDaemonSetAnnotation names the DaemonSet, for people.
	recordDaemonSetAnnotation = "edgeota.io/daemonset"
	// recordShardBytes bounds the data of one record ConfigMap, well under
	// the API's 1 MiB: 10,000 failed nodes with 253-character names and
	// reasons take about 6 MB, in eight ConfigMaps.
	recordShardBytes = 800 << 10
	// maxRecordedReason bounds the reason kept for a failed node, enough
	// for a scheduler's message; the node's name is always kept whole.
	maxRecordedReason = 400
)

// entryState is what a record entry says of its node.
type entryState string

const (
	// entryFailed: the node failed for the revision. It stands, and holds
	// the budget, even if the node recovers.
	entryFailed entryState = "failed"
	// entryInFlight: the controller deletes, or deleted, the node's old pod
	// (or, for OTA, saw an offered one terminate). Until the node runs a
	// pod of the revision it is in flight, and fails at the deadline.
	entryInFlight entryState = "inFlight"
)

// recordEntry is one node's entry: the value, as JSON, under the node's name
// in a record ConfigMap's data.
type recordEntry struct {
	State entryState `json:"state"`
	// Reason says why a failed node failed.
	Reason string `json:"reason,omitempty"`
	// At is when a failed node failed.
	At *metav1.Time `json:"at,omitempty"`
	// Pod is, in flight, the UID of the old pod deleted.
	Pod types.UID `json:"pod,omitempty"`
	// Since is, in flight, when the deletion was issued (or the pod was
	// first seen terminating, or the node first seen without a pod): the
	// start of the deadline while no replacement exists. Nil: the deletion
	// is about to be issued (an entry written ahead, see writeIntents); the
	// old pod, alive and not terminating, is then still a candidate.
	Since *metav1.Time `json:"since,omitempty"`
}

func (e recordEntry) failed() bool { return e.State == entryFailed }

// rolloutRecord is the in-memory copy of one DaemonSet's record for its
// target revision, and what of it is not written yet. It is the truth while
// this process leads; rebuilt from the record ConfigMaps at start.
type rolloutRecord struct {
	mu      sync.Mutex
	dsUID   types.UID
	dsKey   string
	rev     revision
	entries map[string]recordEntry
	failed  int
	shardOf map[string]int
	shards  []recordShard
	// dirty holds the nodes whose entry changed since the last write
	// (absent from entries: to be removed); urgent those of them that must
	// be written before the controller acts again (see setUrgent).
	dirty, urgent map[string]bool
	// writing serialises writes: one at a time per record.
	writing sync.Mutex
	// shown and shownWhy cache display's answer for shown.Count failures.
	shown    rollout.FailedNodes
	shownWhy string
}

// recordShard is one record ConfigMap.
type recordShard struct {
	name    string
	created bool
	bytes   int
}

func newRolloutRecord(dsUID types.UID, dsKey string, rev revision) *rolloutRecord {
	return &rolloutRecord{dsUID: dsUID, dsKey: dsKey, rev: rev, entries: map[string]recordEntry{},
		shardOf: map[string]int{}, dirty: map[string]bool{}, urgent: map[string]bool{}}
}

// recordName is the name of shard i of a DaemonSet's record of a revision.
func recordName(dsUID types.UID, rev revision, shard int) string {
	return fmt.Sprintf("edgeota-rollout-%s-%d-%d", dsUID, rev.number, shard)
}

// entry returns the node's entry.
func (r *rolloutRecord) entry(node string) (recordEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[node]
	return e, ok
}

// failedCount is how many nodes failed: exact, however many.
func (r *rolloutRecord) failedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// set records the node's entry, to be written.
func (r *rolloutRecord) set(node string, e recordEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(node, e)
}

func (r *rolloutRecord) setLocked(node string, e recordEntry) {
	old, had := r.entries[node]
	if had && old.failed() {
		return // a failure stands
	}
	if e.failed() {
		r.failed++
		if len(e.Reason) > maxRecordedReason {
			e.Reason = e.Reason[:maxRecordedReason] + "…"
		}
	}
	r.entries[node] = e
	r.dirty[node] = true
}

// setUrgent records the node's entry, to be written before the controller
// deletes or offers anything more: a failure (a restarted controller must
// halt where this one would), or a node taken in flight by someone else's
// deletion (it must hold its budget after a restart).
func (r *rolloutRecord) setUrgent(node string, e recordEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(node, e)
	r.urgent[node] = r.dirty[node]
}

// clear removes the node's in-flight entry, to be written; failures stand.
func (r *rolloutRecord) clear(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[node]; ok && !e.failed() {
		delete(r.entries, node)
		r.dirty[node] = true
	}
}

// pending reports whether anything is not written yet, and whether any of
// it is urgent (setUrgent).
func (r *rolloutRecord) pending() (any, urgent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.dirty) > 0, len(r.urgent) > 0
}

// written reports whether the node's entry is as written.
func (r *rolloutRecord) written(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.dirty[node]
}

// failedNodes returns the failed nodes in name order with why.
func (r *rolloutRecord) failedNodes() (names []string, why map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	why = make(map[string]string, r.failed)
	for node, e := range r.entries {
		if e.failed() {
			names = append(names, node)
			why[node] = e.Reason
		}
	}
	slices.Sort(names)
	return names, why
}

// display is the record as people read it: the failures as the rollout
// status shows them (the count, and the first recordedFailedNodes in name
// order with why), and a description naming them for an event. Computed
// once per count of failures: a sync builds the status every time.
func (r *rolloutRecord) display() (rollout.FailedNodes, string) {
	r.mu.Lock()
	count := r.failed
	if r.shown.Count == count { // failures only ever grow: the same count is the same set
		defer r.mu.Unlock()
		return r.shown, r.shownWhy
	}
	r.mu.Unlock()
	names, why := r.failedNodes()
	shown := rollout.FailedNodes{Count: len(names)}
	var b strings.Builder
	for _, n := range names[:min(len(names), rollout.ShownNodes)] {
		shown.Nodes = append(shown.Nodes, n)
		if why[n] != "" {
			if shown.Reasons == nil {
				shown.Reasons = map[string]string{}
			}
			shown.Reasons[n] = why[n]
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n)
		if why[n] != "" {
			b.WriteString(" (" + why[n] + ")")
		}
	}
	if more := len(names) - len(shown.Nodes); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shown, r.shownWhy = shown, b.String()
	return shown, r.shownWhy
}

// loadRecord rebuilds the record of the DaemonSet's target revision from the
// record ConfigMaps in the cache, and returns the names of those about other
// revisions, to be deleted. A record that does not parse is a fault of
// whoever wrote it; its entries are skipped and it is rewritten. Without a
// record, the failures an older edgeota kept in the rollout status (prev) are
// taken over.
func (c *Controller) loadRecord(ds *appsv1.DaemonSet, key string, rev revision, prev *rollout.Status) (*rolloutRecord, []string) {
	r := newRolloutRecord(ds.UID, key, rev)
	var stale []string
	objs, _ := c.recordIndexer.ByIndex(byRecordOwner, string(ds.UID))
	type shard struct {
		i  int
		cm *corev1.ConfigMap
	}
	var mine []shard
	for _, obj := range objs {
		cm := obj.(*corev1.ConfigMap)
		i, ok := recordShardIndex(cm.Name, ds.UID, rev)
		if !ok || cm.Labels[recordHashLabel] != rev.hash {
			stale = append(stale, cm.Name)
			continue
		}
		mine = append(mine, shard{i, cm})
	}
	slices.SortFunc(mine, func(a, b shard) int { return a.i - b.i })
	for _, s := range mine {
		for len(r.shards) <= s.i {
			r.shards = append(r.shards, recordShard{name: recordName(ds.UID, rev, len(r.shards))})
		}
		r.shards[s.i].created = true
		for node, value := range s.cm.Data {
			var e recordEntry
			if json.Unmarshal([]byte(value), &e) != nil || (e.State != entryFailed && e.State != entryInFlight) {
				c.logger.Info("Ignoring an unreadable rollout record entry", "configmap", klog.KObj(s.cm), "node", node)
				r.dirty[node] = true // rewritten (removed) at the next write
				r.shardOf[node] = s.i
				continue
			}
			r.entries[node] = e
			r.shardOf[node] = s.i
			r.shards[s.i].bytes += len(node) + len(value)
			if e.failed() {
				r.failed++
			}
		}
	}
	if len(mine) == 0 && prev != nil && prev.Revision == rev.number && prev.Hash == rev.hash {
		for _, node := range prev.Failed.Nodes {
			r.setLocked(node, recordEntry{State: entryFailed, Reason: prev.Failed.Reasons[node]})
			r.urgent[node] = true
		}
	}
	return r, stale
}

// recordShardIndex returns the shard number of a record ConfigMap's name if
// it is one of the DaemonSet's record of rev.
func recordShardIndex(name string, dsUID types.UID, rev revision) (int, bool) {
	prefix := strings.TrimSuffix(recordName(dsUID, rev, 0), "0")
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0
}

// writeRecord writes what changed in the record: a merge patch of the
// changed keys per record ConfigMap (creating it the first time), so that a
// write costs what changed, not the size of the record. On failure what was
// not written stays to be written, and the error says so.
func (c *Controller) writeRecord(ctx context.Context, r *rolloutRecord) error {
	r.writing.Lock()
	defer r.writing.Unlock()
	r.mu.Lock()
	if len(r.dirty) == 0 {
		r.mu.Unlock()
		return nil
	}
	// What to write, per shard; nil removes the key.
	changes := map[int]map[string]*string{}
	snapshot := map[string]*string{}
	for node := range r.dirty {
		var value *string
		if e, ok := r.entries[node]; ok {
			data, err := json.Marshal(e)
			if err != nil {
				r.mu.Unlock()
				return fmt.Errorf("encoding the rollout record entry of node %s: %w", node, err)
			}
			value = new(string(data))
		}
		i, placed := r.shardOf[node]
		if !placed {
			if value == nil {
				delete(r.dirty, node) // never written: nothing to remove
				delete(r.urgent, node)
				continue
			}
			i = r.placeLocked(len(node) + len(*value))
			r.shardOf[node] = i
		}
		if changes[i] == nil {
			changes[i] = map[string]*string{}
		}
		changes[i][node] = value
		snapshot[node] = value
	}
	shards := slices.Clone(r.shards)
	r.mu.Unlock()

	var errs []error
	for _, i := range slices.Sorted(maps.Keys(changes)) {
		if err := c.writeShard(ctx, r, shards[i], changes[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.shards[i].created = true
		for node, value := range changes[i] {
			// Written as it stands unless it changed meanwhile.
			if cur, ok := r.entries[node]; (value == nil && !ok) || (value != nil && ok && entryJSON(cur) == *value) {
				delete(r.dirty, node)
				delete(r.urgent, node)
			}
			if value == nil && !r.dirty[node] {
				delete(r.shardOf, node)
			}
		}
		r.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing the rollout record of daemonset %s: %w", r.dsKey, errs[0])
	}
	return nil
}

func entryJSON(e recordEntry) string {
	data, _ := json.Marshal(e)
	return string(data)
}

// placeLocked returns the shard a new entry of size bytes goes to: the last
// one while it has room, else a new one.
func (r *rolloutRecord) placeLocked(size int) int {
	if n := len(r.shards); n > 0 && r.shards[n-1].bytes+size <= recordShardBytes {
		r.shards[n-1].bytes += size
		return n - 1
	}
	r.shards = append(r.shards, recordShard{name: recordName(r.dsUID, r.rev, len(r.shards)), bytes: size})
	return len(r.shards) - 1
}

// writeShard creates a record ConfigMap with the changes, or merges them
// into it.
func (c *Controller) writeShard(ctx context.Context, r *rolloutRecord, s recordShard, changes map[string]*string) error {
	cms := c.client.CoreV1().ConfigMaps(c.recordNamespace)
	if !s.created {
		data := map[string]string{}
		for node, value := range changes {
			if value != nil {
				data[node] = *value
			}
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: s.name, Namespace: c.recordNamespace,
				Labels: map[string]string{RecordLabel: string(r.dsUID), recordHashLabel: r.rev.hash,
					recordRevisionLabel: strconv.FormatInt(r.rev.number, 10)},
				Annotations: map[string]string{recordDaemonSetAnnotation: r.dsKey},
			},
			Data: data,
		}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
		if err == nil {
			c.metrics.recordWritten()
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating rollout record %s/%s: %w", c.recordNamespace, s.name, err)
		}
		// Created by an earlier write this process does not remember (its
		// predecessor's, or one whose answer was lost): merge into it.
	}
	patch, err := json.Marshal(map[string]any{"data": changes})
	if err != nil {
		return fmt.Errorf("encoding the rollout record patch: %w", err)
	}
	if _, err := cms.Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted behind our back: create it again at the next write,
			// with everything it held.
			r.mu.Lock()
			for i := range r.shards {
				if r.shards[i].name == s.name {
					r.shards[i].created = false
				}
			}
			for node, i := range r.shardOf {
				if r.shards[i].name == s.name {
					r.dirty[node] = true
				}
			}
			r.mu.Unlock()
		}
		return fmt.Errorf("writing rollout record %s/%s: %w", c.recordNamespace, s.name, err)
	}
	c.metrics.recordWritten()
	return nil
}

// deleteRecords deletes the named record ConfigMaps, in the background: a
// leftover is deleted at the next chance, and harms nothing meanwhile.
func (c *Controller) deleteRecords(ctx context.Context, key string, names []string) {
	if len(names) == 0 {
		return
	}
	c.inBackground(ctx, key, func() error {
		var errs []error
		for _, name := range names {
			err := c.client.CoreV1().ConfigMaps(c.recordNamespace).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting rollout record %s/%s: %w", c.recordNamespace, name, err))
			}
		}
		if len(errs) > 0 {
			return errs[0]
		}
		return nil
	})
}

// sweepRecords deletes the records of DaemonSets that no longer exist (deleted
// while no controller ran), once the caches have synced.
func (c *Controller) sweepRecords(ctx context.Context) {
	live := map[string]bool{}
	for _, obj := range c.dsIndexer.List() {
		live[string(obj.(*appsv1.DaemonSet).UID)] = true
	}
	var stale []string
	for _, obj := range c.recordIndexer.List() {
		cm := obj.(*corev1.ConfigMap)
		if uid := cm.Labels[RecordLabel]; uid != "" && !live[uid] {
			stale = append(stale, cm.Name)
		}
	}
	if len(stale) > 0 {
		klog.FromContext(ctx).Info("Deleting the rollout records of DaemonSets that no longer exist", "count", len(stale))
		c.deleteRecords(ctx, "", stale)
	}
}

// recordsOf returns the names of every record ConfigMap of a DaemonSet.
func (c *Controller) recordsOf(dsUID types.UID) []string {
	objs, _ := c.recordIndexer.ByIndex(byRecordOwner, string(dsUID))
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		names = append(names, obj.(*corev1.ConfigMap).Name)
	}
	return names
}

// sinceOf is the start of a pod-less in-flight node's deadline: when the
// deletion was issued, as recorded, or else when the old pod's termination
// began by the API server (its deletionTimestamp minus its grace period).
func sinceOf(e recordEntry, terminating *corev1.Pod) (time.Time, bool) {
	if e.Since != nil {
		return e.Since.Time, true
	}
	if terminating != nil && terminating.DeletionTimestamp != nil {
		grace := int64(0)
		if terminating.DeletionGracePeriodSeconds != nil {
			grace = *terminating.DeletionGracePeriodSeconds
		}
		return terminating.DeletionTimestamp.Add(-time.Duration(grace) * time.Second), true
	}
	return time.Time{}, false
}
