package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// monday10 is a Monday, 10:00 UTC.
var monday10 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// inZone sets a node's time zone annotation.
func inZone(node *corev1.Node, zone string) *corev1.Node {
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[rollout.NodeTimeZoneAnnotation] = zone
	return node
}

// heldUntil gives a pod its owner's hold until the time.
func heldUntil(until time.Time) podOption {
	return func(pod *corev1.Pod) {
		value, err := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(until), Reason: "driving", By: "owner", At: metav1.NewTime(until.Add(-time.Hour))})
		if err != nil {
			panic(err)
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[rollout.HoldAnnotation] = value
	}
}

// nextChange is when the view's earliest verdict changes by the clock.
func (f *fixture) nextChange() time.Time { return f.rollout().NextChange() }

// TestWindowClosedDeletesNothingUntilItOpens: outside the window nothing is
// deleted and the DaemonSet waits for the opening (its next change), where
// the rollout runs.
func TestWindowClosedDeletesNothingUntilItOpens(t *testing.T) {
	ds := advancedDaemonSet("2", withAnnotation(rollout.MaintenanceWindowAnnotation, "Mon-Fri 22:00-04:00"))
	f := newFixture(t, cluster(ds, readyNodes(4))...)
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v at 10:00, want none before the 22:00 window", got)
	}
	opens := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	if got := f.nextChange(); !got.Equal(opens) {
		t.Errorf("got the next change at %s, want the window's opening %s", got, opens)
	}
	if s := f.lastStatus(); s.WaitingForWindow == nil || s.WaitingForWindow.Count != 4 || !s.WaitingForWindow.At.Equal(&metav1.Time{Time: opens}) {
		t.Errorf("got waiting %+v, want 4 nodes until %s", s.WaitingForWindow, opens)
	}
	f.clockAt(opens)
	f.sync()
	if got := len(f.deletedPods()); got != 2 {
		t.Errorf("got %d pods deleted once the window opened, want 2 (the budget)", got)
	}
}

// TestNodeZoneOverTheWindows: each node's own zone decides whether its
// window is open; without one, the window's zone.
func TestNodeZoneOverTheWindows(t *testing.T) {
	// 10:00 UTC is 19:00 in Tokyo, 05:00 in New York, 11:00 in Berlin.
	ds := advancedDaemonSet("10", withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 18:00-20:00 Europe/Berlin"))
	objs := cluster(ds, readyNodes(3))
	objs = replaceNode(objs, inZone(newNode("node-0", corev1.ConditionTrue), "Asia/Tokyo"))
	objs = replaceNode(objs, inZone(newNode("node-1", corev1.ConditionTrue), "America/New_York"))
	f := newFixture(t, objs...)
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
		t.Errorf("got pods deleted %v, want [pod-0]: only Tokyo is in its window", got)
	}
}

// TestInvalidNodeZoneHoldsBackThatNodeAlone: a node naming no IANA zone is
// passed by, with a Warning on the Node, once; the rest roll.
func TestInvalidNodeZoneHoldsBackThatNodeAlone(t *testing.T) {
	ds := advancedDaemonSet("10", withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 00:00-24:00"))
	objs := replaceNode(cluster(ds, readyNodes(3)), inZone(newNode("node-1", corev1.ConditionTrue), "Mars/Olympus"))
	f := newFixture(t, objs...)
	f.sync()
	f.sync()
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-0", "pod-2"}) {
		t.Errorf("got pods deleted %v, want [pod-0 pod-2]", got)
	}
	events := f.events()
	if got := countEvents(events, corev1.EventTypeWarning, rollout.ReasonInvalidTimeZone); got != 1 {
		t.Errorf("got events %q, want one %s", events, rollout.ReasonInvalidTimeZone)
	}
	if s := f.lastStatus(); s.HeldBack != 1 {
		t.Errorf("got %d held back, want node-1", s.HeldBack)
	}
}

// TestInvalidWindowDeletesNothing: a window that does not parse is a
// Warning naming the annotation and its value, and nothing is deleted.
func TestInvalidWindowDeletesNothing(t *testing.T) {
	for _, value := range []string{"Mon-Fry 22:00-04:00", "daily 25:00-26:00", "daily 22:00-04:00 Mars/Olympus"} {
		t.Run(value, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("2", withAnnotation(rollout.MaintenanceWindowAnnotation, value)), readyNodes(3))...)
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v, want none", got)
			}
			events := f.events()
			if countEvents(events, corev1.EventTypeWarning, rollout.ReasonInvalidAnnotation) != 1 || !strings.Contains(events[0], rollout.MaintenanceWindowAnnotation) {
				t.Errorf("got events %q, want one %s naming %s", events, rollout.ReasonInvalidAnnotation, rollout.MaintenanceWindowAnnotation)
			}
		})
	}
}

