package controller

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
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
			handler := f.c.addPod
			if tt.pod.Labels[PrePullLabel] == "true" {
				handler = f.c.enqueuePrePullPodOwner
			}
			if got := f.queuedBy(func() { handler(cached(tt.pod)) }); !slices.Equal(got, tt.want) {
				t.Errorf("got %q queued, want %q", got, tt.want)
			}
		})
	}
}

func TestJobEventsEnqueueTheirDaemonSet(t *testing.T) {
	pod := requestedPod(newHash)
	job := prePullFor(pod, newHash)
	f := newFixture(t, prePullCluster(pod, job)...)
	if got := f.c.daemonSetKeyForJob(cached(job).(*jobRecord)); got != testDSKey {
		t.Errorf("got %q, want %q", got, testDSKey)
	}
	orphan := job.DeepCopy()
	orphan.OwnerReferences[0].UID = "gone"
	if got := f.c.daemonSetKeyForJob(cached(orphan).(*jobRecord)); got != "" {
		t.Errorf("got %q for a Job whose pod was replaced, want none", got)
	}
}

// TestDeletionSeenEndsTheWait: a deletion this process issued counts as in
// flight until the cache shows it, by a tombstone or by the pod turning
// terminating; then the node stays in flight by its record entry, and its
// pod is never deleted twice.
func TestDeletionSeenEndsTheWait(t *testing.T) {
	for _, how := range []string{"tombstone", "terminating"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(2))...)
			f.sync()
			if got := f.deletedPods(); !slices.Equal(got, []string{"pod-0"}) {
				t.Fatalf("got pods deleted %v, want [pod-0]", got)
			}
			if got := f.deletionsIssued(); got != 1 {
				t.Fatalf("got %d deletions in flight, want 1", got)
			}
			pod := newPod("pod-0", "node-0", oldHash)
			var queued []string
			if how == "tombstone" {
				if err := f.indexer(pod).Delete(cached(pod)); err != nil {
					t.Fatal(err)
				}
				queued = f.queuedBy(func() { f.c.deletePod(cache.DeletedFinalStateUnknown{Key: "default/pod-0", Obj: cached(pod)}) })
			} else {
				deleting := newPod("pod-0", "node-0", oldHash, terminating)
				deleting.ResourceVersion = "2"
				queued = f.queuedBy(func() { f.update(deleting) })
			}
			if want := []string{testDSKey}; !slices.Equal(queued, want) {
				t.Errorf("got %q queued, want %q", queued, want)
			}
			f.sync()
			if got := f.deletionsIssued(); got != 0 {
				t.Errorf("got %d deletions in flight once the cache shows it, want 0", got)
			}
			if got := f.deletedPods(); len(got) != 1 {
				t.Errorf("got pods deleted %v, want pod-0 once: node-0 is in flight", got)
			}
			if got := f.state("node-0"); got != decision.StateInFlight {
				t.Errorf("got node-0 %v, want in flight", got)
			}
		})
	}
}

// TestDaemonSetStatusUpdatesAreDropped: the native controller rewrites a
// DaemonSet's status on every pod change of a rollout, which a sync never
// reads: only spec and annotation changes enqueue it.
func TestDaemonSetStatusUpdatesAreDropped(t *testing.T) {
	old := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"))
	old.Generation = 3
	old.Status.DesiredNumberScheduled = 5
	tests := []struct {
		name   string
		change func(*appsv1.DaemonSet)
		want   []string
	}{
		{"status only", func(ds *appsv1.DaemonSet) { ds.Status.NumberReady = 7 }, nil},
		{"nodes to run on: counted per node, never from the status", func(ds *appsv1.DaemonSet) { ds.Status.DesiredNumberScheduled = 6 }, nil},
		{"spec", func(ds *appsv1.DaemonSet) { ds.Generation = 4 }, []string{testDSKey}},
		{"annotation", func(ds *appsv1.DaemonSet) { ds.Annotations[rollout.MaxUnavailableAnnotation] = "2" }, []string{testDSKey}},
		{"rollout status alone, the controller's own write", func(ds *appsv1.DaemonSet) { ds.Annotations[rollout.RolloutStatusAnnotation] = "{}" }, nil},
		{"rollout status and another annotation", func(ds *appsv1.DaemonSet) {
			ds.Annotations[rollout.RolloutStatusAnnotation] = "{}"
			ds.Annotations[rollout.PausedAnnotation] = "true"
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

// TestPodUpdateDropsExpectationsItMovedPast: an expected write is dropped
// once the cache shows its pod at a later state, whether or not a sync asks
// about it again; one made from the state the cache still shows stands.
func TestPodUpdateDropsExpectationsItMovedPast(t *testing.T) {
	f := newFixture(t, cluster(advancedDaemonSet("1"), readyNodes(1))...)
	pod := newPod("pod-0", "node-0", oldHash)
	f.c.expect.expectWrite(pod.UID, writeNeedUpgrade, pod.ResourceVersion)
	f.c.expect.expectWrite(pod.UID, writeChallenge, pod.ResourceVersion)
	f.update(pod.DeepCopy()) // an event of the same state
	if got := len(f.c.expect.writes); got != 2 {
		t.Fatalf("got %d writes expected after an event of the state they were made from, want 2", got)
	}
	moved := pod.DeepCopy()
	moved.ResourceVersion = "2"
	f.update(moved)
	if got := len(f.c.expect.writes); got != 0 {
		t.Errorf("got %d writes expected after the cache moved past them, want 0", got)
	}
}

// TestEmptiedExpectationsLetGoOfTheirRoom: once the writes a fresh
// controller made across the fleet are all seen, the map that held them is
// made anew, so that its buckets (Go's maps never shrink) are freed.
func TestEmptiedExpectationsLetGoOfTheirRoom(t *testing.T) {
	e := newExpectations()
	for i := range 1000 {
		e.expectWrite(types.UID(fmt.Sprint(i)), writeNeedUpgrade, "1")
	}
	grown := reflect.ValueOf(e.writes).UnsafePointer()
	for i := range 999 {
		e.observed(types.UID(fmt.Sprint(i)), "2")
	}
	if reflect.ValueOf(e.writes).UnsafePointer() != grown {
		t.Fatalf("got the map replaced with one write still expected, want it kept")
	}
	e.forgetPod("999")
	if len(e.writes) != 0 || reflect.ValueOf(e.writes).UnsafePointer() == grown {
		t.Errorf("got %d writes in the grown map, want an empty map made anew", len(e.writes))
	}
}
