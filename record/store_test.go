package record

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/kube/kubetest"
	"github.com/edgeota/edgeota/rollout"
)

const (
	ns    = "edgeota-system"
	dsUID = types.UID("ds-uid")
	dsKey = "default/ds"
)

var (
	t0     = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	target = decision.Target{Hash: "new222", Number: 2}
)

// fixture is a store over a fake clientset, its cache seeded with objs.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	indexer cache.Indexer
	store   *Store
	now     time.Time
	// mu guards foreign, data and stored: the store calls its hooks from
	// the writes and from the merges, which run beside them.
	mu      sync.Mutex
	foreign []string
	// data and stored are the sizes of each write, in order.
	data, stored []int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(objs...), now: t0,
		indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ByOwner: IndexByOwner})}
	for _, obj := range objs {
		if err := f.indexer.Add(Summarize(obj.(*corev1.ConfigMap))); err != nil {
			t.Fatal(err)
		}
	}
	f.store = f.newStore()
	return f
}

// newStore is another store over the fixture's client: a controller
// restarted, or a new leader.
func (f *fixture) newStore() *Store {
	return NewStore(kubetest.Wrap(f.client), ns, f.indexer, "test",
		func(data, stored int) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.data, f.stored = append(f.data, data), append(f.stored, stored)
		},
		func(key string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.foreign = append(f.foreign, key)
		}, func() time.Time { return f.now }, klog.Background())
}