// TestInFlightNodeFinishesWhenTheWindowCloses: a node taken in its window
// is upgraded to the end; a closed window holds back only nodes not taken.
func TestInFlightNodeFinishesWhenTheWindowCloses(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 09:00-10:00"))
	objs := upgradedNode(cluster(ds, readyNodes(3)), "0", corev1.ConditionTrue, 0, notReady, createdAt(monday10.Add(-time.Minute)))
	f := newFixture(t, objs...)
	f.clockAt(monday10.Add(time.Minute)) // the window closed a minute ago
	f.sync()
	if got := f.state("node-0"); got != decision.StateInFlight {
		t.Errorf("got node-0 %v, want in flight, the window irrelevant", got)
	}
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got pods deleted %v, want none outside the window", got)
	}
}

// TestWindowedNodeKeepsItsPartitionTurn: under a partition, a node whose
// window is closed waits for it; the next node in name order does not take
// its place.
func TestWindowedNodeKeepsItsPartitionTurn(t *testing.T) {
	ds := advancedDaemonSet("10", withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 18:00-20:00 Europe/Berlin"),
		withAnnotation(rollout.PartitionAnnotation, "2"))
	objs := cluster(ds, readyNodes(4))
	objs = replaceNode(objs, inZone(newNode("node-0", corev1.ConditionTrue), "America/New_York")) // closed
	objs = replaceNode(objs, inZone(newNode("node-1", corev1.ConditionTrue), "Asia/Tokyo"))       // open
	objs = replaceNode(objs, inZone(newNode("node-2", corev1.ConditionTrue), "Asia/Tokyo"))       // open
	f := newFixture(t, objs...)
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("got pods deleted %v, want [pod-1]: node-0 keeps its turn, node-2 stays in the partition", got)
	}
}

// TestHoldKeepsThePodUntilItEnds: a held pod is not deleted and its node
// holds no budget; at the hold's end (the DaemonSet's next change) it goes.
func TestHoldKeepsThePodUntilItEnds(t *testing.T) {
	end := monday10.Add(30 * time.Minute)
	objs := replacePod(cluster(advancedDaemonSet("1"), readyNodes(3)), newPod("pod-0", "node-0", oldHash, heldUntil(end)))
	f := newFixture(t, append(objs, recordOf(nil))...) // the revision first seen as the target at revisionCreated
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Fatalf("got pods deleted %v, want [pod-1]: pod-0 held, holding no budget", got)
	}
	if got := f.nextChange(); !got.Equal(end) {
		t.Errorf("got the next change at %s, want the hold's end %s", got, end)
	}
	if s := f.lastStatus(); s.Held == nil || s.Held.Count != 1 || !s.Held.At.Time.Equal(end) {
		t.Errorf("got held %+v, want 1 until %s", s.Held, end)
	}
	// The owner's view learns the limit through the offer on the pod.
	offers := f.offerPatches()["pod-0"]
	if len(offers) != 1 || offers[0].HoldLimit == nil || !offers[0].HoldLimit.Time.Equal(revisionCreated.Add(decision.DefaultMaxHold)) {
		t.Errorf("got offers %+v on the held pod, want one naming the hold limit %s", offers, revisionCreated.Add(decision.DefaultMaxHold))
	}
}

// TestHoldEndsAndIsReleased: the hold's end upgrades the pod, with an
// event; a released hold (annotation removed) too.
func TestHoldEndsAndIsReleased(t *testing.T) {
	end := monday10.Add(30 * time.Minute)
	objs := replacePod(cluster(advancedDaemonSet("1"), readyNodes(2)), newPod("pod-0", "node-0", oldHash, heldUntil(end)))
	objs = replacePod(objs, newPod("pod-1", "node-1", oldHash, heldUntil(end)))
	f := newFixture(t, objs...)
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v, want none: both held", got)
	}
	// pod-1's owner releases the hold.
	released := newPod("pod-1", "node-1", oldHash)
	released.ResourceVersion = "2"
	f.update(released)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Fatalf("got pods deleted %v after the release, want [pod-1]", got)
	}
	// pod-1's node settles; pod-0's hold ends.
	f.remove(released)
	f.update(newPod("pod-1-new", "node-1", newHash))
	f.clockAt(end)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1", "pod-0"}) {
		t.Errorf("got pods deleted %v once the hold ended, want pod-0 too", got)
	}
	f.wantEvent(f.events(), corev1.EventTypeNormal, rollout.ReasonHoldEnded)
}

