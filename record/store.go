package record

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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/rollout"
)

const (
	// Label marks a rollout record ConfigMap; its value is the DaemonSet's
	// UID. The controller's informer of its records selects by it.
	Label = "edgeota.io/rollout-record"
	// revisionLabel and hashLabel name the revision a record is about (a
	// rollback reuses a hash under a new number).
	revisionLabel = "edgeota.io/revision-number"
	hashLabel     = "edgeota.io/revision-hash"
	// daemonSetAnnotation names the DaemonSet, for people.
	daemonSetAnnotation = "edgeota.io/daemonset"
	// metaKey holds decision.Meta in the first active ConfigMap: not a
	// node's name (node names have no underscore).
	metaKey = "_meta"
	// shardBytes bounds the data of one record ConfigMap, well under the
	// API's 1 MiB: 10,000 failed nodes with 253-character names and
	// reasons take about 6 MB, in eight ConfigMaps.
	shardBytes = 800 << 10
	// ProgressInterval is the least time between two writes of one progress
	// ConfigMap (offered and settled entries).
	ProgressInterval = 3 * time.Second
)

// class is where an entry is kept: active (failed, in flight) or progress
// (offered, settled).
type class int

const (
	active class = iota
	progress
)

func classOf(e decision.Entry) class {
	if e.Stage == decision.StageOffered || e.Stage == decision.StageSettled {
		return progress
	}
	return active
}

// Store reads and writes the rollout records of one namespace.
type Store struct {
	client    kube.Interface
	namespace string
	indexer   cache.Indexer
	// FieldManager names the controller in managedFields.
	fieldManager string
	// written counts each ConfigMap written and the size of its data after
	// the write: what a record costs etcd and the watchers.
	written func(bytes int)
	now     func() time.Time
	logger  klog.Logger
	// foreign is told the DaemonSet key of a record found deleted or changed
	// by someone else, which is being written again.
	foreign func(dsKey string)

	mu      sync.Mutex
	records map[types.UID]*Record
	// wholeWrites serialises the writes of whole ConfigMaps (Write).
	wholeWrites sync.Mutex
}

// NewStore returns the store of the records in namespace, found through
// indexer (an informer of the ConfigMaps labelled Label there, through
// Transform, indexed by ByOwner), read and written through client.
// written is told each write's size; foreign the DaemonSet key of a record
// someone else deleted or changed (see Observe).
func NewStore(client kube.Interface, namespace string, indexer cache.Indexer, fieldManager string,
	written func(bytes int), foreign func(dsKey string), now func() time.Time, logger klog.Logger) *Store {
	if written == nil {
		written = func(int) {}
	}
	if foreign == nil {
		foreign = func(string) {}
	}
	return &Store{client: client, namespace: namespace, indexer: indexer, fieldManager: fieldManager, written: written,
		foreign: foreign, now: now, logger: logger, records: map[types.UID]*Record{}}
}

// ByOwner is the index of record ConfigMaps by their DaemonSet's UID.
const ByOwner = "recordOwner"

// IndexByOwner indexes record ConfigMaps (Cached) by the UID of their
// DaemonSet.
func IndexByOwner(obj any) ([]string, error) {
	if cm, ok := obj.(*Cached); ok {
		if uid := cm.Labels[Label]; uid != "" {
			return []string{uid}, nil
		}
	}
	return nil, nil
}

// Namespace is where the records live.
func (s *Store) Namespace() string { return s.namespace }

// Record is one DaemonSet's record of its target revision: its Ledger, and
// what of it the cluster holds.
type Record struct {
	// Ledger is the record as the controller holds it.
	Ledger *decision.Ledger
	// Adopt says no meta was found: the record is new to this controller
	// (its first sight of the revision, or an older edgeota's record).
	Adopt bool
	// Lost counts the failures the rollout status published that this load
	// did not find: the caller says so in a Warning.
	Lost int

	dsUID  types.UID
	dsKey  string
	target decision.Target

	mu     sync.Mutex
	shards []*shard
	placed map[string]*shard
	// moving are nodes whose entry moved to a progress ConfigMap, with the
	// active one their stale key is removed from once the move is written.
	moving map[string]*shard
	urgent bool
	// writing serialises writes: one at a time per record.
	writing sync.Mutex
}