// stored returns the record ConfigMaps as the API holds them, by name.
func (f *fixture) cms() map[string]*corev1.ConfigMap {
	f.t.Helper()
	list, err := f.client.CoreV1().ConfigMaps(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// read returns what the cluster holds of the test record, as Load reads it.
func (f *fixture) read() (map[string]decision.Entry, *decision.Meta) {
	f.t.Helper()
	list, err := f.client.CoreV1().ConfigMaps(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return Read(list.Items, dsUID, target)
}

// load loads the test DaemonSet's record of target.
func (f *fixture) load(published *rollout.Status) (*Record, []string) {
	f.t.Helper()
	r, stale, err := f.store.Load(f.ctx, dsUID, dsKey, target, published)
	if err != nil {
		f.t.Fatalf("load: %v", err)
	}
	return r, stale
}

func (f *fixture) write(r *Record) time.Duration {
	f.t.Helper()
	wait, err := f.store.Write(f.ctx, r)
	if err != nil {
		f.t.Fatalf("write: %v", err)
	}
	return wait
}

// writeAndCompact writes as the controller does at once: the write, then,
// when it made any due, the merges and deletions (the controller's run in
// the background).
func (f *fixture) writeAndCompact(r *Record) {
	f.t.Helper()
	f.write(r)
	if !r.CompactDue() {
		return
	}
	if err := f.store.Compact(f.ctx, r); err != nil {
		f.t.Fatalf("compact: %v", err)
	}
}

// observeAll hands the store an event of every ConfigMap as listed now, as
// its informer would.
func (f *fixture) observeAll(s *Store) (rewrite bool) {
	for _, cm := range f.cms() {
		if _, again := s.Observe(Summarize(cm), false); again {
			rewrite = true
		}
	}
	return rewrite
}

func entryAt(stage decision.Stage, at time.Time) decision.Entry {
	m := metav1.NewTime(at)
	switch stage {
	case decision.StageOffered:
		return decision.Entry{Stage: stage, OfferedAt: &m}
	case decision.StageSettled:
		return decision.Entry{Stage: stage, At: &m}
	case decision.StageInFlight:
		return decision.Entry{Stage: stage, Pod: "pod-uid", Since: &m}
	}
	return decision.Entry{Stage: stage, Reason: "crash", At: &m}
}

// segmentName is the name of the single-part segment from..to.
func segmentName(from, to uint64) string { return partName(dsUID, target, from, to, 0, 1) }

// keysOf decodes the keys a ConfigMap holds.
func keysOf(t *testing.T, cm *corev1.ConfigMap) []string {
	t.Helper()
	lines, err := decodePart(cm)
	if err != nil {
		t.Fatalf("decoding %s: %v", cm.Name, err)
	}
	var keys []string
	for _, l := range lines {
		keys = append(keys, l.key)
	}
	return keys
}

// wantExact fails unless the cluster holds exactly the ledger.
func (f *fixture) wantExact(r *Record) {
	f.t.Helper()
	entries, meta := f.read()
	if diff := cmp.Diff(r.Ledger.Entries(), entries); diff != "" {
		f.t.Errorf("read back differs from the ledger (-ledger +read):\n%s", diff)
	}
	if want := r.Ledger.Meta(); meta == nil || !meta.Equal(want) {
		f.t.Errorf("read back meta %+v, want %+v", meta, want)
	}
}

// TestNewRecordWritesItsMetaFirst: a record the cluster does not hold is
// adopted as new, its meta (when the target was first seen) written before
// anything else: urgent.
func TestNewRecordWritesItsMetaFirst(t *testing.T) {
	f := newFixture(t)
	r, stale := f.load(nil)
	if !r.Adopt || len(stale) != 0 {
		t.Fatalf("got adopt %v, stale %v; want a new record, nothing stale", r.Adopt, stale)
	}
	if _, urgent := r.Pending(); !urgent {
		t.Fatalf("got the meta not urgent, want it written before the controller acts")
	}
	f.write(r)
	cm := f.cms()[segmentName(1, 1)]
	if cm == nil || !maps.Equal(cm.Labels, map[string]string{Label: string(dsUID)}) || !slices.Equal(keysOf(t, cm), []string{metaKey}) {
		t.Fatalf("got %v, want the record's first segment holding the meta", slices.Collect(maps.Keys(f.cms())))
	}
	again, _ := f.load(nil)
	if again.Adopt || !again.Ledger.Meta().TargetSince.Time.Equal(t0) {
		t.Errorf("read back: got adopt %v, target since %s; want a known record first seen at %s", again.Adopt, again.Ledger.Meta().TargetSince, t0)
	}
}

// TestPinWrittenAtOnce: a pin is written before the controller acts (a
// patch names its digest), and read back as it was.
func TestPinWrittenAtOnce(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	f.write(r)
	pin := decision.Pin{Canary: "n1", At: metav1.NewTime(t0), Digests: map[string]string{"app": "sha256:" + strings.Repeat("a", 64)},
		Unpinnable: map[string]string{"sidecar": "no digest"}}
	if !r.Ledger.SetPin("arm64", pin) || r.Ledger.SetPin("arm64", decision.Pin{Canary: "n2"}) {
		t.Fatalf("got the first pin refused or a second one taken, want the first alone")
	}
	if _, urgent := r.Pending(); !urgent {
		t.Fatalf("got the pin not urgent, want it written before the controller acts")
	}
	f.write(r)
	f.wantExact(r)
	again, _ := f.load(nil)
	if got, ok := again.Ledger.Pin("arm64"); !ok || !got.Equal(pin) {
		t.Errorf("read back pin %+v (%v), want %+v", got, ok, pin)
	}
}

// TestInFlightAndFailedGoAtOnceOfferedAndSettledWait: failed and in-flight
// entries are written at once; offered and settled ones ride along with
// them, or wait ProgressInterval after the last write, and Write says how
// long.
func TestInFlightAndFailedGoAtOnceOfferedAndSettledWait(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	f.now = t0.Add(time.Second)
	r.Ledger.Set("c", entryAt(decision.StageSettled, t0), false)
	r.Ledger.Set("d", entryAt(decision.StageOffered, t0), false)
	if wait := f.write(r); wait != ProgressInterval-time.Second || r.Durable("c") || r.Durable("d") {
		t.Fatalf("got wait %s, c and d written %v %v; want them waiting %s", wait, r.Durable("c"), r.Durable("d"), ProgressInterval-time.Second)
	}
	r.Ledger.Set("b", entryAt(decision.StageInFlight, t0), false)
	if wait := f.write(r); wait != 0 || !r.Durable("b") || !r.Durable("c") || !r.Durable("d") {
		t.Fatalf("an entry in flight: got wait %s, b, c, d written %v %v %v; want all three written at once",
			wait, r.Durable("b"), r.Durable("c"), r.Durable("d"))
	}
	if got := keysOf(t, f.cms()[segmentName(2, 2)]); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("got the second write holding %v, want what changed: [b c d]", got)
	}
	r.Ledger.Set("e", entryAt(decision.StageSettled, t0), false)
	f.now = f.now.Add(ProgressInterval - time.Millisecond)
	if wait := f.write(r); wait != time.Millisecond || r.Durable("e") {
		t.Errorf("got wait %s and e written %v, want it paced", wait, r.Durable("e"))
	}
	f.now = f.now.Add(time.Millisecond)
	if wait := f.write(r); wait != 0 || !r.Durable("e") {
		t.Errorf("once due: got wait %s and e written %v, want it written", wait, r.Durable("e"))
	}
	f.wantExact(r)
}

// TestWriteCostsWhatChanged: a record of 2,000 settled nodes costs a write
// of one changed entry no more than that entry and one ConfigMap's
// metadata: not the record.
func TestWriteCostsWhatChanged(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	for i := range 2000 {
		r.Ledger.Set(fmt.Sprintf("node-%06d", i), entryAt(decision.StageSettled, t0), false)
	}
	f.write(r)
	if data, stored := f.data[len(f.data)-1], f.stored[len(f.stored)-1]; data < 1000 || stored < data+200 {
		t.Fatalf("got 2,000 entries written in %d bytes of data, %d stored; want at least 1,000, and the object's metadata on top", data, stored)
	}
	r.Ledger.Set("node-002000", entryAt(decision.StageInFlight, t0), false)
	f.write(r)
	data, stored := f.data[len(f.data)-1], f.stored[len(f.stored)-1]
	if data > 200 || stored > 1000 {
		t.Errorf("got a write of one entry costing %d bytes of data, %d stored; want at most 200 and 1,000", data, stored)
	}
	if stored <= data {
		t.Errorf("got %d bytes stored for %d of data, want the metadata counted too", stored, data)
	}
}

// TestRestartBetweenFindsTheEarlierStage: a node whose settled entry waits
// for the pacing is read back in flight by a controller restarted in
// between, and settled once written: the later segment wins.
func TestRestartBetweenFindsTheEarlierStage(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("m", entryAt(decision.StageInFlight, t0), true)
	f.write(r)
	f.now = t0.Add(time.Second)
	r.Ledger.Set("m", entryAt(decision.StageSettled, f.now), false)
	f.write(r) // paced: waits
	between, _, _ := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	if e, _ := between.Ledger.Entry("m"); e.Stage != decision.StageInFlight {
		t.Errorf("read back between: got %+v, want in flight", e)
	}
	f.now = t0.Add(ProgressInterval + time.Second)
	f.write(r)
	after, _, _ := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	if e, _ := after.Ledger.Entry("m"); e.Stage != decision.StageSettled {
		t.Errorf("read back after: got %+v, want settled", e)
	}
}

// TestRecordFitsTheAPIAtTenThousandFailures: 10,000 failed nodes with
// 253-character names and 400-character reasons are written in parts each
// under the API's 1 MiB, and read back exactly.
func TestRecordFitsTheAPIAtTenThousandFailures(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("%0253d", i)
		r.Ledger.Set(names[i], decision.Entry{Stage: decision.StageFailed, Reason: strings.Repeat("r", 400)}, true)
	}
	f.write(r)
	cms := f.cms()
	if len(cms) < 6 {
		t.Errorf("got %d record ConfigMaps, want the write split into parts", len(cms))
	}
	for _, cm := range cms {
		if size := len(cm.BinaryData[entriesKey]); size > 1<<20 {
			t.Errorf("got %s holding %d bytes, want at most 1 MiB", cm.Name, size)
		}
	}
	read, stale, _ := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	got, _ := read.Ledger.FailedNodes()
	if len(stale) != 0 || read.Ledger.Failed() != len(names) || !slices.Equal(got, names) {
		t.Errorf("read back %d failed nodes (stale %v), want exactly the %d written", read.Ledger.Failed(), stale, len(names))
	}
}

// TestDeletedRecordRewritten: a record ConfigMap deleted behind the
// controller's back, seen in its watch (or as a relist's tombstone, with an
// old resourceVersion), has the whole record written anew from the ledger,
// before the controller acts again, and the caller told.
func TestDeletedRecordRewritten(t *testing.T) {
	for _, how := range []string{"watch", "tombstone"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			r, _ := f.load(nil)
			r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
			r.Ledger.Set("b", entryAt(decision.StageSettled, t0), false)
			f.write(r)
			r.Ledger.Set("c", entryAt(decision.StageInFlight, t0), false)
			f.write(r)
			cm := f.cms()[segmentName(1, 1)]
			if err := f.client.CoreV1().ConfigMaps(ns).Delete(f.ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			seen := Summarize(cm)
			if how == "tombstone" {
				seen.ResourceVersion = "1"
			}
			if key, rewrite := f.store.Observe(seen, true); !rewrite || key != dsKey {
				t.Fatalf("got %q, %v from the deletion, want %q, true", key, rewrite, dsKey)
			}
			if _, urgent := r.Pending(); !urgent || r.Durable("c") {
				t.Errorf("got urgent %v, c durable %v; want the record rewritten before the controller acts", urgent, r.Durable("c"))
			}
			f.writeAndCompact(r)
			f.wantExact(r)
			if names := slices.Collect(maps.Keys(f.cms())); len(names) != 1 {
				t.Errorf("got %v, want the rewrite alone, the segments it supersedes deleted", names)
			}
		})
	}
}

