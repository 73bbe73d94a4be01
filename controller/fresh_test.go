package controller

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestFreshControllerCountsNodesAwaitingTheirPod: a controller that has just
// started (after a crash, or as a new leader) has no expectations, yet the
// previous one may have deleted pods whose replacements are not in the cache
// with a node: not yet created, or created but not yet bound by the
// scheduler. Those nodes are down all the same; counted as such (from the
// DaemonSet's desired number of nodes), they hold the budget, and the fresh
// controller deletes nothing more until they are back.
func TestFreshControllerCountsNodesAwaitingTheirPod(t *testing.T) {
	const nodes, awaiting = 10, 3 // budget 30% of 10: 3, all taken
	tests := []struct {
		name        string
		replacement func(node string) *corev1.Pod // nil: none yet
	}{
		{"replacement not created yet", nil},
		{"replacement not bound yet", func(node string) *corev1.Pod {
			return newPod("new-for-"+node, "", newHash, notReady)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := advancedDaemonSet("30%", func(ds *appsv1.DaemonSet) { ds.Status.DesiredNumberScheduled = nodes })
			objs := slices.DeleteFunc(cluster(ds, readyNodes(nodes)), func(obj runtime.Object) bool {
				p, ok := obj.(*corev1.Pod)
				return ok && slices.Contains([]string{"pod-0", "pod-1", "pod-2"}, p.Name)
			})
			if tt.replacement != nil {
				for i := range awaiting {
					objs = append(objs, tt.replacement(fmt.Sprintf("node-%d", i)))
				}
			}
			f := newFixture(t, objs...)
			f.sync()
			if got := f.deletedPods(); len(got) != 0 {
				t.Errorf("got pods deleted %v with %d of %d nodes awaiting their pod, want none (budget %d)", got, awaiting, nodes, awaiting)
			}
		})
	}
}

// TestFreshControllerUsesBudgetLeft: nodes awaiting their pod take their
// share of the budget, no more: with one of ten awaiting, two more go.
func TestFreshControllerUsesBudgetLeft(t *testing.T) {
	ds := advancedDaemonSet("30%", func(ds *appsv1.DaemonSet) { ds.Status.DesiredNumberScheduled = 10 })
	objs := slices.DeleteFunc(cluster(ds, readyNodes(10)), func(obj runtime.Object) bool {
		p, ok := obj.(*corev1.Pod)
		return ok && p.Name == "pod-0"
	})
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); len(got) != 2 {
		t.Errorf("got pods deleted %v, want 2: budget 3, one node awaiting its pod", got)
	}
}
