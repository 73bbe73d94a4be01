package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	// hashLabel names the revision an older edgeota's record is about.
	// This layout names the revision by its number alone, in the
	// ConfigMap's name: a DaemonSet never numbers two revisions alike (a
	// rollback renumbers the revision it brings back), and each label
	// costs every write its bytes twice, in the labels and in
	// managedFields.
	hashLabel = "edgeota.io/revision-hash"
	// metaKey holds decision.Meta: not a node's name (node names have no
	// underscore).
	metaKey = "_meta"
	// ProgressInterval is the least time between two writes of a record that
	// carry only offered and settled entries (or removed ones): those ride
	// along with the next write that must go at once, or wait for it.
	ProgressInterval = 3 * time.Second
	// bigWrite is how many keys make a write big: big writes go one record
	// at a time (Store.bigWrites).
	bigWrite = 1000
)

// Store reads and writes the rollout records of one namespace.
type Store struct {
	client    kube.Interface
	namespace string
	indexer   cache.Indexer
	// fieldManager names the controller in managedFields.
	fieldManager string
	// written is told the size of each ConfigMap written: its data (the
	// binaryData key and the compressed entries), and the whole object as
	// etcd stores it.
	written func(data, stored int)
	now     func() time.Time
	logger  klog.Logger
	// foreign is told the DaemonSet key of a record found deleted or changed
	// by someone else, which is being written again.
	foreign func(dsKey string)

	mu      sync.Mutex
	records map[types.UID]*Record
	// bigWrites serialises big writes (more than bigWrite keys) of all
	// records: a controller adopting many settled DaemonSets at start
	// writes every node's entry of each, and would otherwise hold them all
	// at once, with their requests: its peak memory.
	bigWrites sync.Mutex
}

