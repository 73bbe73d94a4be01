package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podcondition"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

// TestSettledNodePowerCycleIsNoFailure: once a node's new pod settled and it
// proved alive, the record says so, and a power cycle after (NotReady, then
// a restart, past the progress deadline) neither fails the node nor halts
// the rollout, even for a controller restarted in between.
func TestSettledNodePowerCycleIsNoFailure(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.MaxFailedAnnotation, "1"), withAnnotation(rollout.ProgressDeadlineAnnotation, "20"))
	objs := upgradedNode(cluster(ds, readyNodes(3), newHash, newHash, newHash), "0", corev1.ConditionTrue, 10*time.Second)
	objs = upgradedNode(objs, "1", corev1.ConditionTrue, 10*time.Second)
	objs = upgradedNode(objs, "2", corev1.ConditionTrue, 10*time.Second)
	first := newFixture(t, objs...)
	first.sync()
	if s := first.lastStatus(); !s.Complete() {
		t.Fatalf("got %+v, want the rollout complete", s)
	}
	first.c.background.Wait()
	if e := first.recordEntries()["node-0"]; e.Stage != decision.StageSettled {
		t.Fatalf("got node-0's entry %+v, want settled", e)
	}
	// The power cycle: NotReady, then back with its pod restarted, not
	// ready; a new controller reads the record.
	rebooted := newPod("pod-0", "node-0", newHash, notReady, createdAgo(time.Minute), func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "nginx", RestartCount: 1,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Now()}}}}
	})
	restarted := append(replacePod(objs, rebooted), first.records()...)
	fresh := newFixture(t, restarted...)
	fresh.sync()
	s := fresh.lastStatus()
	if s.Failed.Count != 0 || s.Halted || s.SettledUnavailable == nil || s.SettledUnavailable.Count != 1 {
		t.Errorf("got failed %d, halted %v, settled unavailable %+v; want none failed, not halted, node-0 unavailable", s.Failed.Count, s.Halted, s.SettledUnavailable)
	}
	if n := countEvents(fresh.events(), corev1.EventTypeWarning, rollout.ReasonRolloutHalted); n != 0 {
		t.Errorf("got %d RolloutHalted events, want none on a completed rollout", n)
	}
}

// TestForgedOfferWrittenBack: a PodNeedUpgrade=True the controller never
// wrote (a node's claim) is written back to False, and its offer is not
// counted; an offer's copy a node rewrote is rewritten from the record, and
// its deadline does not move.
func TestForgedOfferWrittenBack(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.PartitionAnnotation, "2"),
		withAnnotation(rollout.UpgradeDeadlineAnnotation, "7200"))
	objs := cluster(ds, readyNodes(3))
	objs = replacePod(objs, newPod("pod-0", "node-0", oldHash, offeredFor(newHash)))
	forged := newPod("pod-1", "node-1", oldHash, offeredFor(newHash), func(p *corev1.Pod) {
		p.Annotations[rollout.OfferAnnotation] = `{"revision":"new222","offeredAt":"2099-01-01T00:00:00Z"}`
	})
	objs = replacePod(objs, forged)
	f := newFixture(t, withOffers(objs, "node-0")...) // the record: node-0 alone offered
	f.sync()
	patches := f.conditionPatches()
	if c := patches["pod-1"]; len(c) != 1 || c[0]["status"] != "False" || c[0]["reason"] != podcondition.ReasonNotOffered {
		t.Errorf("got pod-1 patched %v, want its forged offer written back False, NotOffered", c)
	}
	if s := f.lastStatus(); s.Offered == nil || s.Offered.Count != 1 || !s.Offered.At.Time.Equal(offeredAt.Add(2*time.Hour)) {
		t.Errorf("got offered %+v, want node-0's alone, due two hours after its recorded offer", s.Offered)
	}
	// node-0 rewrites its copy's offeredAt: the copy is rewritten, the
	// deadline is the record's.
	f.c.background.Wait()
	moved := newPod("pod-0", "node-0", oldHash, offeredFor(newHash), func(p *corev1.Pod) {
		p.Annotations[rollout.OfferAnnotation] = `{"revision":"new222","offeredAt":"2099-01-01T00:00:00Z"}`
		p.ResourceVersion = "7"
	})
	f.update(moved)
	f.clockAt(offeredAt.Add(time.Hour))
	f.sync()
	offers := f.offerPatches()["pod-0"]
	if len(offers) == 0 || !offers[len(offers)-1].OfferedAt.Time.Equal(offeredAt) {
		t.Errorf("got pod-0's offers %+v, want its copy rewritten with the recorded offer %s", offers, offeredAt)
	}
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("an hour before the recorded deadline: got %v deleted, want none", got)
	}
	// The copy is forged again: at the recorded deadline the pod is
	// deleted, and not written on its way out.
	f.update(newPod("pod-0", "node-0", oldHash, offeredFor(newHash), func(p *corev1.Pod) {
		p.Annotations[rollout.OfferAnnotation] = `{"revision":"new222","offeredAt":"2099-01-01T00:00:00Z"}`
		p.ResourceVersion = "8"
	}))
	f.clockAt(offeredAt.Add(2 * time.Hour))
	f.client.ClearActions()
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
		t.Errorf("at the recorded deadline: got %v deleted, want [pod-0]", got)
	}
	if got := f.offerPatches()["pod-0"]; len(got) != 0 {
		t.Errorf("got pod-0 written %d times in the sync that deletes it, want none", len(got))
	}
}

