//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// The modelled image pulls' scenario's figures: a pull delay of a few
// seconds, in whole seconds (see TestImagePullsAreModelled), and a short
// back-off so that a missing image's pod turns to ImagePullBackOff soon.
const (
	pullDelay   = 5 * time.Second
	pullBackOff = 2 * time.Second
)

// Images of the scenario, none of which a node holds at first.
const (
	pulledImage    = "nginx:1.25.0"
	prePulledImage = "nginx:1.26.0"
)

// TestImagePullsAreModelled: on a cluster with image pulls modelled, a
// DaemonSet pod of a new image waits for its pull (ContainerCreating, not
// Ready before the pull delay) and its successor on the node starts without
// waiting; a pod of a missing image shows ErrImagePull and ImagePullBackOff
// and stays Pending; a pre-pull Job's pod pinned to a node pulls the image
// there, so that a DaemonSet pod of it starts at once on that node and
// waits for its pull on another; a crash-looping image still crash-loops,
// once pulled.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestImagePullsAreModelled(t *testing.T) {
	e := newEnvWith(t, harness.ClusterOptions{Nodes: 2, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: pullDelay, BackOff: pullBackOff}})
	h := e.recordPodStates()
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)

	e.createPinnedDaemonSet("pulled", pulledImage, node1)
	e.createPinnedPod("crashloop", localcluster.CrashLoopImages[0], node2)
	first := h.waitPod(t, "a Ready pod of DaemonSet pulled", func(p *corev1.Pod) bool {
		return p.Labels["app"] == "pulled" && podcondition.IsTrue(&p.Status, corev1.PodReady)
	})
	// Both timestamps are whole seconds (the API server keeps no more), each
	// rounded down: for a whole-second delay, a pod Ready at least the delay
	// after its creation reads at least the delay, and one Ready before would
	// read less.
	ready := podcondition.Get(&first.Status, corev1.PodReady).LastTransitionTime.Time
	waited := ready.Sub(first.CreationTimestamp.Time)
	if waited < pullDelay {
		t.Errorf("got the DaemonSet pod of a new image Ready %s after its creation, want at least the pull delay %s", waited, pullDelay)
	}
	t.Logf("the DaemonSet pod of a new image was Ready %s after its creation (pull delay %s)", waited, pullDelay)
	if !h.showed(first.UID, "ContainerCreating") {
		t.Errorf("got the DaemonSet pod of a new image Ready without waiting in ContainerCreating; it showed %v", h.reasons(first.UID))
	}

	if err := e.cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting pod %s: %v", first.Name, err)
	}
	second := h.waitPod(t, "the DaemonSet's next Ready pod", func(p *corev1.Pod) bool {
		return p.Labels["app"] == "pulled" && p.UID != first.UID && podcondition.IsTrue(&p.Status, corev1.PodReady)
	})
	if h.showed(second.UID, "ContainerCreating") {
		t.Errorf("got the second pod of %s on %s waiting for a pull, want it started at once; it showed %v", pulledImage, node1, h.reasons(second.UID))
	}

	crash := h.waitPod(t, "the pod of a crash-looping image in CrashLoopBackOff", func(p *corev1.Pod) bool {
		return p.Name == "crashloop" && h.showed(p.UID, "CrashLoopBackOff")
	})
	if !h.showed(crash.UID, "ContainerCreating") {
		t.Errorf("got the crash-looping image's pod started without waiting for its pull; it showed %v", h.reasons(crash.UID))
	}

	missing := localcluster.MissingImages[0]
	e.createPinnedPod("missing", missing, node1)
	bad := h.waitPod(t, "the pod of a missing image in ImagePullBackOff after ErrImagePull", func(p *corev1.Pod) bool {
		return p.Name == "missing" && h.showed(p.UID, "ErrImagePull") && h.showed(p.UID, "ImagePullBackOff")
	})
	if msg := h.message(bad.UID, "ErrImagePull"); !strings.Contains(msg, "not found") {
		t.Errorf("got ErrImagePull message %q, want one saying the image was not found", msg)
	}
	consistently(t, "the pod of a missing image stays Pending and not Ready", pullDelay, func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, "missing", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodPending && !podcondition.IsTrue(&p.Status, corev1.PodReady),
			fmt.Sprintf("phase %s, showed %v", p.Status.Phase, h.reasons(p.UID)), nil
	})

	e.createPrePullJob("prepull", prePulledImage, node2)
	jobPod := h.waitPod(t, "the pre-pull Job's pod Succeeded", func(p *corev1.Pod) bool {
		return p.Labels["job-name"] == "prepull" && p.Status.Phase == corev1.PodSucceeded
	})
	if !h.showed(jobPod.UID, "ContainerCreating") {
		t.Errorf("got the pre-pull Job's pod finished without waiting for its pull; it showed %v", h.reasons(jobPod.UID))
	}
	e.createPinnedDaemonSet("prepulled", prePulledImage, "")
	for _, node := range []string{node1, node2} {
		pod := h.waitPod(t, "a Ready pod of DaemonSet prepulled on "+node, func(p *corev1.Pod) bool {
			return p.Labels["app"] == "prepulled" && p.Spec.NodeName == node && podcondition.IsTrue(&p.Status, corev1.PodReady)
		})
		if waited, want := h.showed(pod.UID, "ContainerCreating"), node != node2; waited != want {
			t.Errorf("pod of %s on %s (the Job pulled it on %s): got waiting for a pull %t, want %t; it showed %v", prePulledImage, node, node2, waited, want, h.reasons(pod.UID))
		}
	}
}