// NewStore returns the store of the records in namespace, found through
// indexer (an informer of the metadata of the ConfigMaps labelled Label
// there, through Transform, indexed by ByOwner), read and written through
// client. written is told each write's size; foreign the DaemonSet key of
// a record someone else deleted or changed (see Observe). Both may be
// called at once from several goroutines: merges run beside writes.
func NewStore(client kube.Interface, namespace string, indexer cache.Indexer, fieldManager string,
	written func(data, stored int), foreign func(dsKey string), now func() time.Time, logger klog.Logger) *Store {
	if written == nil {
		written = func(int, int) {}
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

	// writing serialises the record's writes; merging its merges, which
	// run beside the writes (Compact): a write ahead of a deletion of pods
	// never waits for a merge, which may write much of the record.
	writing, merging sync.Mutex

	mu sync.Mutex
	// dirty are the keys whose value is not written as the ledger holds it,
	// each with whether it must go at once (an entry in flight or failed,
	// the meta) or may wait for ProgressInterval (offered, settled, gone).
	dirty map[string]bool
	// sending are the keys of the write under way.
	sending map[string]bool
	// urgent: something dirty must be written before the controller acts.
	urgent bool
	// rewrite: a segment was lost or changed by someone else (or the record
	// is an older edgeota's): the next write writes every key in a segment
	// that supersedes all others, which then go.
	rewrite bool
	// segments are the record's segments, oldest first.
	segments []*segment
	// parts are the ConfigMaps of the record this store knows of, by name:
	// those of its segments, and those being created or deleted.
	parts map[string]*part
	// next is the next write's sequence number.
	next uint64
	// lastWrite is when the last write was sent.
	lastWrite time.Time
	// listRV is the resourceVersion Load read the record at: an event no
	// newer shows a state the list accounted for.
	listRV string
	// retired: the store no longer writes the record (Forget).
	retired bool
}

// segment is one write or merge of the record.
type segment struct {
	from, to uint64
	parts    []*part
	// keys are the keys written in it (metaKey included): a merge writes
	// their values anew.
	keys []string
}

// part is one record ConfigMap.
type part struct {
	name  string
	state partState
	// rv is its resourceVersion: the answer to its create, or as Load read
	// it. It never changes: the store writes each ConfigMap once.
	rv string
	// seenRV and seenDeleted are what its informer showed while the create
	// was under way, for its answer to judge.
	seenRV      string
	seenDeleted bool
}

type partState int

const (
	// live: a ConfigMap of one of the record's segments.
	live partState = iota
	// creating: its create is under way.
	creating
	// deleting: this store deletes it at its next write (superseded,
	// stale, a stranger, a part of a write cut short, or a create that
	// failed and may have landed).
	deleting
	// gone: this store deleted it; kept until the informer shows the
	// deletion, so that a late event of it is not taken for a stranger.
	gone
)

// Load rebuilds the record of the DaemonSet's target from its record
// ConfigMaps as the API server holds them (the cache keeps no data), and
// returns the names of those about other revisions, or superseded, to be
// deleted. An entry that does not parse is a fault of whoever wrote it: it
// is skipped and written anew at the next write. published is the rollout
// status the controller last published: a record holding fewer failures of
// the same revision than it shows lost some, and those the status names are
// taken over, the rest counted as lost. A record without meta is new: its
// meta is set (now, written before anything else) and Adopt is set.
func (s *Store) Load(ctx context.Context, dsUID types.UID, dsKey string, target decision.Target, published *rollout.Status) (*Record, []string, error) {
	list, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{Label: string(dsUID)}).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the rollout record of daemonset %s: %w", dsKey, err)
	}
	r := &Record{dsUID: dsUID, dsKey: dsKey, target: target, dirty: map[string]bool{}, sending: map[string]bool{},
		parts: map[string]*part{}, next: 1, listRV: list.ResourceVersion}
	read, stale := readSegments(list.Items, dsUID, target)
	for _, name := range stale {
		if info, ok := parseName(name, dsUID, target); ok {
			// Ours, but not read (incomplete or superseded): the caller
			// deletes it, and no write of this store takes its name.
			r.parts[name] = &part{name: name, state: gone}
			r.next = max(r.next, info.to+1)
		}
	}
	entries, meta := replay(read, func(key, configMap string) {
		s.logger.Info("Ignoring an unreadable rollout record entry", "daemonset", dsKey, "configmap", configMap, "key", key)
		r.dirty[key] = false // written anew: its entry, or its removal
	})
	for _, seg := range read {
		r.segments = append(r.segments, &segment{from: seg.from, to: seg.to, parts: seg.parts, keys: seg.keys})
		for _, p := range seg.parts {
			r.parts[p.name] = p
		}
		r.next = max(r.next, seg.to+1)
		if seg.legacy {
			r.rewrite = true // an older edgeota's layout: written anew in this one
		}
	}
	if meta == nil {
		r.Adopt = true
		meta = &decision.Meta{TargetSince: metav1.Time{Time: s.now().Truncate(time.Second)}}
		r.dirty[metaKey], r.urgent = true, true
	}
	r.Ledger = decision.NewLedger(entries, *meta)
	r.takeOverPublished(published)
	r.Ledger.Changed = r.changed
	s.mu.Lock()
	s.records[dsUID] = r
	s.mu.Unlock()
	return r, stale, nil
}

// replay applies the segments in order: the later value of a key wins, an
// empty one removes it. A value that does not parse (or an entry the
// controller does not write) is skipped and told to bad.
func replay(read []readSegment, bad func(key, configMap string)) (map[string]decision.Entry, *decision.Meta) {
	entries := map[string]decision.Entry{}
	var meta *decision.Meta
	for _, seg := range read {
		for _, l := range seg.lines {
			switch {
			case l.value == "" && l.key == metaKey:
				meta = nil
			case l.value == "":
				delete(entries, l.key)
			case l.key == metaKey:
				var m decision.Meta
				if json.Unmarshal([]byte(l.value), &m) != nil {
					bad(l.key, seg.parts[0].name)
					continue
				}
				meta = &m
			default:
				var e decision.Entry
				if json.Unmarshal([]byte(l.value), &e) != nil || !e.Valid() {
					bad(l.key, seg.parts[0].name)
					continue
				}
				entries[l.key] = e
			}
		}
	}
	return entries, meta
}

