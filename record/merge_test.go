package record

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/internal/kube/kubetest"
)

// TestMergesKeepARecordSmallAndExact: over random changes (nodes taken,
// settled, failed, cleared, forgotten), writes, merges and failed creates,
// a record keeps at most fanIn-1 segments of each level, a merge deletes
// what it replaces, and the cluster always holds what was written: read
// back by a restarted controller, every entry the ledger calls durable is
// there as the ledger holds it, and once everything is written, exactly
// the ledger.
func TestMergesKeepARecordSmallAndExact(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 46))
			f := newFixture(t)
			failing := false
			f.client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				if failing {
					return true, nil, errors.New("etcdserver: request timed out")
				}
				return false, nil, nil
			})
			r, _ := f.load(nil)
			for step := range 600 {
				node := fmt.Sprintf("node-%03d", rng.IntN(60))
				at := t0.Add(time.Duration(step) * time.Second)
				switch rng.IntN(10) {
				case 0, 1, 2:
					r.Ledger.Set(node, entryAt(decision.StageInFlight, at), rng.IntN(2) == 0)
				case 3, 4, 5:
					r.Ledger.Set(node, entryAt(decision.StageSettled, at), false)
				case 6:
					r.Ledger.Set(node, entryAt(decision.StageOffered, at), false)
				case 7:
					r.Ledger.Clear(node)
				case 8:
					r.Ledger.Forget(node)
				default:
					if rng.IntN(4) == 0 {
						r.Ledger.Set(node, entryAt(decision.StageFailed, at), true)
					}
				}
				f.now = at
				failing = rng.IntN(12) == 0
				_, _ = f.store.Write(f.ctx, r)
				if rng.IntN(3) == 0 {
					_ = f.store.Compact(f.ctx, r)
				}
				failing = false
				if step%50 == 49 {
					f.wantDurableReadBack(r)
					if err := f.store.Compact(f.ctx, r); err != nil {
						t.Fatal(err)
					}
					f.wantFewSegments(r)
				}
			}
			f.now = f.now.Add(ProgressInterval)
			f.write(r)
			if err := f.store.Compact(f.ctx, r); err != nil {
				t.Fatal(err)
			}
			f.wantExact(r)
			f.wantFewSegments(r)
		})
	}
}

// wantDurableReadBack fails unless a restarted controller reads back every
// entry the ledger calls durable, as the ledger holds it.
func (f *fixture) wantDurableReadBack(r *Record) {
	f.t.Helper()
	read, stale, err := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	got := read.Ledger.Entries()
	for node, e := range r.Ledger.Entries() {
		if r.Durable(node) && !cmp.Equal(got[node], e) {
			f.t.Errorf("node %s: read back %+v, want %+v, which the ledger calls durable", node, got[node], e)
		}
	}
	for _, name := range stale {
		if !strings.Contains(name, "of") {
			// A part of a write cut short may wait for the next write's
			// deletion; no whole segment should be stale but a merge's
			// sources, which its merge deletes.
			if p := r.parts[name]; p == nil || p.state != deleting && p.state != gone {
				f.t.Errorf("got %s stale on read, want every stale ConfigMap known to the store as going", name)
			}
		}
	}
}

// wantFewSegments fails unless the record holds at most fanIn-1 segments
// of each level (the rewrite's level aside), and the cluster no others.
func (f *fixture) wantFewSegments(r *Record) {
	f.t.Helper()
	r.mu.Lock()
	levels := map[int]int{}
	var names []string
	for _, seg := range r.segments {
		levels[level(seg.from, seg.to)]++
		for _, p := range seg.parts {
			names = append(names, p.name)
		}
	}
	r.mu.Unlock()
	for l, n := range levels {
		if n >= fanIn {
			f.t.Errorf("got %d segments of level %d, want at most %d", n, l, fanIn-1)
		}
	}
	var inCluster []string
	for name := range f.cms() {
		inCluster = append(inCluster, name)
	}
	slices.Sort(names)
	slices.Sort(inCluster)
	if !slices.Equal(names, inCluster) {
		f.t.Errorf("got the cluster holding %v, want the record's segments %v", inCluster, names)
	}
}