// TestForeignChangeRewritten: an event of a record ConfigMap at a
// resourceVersion its create did not answer is someone else's change: the
// record is written anew, the changed ConfigMap goes; the controller's own
// writes, coming back on the same watch, change nothing.
func TestForeignChangeRewritten(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	if f.observeAll(f.store) || len(f.foreign) != 0 {
		t.Fatalf("got the controller's own write taken for someone else's")
	}
	own := f.cms()[segmentName(1, 1)]
	tampered := own.DeepCopy()
	forged, _ := encodeParts([]line{{"a", ""}, {"x", mustJSON(entryAt(decision.StageFailed, t0))}})
	tampered.BinaryData[entriesKey] = forged[0]
	tampered.ResourceVersion = kubetest.NextResourceVersion()
	if _, err := f.client.CoreV1().ConfigMaps(ns).Update(f.ctx, tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, rewrite := f.store.Observe(Summarize(tampered), false); !rewrite {
		t.Fatalf("got a tampered record not rewritten")
	}
	f.writeAndCompact(r)
	f.wantExact(r)
	if _, ok := f.cms()[own.Name]; ok {
		t.Errorf("got the tampered %s kept, want it deleted", own.Name)
	}
	if f.observeAll(f.store) {
		t.Errorf("got the rewrite taken for someone else's")
	}
}

// TestOwnEventBeforeTheAnswer: the informer may show the store's own create
// before the create's answer comes back. The answer judges the event: its
// own resourceVersion is the store's write; a newer one, or a deletion, is
// someone else's.
func TestOwnEventBeforeTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   func(cm *corev1.ConfigMap) (*Cached, bool)
		foreign bool
	}{
		{"its own", func(cm *corev1.ConfigMap) (*Cached, bool) { return Summarize(cm), false }, false},
		{"changed after", func(cm *corev1.ConfigMap) (*Cached, bool) {
			c := Summarize(cm)
			c.ResourceVersion = kubetest.NextResourceVersion()
			return c, false
		}, true},
		{"deleted after", func(cm *corev1.ConfigMap) (*Cached, bool) { return Summarize(cm), true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r, _ := f.load(nil)
			f.write(r)
			f.client.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap)
				if _, rewrite := f.store.Observe(tc.event(cm)); rewrite {
					t.Errorf("got the event judged before the create's answer")
				}
				return false, nil, nil
			})
			r.Ledger.Set("a", entryAt(decision.StageInFlight, t0), false)
			f.write(r)
			if got := len(f.foreign) > 0; got != tc.foreign {
				t.Fatalf("got told of someone else's change %v, want %v", got, tc.foreign)
			}
			if _, urgent := r.Pending(); urgent != tc.foreign {
				t.Errorf("got a rewrite due %v, want %v", urgent, tc.foreign)
			}
		})
	}
}

