package decision

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

var aru = rollout.StrategyAdvancedRollingUpdate

// TestDeletesWithinTheBudget: the budget's worth of Ready nodes goes, in
// name order; the next only once a node settled and proved alive.
func TestDeletesWithinTheBudget(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "2"})
	d := w.decide()
	if got := deleted(d); !slices.Equal(got, []string{"node-0", "node-1"}) {
		t.Fatalf("got %v deleted, want [node-0 node-1]", got)
	}
	if d := w.decide(); len(d.Take) != 0 || d.Unavailable != 2 {
		t.Fatalf("again: got %v deleted with %d unavailable, want none and 2: the deletions are in flight", deleted(d), d.Unavailable)
	}
	w.deliverDeletions()
	w.replace("node-0", true)
	if d := w.decide(); len(d.Take) != 0 {
		t.Fatalf("settled, not proven: got %v deleted, want none", deleted(d))
	}
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-2"}) {
		t.Errorf("proven alive: got %v deleted, want [node-2]", got)
	}
	if s, _ := w.r.State("node-0"); s != StateSettled {
		t.Errorf("got node-0 %v, want settled", s)
	}
	if e, _ := w.ledger.Entry("node-0"); e.Stage != StageSettled {
		t.Errorf("got node-0's entry %+v, want settled", e)
	}
}

// TestSkipsNotReadyNodes: a NotReady node is neither counted nor touched,
// and upgraded once it is Ready again.
func TestSkipsNotReadyNodes(t *testing.T) {
	w := newWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.setNode("node-0", func(n *Node) { n.Ready, n.ReadyStatus = false, "Unknown" })
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("got %v deleted, want [node-1]: node-0 is NotReady", got)
	}
	if s, _ := w.r.State("node-0"); s != StateSkipped {
		t.Errorf("got node-0 %v, want skipped", s)
	}
}

// TestSettledNodeRebootIsNotAFailure: a node whose new pod settled and
// proved alive is settled for good: a power cycle (NotReady, then a
// restart) is neither a failure nor a halt; while its pod is down on a Ready
// node it holds the budget, and the rollout waits, naming it.
func TestSettledNodeRebootIsNotAFailure(t *testing.T) {
	w := newWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.MaxFailedAnnotation: "1",
		rollout.ProgressDeadlineAnnotation: "20"})
	w.decide()
	w.deliverDeletions()
	w.replace("node-0", true)
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("got %v deleted, want [node-1]", got)
	}
	// node-0 powers off: NotReady.
	w.advance(30 * time.Second)
	w.setNode("node-0", func(n *Node) { n.Ready, n.ReadyStatus = false, "Unknown" })
	d := w.decide()
	if s, _ := w.r.State("node-0"); s != StateSkipped || d.Status.Failed.Count != 0 || d.Status.Halted {
		t.Fatalf("offline after settling: got node-0 %v, %d failed, halted %v; want skipped, none, not halted", s, d.Status.Failed.Count, d.Status.Halted)
	}
	if d.Status.Updated != 1 {
		t.Errorf("got %d updated, want node-0 counted updated while offline", d.Status.Updated)
	}
	// It comes back, its pod restarted and not ready yet: past the deadline
	// from the pod's creation, which a re-judged pod would fail.
	w.setNode("node-0", func(n *Node) { n.Ready, n.ReadyStatus = true, "True" })
	w.changePod("node-0", newHash, powerCycle(w.now))
	d = w.decide()
	if s, _ := w.r.State("node-0"); s != StateSettledDown {
		t.Fatalf("back, its pod down: got node-0 %v, want settled and down", s)
	}
	if d.Status.Failed.Count != 0 || d.Status.Halted {
		t.Fatalf("got %d failed, halted %v; want none, not halted", d.Status.Failed.Count, d.Status.Halted)
	}
	if d.Status.SettledUnavailable == nil || d.Status.SettledUnavailable.Count != 1 {
		t.Errorf("got settled unavailable %+v, want node-0", d.Status.SettledUnavailable)
	}
	// node-1 settles too; node-0's pod down holds the budget: the rollout
	// waits for it, naming it, instead of deleting node-2's pod.
	w.deliverDeletions()
	w.replace("node-1", true)
	w.heartbeat("node-1", w.now.Add(2*time.Second))
	d = w.decide()
	if len(d.Take) != 0 || !slices.Equal(d.Waiting, []string{"node-0"}) {
		t.Fatalf("got %v deleted, waiting for %v; want none deleted, waiting for [node-0]", deleted(d), d.Waiting)
	}
	// Even a crash loop of a settled node is not the rollout's failure.
	w.changePod("node-0", newHash, crashLoop)
	if d := w.decide(); d.Status.Failed.Count != 0 || d.Status.Halted {
		t.Errorf("crash-looping after settling: got %d failed, halted %v; want none", d.Status.Failed.Count, d.Status.Halted)
	}
	// Its pod back up: the budget is free again.
	w.changePod("node-0", newHash, func(p *Pod) { setReady(p, true, w.now) })
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-2"}) {
		t.Errorf("node-0's pod back: got %v deleted, want [node-2]", got)
	}
}

