package localcluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// patchedPod is a running pod whose container c0 ran oldImage as container
// kwok://c1 and whose spec was patched to newImage (generation 2, the
// kubelet's observed 1).
func patchedPod(name, node string) *corev1.Pod {
	const oldImage = "nginx:1.24.0"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: simNS, Generation: 2},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c0", Image: newImage}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, ObservedGeneration: 1,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c0", Image: oldImage, ContainerID: "kwok://c1", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}}},
		},
	}
}

// TestInPlacePullKillsThenReleases: a pod patched to an image its node
// lacks is killed at once, as a kubelet kills before it pulls (the spec
// observed, the container waiting with the old one as its last state, the
// pod not Ready), then released for its generation once the pull is done,
// for the stages to start its new container.
func TestInPlacePullKillsThenReleases(t *testing.T) {
	f := startSim(t, ImagePulls{Delay: simDelay}, patchedPod("p", "n1"))
	killed := f.waitFor("p", "killed, waiting for its image", func(p *corev1.Pod) bool {
		st := p.Status.ContainerStatuses
		return p.Status.ObservedGeneration == 2 && len(st) == 1 && st[0].State.Waiting != nil && st[0].State.Waiting.Reason == reasonContainerCreating
	})
	st := killed.Status.ContainerStatuses[0]
	if st.RestartCount != 1 || st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ContainerID != "kwok://c1" || st.Image != newImage {
		t.Errorf("got container %+v, want a restart more, the old container kwok://c1 as its last state, the new image", st)
	}
	if c := podCondition(killed, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("got Ready %+v, want False while the image is pulled", c)
	}
	if killed.Annotations[PulledAnnotation] != "" {
		t.Fatalf("got the pod released before its pull")
	}
	f.clock.Step(simDelay)
	f.waitFor("p", "released for generation 2", func(p *corev1.Pod) bool { return p.Annotations[PulledAnnotation] == "2" })
}

// TestInPlaceHeldImageReleasedAtOnce: a node that holds the patched image
// (a running pod of it started there) has the pod released at once, with
// no kill written: the stages restart it in one write.
func TestInPlaceHeldImageReleasedAtOnce(t *testing.T) {
	running := patchedPod("other", "n1")
	running.Generation, running.Status.ObservedGeneration = 1, 1
	running.Status.ContainerStatuses[0].Image = newImage
	f := startSim(t, ImagePulls{Delay: simDelay}, running, patchedPod("p", "n1"))
	got := f.waitFor("p", "released for generation 2", func(p *corev1.Pod) bool { return p.Annotations[PulledAnnotation] == "2" })
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("got observedGeneration %d, want the kill left to the stages (1)", got.Status.ObservedGeneration)
	}
}

// TestInPlaceWaitsForACutOffNode: a cut-off node does nothing of an upgrade
// in place until it returns: no kill, no release, its pull done or not.
func TestInPlaceWaitsForACutOffNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{CutOffLabel: "true"}}}
	f := startSim(t, ImagePulls{Delay: simDelay}, node, patchedPod("p", "n1"))
	f.clock.Step(2 * simDelay)
	time.Sleep(100 * time.Millisecond) // nothing may come: give it the chance
	if p := f.get("p"); p.Status.ObservedGeneration != 1 || p.Annotations[PulledAnnotation] != "" {
		t.Fatalf("got pod %s while its node is cut off, want it untouched", describe(p))
	}
	node.Labels = nil
	if _, err := f.client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("p", "killed once its node returned", func(p *corev1.Pod) bool { return p.Status.ObservedGeneration == 2 })
	f.clock.Step(simDelay)
	f.waitFor("p", "released once pulled", func(p *corev1.Pod) bool { return p.Annotations[PulledAnnotation] == "2" })
}

// TestImageID: a tag pushed again under RetagSuffix has its tag's digest;
// an image named by digest reports that digest.
func TestImageID(t *testing.T) {
	if a, b := ImageID("nginx:1.25.0"), ImageID("nginx:1.25.0"+RetagSuffix); a != b {
		t.Errorf("got %s and %s, want the same digest", a, b)
	}
	if a, b := ImageID("nginx:1.25.0"), ImageID("nginx:1.25.1"); a == b {
		t.Errorf("got the same digest %s for two tags, want two", a)
	}
	if got := ImageID("registry:5000/app:v1"); got[:len("kwok://registry:5000/app@sha256:")] != "kwok://registry:5000/app@sha256:" {
		t.Errorf("got %s, want the repository registry:5000/app", got)
	}
	pinned := "nginx@sha256:0123"
	if got := ImageID(pinned); got != "kwok://"+pinned {
		t.Errorf("got %s for %s, want its own digest", got, pinned)
	}
}

// TestRegistryImageID: amd64 before any push is ImageID's digest; another
// architecture, or a push again, another digest; an imported image a bare
// config digest, whatever the architecture.
func TestRegistryImageID(t *testing.T) {
	const image = "registry:5000/app:v2"
	if got := RegistryImageID(image, "amd64", 0); got != ImageID(image) {
		t.Errorf("amd64: got %s, want %s", got, ImageID(image))
	}
	seen := map[string]bool{ImageID(image): true}
	for _, id := range []string{RegistryImageID(image, "arm64", 0), RegistryImageID(image, "amd64", 1), RegistryImageID(image, "arm64", 1)} {
		if seen[id] || !strings.HasPrefix(id, "kwok://registry:5000/app@sha256:") {
			t.Errorf("got %s: want a new digest of registry:5000/app", id)
		}
		seen[id] = true
	}
	imported := ImportedPrefix + ":v1"
	if got := RegistryImageID(imported, "arm64", 2); got != ImageID(imported) || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("imported: got %s, want a bare config digest", got)
	}
}