// TestRestartTakesWhatItReadAsItsOwn: a restarted controller takes what its
// Load read as its own: the informer's events of it, replayed or late, are
// nothing; a change after the read is someone else's, and so is a
// ConfigMap named as one of the record's that appears after it.
func TestRestartTakesWhatItReadAsItsOwn(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	restarted := f.newStore()
	if _, _, err := restarted.Load(f.ctx, dsUID, dsKey, target, nil); err != nil {
		t.Fatal(err)
	}
	if restarted.Observe(&Cached{ObjectMeta: metav1.ObjectMeta{Name: segmentName(9, 9), ResourceVersion: "1",
		Labels: map[string]string{Label: string(dsUID)}}}, false); len(f.foreign) != 0 {
		t.Errorf("got an event older than the list taken for a stranger's")
	}
	if restarted.Observe(Summarize(f.cms()[segmentName(1, 1)]), false); len(f.foreign) != 0 || f.observeAll(restarted) {
		t.Fatalf("got what the restarted store read taken for someone else's")
	}
	changed := Summarize(f.cms()[segmentName(1, 1)])
	changed.ResourceVersion = kubetest.NextResourceVersion()
	if _, rewrite := restarted.Observe(changed, false); !rewrite {
		t.Errorf("got a change after the restart not taken for someone else's")
	}
}

