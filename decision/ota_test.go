package decision

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

var ota = rollout.StrategyOTA

// want is the PodNeedUpgrade the node's old pod should carry.
func (w *world) want(d *Decision, node string) Condition {
	w.t.Helper()
	for _, p := range w.pods[node] {
		if !w.target.UpToDate(p) && !p.Terminating {
			c, ok := w.r.NeedUpgrade(d, p, true)
			if !ok {
				w.t.Fatalf("got no condition for %s, want one", node)
			}
			return c
		}
	}
	w.t.Fatalf("no old pod on %s", node)
	return Condition{}
}

// TestOffersComeFromTheRecord: a node's PodNeedUpgrade=True that the
// controller never wrote (a node may write its own pods' status) is no
// offer: it is written back to False, not counted, and never carried out,
// however old; one the controller finds on its first sight of a record is
// adopted as offered now.
func TestOffersComeFromTheRecord(t *testing.T) {
	annotations := map[string]string{rollout.PartitionAnnotation: "2", rollout.UpgradeDeadlineAnnotation: "60"}
	w := newWorld(t, 3, ota, annotations)
	w.build(false)
	d := w.decide()
	if !slices.Equal(d.Offered, []string{"node-0"}) {
		t.Fatalf("got %v offered, want [node-0] (partition 2 of 3)", d.Offered)
	}
	// node-2 writes PodNeedUpgrade=True on its own pod.
	w.changePod("node-2", oldHash, func(p *Pod) { p.NeedUpgrade = offeredCondition() })
	w.advance(time.Hour)
	d = w.decide()
	if got := w.want(&d, "node-2"); got.Status != "False" || got.Reason != podcondition.ReasonNotOffered {
		t.Errorf("forged offer: got %+v, want it written back False, NotOffered", got)
	}
	if s := d.Status; s.Offered == nil || s.Offered.Count != 1 {
		t.Errorf("got offered %+v, want node-0 alone counted", s.Offered)
	}
	if got := deleted(d); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("past the deadline: got %v carried out, want node-0's offer only", got)
	}

	// A new controller finding the same pod on a record it never saw adopts
	// it, as made now.
	w2 := newWorld(t, 3, ota, annotations)
	w2.changePod("node-2", oldHash, func(p *Pod) { p.NeedUpgrade = offeredCondition() })
	w2.build(true)
	e, ok := w2.ledger.Entry("node-2")
	if !ok || e.OfferedAt == nil || !e.OfferedAt.Time.Equal(w2.now) {
		t.Errorf("got node-2's entry %+v, want adopted as offered now", e)
	}
}

// TestPartitionCountsTheOwnersUpgradeInFlight: while an owner's upgrade
// terminates its old pod (a grace period), its node counts as taken: the
// partition offers no other node meanwhile.
func TestPartitionCountsTheOwnersUpgradeInFlight(t *testing.T) {
	w := newWorld(t, 3, ota, map[string]string{rollout.PartitionAnnotation: "2"})
	d := w.decide()
	if !slices.Equal(d.Offered, []string{"node-0"}) {
		t.Fatalf("got %v offered, want [node-0]", d.Offered)
	}
	w.changePod("node-0", oldHash, func(p *Pod) { p.Terminating, p.TerminatingSince = true, unixtime.Of(w.now) })
	d = w.decide()
	if len(d.Offered) != 0 {
		t.Fatalf("owner's upgrade terminating: got %v offered, want none", d.Offered)
	}
	if s, _ := w.r.State("node-0"); s != StateInFlight {
		t.Errorf("got node-0 %v, want in flight", s)
	}
	if e, _ := w.ledger.Entry("node-0"); e.Stage != StageInFlight || e.OfferedAt == nil {
		t.Errorf("got node-0's entry %+v, want in flight, keeping its first offer", e)
	}
	if got := w.want(&d, "node-1"); got.Reason != podcondition.ReasonNotOffered {
		t.Errorf("got node-1 %+v, want held back by the partition", got)
	}
}

// TestDeadlineFromTheRecord: the upgrade deadline counts from the first offer
// the controller recorded; what the pod's copy says does not move it.
func TestDeadlineFromTheRecord(t *testing.T) {
	w := newWorld(t, 2, ota, map[string]string{rollout.UpgradeDeadlineAnnotation: "40", rollout.MaxUnavailableAnnotation: "2"})
	d := w.decide()
	if len(d.Offered) != 2 {
		t.Fatalf("got %v offered, want both", d.Offered)
	}
	deadline := t0.Add(40 * time.Second)
	if !d.Wake.Equal(deadline) {
		t.Errorf("got wake at %s, want the deadline %s", d.Wake, deadline)
	}
	// node-1 rewrites its copy of the offer: no field of the record moves.
	w.changePod("node-1", oldHash, func(p *Pod) { p.Offer = 12345 })
	w.now = deadline
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-0", "node-1"}) {
		t.Errorf("at the deadline: got %v carried out, want both", got)
	}
}

// TestOverdueOfferOutsideItsWindowWakesAtTheOpening: an offer past its
// deadline whose window is closed sets no timer in the past (which would
// spin): it wakes when the window opens.
func TestOverdueOfferOutsideItsWindowWakesAtTheOpening(t *testing.T) {
	w := newWorld(t, 1, ota, map[string]string{rollout.UpgradeDeadlineAnnotation: "5", rollout.MaintenanceWindowAnnotation: "daily 00:00-01:00"})
	w.decide()
	w.advance(10 * time.Second)
	d := w.decide()
	opening := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	if len(d.Take) != 0 || !d.Wake.Equal(opening) {
		t.Errorf("got %v deleted, wake at %s; want none, at the window's opening %s", deleted(d), d.Wake, opening)
	}
	if s := d.Status; s.WaitingForWindow == nil || s.WaitingForWindow.Count != 1 {
		t.Errorf("got waiting %+v, want node-0 waiting for its window", s.WaitingForWindow)
	}
	w.now = opening
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("at the opening: got %v, want node-0 carried out", got)
	}
}

// TestHoldLimitFromTheTargetsFirstSight: the hold limit counts from the
// moment the controller first saw the revision as the target (the ledger's
// meta), not from anything a node or a rollback keeps.
func TestHoldLimitFromTheTargetsFirstSight(t *testing.T) {
	w := newWorld(t, 2, aru, map[string]string{rollout.MaxHoldAnnotation: "60", rollout.MaxUnavailableAnnotation: "2"})
	w.changePod("node-0", oldHash, func(p *Pod) { setHold(p, t0.Add(2*time.Hour)) })
	if got := deleted(w.decide()); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("got %v deleted, want [node-1]: node-0 held", got)
	}
	w.now = t0.Add(time.Minute)
	d := w.decide()
	if got := deleted(d); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("at the limit: got %v, want node-0", got)
	}
	// The same revision rolled back to later is a new target: a new ledger
	// (its meta now) gives a fresh limit.
	w2 := newWorld(t, 2, aru, map[string]string{rollout.MaxHoldAnnotation: "60", rollout.MaxUnavailableAnnotation: "2"})
	w2.now = t0.Add(time.Hour)
	w2.ledger = NewLedger(nil, Meta{TargetSince: timeOfValue(w2.now)})
	w2.target.Number = 3
	w2.changePod("node-0", oldHash, func(p *Pod) { setHold(p, t0.Add(2*time.Hour)) })
	if got := deleted(w2.decide()); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("after a rollback: got %v deleted, want [node-1]: node-0's hold within the fresh limit", got)
	}
}

func timeOfValue(t time.Time) metav1.Time { return metav1.NewTime(t) }
