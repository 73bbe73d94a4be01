package record

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/edgeota/edgeota/internal/kube/kubetest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/edgeota/edgeota/decision"
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
	foreign []string
	bytes   int
	writes  int
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
	f.store = NewStore(kubetest.Wrap(f.client), ns, f.indexer, "test", func(b int) { f.bytes += b; f.writes++ },
		func(key string) { f.foreign = append(f.foreign, key) }, func() time.Time { return f.now }, klog.Background())
	return f
}

// stored returns the record ConfigMaps as the API holds them, by name.
func (f *fixture) stored() map[string]*corev1.ConfigMap {
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

func name(c string) string { return fmt.Sprintf("edgeota-rollout-%s-2-%s", dsUID, c) }

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
	cm := f.stored()[name("0")]
	if cm == nil || cm.Data[metaKey] == "" || cm.Labels[Label] != string(dsUID) {
		t.Fatalf("got %+v, want the first record ConfigMap with the meta", cm)
	}
	again, _ := f.load(nil)
	if again.Adopt || !again.Ledger.Meta().TargetSince.Time.Equal(t0) {
		t.Errorf("read back: got adopt %v, target since %s; want a known record first seen at %s", again.Adopt, again.Ledger.Meta().TargetSince, t0)
	}
}

// TestActiveAndProgressKeptApart: failed and in-flight entries go to the
// active ConfigMaps, offered and settled ones to the progress ones, whose
// writes are paced: a second within ProgressInterval waits, and Write says
// how long.
func TestActiveAndProgressKeptApart(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	r.Ledger.Set("b", entryAt(decision.StageInFlight, t0), true)
	r.Ledger.Set("c", entryAt(decision.StageSettled, t0), false)
	r.Ledger.Set("d", entryAt(decision.StageOffered, t0), false)
	f.write(r)
	cms := f.stored()
	active, progress := cms[name("0")], cms[name("p0")]
	if active == nil || progress == nil {
		t.Fatalf("got %v, want %s and %s", slices.Collect(func(yield func(string) bool) {
			for n := range cms {
				yield(n)
			}
		}), name("0"), name("p0"))
	}
	if _, ok := active.Data["a"]; !ok || active.Data["b"] == "" || active.Data["c"] != "" || active.Data["d"] != "" {
		t.Errorf("got active %v, want a and b only (and the meta)", active.Data)
	}
	if progress.Data["c"] == "" || progress.Data["d"] == "" || len(progress.Data) != 2 {
		t.Errorf("got progress %v, want c and d only", progress.Data)
	}
	// A settled node a second later waits for the pacing.
	r.Ledger.Set("e", entryAt(decision.StageSettled, t0), false)
	f.now = t0.Add(time.Second)
	if wait := f.write(r); wait != ProgressInterval-time.Second {
		t.Errorf("got wait %s, want %s", wait, ProgressInterval-time.Second)
	}
	if f.stored()[name("p0")].Data["e"] != "" || r.Durable("e") {
		t.Errorf("got e written within the interval, want it paced")
	}
	f.now = t0.Add(ProgressInterval)
	if wait := f.write(r); wait != 0 || f.stored()[name("p0")].Data["e"] == "" || !r.Durable("e") {
		t.Errorf("once due: got wait %s and e written %v, want it written", wait, r.Durable("e"))
	}
}

