package main

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodGrouperGroupsAsPodsByNodeInItsOwnRoom: a grouper regroups the
// pods at every call as podsByNode does (terminating and unbound pods left
// out, a node whose pods went stays with none), and once it has grouped a
// fleet it groups that fleet again without allocating.
func TestPodGrouperGroupsAsPodsByNodeInItsOwnRoom(t *testing.T) {
	pod := func(name, node string, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	var g podGrouper
	first := map[string]*corev1.Pod{"a": pod("a", "n1", false), "b": pod("b", "n2", false), "c": pod("c", "n2", false)}
	if got := g.group(first); len(got["n1"]) != 1 || len(got["n2"]) != 2 {
		t.Fatalf("first grouping: got %d pods on n1 and %d on n2, want 1 and 2", len(got["n1"]), len(got["n2"]))
	}
	second := map[string]*corev1.Pod{"b": pod("b", "n2", true), "c": pod("c", "n2", false), "d": pod("d", "", false), "e": pod("e", "n3", false)}
	got := g.group(second)
	for node, want := range map[string][]string{"n1": nil, "n2": {"c"}, "n3": {"e"}} {
		var names []string
		for _, p := range got[node] {
			names = append(names, p.Name)
		}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("second grouping, node %s: got %v, want %v", node, names, want)
		}
		if len(got[node]) != len(podsByNode(second)[node]) {
			t.Errorf("second grouping, node %s: got %d pods, podsByNode %d", node, len(got[node]), len(podsByNode(second)[node]))
		}
	}

	fleet := map[string]*corev1.Pod{}
	for i := range 2000 {
		name := fmt.Sprintf("p%d", i)
		fleet[name] = pod(name, fmt.Sprintf("node-%d", i), false)
	}
	var h podGrouper
	h.group(fleet)
	if allocs := testing.AllocsPerRun(10, func() { h.group(fleet) }); allocs != 0 {
		t.Errorf("regrouping 2,000 nodes' pods: got %.0f allocations, want 0", allocs)
	}
}

// TestUpToDateTakesThePinnedImage: a pod patched in place to the image's
// digest (pinning) is as done as one running the tag; one running another
// digest of the repository is not.
func TestUpToDateTakesThePinnedImage(t *testing.T) {
	const img = "registry.bench.local/app:v1"
	pod := func(image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			Status: corev1.PodStatus{ObservedGeneration: 2,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: image, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
	}
	other := "registry.bench.local/app@sha256:" + strings.Repeat("0", 64)
	for image, want := range map[string]bool{img: true, pinnedTo(img): true, other: false, "registry.bench.local/app:v0": false} {
		if got := upToDate([]*corev1.Pod{pod(image)}, img); got != want {
			t.Errorf("%s: got up to date %v, want %v", image, got, want)
		}
	}
}