// Read returns what a DaemonSet's record ConfigMaps (items, as listed by
// Label) hold for target, as a controller reads them back: every node's
// entry and the meta (nil when none). For tools and tests that look into a
// record: its data is compressed.
func Read(items []corev1.ConfigMap, dsUID types.UID, target decision.Target) (map[string]decision.Entry, *decision.Meta) {
	read, _ := readSegments(items, dsUID, target)
	return replay(read, func(string, string) {})
}

// readSegment is a segment as Load read it.
type readSegment struct {
	from, to uint64
	legacy   bool
	parts    []*part
	lines    []line
	keys     []string
}

// readSegments reads the record ConfigMaps of the DaemonSet's target among
// items, in the order they apply, and returns the names of the others
// (other revisions, incomplete or superseded segments), to be deleted.
func readSegments(items []corev1.ConfigMap, dsUID types.UID, target decision.Target) (read []readSegment, stale []string) {
	type key struct{ from, to uint64 }
	groups := map[key][]*corev1.ConfigMap{}
	var legacy []*corev1.ConfigMap
	for i := range items {
		cm := &items[i]
		info, ok := parseName(cm.Name, dsUID, target)
		switch {
		case !ok || info.legacy && cm.Labels[hashLabel] != target.Hash:
			stale = append(stale, cm.Name)
		case info.legacy:
			legacy = append(legacy, cm)
		default:
			groups[key{info.from, info.to}] = append(groups[key{info.from, info.to}], cm)
		}
	}
	// Complete segments: every part there, once, each readable.
	var complete []readSegment
	for k, cms := range groups {
		seg, ok := readParts(cms, dsUID, target)
		if !ok {
			for _, cm := range cms {
				stale = append(stale, cm.Name)
			}
			continue
		}
		seg.from, seg.to = k.from, k.to
		complete = append(complete, seg)
	}
	// A segment within another's range is one of a merge's sources, or a
	// segment a rewrite superseded: not read.
	slices.SortFunc(complete, func(a, b readSegment) int {
		if a.from != b.from {
			return cmpUint(a.from, b.from)
		}
		return cmpUint(b.to, a.to) // the wider first
	})
	var reach uint64
	for i, seg := range complete {
		if i > 0 && seg.to <= reach {
			for _, p := range seg.parts {
				stale = append(stale, p.name)
			}
			continue
		}
		reach = max(reach, seg.to)
		read = append(read, seg)
	}
	if len(legacy) > 0 {
		// An older edgeota's layout: before every segment of this one
		// (sequence number 0), superseded by a rewrite from 0.
		if len(read) > 0 && read[0].from == 0 {
			for _, cm := range legacy {
				stale = append(stale, cm.Name)
			}
		} else {
			read = append([]readSegment{readLegacy(legacy)}, read...)
		}
	}
	slices.Sort(stale)
	return read, stale
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readParts reads the parts of one segment: ok only if each of its n parts
// is there, once, and readable.
func readParts(cms []*corev1.ConfigMap, dsUID types.UID, target decision.Target) (readSegment, bool) {
	var seg readSegment
	byPart := map[int]*corev1.ConfigMap{}
	of := 0
	for _, cm := range cms {
		info, _ := parseName(cm.Name, dsUID, target)
		if of != 0 && info.of != of {
			return seg, false
		}
		of = info.of
		byPart[info.part] = cm
	}
	if len(byPart) != of {
		return seg, false
	}
	for i := range of {
		cm := byPart[i]
		lines, err := decodePart(cm)
		if err != nil {
			return seg, false
		}
		seg.parts = append(seg.parts, &part{name: cm.Name, rv: cm.ResourceVersion})
		seg.lines = append(seg.lines, lines...)
		for _, l := range lines {
			seg.keys = append(seg.keys, l.key)
		}
	}
	return seg, true
}

// readLegacy reads an older edgeota's record: one key per node in data, the
// meta in the first, entries of failed and in-flight nodes apart from
// offered and settled ones. Two entries of one node (a move between them cut
// short) read as the later stage.
func readLegacy(cms []*corev1.ConfigMap) readSegment {
	seg := readSegment{legacy: true}
	best := map[string]line{}
	rank := map[string]int{}
	for _, cm := range cms {
		seg.parts = append(seg.parts, &part{name: cm.Name, rv: cm.ResourceVersion})
		for key, value := range cm.Data {
			r := 0
			if key != metaKey {
				var e decision.Entry
				if json.Unmarshal([]byte(value), &e) == nil {
					r = e.Stage.Rank()
				}
			}
			if old, ok := best[key]; ok && (rank[key] > r || rank[key] == r && old.value >= value) {
				continue
			}
			best[key], rank[key] = line{key, value}, r
		}
	}
	for _, l := range best {
		seg.lines = append(seg.lines, l)
		seg.keys = append(seg.keys, l.key)
	}
	sortLines(seg.lines)
	return seg
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

// changed is the ledger's hook: the node's entry (the meta for "") changed.
func (r *Record) changed(node string, urgent bool) {
	key, prompt := node, true
	if node == "" {
		key = metaKey
	} else if e, ok := r.Ledger.Entry(node); !ok || e.Stage == decision.StageOffered || e.Stage == decision.StageSettled {
		prompt = urgent
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if urgent {
		r.urgent = true
	}
	r.dirty[key] = r.dirty[key] || prompt
}

// Target is the revision the record is about.
func (r *Record) Target() decision.Target { return r.target }

// Pending reports whether anything is not written yet, and whether any of it
// must be written before the controller acts again.
func (r *Record) Pending() (any, urgent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.dirty) > 0 || r.rewrite, r.urgent
}

// Durable reports whether the node's entry is written as the ledger holds
// it.
func (r *Record) Durable(node string) bool {
	if _, ok := r.Ledger.Entry(node); !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, dirty := r.dirty[node]
	return !dirty && !r.sending[node] && !r.rewrite
}

// batch is one segment to write: its keys with their values, in key order.
type batch struct {
	from, to uint64
	lines    []line
	// prompt are the keys that were to go at once (restored so on failure).
	prompt map[string]bool
	// rewrite: the segment supersedes every other.
	rewrite bool
	// urgent: it was to be written before the controller acts (restored so
	// on failure).
	urgent bool
	// merged are the segments a merge replaces.
	merged []*segment
}

// Write writes what changed in the record, as one segment: at once when any
// of it must go at once (an entry in flight or failed, the meta, a rewrite),
// else once ProgressInterval has passed since the last write. It returns how
// long until what waits is due (zero when nothing waits). On failure what
// was not written stays to be written, and the error says so. What it
// replaces (a rewrite supersedes every older segment), and the parts of a
// write cut short, are left for Compact to delete: a write ahead of a
// deletion of pods makes one request.
func (s *Store) Write(ctx context.Context, r *Record) (time.Duration, error) {
	r.writing.Lock()
	defer r.writing.Unlock()
	if r.isRetired() {
		return 0, nil
	}
	b, wait := s.collect(r)
	if b == nil {
		return wait, nil
	}
	err := s.send(ctx, r, b)
	r.mu.Lock()
	if err != nil {
		for _, l := range b.lines {
			delete(r.sending, l.key)
			r.dirty[l.key] = r.dirty[l.key] || b.prompt[l.key]
		}
		r.rewrite = r.rewrite || b.rewrite
		r.urgent = r.urgent || b.urgent
		r.mu.Unlock()
		return wait, fmt.Errorf("writing the rollout record of daemonset %s: %w", r.dsKey, err)
	}
	for _, l := range b.lines {
		delete(r.sending, l.key)
	}
	var superseded []*segment
	if b.rewrite {
		superseded = r.segments[:len(r.segments)-1]
		r.segments = r.segments[len(r.segments)-1:]
	}
	for _, seg := range superseded {
		for _, p := range seg.parts {
			p.state = deleting
		}
	}
	r.mu.Unlock()
	if b.rewrite {
		s.strangers(r)
	}
	return wait, nil
}

// collect gathers the write due now, with its keys' values; nil and how
// long until one is due when none is.
func (s *Store) collect(r *Record) (*batch, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dirty) == 0 && !r.rewrite {
		return nil, 0
	}
	now := s.now()
	due := r.urgent || r.rewrite || r.lastWrite.IsZero()
	for _, prompt := range r.dirty {
		due = due || prompt
	}
	if !due {
		if wait := r.lastWrite.Add(ProgressInterval).Sub(now); wait > 0 {
			return nil, wait
		}
	}
	b := &batch{prompt: r.dirty, rewrite: r.rewrite, urgent: r.urgent}
	keys := slices.Collect(maps.Keys(r.dirty))
	if r.rewrite {
		keys = append(r.Ledger.Nodes(), metaKey)
	}
	for _, key := range keys {
		value, ok := r.value(key)
		if !ok && b.rewrite {
			continue // a rewrite holds every key there is: none to remove
		}
		b.lines = append(b.lines, line{key, value})
		r.sending[key] = true
	}
	sortLines(b.lines)
	b.from, b.to = r.next, r.next
	if b.rewrite {
		// From the first sequence number, so that it supersedes every
		// segment; as many numbers as keys, so that merges treat it as the
		// writes it stands for (level).
		b.from, b.to = 0, max(r.next, uint64(len(b.lines)))
	}
	r.next = b.to + 1
	r.dirty, r.urgent, r.rewrite, r.lastWrite = map[string]bool{}, false, false, now
	return b, 0
}

// value is the JSON of a key's current entry (or the meta), and false when
// the ledger holds none.
func (r *Record) value(key string) (string, bool) {
	var v any
	if key == metaKey {
		v = r.Ledger.Meta()
	} else {
		e, ok := r.Ledger.Entry(key)
		if !ok {
			return "", false
		}
		v = e
	}
	data, err := json.Marshal(v)
	if err != nil {
		// An Entry and a Meta always encode: their fields are strings,
		// numbers, booleans and times.
		panic(fmt.Sprintf("encoding rollout record key %s: %v", key, err))
	}
	return string(data), true
}

// send writes the batch as one segment, part by part, and adds it to the
// record's segments, after those it merges replace (if any). Parts created
// before a failure are deleted: the segment is incomplete.
func (s *Store) send(ctx context.Context, r *Record, b *batch) error {
	if len(b.lines) > bigWrite {
		s.bigWrites.Lock()
		defer s.bigWrites.Unlock()
	}
	blobs, err := encodeParts(b.lines)
	if err != nil {
		return fmt.Errorf("encoding the rollout record: %w", err)
	}
	seg := &segment{from: b.from, to: b.to, keys: make([]string, len(b.lines))}
	for i, l := range b.lines {
		seg.keys[i] = l.key
	}
	r.mu.Lock()
	for i := range blobs {
		p := &part{name: partName(r.dsUID, r.target, b.from, b.to, i, len(blobs)), state: creating}
		seg.parts = append(seg.parts, p)
		r.parts[p.name] = p
	}
	r.mu.Unlock()
	for i, blob := range blobs {
		if err := s.create(ctx, r, seg.parts[i], blob); err != nil {
			r.mu.Lock()
			for _, p := range seg.parts[:i] {
				p.state = deleting
			}
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.merged != nil {
		// Writes only add segments after those it merges; a rewrite made
		// meanwhile superseded them all, and this merge with them.
		i := slices.Index(r.segments, b.merged[0])
		if i < 0 {
			for _, p := range seg.parts {
				p.state = deleting
			}
			return nil
		}
		r.segments = slices.Replace(r.segments, i, i+len(b.merged), seg)
		for _, old := range b.merged {
			for _, p := range old.parts {
				p.state = deleting
			}
		}
	} else {
		r.segments = append(r.segments, seg)
	}
	return nil
}

// create creates one part and takes its answer's resourceVersion as what
// the part holds for ever; the informer's events meanwhile are judged
// against it.
func (s *Store) create(ctx context.Context, r *Record, p *part, blob []byte) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: s.namespace,
			Labels: map[string]string{Label: string(r.dsUID)}},
		BinaryData: map[string][]byte{entriesKey: blob},
	}
	answer, err := s.client.CoreV1().ConfigMapMetadata(s.namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: s.fieldManager})
	if err != nil {
		r.mu.Lock()
		// The create may have landed (its answer lost): the part goes, its
		// keys being written again in another segment.
		p.state = deleting
		if apierrors.IsAlreadyExists(err) {
			// Not this store's (each name is written once): a stranger,
			// named as one of the record's pieces.
			r.lose()
		}
		r.mu.Unlock()
		return fmt.Errorf("creating rollout record %s/%s: %w", s.namespace, p.name, err)
	}
	r.mu.Lock()
	p.rv, p.state = answer.ResourceVersion, live
	foreign := p.seenDeleted || newer(p.seenRV, p.rv)
	if foreign {
		r.lose()
	}
	r.mu.Unlock()
	if foreign {
		s.foreign(r.dsKey)
	}
	cm.ObjectMeta = answer.ObjectMeta
	stored, err := kube.StoredSize(cm)
	if err != nil {
		s.logger.Error(err, "Sizing a rollout record ConfigMap", "configmap", klog.KObj(cm))
	}
	s.written(len(entriesKey)+len(blob), stored)
	return nil
}

