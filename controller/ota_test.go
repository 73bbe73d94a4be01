package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/podcondition"
)

func otaDaemonSet() []runtime.Object {
	return append([]runtime.Object{newDaemonSet(withAnnotation(StrategyAnnotation, "OTA"))}, revisions()...)
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
		newPod("old", "ready", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash))),
		newPod("new", "ready", newHash, withCondition(needUpgrade(corev1.ConditionFalse, newHash))),
	)
	f := newFixture(t, objs...)
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
		newPod("stale", "ready", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash)), withCondition(stale)),
		newPod("current", "ready", oldHash, withCondition(needUpgrade(corev1.ConditionTrue, newHash)), withCondition(current)),
	)
	f := newFixture(t, objs...)
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
	f := newFixture(t, newDaemonSet(withAnnotation(StrategyAnnotation, "OTA")), newNode("ready", corev1.ConditionTrue), newPod("p", "ready", oldHash))
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
	if err := f.indexer(changed).Update(changed); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := len(f.conditionPatches()["old"]); got != 2 {
		t.Errorf("got %d patches once the cache moved on without the condition, want 2", got)
	}
}