// shard is one record ConfigMap.
type shard struct {
	name    string
	class   class
	index   int
	created bool
	bytes   int
	// nodes are the keys placed here (metaKey included), whose value the
	// ledger holds.
	nodes map[string]bool
	// stored is what the ConfigMap holds, as hashes of its values, after
	// the last write's answer or the last event seen; storedRV that state's
	// resourceVersion.
	stored   map[string]uint64
	storedRV string
	// dirty are the keys whose value may differ from what is stored.
	dirty map[string]bool
	// foreign: the ConfigMap holds content someone else wrote, known only by
	// its digest; the next write replaces its data whole.
	foreign   bool
	lastWrite time.Time
	// writing: a write is under way; its answer tells what the ConfigMap
	// holds, so events meanwhile are left to it.
	writing bool
}

func newShard(dsUID types.UID, target decision.Target, c class, i int) *shard {
	return &shard{name: shardName(dsUID, target, c, i), class: c, index: i, nodes: map[string]bool{},
		stored: map[string]uint64{}, dirty: map[string]bool{}}
}

// shardName is the name of a record ConfigMap. Active ones keep the names an
// older edgeota gave its records (which held failed and in-flight entries
// only), so that they are read back.
func shardName(dsUID types.UID, target decision.Target, c class, i int) string {
	p := ""
	if c == progress {
		p = "p"
	}
	return fmt.Sprintf("edgeota-rollout-%s-%d-%s%d", dsUID, target.Number, p, i)
}

// parseShardName returns the class and index of a record ConfigMap's name if
// it is one of the DaemonSet's record of target.
func parseShardName(name string, dsUID types.UID, target decision.Target) (class, int, bool) {
	rest, ok := strings.CutPrefix(name, fmt.Sprintf("edgeota-rollout-%s-%d-", dsUID, target.Number))
	if !ok {
		return 0, 0, false
	}
	c := active
	if r, isProgress := strings.CutPrefix(rest, "p"); isProgress {
		c, rest = progress, r
	}
	i, err := strconv.Atoi(rest)
	return c, i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}

// Load rebuilds the record of the DaemonSet's target from its record
// ConfigMaps as the API server holds them (the cache keeps no data), and
// returns the names of those about other revisions, to be deleted. An
// entry that does not parse is a fault of whoever wrote it: it is skipped
// and removed at the next write. published
// is the rollout status the controller last published: a record holding
// fewer failures of the same revision than it shows lost some, and those
// the status names are taken over, the rest counted as lost. A record
// without meta is new: its meta is set (now, written before anything else)
// and Adopt is set.
func (s *Store) Load(ctx context.Context, dsUID types.UID, dsKey string, target decision.Target, published *rollout.Status) (*Record, []string, error) {
	list, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{Label: string(dsUID)}).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the rollout record of daemonset %s: %w", dsKey, err)
	}
	r := &Record{dsUID: dsUID, dsKey: dsKey, target: target, placed: map[string]*shard{}, moving: map[string]*shard{}}
	var stale []string
	entries := map[string]decision.Entry{}
	var meta *decision.Meta
	type found struct {
		c     class
		i     int
		value string
	}
	where := map[string]found{}
	for i := range list.Items {
		cm := &list.Items[i]
		c, i, ok := parseShardName(cm.Name, dsUID, target)
		if !ok || cm.Labels[hashLabel] != target.Hash {
			stale = append(stale, cm.Name)
			continue
		}
		sh := r.shard(c, i)
		sh.created, sh.storedRV = true, cm.ResourceVersion
		for key, value := range cm.Data {
			sh.stored[key] = hashOf(value)
			sh.bytes += len(key) + len(value)
			if key == metaKey {
				var m decision.Meta
				if json.Unmarshal([]byte(value), &m) == nil && c == active && i == 0 {
					meta = &m
					sh.nodes[key] = true
				} else {
					sh.dirty[key] = true
				}
				continue
			}
			var e decision.Entry
			if json.Unmarshal([]byte(value), &e) != nil || !e.Valid() || classOf(e) != c {
				s.logger.Info("Ignoring an unreadable rollout record entry", "configmap", klog.KObj(cm), "node", key)
				sh.dirty[key] = true // removed at the next write
				continue
			}
			if prev, ok := entries[key]; ok {
				// Two entries of one node (a move not finished): the later
				// stage wins; the other is removed at the next write.
				loser := where[key]
				if e.Stage.Rank() <= prev.Stage.Rank() {
					loser = found{c, i, value}
				} else {
					entries[key], where[key] = e, found{c, i, value}
				}
				r.shard(loser.c, loser.i).dirty[key] = true
				continue
			}
			entries[key], where[key] = e, found{c, i, value}
		}
	}
	for node, f := range where {
		sh := r.shard(f.c, f.i)
		sh.nodes[node] = true
		r.placed[node] = sh
	}
	if meta == nil {
		r.Adopt = true
		meta = &decision.Meta{TargetSince: metav1.Time{Time: s.now().Truncate(time.Second)}}
	}
	r.Ledger = decision.NewLedger(entries, *meta)
	if r.Adopt {
		r.place(metaKey, active)
		r.urgent = true
	}
	r.takeOverPublished(published)
	r.Ledger.Changed = r.changed
	s.mu.Lock()
	s.records[dsUID] = r
	s.mu.Unlock()
	return r, stale, nil
}