// lose marks the record's content in the cluster untrusted: every key is
// written anew, in a segment that supersedes all others, before the
// controller acts again. Called with r.mu held.
func (r *Record) lose() {
	r.rewrite, r.urgent = true, true
}

// Compact merges the record's segments while fanIn consecutive ones are of
// one level: one segment holding the current value of each of their keys
// replaces them (a key removed since is written removed, unless nothing
// older could hold it). Each key is so rewritten once per level, and a
// record keeps at most fanIn-1 segments of each. Call it in the
// background: a merge of high level writes much of the record. Merges run
// one at a time, beside the writes, which never wait for them: a merge
// holds the current value of its keys, in a segment older than any write
// made meanwhile, which wins where they differ.
func (s *Store) Compact(ctx context.Context, r *Record) error {
	r.merging.Lock()
	defer r.merging.Unlock()
	for !r.isRetired() {
		b := r.mergeDue()
		if b == nil {
			break
		}
		if err := s.send(ctx, r, b); err != nil {
			return errors.Join(fmt.Errorf("merging the rollout record of daemonset %s: %w", r.dsKey, err), s.deleteParts(ctx, r))
		}
	}
	return s.deleteParts(ctx, r)
}

// CompactDue reports whether Compact has work: a merge to make, or
// ConfigMaps to delete that a merge or a rewrite replaced.
func (r *Record) CompactDue() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mergeRun() != nil {
		return true
	}
	for _, p := range r.parts {
		if p.state == deleting {
			return true
		}
	}
	return false
}