// TestReplacementOnASettledNodeStaysSettled: a settled node's pod replaced
// (evicted, deleted by its owner) by a pod of the same revision stays
// settled; the replacement only holds the budget until it is available.
func TestReplacementOnASettledNodeStaysSettled(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.ProgressDeadlineAnnotation: "20"})
	w.decide()
	w.deliverDeletions()
	w.replace("node-0", true)
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	w.decide()
	w.advance(time.Minute)
	crashing := w.replace("node-0", false)
	crashLoop(crashing)
	if d := w.decide(); d.Status.Failed.Count != 0 {
		t.Errorf("got %d failed, want none: node-0 settled", d.Status.Failed.Count)
	}
	if s, _ := w.r.State("node-0"); s != StateSettledDown {
		t.Errorf("got node-0 %v, want settled and down", s)
	}
}

// TestOneFailureHaltsInTheSingular: the reason of a halt at max-failed 1
// names one node, not "1 nodes".
func TestOneFailureHaltsInTheSingular(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.MaxFailedAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	crashLoop(w.replace("node-0", false))
	d := w.decide()
	if want := "1 node failed (max-failed 1)"; !d.Status.Halted || d.Status.Reason != want {
		t.Errorf("got halted %v, reason %q; want halted, %q", d.Status.Halted, d.Status.Reason, want)
	}
}

// TestFailuresHaltTheRollout: max-failed nodes that fail in flight halt
// it: nothing more is deleted.
func TestFailuresHaltTheRollout(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "2", rollout.MaxFailedAnnotation: "2"})
	w.decide()
	w.deliverDeletions()
	for _, n := range []string{"node-0", "node-1"} {
		crashLoop(w.replace(n, false))
	}
	d := w.decide()
	if !d.Status.Halted || d.Status.Failed.Count != 2 || len(d.Take) != 0 {
		t.Fatalf("got halted %v, %d failed, %v deleted; want halted, 2, none", d.Status.Halted, d.Status.Failed.Count, deleted(d))
	}
	if !strings.Contains(d.Status.Reason, "2 nodes failed (max-failed 2)") {
		t.Errorf("got reason %q, want it to say why", d.Status.Reason)
	}
	// Recovered, they stand failed.
	for _, n := range []string{"node-0", "node-1"} {
		w.changePod(n, newHash, func(p *Pod) { setReady(p, true, w.now) })
	}
	if d := w.decide(); !d.Status.Halted {
		t.Errorf("recovered: got not halted, want the failures to stand")
	}
}

// TestFailedWhenNotReadyWhileInFlight: a node that leaves Ready while a new
// pod of the revision runs there failed: the version may have cut it off.
func TestFailedWhenNotReadyWhileInFlight(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	w.replace("node-0", false)
	w.setNode("node-0", func(n *Node) { n.Ready, n.ReadyStatus = false, "Unknown" })
	w.decide()
	if s, why := w.r.State("node-0"); s != StateFailed || !strings.Contains(why, "NotReady after the upgrade (Ready=Unknown)") {
		t.Errorf("got node-0 %v (%s), want failed, NotReady after the upgrade", s, why)
	}
}

// TestAgentAnswerProvesLife: an answer to the challenge about the settled
// pod proves its node alive, in place of the next heartbeat; an answer about
// another pod proves nothing.
func TestAgentAnswerProvesLife(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	p := w.replace("node-0", true)
	w.decide()
	if a, ok := w.r.Awaiting()["node-0"]; !ok || a.Pod != p.UID {
		t.Fatalf("got awaiting %+v, want node-0 waiting for a proof about %s", w.r.Awaiting(), p.UID)
	}
	w.answer["node-0"] = "another-pod"
	w.dirty["node-0"] = true
	if d := w.decide(); len(d.Take) != 0 {
		t.Fatalf("an answer about another pod: got %v deleted, want none", deleted(d))
	}
	w.answer["node-0"] = p.UID
	w.dirty["node-0"] = true
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("answered: got %v deleted, want [node-1]", got)
	}
}

// TestHeartbeatBeforeSettledProvesNothing: a heartbeat sent before the new
// pod settled, or in the same second, proves nothing.
func TestHeartbeatBeforeSettledProvesNothing(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide()
	w.deliverDeletions()
	w.replace("node-0", true)
	w.heartbeat("node-0", w.now.Truncate(time.Second).Add(500*time.Millisecond))
	if d := w.decide(); len(d.Take) != 0 {
		t.Errorf("a heartbeat in the settled second: got %v deleted, want none", deleted(d))
	}
}