// TestMoveRemovesTheStaleKeyOnceTheNewPlaceHoldsIt: a node settling moves
// from the active ConfigMap to the progress one: its in-flight key is
// removed only once the settled one is written, so that a controller
// restarted in between finds it; read back, the later stage wins.
func TestMoveRemovesTheStaleKeyOnceTheNewPlaceHoldsIt(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("n", entryAt(decision.StageSettled, t0), false) // the progress ConfigMap exists
	r.Ledger.Set("m", entryAt(decision.StageInFlight, t0), true)
	f.write(r)
	f.now = t0.Add(time.Second)
	r.Ledger.Set("m", entryAt(decision.StageSettled, f.now), false)
	f.write(r) // paced: the settled entry waits, and so does the removal
	if f.stored()[name("0")].Data["m"] == "" {
		t.Fatalf("got m removed from the active ConfigMap before its settled entry was written")
	}
	// Read back now (a restart in between): in flight still.
	between, _ := f.load(nil)
	if e, _ := between.Ledger.Entry("m"); e.Stage != decision.StageInFlight {
		t.Errorf("read back between: got %+v, want in flight", e)
	}
	f.now = t0.Add(ProgressInterval + time.Second)
	f.write(r)
	cms := f.stored()
	if cms[name("p0")].Data["m"] == "" || cms[name("0")].Data["m"] != "" {
		t.Errorf("got active %v and progress %v, want m moved", cms[name("0")].Data, cms[name("p0")].Data)
	}
	// Both keys present (a move cut short): the later stage wins.
	both := cms[name("0")].DeepCopy()
	both.Data["m"] = mustJSON(entryAt(decision.StageInFlight, t0))
	if _, err := f.client.CoreV1().ConfigMaps(ns).Update(f.ctx, both, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read, _ := f.load(nil)
	if e, _ := read.Ledger.Entry("m"); e.Stage != decision.StageSettled {
		t.Errorf("both read back: got %+v, want settled", e)
	}
	if pending, _ := read.Pending(); !pending {
		t.Errorf("got nothing pending, want the stale key removed at the next write")
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestRecordFitsTheAPIAtTenThousandFailures: 10,000 failed nodes with
// 253-character names fit in record ConfigMaps each under the API's 1 MiB,
// and read back exactly.
func TestRecordFitsTheAPIAtTenThousandFailures(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("%0253d", i)
		r.Ledger.Set(names[i], decision.Entry{Stage: decision.StageFailed, Reason: strings.Repeat("r", 400)}, true)
	}
	f.write(r)
	cms := f.stored()
	if len(cms) < 6 {
		t.Errorf("got %d record ConfigMaps, want the record split across several", len(cms))
	}
	for _, cm := range cms {
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		if size > 1<<20 {
			t.Errorf("got %s holding %d bytes, want at most 1 MiB", cm.Name, size)
		}
	}
	read, stale := f.load(nil)
	got, _ := read.Ledger.FailedNodes()
	if len(stale) != 0 || read.Ledger.Failed() != len(names) || !slices.Equal(got, names) {
		t.Errorf("read back %d failed nodes (stale %v), want exactly the %d written", read.Ledger.Failed(), stale, len(names))
	}
}

// TestDeletedRecordRewritten: a record ConfigMap deleted behind the
// controller's back, whether seen in its watch or at its next write, is
// written again whole from the ledger, and the caller told.
func TestDeletedRecordRewritten(t *testing.T) {
	for _, how := range []string{"watch", "write"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			r, _ := f.load(nil)
			r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
			f.write(r)
			cm := f.stored()[name("0")]
			if err := f.client.CoreV1().ConfigMaps(ns).Delete(f.ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if how == "watch" {
				if key, rewrite := f.store.Observe(Summarize(cm), true); !rewrite || key != dsKey {
					t.Fatalf("got %q, %v from the deletion, want %q, true", key, rewrite, dsKey)
				}
			} else {
				r.Ledger.Set("b", entryAt(decision.StageInFlight, t0), true)
				if _, err := f.store.Write(f.ctx, r); err == nil {
					t.Fatalf("got no error writing into a deleted record, want one")
				}
				if !slices.Equal(f.foreign, []string{dsKey}) {
					t.Errorf("got told %v, want %s", f.foreign, dsKey)
				}
			}
			f.write(r)
			again := f.stored()[name("0")]
			if again == nil || again.Data["a"] == "" || again.Data[metaKey] == "" {
				t.Errorf("got %v, want the record written again whole", again)
			}
		})
	}
}

// TestForeignChangeRewritten: an event showing content the controller did
// not write has the ConfigMap written again; the controller's own writes,
// coming back on the same watch, change nothing.
func TestForeignChangeRewritten(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	own := f.stored()[name("0")]
	if _, rewrite := f.store.Observe(Summarize(own), false); rewrite {
		t.Errorf("got the controller's own write taken for someone else's")
	}
	tampered := own.DeepCopy()
	delete(tampered.Data, "a")
	tampered.Data["x"] = "{}"
	tampered.ResourceVersion = "999"
	if _, err := f.client.CoreV1().ConfigMaps(ns).Update(f.ctx, tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, rewrite := f.store.Observe(Summarize(tampered), false); !rewrite {
		t.Fatalf("got a tampered record not rewritten")
	}
	f.write(r)
	cm := f.stored()[name("0")]
	if cm.Data["a"] == "" || cm.Data["x"] != "" {
		t.Errorf("got %v, want a restored and x removed", cm.Data)
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
	// Another revision's status says nothing of this one.
	other := *published
	other.Revision = 3
	if r, _ := newFixture(t).load(&other); r.Lost != 0 || r.Ledger.Failed() != 0 {
		t.Errorf("another revision: got lost %d, failed %d; want none", r.Lost, r.Ledger.Failed())
	}
}

// TestOtherRevisionsAreStale: records of other revisions are returned to be
// deleted; an unreadable entry is skipped and removed at the next write.
func TestOtherRevisionsAreStale(t *testing.T) {
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("edgeota-rollout-%s-1-0", dsUID),
		Labels: map[string]string{Label: string(dsUID), hashLabel: "old111"}}}
	cur := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("0"), ResourceVersion: "5",
		Labels: map[string]string{Label: string(dsUID), hashLabel: "new222"}},
		Data: map[string]string{"bad": "not json", "good": mustJSON(entryAt(decision.StageFailed, t0)), metaKey: mustJSON(decision.Meta{TargetSince: metav1.NewTime(t0)})}}
	f := newFixture(t, old, cur)
	r, stale := f.load(nil)
	if !slices.Equal(stale, []string{old.Name}) {
		t.Errorf("got stale %v, want [%s]", stale, old.Name)
	}
	if _, ok := r.Ledger.Entry("bad"); ok || r.Ledger.Failed() != 1 {
		t.Errorf("got the unreadable entry read, or %d failed; want skipped, 1", r.Ledger.Failed())
	}
	f.write(r)
	if cm := f.stored()[name("0")]; cm.Data["bad"] != "" {
		t.Errorf("got %v, want the unreadable entry removed", cm.Data)
	}
}

