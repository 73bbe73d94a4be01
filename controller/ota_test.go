package controller

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

func otaDaemonSet() []runtime.Object {
	return append([]runtime.Object{newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"))}, revisions()...)
}

func TestOTAMarksEveryPod(t *testing.T) {
	objs := append(otaDaemonSet(),
		newNode("ready", corev1.ConditionTrue), newNode("lost", corev1.ConditionUnknown),
		newPod("old-on-ready", "ready", oldHash),
		newPod("old-on-lost", "lost", oldHash),
		newPod("new-on-ready", "ready", newHash),
		newPod("by-generation", "ready", "", func(p *corev1.Pod) { p.Labels = map[string]string{podTemplateGenerationLabel: "2"} }),
		newPod("terminating", "ready", oldHash, terminating),
	)
	f := newFixture(t, objs...)
	f.sync()

	want := map[string]corev1.ConditionStatus{
		"old-on-ready":  corev1.ConditionTrue,
		"old-on-lost":   corev1.ConditionTrue,
		"new-on-ready":  corev1.ConditionFalse,
		"by-generation": corev1.ConditionFalse,
	}
	got := f.conditionPatches()
	if len(got) != len(want) {
		t.Errorf("got %d pods patched (%v), want %d", len(got), got, len(want))
	}
	for pod, status := range want {
		entries := got[pod]
		if len(entries) != 1 {
			t.Errorf("pod %s: got %d condition entries, want 1", pod, len(entries))
			continue
		}
		e := entries[0]
		if e["type"] != string(podcondition.NeedUpgrade) || e["status"] != string(status) || e["message"] != podcondition.RevisionMessage(newHash) {
			t.Errorf("pod %s: got condition %v, want %s=%s with message %q", pod, e, podcondition.NeedUpgrade, status, podcondition.RevisionMessage(newHash))
		}
	}
	if d := f.deletedPods(); len(d) != 0 {
		t.Errorf("got pods deleted %v, want none in OTA mode", d)
	}
}

func TestOTANoWriteWhenUnchanged(t *testing.T) {
	objs := append(otaDaemonSet(),
		newNode("ready", corev1.ConditionTrue),
		newPod("old", "ready", oldHash, offeredFor(newHash)),
		newPod("new", "ready", newHash, withCondition(needUpgrade(corev1.ConditionFalse, newHash))),
	)
	f := newFixture(t, withOffers(objs, "ready")...)
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("got writes %v, want none", w)
	}
}

func TestOTARewritesWhenTargetMoves(t *testing.T) {
	objs := append(otaDaemonSet(),
		newNode("ready", corev1.ConditionTrue),
		// Marked against an older target: same status, other message.
		newPod("old", "ready", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, "older0"))),
	)
	f := newFixture(t, objs...)
	f.sync()
	got := f.conditionPatches()["old"]
	if len(got) != 1 || got[0]["message"] != podcondition.RevisionMessage(newHash) {
		t.Errorf("got %v, want one patch naming %s", got, newHash)
	}
}

func TestOTARemovesImageReadyOfOlderRevision(t *testing.T) {
	stale := corev1.PodCondition{
		Type: podcondition.ImageReady, Status: corev1.ConditionTrue,
		Reason: podcondition.ReasonPullImageSuccess, Message: podcondition.RevisionMessage(oldHash),
	}
	current := stale
	current.Message = podcondition.RevisionMessage(newHash)
	objs := append(otaDaemonSet(),
		newNode("ready", corev1.ConditionTrue),
		newPod("stale", "ready", oldHash, offeredFor(newHash), withCondition(stale)),
		newPod("current", "ready", oldHash, offeredFor(newHash), withCondition(current)),
	)
	f := newFixture(t, withOffers(objs, "ready")...)
	f.sync()
	got := f.conditionPatches()
	if len(got) != 1 || len(got["stale"]) != 1 {
		t.Fatalf("got patches %v, want exactly one, on pod stale", got)
	}
	if e := got["stale"][0]; e["type"] != string(podcondition.ImageReady) || e["$patch"] != "delete" {
		t.Errorf("got %v, want a delete of %s", e, podcondition.ImageReady)
	}
}

func TestOTAWaitsForControllerRevision(t *testing.T) {
	f := newFixture(t, newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA")), newNode("ready", corev1.ConditionTrue), newPod("p", "ready", oldHash))
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("got writes %v, want none before the DaemonSet has a ControllerRevision", w)
	}
}