// takeOverPublished keeps the failures the rollout status published for the
// same revision and the record lost: those it names, as failed, and a count
// of the rest.
func (r *Record) takeOverPublished(published *rollout.Status) {
	if published == nil || published.Revision != r.target.Number || published.Hash != r.target.Hash {
		return
	}
	have := r.Ledger.Failed()
	if published.Failed.Count <= have {
		return
	}
	r.Lost = published.Failed.Count - have
	for _, node := range published.Failed.Nodes {
		if e, ok := r.Ledger.Entry(node); !ok || e.Stage != decision.StageFailed {
			r.Ledger.Set(node, decision.Entry{Stage: decision.StageFailed, Reason: published.Failed.Reasons[node]}, true)
			r.changed(node, true)
		}
	}
	if have = r.Ledger.Failed(); published.Failed.Count > have {
		m := r.Ledger.Meta()
		m.LostFailures += published.Failed.Count - have
		r.Ledger.SetMeta(m, true)
		r.changed("", true)
	}
}

// shard returns the record's ConfigMap of class c and index i, adding it
// (and those before it) when missing.
func (r *Record) shard(c class, i int) *shard {
	for _, sh := range r.shards {
		if sh.class == c && sh.index == i {
			return sh
		}
	}
	sh := newShard(r.dsUID, r.target, c, i)
	r.shards = append(r.shards, sh)
	slices.SortFunc(r.shards, func(a, b *shard) int {
		if a.class != b.class {
			return int(a.class) - int(b.class)
		}
		return a.index - b.index
	})
	return sh
}

// place puts key in a ConfigMap of class c: the last one while it has room,
// else a new one; the meta always in the first active one. Called with r.mu
// held (or before the record is shared).
func (r *Record) place(key string, c class) *shard {
	if key == metaKey {
		sh := r.shard(active, 0)
		sh.nodes[key], sh.dirty[key] = true, true
		return sh
	}
	size := len(key)
	if v, err := r.value(key); err == nil {
		size += len(v)
	}
	var last *shard
	n := 0
	for _, sh := range r.shards {
		if sh.class == c {
			last, n = sh, n+1
		}
	}
	if last == nil || last.bytes+size > shardBytes {
		last = r.shard(c, n)
	}
	last.bytes += size
	last.nodes[key], last.dirty[key] = true, true
	r.placed[key] = last
	return last
}