// mergeRun is the run of segments to merge: the oldest fanIn consecutive
// ones of one level, and none while a rewrite is due (it supersedes them
// all). Levels never grow from the oldest segment to the newest (a write is
// the newest, of level 0; a merge takes the place of what it replaces, one
// level up), so a level's segments follow each other. Called with r.mu
// held.
func (r *Record) mergeRun() []*segment {
	if r.rewrite {
		return nil
	}
	for i := 0; i+fanIn <= len(r.segments); i++ {
		run := r.segments[i : i+fanIn]
		l := level(run[0].from, run[0].to)
		if !slices.ContainsFunc(run[1:], func(seg *segment) bool { return level(seg.from, seg.to) != l }) {
			return run
		}
	}
	return nil
}

// mergeDue is the merge to make now, with its keys' current values.
func (r *Record) mergeDue() *batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.mergeRun()
	if run == nil {
		return nil
	}
	first := run[0] == r.segments[0]
	b := &batch{from: run[0].from, to: run[len(run)-1].to, merged: slices.Clone(run)}
	seen := map[string]bool{}
	for _, seg := range run {
		for _, key := range seg.keys {
			if seen[key] {
				continue
			}
			seen[key] = true
			value, ok := r.value(key)
			if !ok && first {
				continue // nothing older holds it
			}
			b.lines = append(b.lines, line{key, value})
		}
	}
	sortLines(b.lines)
	return b
}

