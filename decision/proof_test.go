package decision

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

// proven returns the NoticeProven notices among notices.
func proven(notices []Notice) []Notice {
	return slices.DeleteFunc(slices.Clone(notices), func(n Notice) bool { return n.Kind != NoticeProven })
}

// TestSettledEntryRecordsItsProof: a node settled by its agent's answer and
// one settled by a heartbeat have their proof in their entries, the rollout
// status counts each kind, and a controller rebuilding from the record
// counts them the same.
func TestSettledEntryRecordsItsProof(t *testing.T) {
	w := newWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "2"})
	w.decide()
	w.deliverDeletions()
	answered := w.replace("node-0", true)
	w.replace("node-1", true)
	if d := w.decide(); d.Status.Proven != nil {
		t.Fatalf("nothing settled yet: got proven %+v, want none", d.Status.Proven)
	}
	w.answer["node-0"] = answered.UID
	w.dirty["node-0"] = true
	w.heartbeat("node-1", w.now.Add(2*time.Second))
	d := w.decide()
	for node, want := range map[string]Proof{"node-0": ProofAnswer, "node-1": ProofHeartbeat} {
		if e, _ := w.ledger.Entry(node); e.Stage != StageSettled || e.Proof != want {
			t.Errorf("got %s's entry %+v, want settled by %s", node, e, want)
		}
	}
	want := rollout.ProvenNodes{Answer: 1, Heartbeat: 1}
	if d.Status.Proven == nil || *d.Status.Proven != want {
		t.Fatalf("got proven %+v, want %+v", d.Status.Proven, want)
	}
	w.build(false)
	if got := w.r.Decide(w.now).Status.Proven; got == nil || *got != want {
		t.Errorf("rebuilt from the record: got proven %+v, want %+v", got, want)
	}
}

// TestAnswerNamedWhenBothProve: a node whose answer and heartbeat both
// prove it at one judgement is counted as proven by the answer.
func TestAnswerNamedWhenBothProve(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	p := w.replace("node-0", true)
	w.decide()
	w.answer["node-0"] = p.UID
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	w.decide()
	if e, _ := w.ledger.Entry("node-0"); e.Proof != ProofAnswer {
		t.Errorf("got node-0's entry %+v, want settled by %s", e, ProofAnswer)
	}
}

// TestProvenNoticeMeasuresTheWait: the Rollout reports each node it settles
// with its proof and how long it saw the node wait for it, by the clock it
// judges with: from its first judgement of the node awaiting proof to the
// proof; unknown (not Waited) to a Rollout that finds the node proven as it
// is built, which did not see the wait begin.
func TestProvenNoticeMeasuresTheWait(t *testing.T) {
	w := newWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "3"})
	w.decide()
	w.deliverDeletions()
	p0 := w.replace("node-0", true)
	w.replace("node-1", true)
	w.replace("node-2", true)
	if got := proven(w.refresh()); len(got) != 0 {
		t.Fatalf("settled, not proven: got %+v, want no proof", got)
	}

	w.advance(1500 * time.Millisecond)
	w.answer["node-0"] = p0.UID
	w.dirty["node-0"] = true
	// node-1 too is seen awaiting, and again later: the wait runs from the
	// first sight.
	w.dirty["node-1"] = true
	got := proven(w.refresh())
	if want := []Notice{{Kind: NoticeProven, Node: "node-0", Proof: ProofAnswer, Wait: 1500 * time.Millisecond, Waited: true}}; !slices.Equal(got, want) {
		t.Fatalf("answered after 1.5 s: got %+v, want %+v", got, want)
	}

	w.advance(2 * time.Second)
	w.heartbeat("node-1", w.now)
	got = proven(w.refresh())
	if want := []Notice{{Kind: NoticeProven, Node: "node-1", Proof: ProofHeartbeat, Wait: 3500 * time.Millisecond, Waited: true}}; !slices.Equal(got, want) {
		t.Fatalf("heartbeat 3.5 s after the first sight: got %+v, want %+v", got, want)
	}

	// A Rollout built afresh (a restarted controller) that finds node-2
	// proven did not see it begin to wait.
	w.advance(time.Second)
	w.heartbeat("node-2", w.now)
	w.r = New(w.cfg, w.target, w.ledger, false)
	got = proven(w.r.Build(w.now, slices.Collect(maps.Keys(w.pods)), w.facts))
	if want := []Notice{{Kind: NoticeProven, Node: "node-2", Proof: ProofHeartbeat}}; !slices.Equal(got, want) {
		t.Errorf("proven at a rebuild: got %+v, want %+v, its wait unknown", got, want)
	}
}

// TestProvenAtFirstSightWaitsNothing: a node whose heartbeat already proves
// it when the Rollout first judges its pod settled waited nothing.
func TestProvenAtFirstSightWaitsNothing(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	w.refresh()
	w.replace("node-0", true)
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	got := proven(w.refresh())
	if want := []Notice{{Kind: NoticeProven, Node: "node-0", Proof: ProofHeartbeat, Waited: true}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestNoticesAreNotKeptAfterTheyAreReturned: a refresh that proves every
// node at once returns a notice per node; the next refresh, with nothing
// to notice, returns none and keeps nothing of them (a Rollout lives as
// long as its DaemonSet, and the notices point at pods).
func TestNoticesAreNotKeptAfterTheyAreReturned(t *testing.T) {
	const nodes = 20
	w := newWorld(t, nodes, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%"})
	w.decide()
	w.deliverDeletions()
	for node := range w.nodes {
		w.replace(node, true)
	}
	w.decide()
	for node := range w.nodes {
		w.heartbeat(node, w.now.Add(2*time.Second))
	}
	if got := len(proven(w.refresh())); got != nodes {
		t.Fatalf("got %d NoticeProven notices, want %d", got, nodes)
	}
	w.advance(time.Second)
	w.dirty["node-0"] = true
	if got := w.refresh(); len(got) != 0 {
		t.Fatalf("got notices %+v from a quiet refresh, want none", got)
	}
	if got := cap(w.r.notices); got != 0 {
		t.Errorf("got %d notices' room kept after a quiet refresh, want 0", got)
	}
}
