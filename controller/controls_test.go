package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// labelNode sets labels on the seeded node of the name.
func labelNode(objs []runtime.Object, name string, labels map[string]string) []runtime.Object {
	for _, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok && n.Name == name {
			n.Labels = labels
		}
	}
	return objs
}

func TestPartitionOrder(t *testing.T) {
	tests := []struct {
		name      string
		partition string
		ready     []corev1.ConditionStatus
		upgraded  []string // hashes of pod-0.. (oldHash beyond)
		want      []string
	}{
		// 6 nodes, partition 4: two may run the target, taken in name order.
		{"integer", "4", readyNodes(6), nil, []string{"pod-0", "pod-1"}},
		// 50% of 6 is 3 staying: three may move.
		{"percentage", "50%", readyNodes(6), nil, []string{"pod-0", "pod-1", "pod-2"}},
		// node-0 already runs the target: one more.
		{"upgraded count", "4", readyNodes(6), []string{newHash}, []string{"pod-1"}},
		// node-0 NotReady is passed over, not counted.
		{"NotReady passed over", "4", append([]corev1.ConditionStatus{corev1.ConditionUnknown}, readyNodes(5)...), nil, []string{"pod-1", "pod-2"}},
		// Never reverted: more upgraded than the partition allows stay.
		{"never reverted", "5", readyNodes(6), []string{newHash, newHash}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("100%", withAnnotation(rollout.PartitionAnnotation, tt.partition)), tt.ready, tt.upgraded...)...)
			f.sync()
			if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, tt.want) {
				t.Errorf("got pods deleted %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRolloutNodeSelector(t *testing.T) {
	objs := cluster(advancedDaemonSet("100%", withAnnotation(rollout.RolloutNodeSelectorAnnotation, "fleet in (canary),!lab")), readyNodes(4))
	objs = labelNode(objs, "node-0", map[string]string{"fleet": "canary"})
	objs = labelNode(objs, "node-1", map[string]string{"fleet": "canary", "lab": ""})
	objs = labelNode(objs, "node-2", map[string]string{"fleet": "main"})
	f := newFixture(t, objs...)
	f.sync()
	if got := slices.Sorted(slices.Values(f.deletedPods())); !slices.Equal(got, []string{"pod-0"}) {
		t.Errorf("got pods deleted %v, want [pod-0]: the only node matching", got)
	}
	if s := f.lastStatus(); s.HeldBack != 3 {
		t.Errorf("got %d held back, want 3", s.HeldBack)
	}
}

func TestRolloutNodeSelectorErrors(t *testing.T) {
	for _, value := range []string{"fleet in (canary", "a=b=c", "!"} {
		t.Run(value, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("100%", withAnnotation(rollout.RolloutNodeSelectorAnnotation, value)), readyNodes(2))...)
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v, want none", got)
			}
			events := f.events()
			if len(events) != 1 || !strings.Contains(events[0], rollout.ReasonInvalidAnnotation) || !strings.Contains(events[0], rollout.RolloutNodeSelectorAnnotation) {
				t.Errorf("got events %q, want one %s naming %s", events, rollout.ReasonInvalidAnnotation, rollout.RolloutNodeSelectorAnnotation)
			}
		})
	}
}

func TestNodeLabelChangeRequeues(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(2))...)
	old := newNode("node-0", corev1.ConditionTrue)
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"fleet": "canary"}
	f.c.updateNode(cached(old), cached(old))
	if got := f.c.queue.Len(); got != 0 {
		t.Fatalf("got %d queued for an unchanged node, want 0", got)
	}
	f.c.updateNode(cached(old), cached(relabelled))
	if got := f.c.queue.Len(); got != 1 {
		t.Errorf("got %d queued after node-0's labels changed, want its DaemonSet", got)
	}
}

// TestOTAControls: pause, selector and partition hold back new offers with
// NotOffered; an offer already made stands under a pause.
func TestOTAControls(t *testing.T) {
	offered := offeredFor(newHash)
	tests := []struct {
		name       string
		annotation [2]string
		want       map[string]string // pod → "True" or the reason of False
	}{
		{"paused", [2]string{rollout.PausedAnnotation, "true"}, map[string]string{"pod-0": "True", "pod-1": podcondition.ReasonNotOffered, "pod-2": podcondition.ReasonNotOffered}},
		{"partition", [2]string{rollout.PartitionAnnotation, "1"}, map[string]string{"pod-0": "True", "pod-1": "True", "pod-2": podcondition.ReasonNotOffered}},
		{"selector", [2]string{rollout.RolloutNodeSelectorAnnotation, "fleet=canary"}, map[string]string{"pod-0": "True", "pod-1": podcondition.ReasonNotOffered, "pod-2": "True"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(tt.annotation[0], tt.annotation[1]))
			objs := cluster(ds, readyNodes(3))
			objs = replacePod(objs, newPod("pod-0", "node-0", oldHash, offered))
			objs = labelNode(objs, "node-2", map[string]string{"fleet": "canary"})
			f := newFixture(t, withOffers(objs, "node-0")...)
			f.sync()
			got := map[string]string{}
			for pod, entries := range f.conditionPatches() {
				e := entries[len(entries)-1]
				got[pod] = e["status"].(string)
				if e["status"] == "False" {
					got[pod] = e["reason"].(string)
				}
			}
			for pod, want := range tt.want {
				if pod == "pod-0" {
					continue // offered already: no write, it stands
				}
				if got[pod] != want {
					t.Errorf("pod %s: got %q, want %q", pod, got[pod], want)
				}
			}
			if _, rewritten := got["pod-0"]; rewritten && tt.want["pod-0"] == "True" {
				t.Errorf("got pod-0's standing offer rewritten to %s, want it to stand", got["pod-0"])
			}
		})
	}
}

// TestOTABrake: once max-failed pods that owners upgraded have failed, the
// offers not taken are withdrawn with RolloutHalted, naming why.
func TestOTABrake(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.MaxFailedAnnotation, "1"))
	objs := cluster(ds, readyNodes(3))
	objs = replacePod(objs, newPod("pod-0", "node-0", newHash, crashLooping, createdAgo(10*time.Second)))
	objs = replacePod(objs, newPod("pod-1", "node-1", oldHash, offeredFor(newHash)))
	f := newFixture(t, objs...)
	f.sync()
	patches := f.conditionPatches()
	for _, pod := range []string{"pod-1", "pod-2"} {
		entries := patches[pod]
		if len(entries) != 1 || entries[0]["status"] != "False" || entries[0]["reason"] != podcondition.ReasonRolloutHalted ||
			!strings.Contains(entries[0]["message"].(string), "1 upgraded node failed") {
			t.Errorf("pod %s: got %v, want False %s saying why", pod, entries, podcondition.ReasonRolloutHalted)
		}
		if rev, ok := podcondition.Revision(entries[0]["message"].(string)); !ok || rev != newHash {
			t.Errorf("pod %s: got message %q, want it to name revision %s first", pod, entries[0]["message"], newHash)
		}
	}
	if e := patches["pod-0"]; len(e) != 1 || e[0]["status"] != "False" || e[0]["reason"] != "" {
		t.Errorf("got the upgraded pod-0 patched %v, want False without a reason: it runs the target", e)
	}
	f.wantEvent(f.events(), corev1.EventTypeWarning, rollout.ReasonRolloutHalted)
}