// TestStrangerNamedAsASegmentGoes: a ConfigMap named as one of the
// record's segments that the store never wrote (a forged failure, which a
// restarted controller would read back) is deleted, and the record written
// anew.
func TestStrangerNamedAsASegmentGoes(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	f.write(r)
	forged, _ := encodeParts([]line{{"x", mustJSON(entryAt(decision.StageFailed, t0))}})
	stranger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: segmentName(50, 50), ResourceVersion: kubetest.NextResourceVersion(),
		Labels: map[string]string{Label: string(dsUID)}}, BinaryData: map[string][]byte{entriesKey: forged[0]}}
	if _, err := f.client.CoreV1().ConfigMaps(ns).Create(f.ctx, stranger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.indexer.Add(Summarize(stranger)); err != nil {
		t.Fatal(err)
	}
	if _, rewrite := f.store.Observe(Summarize(stranger), false); !rewrite {
		t.Fatalf("got a stranger named as a segment not taken for someone else's")
	}
	f.writeAndCompact(r)
	if _, ok := f.cms()[stranger.Name]; ok {
		t.Errorf("got the stranger kept, want it deleted")
	}
	if entries, _ := f.read(); len(entries) != 0 {
		t.Errorf("read back %v, want no forged entry", entries)
	}
}

// TestLostFailuresCounted: a restarted controller whose published status
// counts more failures of the target than the record holds takes over those
// it names and counts the rest: it never counts fewer failures than it once
// published.
func TestLostFailuresCounted(t *testing.T) {
	f := newFixture(t)
	published := &rollout.Status{Revision: 2, Hash: "new222", Failed: rollout.FailedNodes{Count: 12,
		Nodes: []string{"n0", "n1"}, Reasons: map[string]string{"n0": "crash"}}}
	r, _ := f.load(published)
	if r.Lost != 12 || r.Ledger.Failed() != 12 {
		t.Fatalf("got lost %d, failed %d; want 12 and 12", r.Lost, r.Ledger.Failed())
	}
	if e, _ := r.Ledger.Entry("n0"); e.Stage != decision.StageFailed || e.Reason != "crash" {
		t.Errorf("got n0 %+v, want failed, crash", e)
	}
	if m := r.Ledger.Meta(); m.LostFailures != 10 {
		t.Errorf("got %d lost in the meta, want the 10 unnamed", m.LostFailures)
	}
	f.write(r)
	f.wantExact(r)
	// Another revision's status says nothing of this one.
	other := *published
	other.Revision = 3
	if r, _ := newFixture(t).load(&other); r.Lost != 0 || r.Ledger.Failed() != 0 {
		t.Errorf("another revision: got lost %d, failed %d; want none", r.Lost, r.Ledger.Failed())
	}
}

// segmentOf is a ConfigMap of the test record holding lines, as the store
// writes one, named as part i of n of the segment from..to.
func segmentOf(from, to uint64, i, n int, lines ...line) *corev1.ConfigMap {
	blobs, _ := encodeParts(lines)
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: partName(dsUID, target, from, to, i, n), ResourceVersion: "5",
		Labels: map[string]string{Label: string(dsUID)}}, BinaryData: map[string][]byte{entriesKey: blobs[0]}}
}