// changed is the ledger's hook: the node's entry (the meta for "") changed.
func (r *Record) changed(node string, urgent bool) {
	key := node
	if node == "" {
		key = metaKey
	}
	var (
		e  decision.Entry
		ok bool
	)
	if node != "" {
		e, ok = r.Ledger.Entry(node)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if urgent {
		r.urgent = true
	}
	if node == "" {
		r.place(metaKey, active)
		return
	}
	cur := r.placed[key]
	switch {
	case !ok && cur == nil:
		// Never placed: nothing to remove.
		if m := r.moving[key]; m != nil {
			m.dirty[key] = true
			delete(r.moving, key)
		}
	case !ok:
		delete(cur.nodes, key)
		cur.dirty[key] = true
		delete(r.placed, key)
	case cur != nil && cur.class == classOf(e):
		cur.dirty[key] = true
	default:
		if cur != nil {
			delete(cur.nodes, key)
			if cur.class == active {
				// Removed from the active ConfigMap once the progress one
				// holds it.
				r.moving[key] = cur
			} else {
				cur.dirty[key] = true
			}
		}
		if m := r.moving[key]; m != nil && classOf(e) == active {
			// Back where it was: the same key is rewritten in place.
			delete(r.moving, key)
			m.nodes[key], m.dirty[key] = true, true
			r.placed[key] = m
			return
		}
		r.place(key, classOf(e))
	}
}

// Target is the revision the record is about.
func (r *Record) Target() decision.Target { return r.target }

// Pending reports whether anything is not written yet, and whether any of it
// must be written before the controller acts again.
func (r *Record) Pending() (any, urgent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sh := range r.shards {
		if len(sh.dirty) > 0 {
			return true, r.urgent
		}
	}
	return len(r.moving) > 0, r.urgent
}

// whole reports whether a write of the record would write a ConfigMap
// whole: one not created yet, or someone else's content to replace.
func (r *Record) whole() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.shards, (*shard).whole)
}

// whole reports whether the shard's next write replaces its ConfigMap's
// data whole: one not created yet, or someone else's content.
func (sh *shard) whole() bool { return !sh.created || sh.foreign }

// Durable reports whether the node's entry is written as the ledger holds
// it.
func (r *Record) Durable(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sh := r.placed[node]
	return sh != nil && sh.created && !sh.dirty[node]
}