// TestDeletedRecordIsRewritten: a record deleted while the controller runs
// is written again from what it holds, with a Warning.
func TestDeletedRecordIsRewritten(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.MaxFailedAnnotation, "5"))
	objs := upgradedNode(cluster(ds, readyNodes(3)), "0", corev1.ConditionTrue, 10*time.Second, crashLooping, createdAgo(time.Second))
	f := newFixture(t, objs...)
	f.sync()
	written := f.records()
	if len(written) == 0 {
		t.Fatalf("got no record, want node-0's failure written")
	}
	for _, obj := range written {
		cm := obj.(*corev1.ConfigMap)
		if err := f.client.CoreV1().ConfigMaps(cm.Namespace).Delete(f.ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if queued := f.queuedBy(func() { f.c.observeRecord(recordstore.Summarize(cm), true) }); !slices.Contains(queued, testDSKey) {
			t.Errorf("got %v queued by the deletion, want %s", queued, testDSKey)
		}
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonRecordRewritten)
	f.sync()
	if e := f.recordRead()["node-0"]; e.Stage != decision.StageFailed {
		t.Errorf("got node-0's entry %+v rewritten, want its failure", e)
	}
}

// recordRead is the test DaemonSet's rollout record of the target as the
// cluster holds it.
func (f *fixture) recordRead() map[string]decision.Entry {
	f.t.Helper()
	var cms []corev1.ConfigMap
	for _, obj := range f.records() {
		cms = append(cms, *obj.(*corev1.ConfigMap))
	}
	entries, _ := recordstore.Read(cms, testDSUID, decision.Target{Hash: newHash, Number: 2})
	return entries
}

// TestUnreadableRecordActsOnNothing: a record that cannot be read (the
// cache holds none of its data) fails the sync, to be retried: it is never
// taken for a new record, which would forget the failures it holds.
func TestUnreadableRecordActsOnNothing(t *testing.T) {
	ds := advancedDaemonSet("2", withAnnotation(rollout.MaxFailedAnnotation, "1"))
	objs := append(cluster(ds, readyNodes(3)), recordOf(map[string]decision.Entry{"node-0": failedEntry("crash")}))
	f := newFixture(t, objs...)
	f.client.PrependReactor("list", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("etcdserver: request timed out")
	})
	if err := f.syncErr(); err == nil || !strings.Contains(err.Error(), "request timed out") {
		t.Errorf("got %v, want the read's error", err)
	}
	if got := f.allWrites(); len(got) != 0 {
		t.Errorf("got %d writes, want none: %v", len(got), got)
	}
	f.client.ReactionChain = f.client.ReactionChain[1:]
	f.sync()
	if e := f.recordEntries()["node-0"]; e.Stage != decision.StageFailed {
		t.Errorf("read at the retry: got node-0 %+v, want its failure", e)
	}
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got %v deleted, want none: node-0's failure halts the rollout at max-failed 1", got)
	}
}

