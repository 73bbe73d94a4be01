package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// The simulator's tests run it on client-go's fake clientset and a fake
// clock: each pull's steps fire when the test steps the clock, and the
// writes they lead to are awaited with a generous deadline that only turns
// a hang into a failure.

const (
	simNS       = "default"
	simDelay    = 5 * time.Second
	simBackOff  = 4 * time.Second
	simDeadline = 30 * time.Second
	newImage    = "nginx:1.25.0"
	otherImage  = "redis:7.2"
)

// simFixture is a running simulator on a fake cluster.
type simFixture struct {
	t      *testing.T
	client *fake.Clientset
	clock  *testingclock.FakeClock
	sim    *pullSimulator
}

// startSim runs a simulator of opts on a fake cluster holding objects.
func startSim(t *testing.T, opts ImagePulls, objects ...runtime.Object) *simFixture {
	t.Helper()
	f := &simFixture{
		t:      t,
		client: fake.NewClientset(objects...),
		clock:  testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
	}
	sim, err := newPullSimulator(f.client, opts, f.clock, ktesting.NewLogger(t, ktesting.NewConfig()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), simDeadline)
	defer cancel()
	if err := sim.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.stop)
	f.sim = sim
	return f
}

// boundPod is a Pending pod bound to node, one container per image.
func boundPod(name, node string, images ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: simNS},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for i, image := range images {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: image})
	}
	return pod
}

// create creates the pod in the fake cluster.
func (f *simFixture) create(pod *corev1.Pod) {
	f.t.Helper()
	if _, err := f.client.CoreV1().Pods(pod.Namespace).Create(f.t.Context(), pod, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
}

// get reads the pod.
func (f *simFixture) get(name string) *corev1.Pod {
	f.t.Helper()
	pod, err := f.client.CoreV1().Pods(simNS).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("reading pod %s: %v", name, err)
	}
	return pod
}

// waitFor waits until the pod is as want says, failing with its last state
// after simDeadline.
func (f *simFixture) waitFor(name, what string, want func(*corev1.Pod) bool) *corev1.Pod {
	f.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(f.t.Context(), 2*time.Millisecond, simDeadline, true, func(ctx context.Context) (bool, error) {
		pod, err := f.client.CoreV1().Pods(simNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pod
		return want(pod), nil
	})
	if err != nil {
		f.t.Fatalf("pod %s: got %s, want %s (%v)", name, describe(last), what, err)
	}
	return last
}

// waitAttempt waits until the node's pull of the image is at its attempt-th
// attempt, whose end is then timed: a retry shows nothing new on the pods.
func (f *simFixture) waitAttempt(node, image string, attempt int) {
	f.t.Helper()
	got := 0
	err := wait.PollUntilContextTimeout(f.t.Context(), 2*time.Millisecond, simDeadline, true, func(context.Context) (bool, error) {
		f.sim.mu.Lock()
		defer f.sim.mu.Unlock()
		if p := f.sim.pulls[pullKey{node, image}]; p != nil {
			got = p.attempt
		}
		return got == attempt, nil
	})
	if err != nil {
		f.t.Fatalf("pull of %s on %s: got attempt %d, want %d (%v)", image, node, got, attempt, err)
	}
}

// released says whether the simulator let KWOK start the pod.
func released(pod *corev1.Pod) bool {
	return pod.Annotations[PulledAnnotation] == "true"
}

// showing is a wait condition: every container of the pod waits with reason,
// and the pod is not released.
func showing(reason string) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		if released(pod) || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
			return false
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Waiting == nil || s.State.Waiting.Reason != reason {
				return false
			}
		}
		return true
	}
}

// describe sums up what a pod shows, for failure messages.
func describe(pod *corev1.Pod) string {
	if pod == nil {
		return "no pod"
	}
	var states []string
	for _, s := range pod.Status.ContainerStatuses {
		state := "no waiting state"
		if w := s.State.Waiting; w != nil {
			state = w.Reason + " (" + w.Message + ")"
		}
		states = append(states, s.Name+": "+state)
	}
	ready := "none"
	if c := podCondition(pod, corev1.PodReady); c != nil {
		ready = string(c.Status)
	}
	return fmt.Sprintf("released=%t Ready=%s containers [%s]", released(pod), ready, strings.Join(states, "; "))
}

