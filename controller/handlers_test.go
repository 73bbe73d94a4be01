package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func TestPodEventsEnqueueTheirDaemonSet(t *testing.T) {
	pod := requestedPod(newHash)
	job := prePullFor(pod, newHash)
	stranger := newPod("stranger", "edge-1", oldHash)
	stranger.OwnerReferences[0].UID = types.UID("another-ds-of-the-same-name")
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"daemon pod", pod, 1},
		{"pre-pull job pod", jobPod(job), 1},
		{"owner UID mismatch", stranger, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, prePullCluster(pod, job)...)
			f.c.enqueuePodOwner(tt.pod)
			if got := f.waitQueued(); got != tt.want {
				t.Errorf("got %d queued, want %d", got, tt.want)
			}
		})
	}
}

func TestJobEventsEnqueueTheirDaemonSet(t *testing.T) {
	pod := requestedPod(newHash)
	job := prePullFor(pod, newHash)
	f := newFixture(t, prePullCluster(pod, job)...)
	if got := f.c.daemonSetKeyForJob(job); got != testDSKey {
		t.Errorf("got %q, want %q", got, testDSKey)
	}
	orphan := job.DeepCopy()
	orphan.OwnerReferences[0].UID = "gone"
	if got := f.c.daemonSetKeyForJob(orphan); got != "" {
		t.Errorf("got %q for a Job whose pod was replaced, want none", got)
	}
}

func TestDeletedPodTombstoneObservesExpectation(t *testing.T) {
	pod := newPod("pod-0", "node-0", oldHash)
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(1))...)
	f.c.expectations.expectDeletions(testDSKey, map[types.UID]string{pod.UID: pod.Spec.NodeName})
	if f.c.expectations.satisfied(testDSKey) {
		t.Fatal("got satisfied before the deletion was seen, want not")
	}
	f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "default/pod-0", Obj: pod})
	if !f.c.expectations.satisfied(testDSKey) {
		t.Error("got unsatisfied after the tombstone, want satisfied")
	}
	if got := f.waitQueued(); got != 1 {
		t.Errorf("got %d queued, want 1", got)
	}
}

func TestTerminatingPodObservesExpectation(t *testing.T) {
	pod := newPod("pod-0", "node-0", oldHash)
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(1))...)
	f.c.expectations.expectDeletions(testDSKey, map[types.UID]string{pod.UID: pod.Spec.NodeName})
	deleting := newPod("pod-0", "node-0", oldHash, terminating)
	deleting.ResourceVersion = "2"
	f.c.updatePod(pod, deleting)
	if !f.c.expectations.satisfied(testDSKey) {
		t.Error("got unsatisfied once the pod is terminating, want satisfied")
	}
}

func TestDaemonSetStatusUpdatesAreDropped(t *testing.T) {
	old := newDaemonSet(withAnnotation(StrategyAnnotation, "OTA"))
	old.Generation = 3
	tests := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		want   int
	}{
		{"status only", func(ds *appsv1.DaemonSet) { ds.Status.NumberReady = 7 }, 0},
		{"spec", func(ds *appsv1.DaemonSet) { ds.Generation = 4 }, 1},
		{"annotation", func(ds *appsv1.DaemonSet) { ds.Annotations[MaxUnavailableAnnotation] = "2" }, 1},
		{"rollout status alone, the controller's own write", func(ds *appsv1.DaemonSet) { ds.Annotations[RolloutStatusAnnotation] = "{}" }, 0},
		{"rollout status and another annotation", func(ds *appsv1.DaemonSet) {
			ds.Annotations[RolloutStatusAnnotation] = "{}"
			ds.Annotations[PausedAnnotation] = "true"
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ds := old.DeepCopy()
			tt.change(ds)
			f.c.updateDaemonSet(old, ds)
			if got := f.c.queue.Len(); got != tt.want {
				t.Errorf("got %d queued, want %d", got, tt.want)
			}
		})
	}
}
