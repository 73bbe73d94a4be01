package health

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// patchedPod is a pod of one container, app, whose images were patched to
// generation 2 at t0: its kubelet reports observed, and the container as
// given; its pod-level readiness (ContainersReady since an hour before, the
// old container's) unless changed.
func patchedPod(observed int64, app corev1.ContainerStatus, change ...func(*corev1.Pod)) *Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: observed,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
			},
			ContainerStatuses: []corev1.ContainerStatus{app,
				{Name: "sidecar", ContainerID: "kwok://side", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-time.Hour))}}}},
		},
	}
	for _, f := range change {
		f(p)
	}
	facts := PodOf(p, nil)
	return &facts
}

// oldApp is the app container as it ran before the patch; newApp a new one
// started at started, Ready or not, its old one killed just before.
var oldApp = corev1.ContainerStatus{Name: "app", ContainerID: "kwok://old", Ready: true,
	State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-time.Hour))}}}

func newApp(started time.Time, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "app", ContainerID: "kwok://new", Ready: ready, RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "kwok://old", FinishedAt: metav1.NewTime(started.Add(-time.Second))}}}
}

// patch is the upgrade of app to generation 2, as the controller records it.
var patch = InPlace{Generation: 2, Before: map[string]uint64{"app": ContainerID("kwok://old"), "sidecar": ContainerID("kwok://side")}, Changed: []string{"app"}}

func TestJudgeInPlace(t *testing.T) {
	const deadline = 10 * time.Minute
	cases := []struct {
		name     string
		pod      *Pod
		minReady int32
		now      time.Time
		want     State
		reason   string
		settled  time.Time
	}{
		{name: "the kubelet has not observed the patch", pod: patchedPod(1, oldApp), now: t0.Add(time.Minute), want: Progressing},
		{name: "observed, the old container still reported (the status of the sync that took the patch)", pod: patchedPod(2, oldApp),
			now: t0.Add(time.Minute), want: Progressing},
		{name: "a new container ID, never reported not Ready: the old ContainersReady and the kill do not hang it",
			pod: patchedPod(2, newApp(t0.Add(2*time.Second), true)), now: t0.Add(time.Minute), want: Settled, settled: t0.Add(2 * time.Second)},
		{name: "settled only minReadySeconds after the new container's start, not the old readiness",
			pod: patchedPod(2, newApp(t0.Add(2*time.Second), true)), minReady: 30, now: t0.Add(10 * time.Second), want: Progressing},
		{name: "and then", pod: patchedPod(2, newApp(t0.Add(2*time.Second), true)), minReady: 30, now: t0.Add(40 * time.Second), want: Settled,
			settled: t0.Add(32 * time.Second)},
		{name: "a new container not Ready", pod: patchedPod(2, newApp(t0.Add(2*time.Second), false)), now: t0.Add(time.Minute), want: Progressing},
		{name: "the pod reported not Ready", pod: patchedPod(2, newApp(t0.Add(2*time.Second), true), func(p *corev1.Pod) {
			p.Status.Conditions[1].Status = corev1.ConditionFalse
		}), now: t0.Add(time.Minute), want: Progressing},
		{name: "crash-looping at once", pod: patchedPod(2, waiting("app", "CrashLoopBackOff")), now: t0.Add(time.Second), want: Failed, reason: "CrashLoopBackOff"},
		{name: "a pull that fails, before the deadline", pod: patchedPod(2, waiting("app", "ImagePullBackOff")), now: t0.Add(time.Minute), want: Progressing,
			reason: "ImagePullBackOff"},
		{name: "a pull that fails, at the deadline from the patch", pod: patchedPod(2, waiting("app", "ImagePullBackOff")), now: t0.Add(deadline), want: Failed,
			reason: "ImagePullBackOff"},
		{name: "never observed, at the deadline", pod: patchedPod(1, oldApp), now: t0.Add(deadline), want: Failed, reason: ReasonProgressDeadlineExceeded},
		{name: "restarted again after its start: settled from the last start", pod: patchedPod(2, newApp(t0.Add(2*time.Second), true), func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(20 * time.Second))
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated.FinishedAt = metav1.NewTime(t0.Add(19 * time.Second))
		}), now: t0.Add(time.Minute), want: Settled, settled: t0.Add(20 * time.Second)},
		{name: "an unchanged container restarted meanwhile, not Ready", pod: patchedPod(2, newApp(t0.Add(2*time.Second), true), func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "sidecar", ContainerID: "kwok://side2",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
		}), now: t0.Add(time.Minute), want: Progressing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := JudgeInPlace(tc.pod, &patch, t0, tc.minReady, deadline, tc.now)
			if got.State != tc.want || tc.reason != "" && got.Reason != tc.reason {
				t.Fatalf("got %s (%s: %s), want %s %s", got.State, got.Reason, got.Message, tc.want, tc.reason)
			}
			if !tc.settled.IsZero() && !got.SettledAt.Equal(tc.settled) {
				t.Errorf("got settled at %s, want %s", got.SettledAt, tc.settled)
			}
			if got.State == Progressing && got.Recheck <= 0 {
				t.Errorf("got a progressing verdict with no recheck, want the deadline at least")
			}
		})
	}
}

// TestJudgeInPlaceSameDigest: a new tag of the same image (its imageID
// unchanged, as a registry resolves a tag pushed again for the same bytes)
// settles once its new container runs: OpenKruise's open bug 2297 judged
// by image and imageID and never saw it done.
func TestJudgeInPlaceSameDigest(t *testing.T) {
	digest := "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	old := oldApp
	old.Image, old.ImageID = "registry.example/app:v1", digest
	fresh := newApp(t0.Add(time.Second), true)
	fresh.Image, fresh.ImageID = "registry.example/app:v1-again", digest
	if got := JudgeInPlace(patchedPod(2, fresh), &patch, t0, 0, time.Minute, t0.Add(2*time.Second)); got.State != Settled {
		t.Errorf("got %s (%s), want Settled: the kubelet started a new container, whatever its imageID", got.State, got.Message)
	}
}

// TestJudgeMessageOfAPatchedPod: a failed patched pod's message names its
// container, as a recreated one's does.
func TestJudgeMessageOfAPatchedPod(t *testing.T) {
	got := JudgeInPlace(patchedPod(2, waiting("app", "CreateContainerConfigError")), &patch, t0, 0, time.Minute, t0)
	if got.State != Failed || !strings.Contains(got.Message, "container app: CreateContainerConfigError") {
		t.Errorf("got %s %q, want Failed naming container app", got.State, got.Message)
	}
}
