package health

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// pod returns a pod whose ContainersReady turned status at readyAt, with the
// given container statuses.
func pod(ready corev1.ConditionStatus, readyAt time.Time, containers ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: metav1.NewTime(readyAt)}},
		ContainerStatuses: containers,
	}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "detail"}}}
}

func restarted(name string, finished time.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(finished)}}}
}

func TestJudge(t *testing.T) {
	const deadline = 10 * time.Minute
	cases := []struct {
		name        string
		pod         *corev1.Pod
		minReady    int32
		now         time.Time
		want        State
		wantReason  string
		wantRecheck time.Duration
	}{
		{"ready, no minReadySeconds", pod(corev1.ConditionTrue, t0), 0, t0, Settled, "", 0},
		{"ready for minReadySeconds", pod(corev1.ConditionTrue, t0), 5, t0.Add(5 * time.Second), Settled, "", 0},
		{"ready, not yet long enough", pod(corev1.ConditionTrue, t0), 5, t0.Add(2 * time.Second), Progressing, "", 3 * time.Second},
		{"ready, restarted since", pod(corev1.ConditionTrue, t0, restarted("app", t0.Add(time.Second))), 0, t0.Add(2 * time.Second), Progressing, "", deadline - 2*time.Second},
		{"ready, restarted before turning ready", pod(corev1.ConditionTrue, t0, restarted("app", t0.Add(-time.Second))), 0, t0, Settled, "", 0},
		{"not ready, before the deadline", pod(corev1.ConditionFalse, t0), 0, t0.Add(time.Minute), Progressing, "", deadline - time.Minute},
		{"not ready at the deadline", pod(corev1.ConditionFalse, t0), 0, t0.Add(deadline), Failed, ReasonProgressDeadlineExceeded, 0},
		{"crash loop fails at once", pod(corev1.ConditionFalse, t0, waiting("app", "CrashLoopBackOff")), 0, t0, Failed, "CrashLoopBackOff", 0},
		{"config error fails at once", pod(corev1.ConditionFalse, t0, waiting("app", "CreateContainerConfigError")), 0, t0, Failed, "CreateContainerConfigError", 0},
		{"invalid image name fails at once", pod(corev1.ConditionFalse, t0, waiting("app", "InvalidImageName")), 0, t0, Failed, "InvalidImageName", 0},
		{"pull error waits", pod(corev1.ConditionFalse, t0, waiting("app", "ImagePullBackOff")), 0, t0.Add(time.Minute), Progressing, "ImagePullBackOff", deadline - time.Minute},
		{"pull error at the deadline names the pull", pod(corev1.ConditionFalse, t0, waiting("app", "ErrImagePull")), 0, t0.Add(deadline), Failed, "ErrImagePull", 0},
		{"pull error preferred over creating", pod(corev1.ConditionFalse, t0, waiting("a", "ContainerCreating"), waiting("b", "ImagePullBackOff")), 0, t0.Add(deadline), Failed, "ImagePullBackOff", 0},
		{"phase Failed fails at once", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, 0, t0, Failed, "Evicted", 0},
		{"phase Failed without a reason", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, 0, t0, Failed, ReasonPodFailed, 0},
		{"no conditions yet", &corev1.Pod{}, 0, t0, Progressing, "", deadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := PodOf(tc.pod, nil)
			v := Judge(&f, t0, tc.minReady, deadline, tc.now)
			if v.State != tc.want || v.Reason != tc.wantReason || v.Recheck != tc.wantRecheck {
				t.Errorf("got %s reason %q recheck %s (%q), want %s reason %q recheck %s",
					v.State, v.Reason, v.Recheck, v.Message, tc.want, tc.wantReason, tc.wantRecheck)
			}
			if v.State == Failed && v.Message == "" {
				t.Errorf("got a failure without a message")
			}
		})
	}
}

func TestJudgeWithoutDeadlineNeverExpires(t *testing.T) {
	f := PodOf(pod(corev1.ConditionFalse, t0), nil)
	v := Judge(&f, t0, 0, 0, t0.Add(1000*time.Hour))
	if v.State != Progressing || v.Recheck != 0 {
		t.Errorf("got %s recheck %s, want Progressing recheck 0", v.State, v.Recheck)
	}
}

func TestJudgeMessageNamesTheContainer(t *testing.T) {
	f := PodOf(pod(corev1.ConditionFalse, t0, waiting("sidecar", "CrashLoopBackOff")), nil)
	v := Judge(&f, t0, 0, time.Minute, t0)
	if want := "container sidecar: CrashLoopBackOff: detail"; v.Message != want {
		t.Errorf("got message %q, want %q", v.Message, want)
	}
}

func TestPodAvailable(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}}}
	f := PodOf(p, nil)
	if ok, wait := PodAvailable(&f, 10, t0.Add(4*time.Second)); ok || wait != 6*time.Second {
		t.Errorf("got %v, %s; want false, 6s", ok, wait)
	}
	if ok, _ := PodAvailable(&f, 10, t0.Add(10*time.Second)); !ok {
		t.Errorf("got unavailable after minReadySeconds, want available")
	}
	if ok, _ := PodAvailable(&Pod{}, 0, t0); ok {
		t.Errorf("got available without a Ready condition, want unavailable")
	}
}

func TestNodeReady(t *testing.T) {
	node := func(s corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: s}}}}
	}
	for s, want := range map[corev1.ConditionStatus]bool{corev1.ConditionTrue: true, corev1.ConditionFalse: false, corev1.ConditionUnknown: false} {
		if got := NodeReady(node(s)); got != want {
			t.Errorf("Ready=%s: got %v, want %v", s, got, want)
		}
	}
	if NodeReady(&corev1.Node{}) {
		t.Errorf("no Ready condition: got ready, want not ready")
	}
}