// TestPodOfHeldImagesStartsAtOnce: a pod whose node holds its images is
// released without a status write and without the clock moving.
func TestPodOfHeldImagesStartsAtOnce(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay, Preloaded: []string{newImage}})
	f.create(boundPod("p", "n1", newImage))
	pod := f.waitFor("p", "released", released)
	if n := len(pod.Status.ContainerStatuses); n != 0 {
		t.Errorf("got %d container statuses written, want none: %s", n, describe(pod))
	}
}

// TestPodOfNewImageWaitsForItsPull: a pod of an image its node has not
// pulled shows ContainerCreating and Ready=False, and is released once the
// pull delay has passed, not before; the node then holds the image, so a
// second pod of it there starts at once, while another node pulls it too.
func TestPodOfNewImageWaitsForItsPull(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay})
	f.create(boundPod("first", "n1", newImage))
	pod := f.waitFor("first", "ContainerCreating", showing(reasonContainerCreating))
	if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse || c.Reason != reasonContainersNotReady {
		t.Errorf("got Ready condition %+v, want False (%s)", c, reasonContainersNotReady)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("got phase %s, want Pending", pod.Status.Phase)
	}

	f.clock.Step(simDelay - time.Millisecond)
	if pod := f.get("first"); released(pod) {
		t.Errorf("got released %s after the pull began, want it waiting the pull delay %s", simDelay-time.Millisecond, simDelay)
	}
	f.clock.Step(time.Millisecond)
	f.waitFor("first", "released at the pull delay", released)

	f.create(boundPod("second", "n1", newImage))
	pod = f.waitFor("second", "released at once", released)
	if n := len(pod.Status.ContainerStatuses); n != 0 {
		t.Errorf("second pod on the node: got %d container statuses written, want none: %s", n, describe(pod))
	}
	f.create(boundPod("elsewhere", "n2", newImage))
	f.waitFor("elsewhere", "ContainerCreating on a node without the image", showing(reasonContainerCreating))
}

// TestPodsShareTheirNodesPull: pods waiting for one image on one node share
// one pull, and a pod of a held and a new image waits for the new one only.
func TestPodsShareTheirNodesPull(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay, Preloaded: []string{otherImage}})
	f.create(boundPod("a", "n1", newImage))
	f.waitFor("a", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay / 2)
	f.create(boundPod("b", "n1", otherImage, newImage))
	f.waitFor("b", "ContainerCreating", showing(reasonContainerCreating))
	f.sim.mu.Lock()
	pulls := len(f.sim.pulls)
	f.sim.mu.Unlock()
	if pulls != 1 {
		t.Errorf("got %d pulls under way, want 1", pulls)
	}
	f.clock.Step(simDelay / 2)
	f.waitFor("a", "released", released)
	f.waitFor("b", "released with the first pod's pull", released)
}

// TestPrePullJobPullsForTheDaemonSet: a pre-pull Job's pod pinned to a node
// pulls the image there; once it finished and went, a DaemonSet pod of the
// image on that node starts at once.
func TestPrePullJobPullsForTheDaemonSet(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay})
	job := boundPod("pull-job", "n1", newImage)
	job.Labels = map[string]string{"edgeota.io/prepull": "true"}
	f.create(job)
	f.waitFor("pull-job", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay)
	job = f.waitFor("pull-job", "released", released)
	job.Status.Phase = corev1.PodSucceeded // what KWOK's pod-complete stage does next
	if _, err := f.client.CoreV1().Pods(simNS).UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().Pods(simNS).Delete(t.Context(), job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := boundPod("ds-pod", "n1", newImage)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "web", UID: "u"}}
	f.create(ds)
	if pod := f.waitFor("ds-pod", "released at once", released); len(pod.Status.ContainerStatuses) != 0 {
		t.Errorf("got the DaemonSet pod waiting for a pull: %s", describe(pod))
	}
}