// TestWhatIsReadAndWhatIsStale: records of other revisions, a segment
// lacking a part (a write cut short) and one within a merge's range (a
// source not deleted yet) are returned to be deleted, and not read; an
// unreadable entry is skipped and written anew (here: removed) at the next
// write; no write takes a stale segment's name.
func TestWhatIsReadAndWhatIsStale(t *testing.T) {
	meta := line{metaKey, mustJSON(decision.Meta{TargetSince: metav1.NewTime(t0)})}
	other := segmentOf(1, 1, 0, 1, meta)
	other.Name = fmt.Sprintf("edgeota-rollout-%s-1-1-1", dsUID)
	merged := segmentOf(1, 8, 0, 1, meta, line{"good", mustJSON(entryAt(decision.StageSettled, t0))})
	source := segmentOf(3, 3, 0, 1, line{"good", mustJSON(entryAt(decision.StageInFlight, t0))})
	later := segmentOf(9, 9, 0, 1, line{"bad", "not json"}, line{"failed", mustJSON(entryAt(decision.StageFailed, t0))})
	cut := segmentOf(10, 10, 0, 2, line{"good", mustJSON(entryAt(decision.StageFailed, t0))})
	f := newFixture(t, other, merged, source, later, cut)
	r, stale := f.load(nil)
	if want := []string{other.Name, source.Name, cut.Name}; !slices.Equal(stale, slices.Sorted(slices.Values(want))) {
		t.Errorf("got stale %v, want %v", stale, want)
	}
	want := map[string]decision.Stage{"good": decision.StageSettled, "failed": decision.StageFailed}
	if got := r.Ledger.Entries(); len(got) != len(want) || got["good"].Stage != want["good"] || got["failed"].Stage != want["failed"] {
		t.Errorf("got %v, want good settled and failed failed, bad skipped", got)
	}
	if pending, _ := r.Pending(); !pending {
		t.Fatalf("got nothing pending, want the unreadable entry written anew")
	}
	f.now = t0.Add(time.Hour)
	f.write(r)
	if _, ok := f.cms()[segmentName(11, 11)]; !ok {
		t.Errorf("got %v, want the write after every name read, stale ones included (11)", slices.Sorted(maps.Keys(f.cms())))
	}
	if err := f.store.Delete(f.ctx, stale); err != nil {
		t.Fatal(err)
	}
	f.wantExact(r)
}

// TestOlderLayoutReadAndWrittenAnew: a record an older edgeota wrote (one
// key per node, failed and in-flight entries apart from offered and
// settled ones, a node in both after a move cut short) is read, the later
// stage winning, and written anew in this layout at the first write, the
// old ConfigMaps deleted.
func TestOlderLayoutReadAndWrittenAnew(t *testing.T) {
	legacy := func(suffix string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("edgeota-rollout-%s-2-%s", dsUID, suffix), ResourceVersion: "3",
			Labels: map[string]string{Label: string(dsUID), hashLabel: target.Hash, "edgeota.io/revision-number": "2"}}, Data: data}
	}
	active := legacy("0", map[string]string{metaKey: mustJSON(decision.Meta{TargetSince: metav1.NewTime(t0)}),
		"a": mustJSON(entryAt(decision.StageFailed, t0)), "m": mustJSON(entryAt(decision.StageInFlight, t0))})
	progress := legacy("p0", map[string]string{"m": mustJSON(entryAt(decision.StageSettled, t0)), "o": mustJSON(entryAt(decision.StageOffered, t0))})
	f := newFixture(t, active, progress)
	r, stale := f.load(nil)
	if r.Adopt || len(stale) != 0 {
		t.Fatalf("got adopt %v, stale %v; want the older record read", r.Adopt, stale)
	}
	stages := map[string]decision.Stage{}
	for node, e := range r.Ledger.Entries() {
		stages[node] = e.Stage
	}
	if want := map[string]decision.Stage{"a": decision.StageFailed, "m": decision.StageSettled, "o": decision.StageOffered}; !maps.Equal(stages, want) {
		t.Errorf("got %v, want %v", stages, want)
	}
	if pending, _ := r.Pending(); !pending {
		t.Fatalf("got nothing pending, want the record written anew")
	}
	f.writeAndCompact(r)
	for name := range f.cms() {
		if name == active.Name || name == progress.Name {
			t.Errorf("got %s kept, want the older layout deleted once written anew", name)
		}
	}
	f.wantExact(r)
}

