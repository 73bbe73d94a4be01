package controller

import (
	"slices"
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
		want []string
	}{
		{"daemon pod", pod, []string{testDSKey}},
		{"pre-pull job pod", jobPod(job), []string{testDSKey}},
		{"owner UID mismatch", stranger, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, prePullCluster(pod, job)...)
			if got := f.queuedBy(func() { f.c.enqueuePodOwner(tt.pod) }); !slices.Equal(got, tt.want) {
				t.Errorf("got %q queued, want %q", got, tt.want)
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
	queued := f.queuedBy(func() { f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "default/pod-0", Obj: pod}) })
	if got := f.c.expectations.pendingDeletions(testDSKey); len(got) != 0 {
		t.Errorf("got pending deletions %v after the tombstone, want none", got)
	}
	if got := f.c.expectations.awaitingReplacement(testDSKey); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("got nodes awaiting replacement %v, want [node-0]", got)
	}
	if want := []string{testDSKey}; !slices.Equal(queued, want) {
		t.Errorf("got %q queued, want %q", queued, want)
	}
}

func TestTerminatingPodObservesExpectation(t *testing.T) {
	pod := newPod("pod-0", "node-0", oldHash)
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(1))...)
	f.c.expectations.expectDeletions(testDSKey, map[types.UID]string{pod.UID: pod.Spec.NodeName})
	deleting := newPod("pod-0", "node-0", oldHash, terminating)
	deleting.ResourceVersion = "2"
	f.c.updatePod(pod, deleting)
	if got := f.c.expectations.pendingDeletions(testDSKey); len(got) != 0 {
		t.Errorf("got pending deletions %v once the pod is terminating, want none", got)
	}
}

// TestDaemonSetStatusUpdatesAreDropped: the native controller rewrites a
// DaemonSet's status on every pod change of a rollout; only the part a sync
// reads (desiredNumberScheduled, for nodes whose pod is missing) enqueues it.
func TestDaemonSetStatusUpdatesAreDropped(t *testing.T) {
	old := newDaemonSet(withAnnotation(StrategyAnnotation, "OTA"))
	old.Generation = 3
	old.Status.DesiredNumberScheduled = 5
	tests := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		want   []string
	}{
		{"status only", func(ds *appsv1.DaemonSet) { ds.Status.NumberReady = 7 }, nil},
		{"nodes to run on", func(ds *appsv1.DaemonSet) { ds.Status.DesiredNumberScheduled = 6 }, []string{testDSKey}},
		{"spec", func(ds *appsv1.DaemonSet) { ds.Generation = 4 }, []string{testDSKey}},
		{"annotation", func(ds *appsv1.DaemonSet) { ds.Annotations[MaxUnavailableAnnotation] = "2" }, []string{testDSKey}},
		{"rollout status alone, the controller's own write", func(ds *appsv1.DaemonSet) { ds.Annotations[RolloutStatusAnnotation] = "{}" }, nil},
		{"rollout status and another annotation", func(ds *appsv1.DaemonSet) {
			ds.Annotations[RolloutStatusAnnotation] = "{}"
			ds.Annotations[PausedAnnotation] = "true"
		}, []string{testDSKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ds := old.DeepCopy()
			tt.change(ds)
			if got := f.queuedBy(func() { f.c.updateDaemonSet(old, ds) }); !slices.Equal(got, tt.want) {
				t.Errorf("got %q queued, want %q", got, tt.want)
			}
		})
	}
}