func TestOTANoRepeatedWriteWhileCacheLags(t *testing.T) {
	pod := newPod("old", "ready", oldHash)
	f := newFixture(t, append(otaDaemonSet(), newNode("ready", corev1.ConditionTrue), pod)...)
	f.sync()
	f.sync() // the cache does not show the first write yet
	if got := len(f.conditionPatches()["old"]); got != 1 {
		t.Fatalf("got %d patches on a lagging cache, want 1", got)
	}

	// The cache moves on without the condition (someone removed it): write again.
	changed := pod.DeepCopy()
	changed.ResourceVersion = "2"
	if err := f.indexer(changed).Update(cached(changed)); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := len(f.conditionPatches()["old"]); got != 2 {
		t.Errorf("got %d patches once the cache moved on without the condition, want 2", got)
	}
}

// offerPatches maps pod name to the offers its status patches carried.
func (f *fixture) offerPatches() map[string][]*podchannel.Offer {
	f.t.Helper()
	out := map[string][]*podchannel.Offer{}
	for _, a := range f.writes() {
		p, ok := a.(core.PatchAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		value, ok := f.patchAnnotations(p)[rollout.OfferAnnotation]
		if !ok {
			continue
		}
		var o podchannel.Offer
		if err := json.Unmarshal([]byte(value), &o); err != nil {
			f.t.Fatalf("decoding offer %s: %v", value, err)
		}
		out[p.GetName()] = append(out[p.GetName()], &o)
	}
	return out
}

// TestOfferTravelsWithPodNeedUpgrade checks the channel to the node agent:
// the target's images and progress deadline ride in the very patch that
// sets PodNeedUpgrade, one write per pod.
func TestOfferTravelsWithPodNeedUpgrade(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.ProgressDeadlineAnnotation, "120"))
	objs := append([]runtime.Object{ds}, revisions()...)
	objs = append(objs, newNode("ready", corev1.ConditionTrue), newPod("old", "ready", oldHash))
	f := newFixture(t, objs...)
	before := time.Now().Add(-time.Second)
	f.sync()

	if w := f.writes(); len(w) != 1 {
		t.Fatalf("got %d writes (%v), want one status patch", len(w), w)
	}
	conditions, offers := f.conditionPatches()["old"], f.offerPatches()["old"]
	if len(conditions) != 1 || conditions[0]["status"] != string(corev1.ConditionTrue) || len(offers) != 1 {
		t.Fatalf("got conditions %v and offers %v in the patch, want PodNeedUpgrade True and one offer", conditions, offers)
	}
	o := offers[0]
	wantImages := map[string]string{"init": "busybox:1.36", "nginx": "nginx:1.19.4"}
	if o.Revision != newHash || !maps.Equal(o.Images, wantImages) || o.ProgressDeadlineSeconds != 120 {
		t.Errorf("got offer %+v, want revision %s, images %v, deadline 120", o, newHash, wantImages)
	}
	if o.OfferedAt == nil || o.OfferedAt.Time.Before(before.Truncate(time.Second)) || o.OfferedAt.Time.After(time.Now()) {
		t.Errorf("got offeredAt %v, want now", o.OfferedAt)
	}
}

// TestOfferedAtKeptWhenWithdrawnAndResetByANewRevision checks that the time
// a revision was first offered stays when a halt withdraws the offer (it is
// kept in the rollout record, so a restarted controller keeps it too), and
// starts again for a new revision.
func TestOfferedAtKeptWhenWithdrawnAndResetByANewRevision(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.MaxFailedAnnotation, "1"))
	objs := cluster(ds, readyNodes(3))
	objs = replacePod(objs, newPod("pod-0", "node-0", newHash, crashLooping, createdAgo(10*time.Second)))
	objs = replacePod(objs, newPod("pod-1", "node-1", oldHash, offeredFor(newHash)))
	objs = replacePod(objs, newPod("pod-2", "node-2", oldHash, offeredFor("older0")))
	f := newFixture(t, withOffers(objs, "node-1")...)
	f.sync()

	offers := f.offerPatches()
	withdrawn := offers["pod-1"]
	wantAt := offeredAt
	if len(withdrawn) != 1 || withdrawn[0].OfferedAt == nil || withdrawn[0].OfferedAt.Sub(wantAt).Abs() > time.Second {
		t.Errorf("withdrawn: got offers %+v, want one keeping offeredAt %s", withdrawn, wantAt)
	}
	if c := f.conditionPatches()["pod-1"]; len(c) != 1 || c[0]["reason"] != podcondition.ReasonRolloutHalted {
		t.Errorf("withdrawn: got conditions %v, want PodNeedUpgrade False %s", c, podcondition.ReasonRolloutHalted)
	}
	// Offered an older revision, then halted before the new one was
	// offered: the new revision has no offeredAt yet.
	if older := offers["pod-2"]; len(older) != 1 || older[0].Revision != newHash || older[0].OfferedAt != nil {
		t.Errorf("older revision, halted: got offers %+v, want one of %s without offeredAt", older, newHash)
	}
	if _, ok := offers["pod-0"]; ok {
		t.Errorf("got an offer on pod-0, which runs the target, want none")
	}
}