// TestHoldLimitFromTheTargetsFirstSight: a hold is honoured until the
// moment the controller first saw the revision as the target (kept in the
// rollout record) plus edgeota.io/max-hold-seconds, however far the owner
// sets it, and a restarted controller counts the same; 0 ignores holds.
func TestHoldLimitFromTheTargetsFirstSight(t *testing.T) {
	far := revisionCreated.Add(365 * 24 * time.Hour)
	tests := []struct {
		name    string
		maxHold string
		now     time.Time
		held    bool
	}{
		{"within the limit", "7200", revisionCreated.Add(time.Hour), true},
		{"past the limit", "7200", revisionCreated.Add(2 * time.Hour), false},
		{"holds ignored", "0", revisionCreated.Add(time.Minute), false},
		{"default: a day", "", revisionCreated.Add(23 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []dsOption{}
			if tt.maxHold != "" {
				opts = append(opts, withAnnotation(rollout.MaxHoldAnnotation, tt.maxHold))
			}
			objs := replacePod(cluster(advancedDaemonSet("1", opts...), readyNodes(2)), newPod("pod-0", "node-0", oldHash, heldUntil(far)))
			objs = append(objs, recordOf(nil)) // first seen as the target at revisionCreated
			for range 2 {                      // a restart counts from the same first sight
				f := newFixture(t, objs...)
				f.clockAt(tt.now)
				f.sync()
				if deleted := slices.Contains(f.deletedPods(), "pod-0"); deleted == tt.held {
					t.Errorf("got pod-0 deleted=%v, want held=%v", deleted, tt.held)
				}
			}
		})
	}
}

// TestExpiredHoldIsIgnored: a hold whose end has passed (one queued in a
// dead zone and delivered late) holds nothing.
func TestExpiredHoldIsIgnored(t *testing.T) {
	objs := replacePod(cluster(advancedDaemonSet("1"), readyNodes(2)), newPod("pod-0", "node-0", oldHash, heldUntil(monday10.Add(-time.Minute))))
	f := newFixture(t, objs...)
	f.clockAt(monday10)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
		t.Errorf("got pods deleted %v, want [pod-0]", got)
	}
}

// TestOTADeadlineCarriesOutTheOffer: an offer not taken by its deadline
// (counted from its first offer) is carried out by the controller, within
// max-unavailable; before the deadline the DaemonSet waits for it.
func TestOTADeadlineCarriesOutTheOffer(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "7200"),
		withAnnotation(rollout.MaxUnavailableAnnotation, "1"))
	objs := cluster(ds, readyNodes(3))
	for _, p := range []string{"pod-0", "pod-1", "pod-2"} {
		objs = replacePod(objs, newPod(p, "node-"+p[4:], oldHash, offeredFor(newHash))) // offered an hour ago
	}
	deadline := offeredAt.Add(2 * time.Hour)
	f := newFixture(t, withOffers(objs, "node-0", "node-1", "node-2")...)
	f.clockAt(deadline.Add(-time.Second))
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v before the deadline, want none", got)
	}
	if got := f.nextChange(); got.Sub(deadline).Abs() > time.Second {
		t.Errorf("got the next change at %s, want the deadline %s", got, deadline)
	}
	if s := f.lastStatus(); s.Offered == nil || s.Offered.Count != 3 || s.Offered.At.Sub(deadline).Abs() > time.Second {
		t.Errorf("got offered %+v, want 3 with the deadline %s", s.Offered, deadline)
	}
	f.clockAt(deadline)
	f.sync()
	if got := f.deletedPods(); len(got) != 1 {
		t.Errorf("got pods deleted %v at the deadline, want 1 (max-unavailable)", got)
	}
}

// TestOTADeadlineWaitsWhilePausedOrHalted: a paused or halted DaemonSet
// makes no deadline upgrades.
func TestOTADeadlineWaitsWhilePausedOrHalted(t *testing.T) {
	for _, control := range [][2]string{{rollout.PausedAnnotation, "true"}, {rollout.MaxFailedAnnotation, "1"}} {
		t.Run(control[0], func(t *testing.T) {
			ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "60"),
				withAnnotation(control[0], control[1]))
			objs := cluster(ds, readyNodes(3))
			objs = replacePod(objs, newPod("pod-0", "node-0", newHash, crashLooping, createdAgo(10*time.Second))) // fails: halts at max-failed 1
			objs = replacePod(objs, newPod("pod-1", "node-1", oldHash, offeredFor(newHash)))
			f := newFixture(t, objs...)
			f.sync()
			if control[0] == rollout.PausedAnnotation && f.count(decision.StateFailed) != 1 {
				t.Fatalf("setup: got %d failed, want node-0", f.count(decision.StateFailed))
			}
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v past the deadline, want none while %s", got, control[0])
			}
		})
	}
}