// TestLostRecordKeepsTheRolloutHalted: a controller that published a halt,
// and restarts to find the record gone, stays halted with a Warning, until
// max-failed is raised.
func TestLostRecordKeepsTheRolloutHalted(t *testing.T) {
	published := rollout.Status{Revision: 2, Hash: newHash, Total: 3, Halted: true,
		Failed: rollout.FailedNodes{Count: 2, Nodes: []string{"node-0"}, Reasons: map[string]string{"node-0": "CrashLoopBackOff"}}}
	value, _ := json.Marshal(published)
	ds := advancedDaemonSet("2", withAnnotation(rollout.MaxFailedAnnotation, "2"), withAnnotation(rollout.RolloutStatusAnnotation, string(value)))
	f := newFixture(t, cluster(ds, readyNodes(3))...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("got %v deleted, want none: the published failures stand", got)
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonRecordLost)
	if e := f.recordEntries()["node-0"]; e.Stage != decision.StageFailed {
		t.Errorf("got node-0 %+v, want the failure the status named taken over", e)
	}
	raised := advancedDaemonSet("2", withAnnotation(rollout.MaxFailedAnnotation, "3"), withAnnotation(rollout.RolloutStatusAnnotation, string(value)))
	raised.ResourceVersion = "2"
	f.update(raised)
	f.clockAt(time.Now().Add(2 * statusWriteInterval)) // the status write is due
	f.sync()
	if got := f.deletedPods(); len(got) != 1 {
		t.Errorf("max-failed raised: got %v deleted, want one (budget 2, node-0's failure holding one)", got)
	}
	if s := f.lastStatus(); s.Halted || s.Failed.Count != 2 || s.Failed.Lost != 1 {
		t.Errorf("got halted %v, %d failed (%d lost), want not halted, 2 failed of which 1 unnamed", s.Halted, s.Failed.Count, s.Failed.Lost)
	}
}

// TestRollbackStartsAFreshRecord: rolling back to an earlier revision (the
// same hash under a new number, as `kubectl rollout undo` does, keeping the
// ControllerRevision's creation) is a new rollout: a fresh first sight, so
// a fresh hold limit.
func TestRollbackStartsAFreshRecord(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	held := newPod("pod-0", "node-0", oldHash, heldUntil(now.Add(2*time.Hour)))
	objs := replacePod(cluster(advancedDaemonSet("2", withAnnotation(rollout.MaxHoldAnnotation, "60")), readyNodes(2)), held)
	objs = append(objs, recordOf(nil)) // revision 2 first seen an hour ago: its limit has passed
	f := newFixture(t, objs...)
	f.clockAt(now)
	f.sync()
	if got := f.deletedPods(); !slices.Contains(got, "pod-0") {
		t.Fatalf("got %v deleted, want pod-0: its hold past the limit", got)
	}
	// Undo: newHash again, as revision 3, its ControllerRevision created long ago.
	undone := replacePod(cluster(advancedDaemonSet("2", withAnnotation(rollout.MaxHoldAnnotation, "60")), readyNodes(2)), held)
	for _, obj := range undone {
		if cr, ok := obj.(*appsv1.ControllerRevision); ok && cr.Labels[revisionHashLabel] == newHash {
			cr.Revision = 3 // undo renumbers it, and keeps its creation
		}
	}
	g := newFixture(t, append(undone, recordOf(nil))...) // revision 2's record: stale now
	g.clockAt(now)
	g.sync()
	if got := g.deletedPods(); slices.Contains(got, "pod-0") {
		t.Errorf("after the undo: got %v deleted, want pod-0 held: a fresh limit", got)
	}
	if e := g.c.existingTracker(testDSKey).ledger().Meta(); !e.TargetSince.Time.Equal(now) {
		t.Errorf("got the target first seen at %s, want now %s", e.TargetSince, now)
	}
}