// createPinnedDaemonSet creates a DaemonSet of one container of image, on
// node only unless node is empty, its pods labelled app=name.
func (e *env) createPinnedDaemonSet(name, image, node string) {
	e.t.Helper()
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
	if node != "" {
		ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Create(e.ctx(), ds, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating DaemonSet %s: %v", name, err)
	}
}

// createPinnedPod creates a pod of image bound to node.
func (e *env) createPinnedPod(name, image, node string) {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
	if _, err := e.cluster.Client.CoreV1().Pods(e.ns).Create(e.ctx(), pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating pod %s: %v", name, err)
	}
}

// createPrePullJob creates a Job like the controller's pre-pull Jobs
// (controller/prepulljob.go): labelled edgeota.io/prepull=true, its pod
// pinned to node by spec.nodeName, never restarted. The label is spelled
// here, as the suite spells the contract's keys.
func (e *env) createPrePullJob(name, image, node string) {
	e.t.Helper()
	labels := map[string]string{"edgeota.io/prepull": "true"}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName:      node,
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "app", Image: image, Command: []string{"true"}}},
				},
			},
		},
	}
	if _, err := e.cluster.Client.BatchV1().Jobs(e.ns).Create(e.ctx(), job, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating Job %s: %v", name, err)
	}
}

// podStates records, through a watch of the namespace's pods, every waiting
// reason each pod's containers showed (with its first message) and each
// pod's latest version, so that a scenario can tell what a pod went through
// on its way to where it is.
type podStates struct {
	mu       sync.Mutex
	seen     map[types.UID][]string
	messages map[types.UID]map[string]string
	latest   map[types.UID]*corev1.Pod
}

// recordPodStates starts recording the pods of the test's namespace until
// the test ends.
func (e *env) recordPodStates() *podStates {
	e.t.Helper()
	h := &podStates{seen: map[types.UID][]string{}, messages: map[types.UID]map[string]string{}, latest: map[types.UID]*corev1.Pod{}}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	record := func(obj any) { h.record(obj.(*corev1.Pod)) }
	registration, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	})
	if err != nil {
		e.t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	e.t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(e.t.Context().Done(), registration.HasSynced) {
		e.t.Fatal("the pod watch never synced")
	}
	return h
}

func (h *podStates) record(p *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest[p.UID] = p
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		w := s.State.Waiting
		if w == nil {
			continue
		}
		if !slices.Contains(h.seen[p.UID], w.Reason) {
			h.seen[p.UID] = append(h.seen[p.UID], w.Reason)
		}
		if h.messages[p.UID] == nil {
			h.messages[p.UID] = map[string]string{}
		}
		if _, ok := h.messages[p.UID][w.Reason]; !ok {
			h.messages[p.UID][w.Reason] = w.Message
		}
	}
}

// showed says whether a container of the pod was seen waiting with reason.
func (h *podStates) showed(uid types.UID, reason string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.seen[uid], reason)
}

// reasons are the waiting reasons the pod showed, first seen first.
func (h *podStates) reasons(uid types.UID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[uid])
}

// message is the first message the pod showed with reason.
func (h *podStates) message(uid types.UID, reason string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.messages[uid][reason]
}

// waitPod waits until a recorded pod's latest version matches, and returns
// it.
func (h *podStates) waitPod(t *testing.T, what string, match func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	eventually(t, what, func(context.Context) (bool, string, error) {
		h.mu.Lock()
		pods := make([]*corev1.Pod, 0, len(h.latest))
		for _, p := range h.latest {
			pods = append(pods, p)
		}
		h.mu.Unlock()
		var state []string
		for _, p := range pods {
			if match(p) {
				found = p
				return true, "", nil
			}
			state = append(state, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, h.reasons(p.UID)))
		}
		slices.Sort(state)
		return false, strings.Join(state, "; "), nil
	})
	return found
}