// TestStartedPodsCountAsPulled: the images of the pods that had started on
// a node when the simulator started count as pulled there, and there only.
func TestStartedPodsCountAsPulled(t *testing.T) {
	running := boundPod("running", "n1", newImage)
	running.Status.Phase = corev1.PodRunning
	f := startSim(t, ImagePulls{Delay: simDelay}, running)
	f.create(boundPod("same-node", "n1", newImage))
	if pod := f.waitFor("same-node", "released at once", released); len(pod.Status.ContainerStatuses) != 0 {
		t.Errorf("got the pod waiting for a pull: %s", describe(pod))
	}
	f.create(boundPod("other-node", "n2", newImage))
	f.waitFor("other-node", "ContainerCreating", showing(reasonContainerCreating))
}

// TestMissingImageNeverStarts: a pull of an image that does not exist fails
// at once with "not found": ErrImagePull for half the back-off,
// ImagePullBackOff for the other half and the next attempt, which fails
// again and backs off twice as long; the pod is never released.
func TestMissingImageNeverStarts(t *testing.T) {
	image := MissingImages[0]
	f := startSim(t, ImagePulls{Delay: simDelay, BackOff: simBackOff})
	f.create(boundPod("p", "n1", image))
	pod := f.waitFor("p", "ErrImagePull", showing(reasonErrImagePull))
	if got, want := pod.Status.ContainerStatuses[0].State.Waiting.Message, notFoundMessage(image); got != want || !strings.Contains(got, "not found") {
		t.Errorf("got message %q, want %q", got, want)
	}
	f.clock.Step(simBackOff / 2)
	pod = f.waitFor("p", "ImagePullBackOff", showing(reasonImagePullBackOff))
	if got, want := pod.Status.ContainerStatuses[0].State.Waiting.Message, `Back-off pulling image "`+image+`": ErrImagePull: `+notFoundMessage(image); got != want {
		t.Errorf("got message %q, want %q", got, want)
	}
	f.clock.Step(simBackOff / 2)
	f.waitFor("p", "ErrImagePull again after the second attempt", showing(reasonErrImagePull))
	f.waitAttempt("n1", image, 2)
	f.clock.Step(simBackOff) // the second back-off's first half: twice the first's
	f.waitFor("p", "ImagePullBackOff again", showing(reasonImagePullBackOff))
	if pod := f.get("p"); released(pod) || pod.Status.Phase != corev1.PodPending {
		t.Errorf("got %s in phase %s, want Pending and never released", describe(pod), pod.Status.Phase)
	}
}

// TestMissingRuleIsAnOption: Missing replaces the default rule.
func TestMissingRuleIsAnOption(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay, Missing: func(image string) bool { return strings.HasSuffix(image, ":typo") }})
	f.create(boundPod("p", "n1", "nginx:typo"))
	f.waitFor("p", "ErrImagePull", showing(reasonErrImagePull))
}

// TestTransientFailuresThenSuccess: with TransientFailures 2 the first two
// pulls of an image on a node time out after the pull delay (ErrImagePull
// with an i/o timeout, then ImagePullBackOff), and the third succeeds; the
// count is per node.
func TestTransientFailuresThenSuccess(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay, BackOff: simBackOff, TransientFailures: 2})
	f.create(boundPod("p", "n1", newImage))
	f.waitFor("p", "ContainerCreating", showing(reasonContainerCreating))
	for attempt, backOff := range []time.Duration{simBackOff, 2 * simBackOff} {
		f.clock.Step(simDelay)
		pod := f.waitFor("p", fmt.Sprintf("ErrImagePull after attempt %d", attempt+1), showing(reasonErrImagePull))
		if got := pod.Status.ContainerStatuses[0].State.Waiting.Message; got != timeoutMessage(newImage) || !strings.Contains(got, "timeout") {
			t.Errorf("attempt %d: got message %q, want %q", attempt+1, got, timeoutMessage(newImage))
		}
		f.clock.Step(backOff / 2)
		f.waitFor("p", "ImagePullBackOff", showing(reasonImagePullBackOff))
		f.clock.Step(backOff / 2)
		f.waitAttempt("n1", newImage, attempt+2)
	}
	if pod := f.get("p"); released(pod) {
		t.Errorf("got released before the third attempt ended: %s", describe(pod))
	}
	f.clock.Step(simDelay)
	f.waitFor("p", "released after the third attempt", released)

	f.create(boundPod("q", "n2", newImage))
	f.waitFor("q", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay)
	f.waitFor("q", "ErrImagePull: another node's pulls fail on their own count", showing(reasonErrImagePull))
}

