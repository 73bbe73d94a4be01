package decision

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/rollout"
)

// TestLedgerGivesBackEveryEntryAsSet: whatever an entry holds, the Ledger
// gives it back, field by field, to the record's precision (whole seconds):
// every stage and proof, one this controller does not name (a newer
// controller's, read back), a reason, a pod, nil and set times, the Unix
// epoch and the far future, NoPodLost.
func TestLedgerGivesBackEveryEntryAsSet(t *testing.T) {
	at := func(tm time.Time) *metav1.Time { return &metav1.Time{Time: tm} }
	t0 := time.Date(2026, 11, 27, 13, 40, 5, 0, time.UTC)
	entries := map[string]Entry{
		"settled":      {Stage: StageSettled, At: at(t0), Proof: ProofHeartbeat},
		"answered":     {Stage: StageSettled, At: at(t0), OfferedAt: at(t0.Add(-time.Hour)), Proof: ProofAnswer},
		"old-settled":  {Stage: StageSettled, At: at(t0)}, // no proof: an older controller's
		"failed":       {Stage: StageFailed, Reason: "crash-looping: back-off 5m0s", At: at(t0)},
		"pull-failed":  {Stage: StageFailed, Reason: "pull", At: at(t0), NoPodLost: true},
		"in-flight":    {Stage: StageInFlight, Pod: "uid-1", Since: at(t0)},
		"ahead":        {Stage: StageInFlight, Pod: "uid-2"}, // written ahead of the deletion: no Since
		"offered":      {Stage: StageOffered, OfferedAt: at(t0)},
		"newer-stage":  {Stage: "quarantined", At: at(t0)},
		"newer-proof":  {Stage: StageSettled, At: at(t0), Proof: "attestation"},
		"epoch":        {Stage: StageSettled, At: at(time.Unix(0, 0))},
		"far-future":   {Stage: StageFailed, At: at(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))},
		"before-epoch": {Stage: StageInFlight, Since: at(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC))},
		"empty":        {},
	}
	l := NewLedger(entries, Meta{})
	l.Set("set", Entry{Stage: StageInFlight, Pod: "uid-3", Since: at(t0), OfferedAt: at(t0)}, false)
	entries["set"] = Entry{Stage: StageInFlight, Pod: "uid-3", Since: at(t0), OfferedAt: at(t0)}
	got := l.Entries()
	if len(got) != len(entries) {
		t.Fatalf("got %d entries, want %d", len(got), len(entries))
	}
	for node, want := range entries {
		e, ok := l.Entry(node)
		if !ok {
			t.Errorf("%s: got no entry, want %+v", node, want)
			continue
		}
		if g, w := describe(e), describe(want); g != w {
			t.Errorf("%s: got %s, want %s", node, g, w)
		}
		if g, w := describe(got[node]), describe(want); g != w {
			t.Errorf("%s in Entries: got %s, want %s", node, g, w)
		}
	}
	if got, want := l.Failed(), 3; got != want {
		t.Errorf("got %d failed, want %d", got, want)
	}
	names, why := l.FailedNodes()
	if got, want := fmt.Sprint(names, why), fmt.Sprint([]string{"failed", "far-future", "pull-failed"},
		map[string]string{"failed": "crash-looping: back-off 5m0s", "far-future": "", "pull-failed": "pull"}); got != want {
		t.Errorf("got failed nodes %s, want %s", got, want)
	}

	// Below the record's precision: kept to the second, as the record
	// keeps it.
	l.Set("subsecond", Entry{Stage: StageSettled, At: at(t0.Add(700 * time.Millisecond))}, false)
	if e, _ := l.Entry("subsecond"); !e.At.Time.Equal(t0) {
		t.Errorf("got At %s, want %s: whole seconds", e.At.Time, t0)
	}
}

// describe is an Entry with its times as instants, for comparison.
func describe(e Entry) string {
	tm := func(t *metav1.Time) string {
		if t == nil {
			return "nil"
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{stage %q reason %q at %s pod %q since %s offeredAt %s noPodLost %t proof %q}",
		e.Stage, e.Reason, tm(e.At), e.Pod, tm(e.Since), tm(e.OfferedAt), e.NoPodLost, e.Proof)
}

// TestAHeldEntryIsSmall: the packed entry stays at 40 bytes, and a settled
// entry with a named proof allocates nothing beyond it. A field added to
// Entry that the common entry carries belongs in held, not in heldRare.
func TestAHeldEntryIsSmall(t *testing.T) {
	if got := unsafe.Sizeof(held{}); got != 40 {
		t.Errorf("got held of %d bytes, want 40", got)
	}
	settled := Entry{Stage: StageSettled, At: &metav1.Time{Time: time.Unix(1795780000, 0)}, OfferedAt: &metav1.Time{Time: time.Unix(1795770000, 0)}, Proof: ProofAnswer}
	if h := hold(settled); h.rare != nil {
		t.Errorf("got a settled entry's rare part %+v, want none", *h.rare)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = hold(settled) }); allocs != 0 {
		t.Errorf("got %.0f allocations holding a settled entry, want 0", allocs)
	}
}

// TestASettledNodeIsSmall: a Rollout holds a nodeInfo per node and
// DaemonSet (152 bytes: its architecture, for pinning, is a string the
// node's cache shares), and what few verdicts carry is behind verdict.rare: a node
// proven by this very judgement carries its proof there, and once judged
// again, settled, it carries nothing, as an old node does.
func TestASettledNodeIsSmall(t *testing.T) {
	if got := unsafe.Sizeof(nodeInfo{}); got != 152 {
		t.Errorf("got nodeInfo of %d bytes, want 152", got)
	}
	if got := unsafe.Sizeof(verdict{}); got != 64 {
		t.Errorf("got verdict of %d bytes, want 64", got)
	}
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	w.replace("node-0", true)
	w.decide()
	if v := w.r.nodes["node-0"].verdict; !v.awaitsProof || v.proofPod() == "" {
		t.Fatalf("got node-0's verdict %+v, want it awaiting its new pod's proof of life", v)
	}
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	w.decide()
	if got := w.r.nodes["node-0"].verdict.proven(); got != ProofHeartbeat {
		t.Fatalf("got node-0 proven by %q in this judgement, want %q", got, ProofHeartbeat)
	}
	w.now = w.now.Add(time.Second)
	w.dirty["node-0"] = true
	w.decide()
	for _, node := range []string{"node-0", "node-1"} {
		if v := w.r.nodes[node].verdict; v.rare != nil {
			t.Errorf("got %s's verdict (%s) carrying %+v, want nothing rare", node, v.state, *v.rare)
		}
	}
}