// strangers marks for deletion every ConfigMap of the record's target the
// informer shows that is none of its segments' (someone else's, named as
// one of its pieces), after a rewrite.
func (s *Store) strangers(r *Record) {
	names := s.Of(r.dsUID)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if _, ok := parseName(name, r.dsUID, r.target); ok && r.parts[name] == nil {
			r.parts[name] = &part{name: name, state: deleting}
		}
	}
}

// deleteParts deletes the record's ConfigMaps marked deleting; those that
// fail stay marked, for the next Compact. Only Compact calls it, and a
// name is created again only by a merge tried again, after this call:
// no create of a part of the same name runs meanwhile.
func (s *Store) deleteParts(ctx context.Context, r *Record) error {
	r.mu.Lock()
	var names []string
	for name, p := range r.parts {
		if p.state == deleting {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		err := s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting rollout record %s/%s: %w", s.namespace, name, err))
			continue
		}
		r.mu.Lock()
		if p := r.parts[name]; p != nil && p.state == deleting {
			p.state = gone
		}
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Observe takes an event of the records' informer (deleted: the ConfigMap is
// gone), which shows metadata alone. The store writes each ConfigMap once,
// so any resourceVersion of a live one other than its create's answer is
// someone else's change, and a deletion it did not make is a loss; a
// ConfigMap named as one of the record's that the store never wrote is a
// stranger's. Each has the record written anew and returns the DaemonSet's
// key and true, for the caller to requeue it and say so. The store's own
// writes come back on the same watch, the event sometimes before the
// create's answer: those change nothing.
func (s *Store) Observe(cm *Cached, deleted bool) (dsKey string, rewrite bool) {
	s.mu.Lock()
	r := s.records[types.UID(cm.Labels[Label])]
	s.mu.Unlock()
	if r == nil {
		return "", false
	}
	if _, ok := parseName(cm.Name, r.dsUID, r.target); !ok {
		return "", false // another revision's: deleted when the target moved
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[cm.Name]
	switch {
	case p == nil && (deleted || !newer(cm.ResourceVersion, r.listRV)):
		return "", false // gone, or a state older than Load's list
	case p == nil:
		// Not written by this store, nor read by its Load: a stranger's.
		r.parts[cm.Name] = &part{name: cm.Name, state: deleting}
	case p.state == creating:
		// The create's answer judges it.
		if deleted {
			p.seenDeleted = true
		} else if newer(cm.ResourceVersion, p.seenRV) {
			p.seenRV = cm.ResourceVersion
		}
		return "", false
	case p.state == deleting || p.state == gone:
		if deleted {
			delete(r.parts, cm.Name)
		}
		return "", false
	case deleted:
		// Whatever its last resourceVersion (a tombstone's is an old one),
		// a ConfigMap of a live record is gone.
		delete(r.parts, cm.Name)
	case !newer(cm.ResourceVersion, p.rv):
		return "", false // its create's, or an older state
	default:
		p.state = deleting // changed by someone else: superseded by the rewrite
	}
	r.lose()
	return r.dsKey, true
}

// newer reports whether resourceVersion a is after b. ResourceVersions are
// etcd revisions, compared as numbers where they are numbers (as client-go's
// watch cache does); otherwise any difference counts as newer.
func newer(a, b string) bool {
	if a == "" {
		return false
	}
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

// Forget stops following the DaemonSet's record and writing it (a new
// target, the DaemonSet gone or opted out): a write under way ends, none
// follows.
func (s *Store) Forget(r *Record) {
	s.mu.Lock()
	if s.records[r.dsUID] == r {
		delete(s.records, r.dsUID)
	}
	s.mu.Unlock()
	r.mu.Lock()
	r.retired = true
	r.mu.Unlock()
}

func (r *Record) isRetired() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retired
}

// DeleteAll deletes every record ConfigMap of a deleted DaemonSet, once the
// write and the merge under way of its record r (nil when none is
// followed) end: those
// the informer shows, and those r wrote that it may not show yet.
func (s *Store) DeleteAll(ctx context.Context, dsUID types.UID, r *Record) error {
	names := s.Of(dsUID)
	if r != nil {
		s.Forget(r)
		r.writing.Lock()
		r.merging.Lock()
		r.mu.Lock()
		for name, p := range r.parts {
			if p.state != gone {
				names = append(names, name)
			}
		}
		r.mu.Unlock()
		r.merging.Unlock()
		r.writing.Unlock()
	}
	slices.Sort(names)
	return s.Delete(ctx, slices.Compact(names))
}

// Records counts the records the store follows.
func (s *Store) Records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
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
	return errors.Join(errs...)
}