// TestPullFailImagesTimeOutForEver: PullFailImages' pulls time out like a
// registry out of reach, whatever TransientFailures says.
func TestPullFailImagesTimeOutForEver(t *testing.T) {
	image := PullFailImages[0]
	f := startSim(t, ImagePulls{Delay: simDelay, BackOff: simBackOff})
	f.create(boundPod("p", "n1", image))
	f.waitFor("p", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay)
	pod := f.waitFor("p", "ErrImagePull", showing(reasonErrImagePull))
	if got := pod.Status.ContainerStatuses[0].State.Waiting.Message; got != timeoutMessage(image) {
		t.Errorf("got message %q, want %q", got, timeoutMessage(image))
	}
}

// TestPullOfGonePodsIsDropped: a failing pull whose pods are all gone is
// dropped at its next attempt instead of retrying for ever.
func TestPullOfGonePodsIsDropped(t *testing.T) {
	image := MissingImages[0]
	f := startSim(t, ImagePulls{BackOff: simBackOff})
	f.create(boundPod("p", "n1", image))
	f.waitFor("p", "ErrImagePull", showing(reasonErrImagePull))
	if err := f.client.CoreV1().Pods(simNS).Delete(t.Context(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer must see the deletion before the retry looks for pods.
	if err := wait.PollUntilContextTimeout(t.Context(), 2*time.Millisecond, simDeadline, true, func(context.Context) (bool, error) {
		_, exists, err := f.sim.pods.GetIndexer().GetByKey(simNS + "/p")
		return !exists, err
	}); err != nil {
		t.Fatalf("the simulator never saw the pod go: %v", err)
	}
	f.clock.Step(simBackOff)
	if err := wait.PollUntilContextTimeout(t.Context(), 2*time.Millisecond, simDeadline, true, func(context.Context) (bool, error) {
		f.sim.mu.Lock()
		defer f.sim.mu.Unlock()
		return len(f.sim.pulls) == 0, nil
	}); err != nil {
		t.Errorf("got the pull kept after its pod went: %v", err)
	}
}

// TestWaitsForPull: the simulator starts only bound, Pending pods that are
// not being deleted and not released yet.
func TestWaitsForPull(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"bound and Pending", func(*corev1.Pod) {}, true},
		{"phase not set yet", func(p *corev1.Pod) { p.Status.Phase = "" }, true},
		{"unbound", func(p *corev1.Pod) { p.Spec.NodeName = "" }, false},
		{"released", func(p *corev1.Pod) { p.Annotations = map[string]string{PulledAnnotation: "true"} }, false},
		{"being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false},
		{"running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
	} {
		pod := boundPod("p", "n1", newImage)
		tc.change(pod)
		if got := waitsForPull(pod); got != tc.want {
			t.Errorf("%s: got waitsForPull %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestPodImagesCountsInitContainers: a pod's images are its init
// containers' and containers', each once.
func TestPodImagesCountsInitContainers(t *testing.T) {
	pod := boundPod("p", "n1", newImage, otherImage, newImage)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
	got := podImages(pod)
	if want := []string{"busybox:1.36", newImage, otherImage}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestBackOffDoublesToTheKubeletsCap: the back-off starts at BackOff (the
// kubelet's 10 s by default) and doubles up to 5 minutes.
func TestBackOffDoublesToTheKubeletsCap(t *testing.T) {
	for _, tc := range []struct {
		opts     ImagePulls
		failures int
		want     time.Duration
	}{
		{ImagePulls{}, 1, 10 * time.Second},
		{ImagePulls{}, 2, 20 * time.Second},
		{ImagePulls{}, 6, 5 * time.Minute},
		{ImagePulls{}, 60, 5 * time.Minute},
		{ImagePulls{BackOff: time.Second}, 3, 4 * time.Second},
	} {
		if got := tc.opts.backOff(tc.failures); got != tc.want {
			t.Errorf("back-off %s after %d failures: got %s, want %s", tc.opts.BackOff, tc.failures, got, tc.want)
		}
	}
}

// TestImagePullsValidate refuses negative delays and counts.
func TestImagePullsValidate(t *testing.T) {
	if err := (ImagePulls{Delay: time.Second, Delays: map[string]time.Duration{newImage: 0}}).Validate(); err != nil {
		t.Errorf("valid options: got %v, want nil", err)
	}
	for _, p := range []ImagePulls{
		{Delay: -time.Second}, {BackOff: -time.Second}, {TransientFailures: -1}, {Delays: map[string]time.Duration{newImage: -1}},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: got nil, want an error", p)
		}
	}
}

// TestDelaysPerImage: Delays overrides Delay for the images it names.
func TestDelaysPerImage(t *testing.T) {
	p := ImagePulls{Delay: time.Second, Delays: map[string]time.Duration{newImage: time.Minute}}
	if got := p.delay(newImage); got != time.Minute {
		t.Errorf("%s: got %s, want 1m", newImage, got)
	}
	if got := p.delay(otherImage); got != time.Second {
		t.Errorf("%s: got %s, want 1s", otherImage, got)
	}
}

// TestImageIDsResolvedAtPull: a released pod carries the imageID its node
// holds each image by: the registry's digest for the node's architecture
// when it pulled it; a push of the tag again changes what later pulls get,
// never what a node holds.
func TestImageIDsResolvedAtPull(t *testing.T) {
	node := func(name, arch string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelArchStable: arch}}}
	}
	f := startSim(t, ImagePulls{Delay: simDelay, Preloaded: []string{otherImage}}, node("n1", "amd64"), node("n2", "arm64"), node("n3", "amd64"))
	ids := func(pod *corev1.Pod) map[string]string {
		var m map[string]string
		if err := json.Unmarshal([]byte(pod.Annotations[ImageIDsAnnotation]), &m); err != nil {
			t.Fatalf("pod %s: annotation %s %q: %v", pod.Name, ImageIDsAnnotation, pod.Annotations[ImageIDsAnnotation], err)
		}
		return m
	}
	f.create(boundPod("first", "n1", newImage, otherImage))
	f.waitFor("first", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay)
	got := ids(f.waitFor("first", "released", released))
	if want := map[string]string{newImage: ImageID(newImage), otherImage: ImageID(otherImage)}; !maps.Equal(got, want) {
		t.Errorf("amd64 before any push: got %v, want %v", got, want)
	}

	f.sim.repush(newImage)
	f.create(boundPod("arm", "n2", newImage))
	f.create(boundPod("later", "n3", newImage))
	f.waitFor("arm", "ContainerCreating", showing(reasonContainerCreating))
	f.waitFor("later", "ContainerCreating", showing(reasonContainerCreating))
	f.clock.Step(simDelay)
	if got, want := ids(f.waitFor("arm", "released", released))[newImage], RegistryImageID(newImage, "arm64", 1); got != want || got == ImageID(newImage) {
		t.Errorf("arm64 after a push: got %s, want %s", got, want)
	}
	if got, want := ids(f.waitFor("later", "released", released))[newImage], RegistryImageID(newImage, "amd64", 1); got != want || got == ImageID(newImage) {
		t.Errorf("amd64 pulled after a push: got %s, want %s", got, want)
	}
	f.create(boundPod("again", "n1", newImage))
	if got := ids(f.waitFor("again", "released at once", released))[newImage]; got != ImageID(newImage) {
		t.Errorf("a node that held the image before the push: got %s, want what it pulled, %s", got, ImageID(newImage))
	}
}