// TestCachedHoldsNoData: the informer keeps a record ConfigMap's name,
// labels and a digest of its data; the same data in any order has the same
// digest, any change another one; Transform takes its own output.
func TestCachedHoldsNoData(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("0"), ResourceVersion: "7",
		Labels: map[string]string{Label: string(dsUID)}}, Data: map[string]string{"a": "1", "b": "2"}}
	out, err := Transform(cm)
	c, ok := out.(*Cached)
	if err != nil || !ok || c.Name != cm.Name || c.ResourceVersion != "7" || c.Labels[Label] != string(dsUID) || c.Keys != 2 {
		t.Fatalf("got %#v, %v; want the ConfigMap's name, resourceVersion, labels and 2 keys", out, err)
	}
	if again, _ := Transform(c); again != c {
		t.Errorf("got %#v transforming a Cached, want it unchanged", again)
	}
	if want := digestOf(map[string]uint64{"b": hashOf("2"), "a": hashOf("1")}); c.Digest != want {
		t.Errorf("got digest %x, want %x: the digest of the hashes a shard keeps", c.Digest, want)
	}
	for _, data := range []map[string]string{{"a": "1", "b": "3"}, {"a": "2", "b": "1"}, {"a": "1"}, {"a": "1", "b": "2", "c": ""}} {
		other := cm.DeepCopy()
		other.Data = data
		if d := Summarize(other); d.Digest == c.Digest && d.Keys == c.Keys {
			t.Errorf("got data %v taken for %v", data, cm.Data)
		}
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

// TestCreateOverAnExistingConfigMapReplacesIt: a ConfigMap the store would
// create that exists already (created by a write whose answer was lost)
// is replaced whole: keys someone else put there go.
func TestCreateOverAnExistingConfigMapReplacesIt(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	if _, err := f.client.CoreV1().ConfigMaps(ns).Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name("0")},
		Data: map[string]string{"x": "{}"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)
	f.write(r)
	cm := f.stored()[name("0")]
	if cm.Data["a"] == "" || cm.Data[metaKey] == "" || cm.Data["x"] != "" {
		t.Errorf("got %v, want a and the meta only", cm.Data)
	}
	if _, rewrite := f.store.Observe(Summarize(cm), false); rewrite || len(f.foreign) != 0 {
		t.Errorf("got the replaced ConfigMap taken for someone else's (told %v)", f.foreign)
	}
}

// TestWholeWritesOneAtATime: writing a ConfigMap whole (a record's first
// write) waits for any other whole write; writing changes into created
// ConfigMaps never waits for one.
func TestWholeWritesOneAtATime(t *testing.T) {
	f := newFixture(t)
	created, _ := f.load(nil)
	f.write(created)
	created.Ledger.Set("a", entryAt(decision.StageFailed, t0), true)

	other, _, err := f.store.Load(f.ctx, "other-uid", "default/other", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.store.wholeWrites.Lock() // another record's whole write under way
	done := make(chan error)
	go func() { _, err := f.store.Write(f.ctx, other); done <- err }()
	f.write(created) // changes only: not held up
	if f.stored()[name("0")].Data["a"] == "" {
		t.Fatalf("got a not written, want it merged while a whole write is under way")
	}
	select {
	case err := <-done:
		t.Fatalf("got the new record written (%v) while another whole write was under way, want it waiting", err)
	case <-time.After(100 * time.Millisecond):
	}
	f.store.wholeWrites.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("got the new record's write still waiting after the other ended")
	}
	if len(f.stored()) != 2 {
		t.Errorf("got %d record ConfigMaps, want both records' first", len(f.stored()))
	}
}