// TestMergeCutShortReadsBack: a merge whose sources were not deleted (the
// controller stopped in between) reads back as the merge, its sources
// returned stale; a merge whose parts were not all created reads back as
// its sources.
func TestMergeCutShortReadsBack(t *testing.T) {
	f := newFixture(t)
	deleting := true
	f.client.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !deleting {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	r, _ := f.load(nil)
	for i := range fanIn {
		r.Ledger.Set(fmt.Sprintf("node-%d", i), entryAt(decision.StageInFlight, t0), false)
		f.write(r)
	}
	if !r.CompactDue() {
		t.Fatalf("got no merge due after %d writes, want one", fanIn)
	}
	deleting = false
	if err := f.store.Compact(f.ctx, r); err == nil {
		t.Fatalf("got the merge's deletions done, want them refused")
	}
	read, stale, err := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != fanIn {
		t.Errorf("got stale %v, want the merge's %d sources", stale, fanIn)
	}
	if diff := cmp.Diff(r.Ledger.Entries(), read.Ledger.Entries()); diff != "" {
		t.Errorf("read back differs (-ledger +read):\n%s", diff)
	}
	deleting = true
	if err := f.store.Compact(f.ctx, r); err != nil {
		t.Fatalf("got %v, want the sources deleted at the next merge", err)
	}
	f.wantFewSegments(r)
}

// gatedDeletes serves a client whose ConfigMap deletions each wait for a
// token on gate, outside the fake clientset's lock (which a reactor holds),
// so that other requests go on meanwhile.
type gatedDeletes struct {
	kube.Interface
	gate chan struct{}
}

func (g gatedDeletes) CoreV1() kube.CoreV1 { return gatedCore{g.Interface.CoreV1(), g.gate} }

type gatedCore struct {
	kube.CoreV1
	gate chan struct{}
}

func (g gatedCore) ConfigMaps(ns string) kube.ConfigMaps {
	return gatedConfigMaps{g.CoreV1.ConfigMaps(ns), g.gate}
}

type gatedConfigMaps struct {
	kube.ConfigMaps
	gate chan struct{}
}

func (g gatedConfigMaps) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	<-g.gate
	return g.ConfigMaps.Delete(ctx, name, opts)
}

// TestWriteNeverWaitsForAMerge: a write ahead of a deletion of pods, made
// while a merge deletes the segments it replaced, goes through at once;
// the merge ends once its deletions do, and the record reads back exact.
func TestWriteNeverWaitsForAMerge(t *testing.T) {
	f := newFixture(t)
	gate := make(chan struct{})
	store := NewStore(gatedDeletes{kubetest.Wrap(f.client), gate}, ns, f.indexer, "test",
		func(int, int) {}, func(string) {}, func() time.Time { return f.now }, klog.Background())
	f.store = store
	r, _ := f.load(nil)
	for i := range fanIn {
		r.Ledger.Set(fmt.Sprintf("node-%d", i), entryAt(decision.StageInFlight, t0), false)
		f.write(r)
	}
	compacted := make(chan error, 1)
	go func() { compacted <- store.Compact(f.ctx, r) }()
	gate <- struct{}{} // the merge is written, and deletes what it replaced
	r.Ledger.Set("taken", entryAt(decision.StageInFlight, t0), true)
	written := make(chan error, 1)
	go func() { _, err := store.Write(f.ctx, r); written <- err }()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("got the write waiting for the merge's deletions, want it through at once")
	}
	if !r.Durable("taken") {
		t.Fatalf("got taken not durable after the write, want it written")
	}
	for range fanIn - 1 {
		gate <- struct{}{}
	}
	if err := <-compacted; err != nil {
		t.Fatal(err)
	}
	f.wantExact(r)
}

// TestMergesBesideWritesReadBackExact: merges running beside writes, a
// rewrite among them, leave a record that reads back exactly as the ledger
// holds it once everything is written.
func TestMergesBesideWritesReadBackExact(t *testing.T) {
	f := newFixture(t)
	r, _ := f.load(nil)
	stop := make(chan struct{})
	compacted := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				compacted <- f.store.Compact(f.ctx, r)
				return
			default:
				if err := f.store.Compact(f.ctx, r); err != nil {
					compacted <- err
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for step := range 400 {
		node := fmt.Sprintf("node-%03d", step%50)
		switch step % 7 {
		case 0, 1, 2:
			r.Ledger.Set(node, entryAt(decision.StageInFlight, t0.Add(time.Duration(step)*time.Second)), true)
		case 3, 4:
			r.Ledger.Set(node, entryAt(decision.StageSettled, t0.Add(time.Duration(step)*time.Second)), false)
		case 5:
			r.Ledger.Clear(node)
		default:
			if step%70 == 6 {
				r.mu.Lock()
				r.lose() // a foreign change seen: everything written anew
				r.mu.Unlock()
			}
		}
		f.write(r)
	}
	close(stop)
	if err := <-compacted; err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(ProgressInterval) // the settled entries are due
	f.write(r)
	f.wantExact(r)
	read, _, err := f.newStore().Load(f.ctx, dsUID, dsKey, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Ledger.Entries(), read.Ledger.Entries()); diff != "" {
		t.Errorf("a restarted controller reads back (-ledger +read):\n%s", diff)
	}
}