// TestOfferedAtResetByANewRevision checks that a pod offered an older
// revision gets a new offeredAt with the new one.
func TestOfferedAtResetByANewRevision(t *testing.T) {
	objs := append(otaDaemonSet(), newNode("ready", corev1.ConditionTrue), newPod("old", "ready", oldHash, offeredFor("older0")))
	f := newFixture(t, objs...)
	f.sync()
	got := f.offerPatches()["old"]
	if len(got) != 1 || got[0].Revision != newHash || got[0].OfferedAt == nil || time.Since(got[0].OfferedAt.Time) > 2*time.Second {
		t.Errorf("got offers %+v, want one of %s offered now", got, newHash)
	}
}

// TestStaleGenerationDoesNotHideTheUpgrade: the cache can show the new
// ControllerRevision before the DaemonSet whose template changed; a pod of
// the old revision, whose template generation the stale DaemonSet still
// names, is out of date all the same, and is offered the target at once.
func TestStaleGenerationDoesNotHideTheUpgrade(t *testing.T) {
	stale := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(templateGenerationAnnot, "1"))
	old := newPod("old", "ready", oldHash, func(p *corev1.Pod) { p.Labels[podTemplateGenerationLabel] = "1" })
	f := newFixture(t, append(append([]runtime.Object{stale}, revisions()...), newNode("ready", corev1.ConditionTrue), old)...)
	f.sync()
	got := f.conditionPatches()["old"]
	if len(got) != 1 || got[0]["status"] != string(corev1.ConditionTrue) || got[0]["message"] != podcondition.RevisionMessage(newHash) {
		t.Errorf("got %v, want one offer of %s", got, newHash)
	}
}

// TestDaemonSetAheadOfItsRevisionRewritesNoOffer: the cache can show a
// DaemonSet's new template before the ControllerRevision the native
// controller makes of it. Until then the target is the revision before, and
// an offer of it names that revision's own images, so a pod already offered
// it is not written; the new revision then writes each pod once.
func TestDaemonSetAheadOfItsRevisionRewritesNoOffer(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"))
	revs := revisions()
	revs[0].(*appsv1.ControllerRevision).Data = templateData(t, ds.Spec.Template) // newHash's template
	ds.Spec.Template.Spec.Containers[0].Image = "nginx:1.19.5"
	objs := append(append([]runtime.Object{ds}, revs...), newNode("ready", corev1.ConditionTrue), newPod("old", "ready", oldHash, offeredFor(newHash)))
	f := newFixture(t, withOffers(objs, "ready")...)
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("before the new revision: got writes %v, want none", w)
	}

	next := revs[0].(*appsv1.ControllerRevision).DeepCopy()
	next.Name, next.UID, next.Revision, next.Labels = testDSName+"-next0", "rev-next0", 3, map[string]string{revisionHashLabel: "next0"}
	next.Data = templateData(t, ds.Spec.Template)
	f.update(next)
	f.sync()
	offers := f.offerPatches()["old"]
	want := map[string]string{"init": "busybox:1.36", "nginx": "nginx:1.19.5"}
	if len(offers) != 1 || offers[0].Revision != "next0" || !maps.Equal(offers[0].Images, want) {
		t.Errorf("after the new revision: got offers %+v, want one of next0 with images %v", offers, want)
	}
}

// templateData is a ControllerRevision's data as the native DaemonSet
// controller writes it: a patch replacing the pod template.
func templateData(t *testing.T, template corev1.PodTemplateSpec) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"$patch": "replace", "metadata": template.ObjectMeta, "spec": template.Spec}}})
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// TestOTAMarksAtMostWriteBurstPodsPerSync: a fresh controller on more pods
// than a burst marks WriteBurst of them, queues the DaemonSet again, and
// the next sync marks the rest.
func TestOTAMarksAtMostWriteBurstPodsPerSync(t *testing.T) {
	n := WriteBurst + 30
	hashes := make([]string, n)
	for i := range hashes {
		hashes[i] = newHash
	}
	f := newFixture(t, cluster(newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA")), readyNodes(n), hashes...)...)

	f.expectWritesInBursts(n, func() map[string]int { return writesPerPod(f.conditionPatches()) })
}