// Write writes what changed in the record: a merge patch of the changed keys
// per ConfigMap (creating it the first time), progress ConfigMaps first,
// those written less than ProgressInterval ago left for later. It returns
// how long until those are due (zero when none waits). On failure what was
// not written stays to be written, and the error says so.
func (s *Store) Write(ctx context.Context, r *Record) (time.Duration, error) {
	r.writing.Lock()
	defer r.writing.Unlock()
	if r.whole() {
		// A whole ConfigMap is written one record at a time: a controller
		// adopting many settled DaemonSets at start (every node's entry,
		// about 160 KB at 2,000 nodes, each) would otherwise hold all of
		// them at once, with their requests, answers and the watch's
		// copies: its peak memory.
		s.wholeWrites.Lock()
		defer s.wholeWrites.Unlock()
	}
	var wait time.Duration
	var errs []error
	for _, c := range []class{progress, active} {
		for _, w := range s.collect(r, c, &wait) {
			if err := s.writeShard(ctx, r, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	r.mu.Lock()
	if !slices.ContainsFunc(r.shards, func(sh *shard) bool { return sh.class == active && len(sh.dirty) > 0 }) {
		r.urgent = false
	}
	r.mu.Unlock()
	if len(errs) > 0 {
		return wait, fmt.Errorf("writing the rollout record of daemonset %s: %w", r.dsKey, errs[0])
	}
	return wait, nil
}

// shardWrite is what one write sends to one ConfigMap.
type shardWrite struct {
	sh      *shard
	created bool
	// whole: data replaces the ConfigMap's (created, or foreign); else
	// changes are merged into it.
	whole   bool
	changes map[string]*string // nil removes the key
	data    map[string]string  // every value, for a whole write
}

// collect gathers the writes due for the record's ConfigMaps of class c,
// raising wait to when the next paced one is due.
func (s *Store) collect(r *Record, c class, wait *time.Duration) []shardWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := s.now()
	var out []shardWrite
	for _, sh := range r.shards {
		whole := sh.whole()
		if sh.class != c || len(sh.dirty) == 0 && !whole {
			continue
		}
		if c == progress && !sh.lastWrite.IsZero() {
			if due := sh.lastWrite.Add(ProgressInterval).Sub(now); due > 0 {
				if *wait == 0 || due < *wait {
					*wait = due
				}
				continue
			}
		}
		w := shardWrite{sh: sh, created: sh.created, whole: whole, changes: map[string]*string{}}
		for key := range sh.dirty {
			var value *string
			if sh.nodes[key] {
				v, err := r.value(key)
				if err != nil {
					s.logger.Error(err, "Encoding a rollout record entry", "node", key)
					continue
				}
				value = &v
			}
			if (value == nil && !hasKey(sh.stored, key)) || (value != nil && sh.stored[key] == hashOf(*value) && hasKey(sh.stored, key)) {
				delete(sh.dirty, key) // as stored already
				continue
			}
			w.changes[key] = value
		}
		if whole {
			w.data = map[string]string{}
			for key := range sh.nodes {
				if v, err := r.value(key); err == nil {
					w.data[key] = v
				}
			}
		} else if len(w.changes) == 0 {
			continue
		}
		sh.writing = true
		out = append(out, w)
	}
	return out
}

func hasKey(m map[string]uint64, k string) bool { _, ok := m[k]; return ok }

// value is the JSON of a key's current entry (or the meta).
func (r *Record) value(key string) (string, error) {
	var v any
	if key == metaKey {
		v = r.Ledger.Meta()
	} else {
		e, ok := r.Ledger.Entry(key)
		if !ok {
			return "", fmt.Errorf("no entry for node %s", key)
		}
		v = e
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// writeShard sends one write and takes its answer as what the ConfigMap
// holds. An answer that holds anything else than what was stored before
// with this write's changes is someone else's doing: it is written again.
func (s *Store) writeShard(ctx context.Context, r *Record, w shardWrite) error {
	sh := w.sh
	defer func() {
		r.mu.Lock()
		sh.writing = false
		r.mu.Unlock()
	}()
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	var (
		cm      *corev1.ConfigMap
		err     error
		written = w.changes
		// replace: the ConfigMap exists and its data is replaced whole.
		replace = w.whole && w.created
	)
	if w.whole {
		written = map[string]*string{}
		for k, v := range w.data {
			written[k] = &v
		}
	}
	if !w.created {
		cm, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: sh.name, Namespace: s.namespace,
				Labels: map[string]string{Label: string(r.dsUID), hashLabel: r.target.Hash,
					revisionLabel: strconv.FormatInt(r.target.Number, 10)},
				Annotations: map[string]string{daemonSetAnnotation: r.dsKey},
			},
			Data: w.data,
		}, metav1.CreateOptions{FieldManager: s.fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Created by a write this process does not remember (its
			// predecessor's, or one whose answer was lost): replaced.
			cm, err, replace = nil, nil, true
		} else if err != nil {
			return fmt.Errorf("creating rollout record %s/%s: %w", s.namespace, sh.name, err)
		}
	}
	if cm == nil {
		patchType, body := types.MergePatchType, any(map[string]any{"data": written})
		if replace {
			// A strategic merge patch's directive replaces the whole map:
			// keys someone else added go too, with no read first.
			data := map[string]any{"$patch": "replace"}
			for k, v := range w.data {
				data[k] = v
			}
			patchType, body = types.StrategicMergePatchType, map[string]any{"data": data}
		}
		patch, perr := json.Marshal(body)
		if perr != nil {
			return fmt.Errorf("encoding the rollout record patch: %w", perr)
		}
		cm, err = cms.Patch(ctx, sh.name, patchType, patch, metav1.PatchOptions{FieldManager: s.fieldManager})
		if apierrors.IsNotFound(err) {
			// Deleted behind our back: created again, whole, at the next
			// write.
			r.mu.Lock()
			sh.lost()
			r.mu.Unlock()
			s.foreign(r.dsKey)
		}
		if err != nil {
			return fmt.Errorf("writing rollout record %s/%s: %w", s.namespace, sh.name, err)
		}
	}
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	s.written(size)

	r.mu.Lock()
	expected := maps.Clone(sh.stored)
	if w.whole {
		clear(expected) // a new ConfigMap, or one replaced: only our keys
	}
	for k, v := range written {
		if v == nil {
			delete(expected, k)
		} else {
			expected[k] = hashOf(*v)
		}
	}
	sh.created, sh.foreign, sh.lastWrite = true, false, s.now()
	sh.take(cm)
	for key, value := range written {
		// Written as it stands, unless it changed meanwhile.
		cur, err := r.value(key)
		if (value == nil && !sh.nodes[key]) || (value != nil && sh.nodes[key] && err == nil && cur == *value) {
			delete(sh.dirty, key)
		}
		if sh.class == progress && value != nil {
			if m := r.moving[key]; m != nil {
				m.dirty[key] = true // its new place holds it: the stale key goes
				delete(r.moving, key)
			}
		}
	}
	if len(sh.dirty) == 0 {
		// Made anew: Go's maps keep their buckets, and a record's first
		// write had every node dirty.
		sh.dirty = map[string]bool{}
	}
	foreign := !maps.Equal(expected, sh.stored)
	if foreign {
		// Someone else's keys merged in meanwhile (a patch's answer shows
		// the whole ConfigMap): ours written again, theirs removed.
		for k := range sh.nodes {
			sh.dirty[k] = true
		}
		for k := range sh.stored {
			if !sh.nodes[k] {
				sh.dirty[k] = true
			}
		}
	}
	r.mu.Unlock()
	if foreign && w.created {
		s.foreign(r.dsKey)
	}
	return nil
}

// take records a ConfigMap's state as what the shard holds.
func (sh *shard) take(cm *corev1.ConfigMap) {
	sh.stored = make(map[string]uint64, len(cm.Data))
	for k, v := range cm.Data {
		sh.stored[k] = hashOf(v)
	}
	sh.storedRV = cm.ResourceVersion
}

// lost marks the shard's ConfigMap gone: created again, whole.
func (sh *shard) lost() {
	sh.created = false
	sh.stored = map[string]uint64{}
	sh.storedRV = ""
	for k := range sh.nodes {
		sh.dirty[k] = true
	}
}

// Observe takes an event of the records' informer (deleted: the ConfigMap is
// gone). A ConfigMap of a live record that someone else deleted, or changed
// to other content (another digest), is marked to be written again from the
// ledger: it returns the DaemonSet's key and true then, for the caller to
// requeue it and say so. The controller's own writes come back on the same
// watch, with the content it wrote: they change nothing.
func (s *Store) Observe(cm *Cached, deleted bool) (dsKey string, rewrite bool) {
	s.mu.Lock()
	r := s.records[types.UID(cm.Labels[Label])]
	s.mu.Unlock()
	if r == nil {
		return "", false
	}
	c, i, ok := parseShardName(cm.Name, r.dsUID, r.target)
	if !ok {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var sh *shard
	for _, x := range r.shards {
		if x.class == c && x.index == i {
			sh = x
		}
	}
	if sh == nil || !sh.created || sh.writing {
		return "", false // not ours yet, or a write's answer will tell
	}
	if deleted {
		// Whatever its last resourceVersion (a tombstone's is an old one),
		// a ConfigMap of a live record is gone.
		sh.lost()
		return r.dsKey, true
	}
	if !newer(cm.ResourceVersion, sh.storedRV) {
		return "", false // an older state than the last answer
	}
	sh.storedRV = cm.ResourceVersion
	if cm.Keys == len(sh.stored) && cm.Digest == digestOf(sh.stored) {
		return "", false // metadata only: the content is ours
	}
	// Other content, known only by its digest: replaced whole at the next
	// write, every key of ours with it.
	sh.foreign = true
	for k := range sh.nodes {
		sh.dirty[k] = true
	}
	return r.dsKey, true
}

// newer reports whether resourceVersion a is after b. ResourceVersions are
// etcd revisions, compared as numbers where they are numbers (as client-go's
// watch cache does); otherwise any difference counts as newer.
func newer(a, b string) bool {
	if b == "" {
		return true
	}
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}

// Forget stops following the DaemonSet's record (a new target, or the
// DaemonSet gone).
func (s *Store) Forget(r *Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records[r.dsUID] == r {
		delete(s.records, r.dsUID)
	}
}

// Of returns the names of every record ConfigMap of a DaemonSet.
func (s *Store) Of(dsUID types.UID) []string {
	objs, _ := s.indexer.ByIndex(ByOwner, string(dsUID))
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		if cm, ok := obj.(*Cached); ok {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Orphans returns the names of the records of DaemonSets not in live (by
// UID): deleted while no controller ran.
func (s *Store) Orphans(live map[types.UID]bool) []string {
	var stale []string
	for _, obj := range s.indexer.List() {
		cm, ok := obj.(*Cached)
		if !ok {
			continue
		}
		if uid := cm.Labels[Label]; uid != "" && !live[types.UID(uid)] {
			stale = append(stale, cm.Name)
		}
	}
	slices.Sort(stale)
	return stale
}

// Delete deletes the named record ConfigMaps; one already gone is no error.
func (s *Store) Delete(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		err := s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting rollout record %s/%s: %w", s.namespace, name, err))
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Names lists the record's ConfigMaps, in order.
func (r *Record) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.shards))
	for _, sh := range r.shards {
		names = append(names, sh.name)
	}
	return names
}