// TestOTAOfferCarriesTheDeadlineAndTheHoldLimit: the owner sees, on the
// offer, when the controller will carry it out and until when a hold is
// honoured.
func TestOTAOfferCarriesTheDeadlineAndTheHoldLimit(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "604800"),
		withAnnotation(rollout.MaxHoldAnnotation, "3600"))
	objs := append([]runtime.Object{ds}, revisions()...)
	f := newFixture(t, append(objs, newNode("n", corev1.ConditionTrue), newPod("p", "n", oldHash), recordOf(nil))...)
	f.sync()
	offers := f.offerPatches()["p"]
	if len(offers) != 1 || offers[0].OfferedAt == nil {
		t.Fatalf("got offers %+v, want one", offers)
	}
	o := offers[0]
	if o.UpgradeDeadline == nil || !o.UpgradeDeadline.Time.Equal(o.OfferedAt.Add(7*24*time.Hour)) {
		t.Errorf("got deadline %v, want a week after %s", o.UpgradeDeadline, o.OfferedAt)
	}
	if o.HoldLimit == nil || !o.HoldLimit.Time.Equal(revisionCreated.Add(time.Hour)) {
		t.Errorf("got hold limit %v, want %s", o.HoldLimit, revisionCreated.Add(time.Hour))
	}
}

// TestOTADeadlineUnchangedByAPause: an offer standing through a pause keeps
// the time it was first offered, and so its deadline; the pause only holds
// the controller's own upgrade back until it ends, when the deadline that
// passed meanwhile is carried out.
func TestOTADeadlineUnchangedByAPause(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "7200"),
		withAnnotation(rollout.PausedAnnotation, "true"))
	objs := replacePod(cluster(ds, readyNodes(2)), newPod("pod-0", "node-0", oldHash, offeredFor(newHash))) // offered an hour ago
	f := newFixture(t, withOffers(objs, "node-0")...)
	deadline := offeredAt.Add(2 * time.Hour)
	f.clockAt(deadline.Add(time.Minute))
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got pods deleted %v while paused, want none", got)
	}
	// The offer stands; written again only to carry the deadline, from the
	// time it was first offered.
	for _, o := range f.offerPatches()["pod-0"] {
		if o.OfferedAt == nil || !o.OfferedAt.Time.Equal(offeredAt) || o.UpgradeDeadline == nil || !o.UpgradeDeadline.Time.Equal(deadline) {
			t.Errorf("got pod-0's offer rewritten %+v while paused, want it offered at %s with the deadline %s", o, offeredAt, deadline)
		}
	}
	resumed := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "7200"))
	resumed.ResourceVersion = "2"
	f.update(resumed)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
		t.Errorf("got pods deleted %v once resumed past the deadline, want [pod-0]", got)
	}
}

// TestOverdueOffersOutsideTheirWindowRest: offers past their deadline whose
// window is closed queue no sync before the window opens: the controller
// rests.
func TestOverdueOffersOutsideTheirWindowRest(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.UpgradeDeadlineAnnotation, "5"),
		withAnnotation(rollout.MaintenanceWindowAnnotation, "daily 09:00-10:00"))
	objs := withOffers(cluster(ds, readyNodes(3)), "node-0", "node-1", "node-2")
	for _, p := range []string{"pod-0", "pod-1", "pod-2"} {
		objs = replacePod(objs, newPod(p, "node-"+p[4:], oldHash, offeredFor(newHash)))
	}
	f := newFixture(t, objs...)
	f.clockAt(monday10.Add(time.Hour)) // the deadlines long past, the window closed
	f.sync()
	f.drainQueue()
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got %v deleted outside the window, want none", got)
	}
	if n := f.c.queue.Len(); n != 0 {
		t.Errorf("got %d syncs queued at once, want none: the next is at the window's opening", n)
	}
	if got, want := f.nextChange(), monday10.Add(23*time.Hour); !got.Equal(want) {
		t.Errorf("got the next change at %s, want the window's opening %s", got, want)
	}
}

// TestHoldLimitsShownAtMostWriteBurstPerSync: the offers that show held
// pods their limit are written WriteBurst at a time, the DaemonSet queued
// again for the rest.
func TestHoldLimitsShownAtMostWriteBurstPerSync(t *testing.T) {
	n := WriteBurst + 30
	end := monday10.Add(30 * time.Minute)
	objs := cluster(advancedDaemonSet("1"), readyNodes(n))
	for i := range n {
		objs = replacePod(objs, newPod(fmt.Sprintf("pod-%d", i), fmt.Sprintf("node-%d", i), oldHash, heldUntil(end)))
	}
	f := newFixture(t, append(objs, recordOf(nil))...)
	f.clockAt(monday10)

	f.expectWritesInBursts(n, func() map[string]int { return writesPerPod(f.offerPatches()) })
	if d := f.deletedPods(); len(d) != 0 {
		t.Errorf("got pods deleted %v, want none: all held", d)
	}
}