// TestCachedHoldsMetadataOnly: the informer keeps a record ConfigMap's
// name, resourceVersion and labels, not its managedFields or annotations;
// Transform takes its own output.
func TestCachedHoldsMetadataOnly(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: segmentName(1, 1), UID: "u", ResourceVersion: "7",
		Labels: map[string]string{Label: string(dsUID)}, Annotations: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test", FieldsV1: metav1.NewFieldsV1(`{"f:binaryData":{}}`)}}}}
	out, err := Transform(m)
	c, ok := out.(*Cached)
	want := &Cached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name, UID: "u", ResourceVersion: "7", Labels: m.Labels}}
	if err != nil || !ok || !cmp.Equal(c, want) {
		t.Fatalf("got %#v, %v; want %#v", out, err, want)
	}
	if again, _ := Transform(c); again != c {
		t.Errorf("got %#v transforming a Cached, want it unchanged", again)
	}
}

// TestLoadReadsTheAPIServer: the cache holds no data, so a record is read
// from the API server, and a failed read is an error, not an empty record
// (which would be adopted as new).
func TestLoadReadsTheAPIServer(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	if n := len(f.indexer.List()); n != 0 {
		t.Fatalf("got %d cached objects, want an empty cache", n)
	}
	again, _ := f.load(nil)
	if again.Adopt || again.Ledger.Failed() != 1 {
		t.Errorf("got adopt %v, %d failed; want the record read back with its failure", again.Adopt, again.Ledger.Failed())
	}
	f.client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("connection refused")
	})
	if r, _, err := f.store.Load(f.ctx, dsUID, dsKey, target, nil); err == nil || r != nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("got %v, %v; want no record and the error", r, err)
	}
}

// TestCreateOverAnExistingConfigMap: a ConfigMap the store would create
// that exists already is not the store's (it writes each name once): the
// write fails, the stranger goes, and the record is written anew.
func TestCreateOverAnExistingConfigMap(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	forged, _ := encodeParts([]line{{"x", mustJSON(entryAt(decision.StageFailed, t0))}})
	if _, err := f.client.CoreV1().ConfigMaps(ns).Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: segmentName(1, 1),
		Labels: map[string]string{Label: string(dsUID)}}, BinaryData: map[string][]byte{entriesKey: forged[0]}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	if _, err := f.store.Write(f.ctx, r); !apierrors.IsAlreadyExists(errorsUnwrapAll(err)) {
		t.Fatalf("got %v, want the create refused", err)
	}
	f.write(r)
	f.wantExact(r)
}

// errorsUnwrapAll returns the innermost error of a chain of single wraps.
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
				err = j.Unwrap()[0]
				continue
			}
			return err
		}
		err = u.Unwrap()
	}
}

// TestBigWritesOneAtATime: a big write (every node's entry, as a new
// record of a settled fleet) waits for any other record's big write;
// writing a few changes never waits for one.
func TestBigWritesOneAtATime(t *testing.T) {
	f := newFixture(t)
	small, _ := f.load(nil)
	f.write(small)
	small.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)

	big, _, err := f.store.Load(f.ctx, "other-uid", "default/other", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bigWrite + 1 {
		big.Ledger.Set(fmt.Sprintf("node-%d", i), entryAt(decision.StageSettled, t0), false)
	}
	f.store.bigWrites.Lock() // another record's big write under way
	done := make(chan error)
	go func() { _, err := f.store.Write(f.ctx, big); done <- err }()
	f.write(small) // a few changes: not held up
	if !small.Durable("a") {
		t.Fatalf("got a not written, want it written while a big write is under way")
	}
	select {
	case err := <-done:
		t.Fatalf("got the big write done (%v) while another was under way, want it waiting", err)
	case <-time.After(100 * time.Millisecond):
	}
	f.store.bigWrites.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("got the big write still waiting after the other ended")
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
