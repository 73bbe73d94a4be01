package controller

import (
	"fmt"
	"slices"
	"testing"

	"time"

	"github.com/edgeota/edgeota/decision"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestFreshControllerCountsNodesAwaitingTheirPod: a fresh controller (a
// restart, a new leader) finds nodes whose pod its predecessor deleted and
// whose replacement is not in the cache with a node: not yet created (the
// predecessor's record says it deleted them), or created but not yet bound
// by the scheduler (the replacement's node affinity names its node). Those
// nodes are down all the same; counted per node, they hold the budget, and
// the fresh controller deletes nothing more until they are back.
func TestFreshControllerCountsNodesAwaitingTheirPod(t *testing.T) {
	const nodes, awaiting = 10, 3 // budget 30% of 10: 3, all taken
	tests := []struct {
		name        string
		replacement func(node string) *corev1.Pod // nil: none yet
	}{
		{"replacement not created yet", nil},
		{"replacement not bound yet", func(node string) *corev1.Pod {
			return newPod("new-for-"+node, "", newHash, notReady, meantFor(node))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := slices.DeleteFunc(cluster(advancedDaemonSet("30%"), readyNodes(nodes)), func(obj runtime.Object) bool {
				p, ok := obj.(*corev1.Pod)
				return ok && slices.Contains([]string{"pod-0", "pod-1", "pod-2"}, p.Name)
			})
			entries := map[string]decision.Entry{}
			for i := range awaiting {
				node := fmt.Sprintf("node-%d", i)
				if tt.replacement != nil {
					objs = append(objs, tt.replacement(node))
				} else {
					entries[node] = inFlightSince(fmt.Sprintf("pod-%d", i), time.Minute)
				}
			}
			if len(entries) > 0 {
				objs = append(objs, recordOf(entries))
			}
			f := newFixture(t, objs...)
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v with %d of %d nodes awaiting their pod, want none (budget %d)", got, awaiting, nodes, awaiting)
			}
			if s := f.lastStatus(); s.Total != nodes || s.InFlight != awaiting {
				t.Errorf("got total %d, in flight %d, want %d and %d", s.Total, s.InFlight, nodes, awaiting)
			}
		})
	}
}

// TestFreshControllerUsesBudgetLeft: nodes awaiting their pod take their
// share of the budget, no more: with one of ten awaiting, two more go.
func TestFreshControllerUsesBudgetLeft(t *testing.T) {
	objs := slices.DeleteFunc(cluster(advancedDaemonSet("30%"), readyNodes(10)), func(obj runtime.Object) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && p.Name == "pod-0"
	})
	objs = append(objs, recordOf(map[string]decision.Entry{"node-0": inFlightSince("pod-0", time.Minute)}))
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); len(got) != 2 {
		t.Errorf("got pods deleted %v, want 2: budget 3, one node awaiting its pod", got)
	}
}
