package localcluster

// The kubelet's part of an upgrade in place, as the local cluster models it.
//
// KWOK alone never restarts a container whose image changed, and writes no
// container IDs. The local cluster's stages (stages.go) do what a kubelet
// does in the status writes KWOK makes anyway:
//   - every container started gets a containerID of its own, and every pod
//     the observedGeneration of its spec (pod-ready and the bad images'
//     stages), as a Kubernetes 1.35 kubelet reports them;
//   - a running pod whose spec was patched (its metadata.generation above
//     its observedGeneration) has each container whose image changed, and
//     each native sidecar's, restarted under a new containerID, with its
//     restart count one higher and the old container as its last state, the
//     others left running: in one status write, never reporting the pod not
//     Ready, as a kubelet that restarts a container within one sync does
//     (pod-restart-in-place); or, for a pod annotated RestartAnnotation
//     "reported", in two, the pod reported not Ready with the container
//     waiting (ContainerCreating) in the first (pod-kill-in-place,
//     pod-start-in-place), as a slower kubelet does. A changed container
//     whose new image is a bad one (images.go) crash-loops, never turns
//     Ready, or cannot be pulled, and the pod turns not Ready.
//
// With image pulls modelled (ImagePulls) the pull simulator gates the
// restart on the pull, as a kubelet that kills the old container before it
// pulls the new image: a node that holds the new images has the pod
// released for its generation (PulledAnnotation naming it) at once, and the
// restart is the one write above; one that does not has the pod reported
// not Ready with the changed containers waiting (the kubelet's kill: the
// simulator writes it), shows the pull as the containers' waiting reasons
// (ErrImagePull, ImagePullBackOff), and releases the pod for
// pod-start-in-place once pulled. A cut-off node (CutOffLabel) does none of
// this for a pod upgraded in place until it returns: neither the kill, nor
// the pull's progress, nor the release. (Without image pulls modelled, and
// with status heartbeats, KWOK itself goes on playing a cut-off node's pods,
// as it starts a recreated pod there; with node Leases it plays none of a
// cut-off node's pods.)
//
// Writes per pod and upgrade: one status write (two for a "reported" pod,
// or a pull: the kill, the start, and the pull's waiting reasons as they
// change), and with image pulls modelled one release; a pod recreated in the
// same model costs its creation, binding, one status write and its release.
// A kubelet writes two or three statuses for a restart (observed, killed,
// started) and as many for a pod's start: KWOK's one per start is charged to
// the native baseline alike.
//
// Not modelled: imageIDs and digests (KWOK sets none: a same-digest tag
// restarts like any other), the kubelet's wait for the old container's
// termination grace period, readiness probes (a container is Ready as soon
// as it runs, unless its image never turns Ready), a restart of the whole
// pod (its sandbox) when more than images changed (the API server refuses
// such a patch anyway), and CPU and memory resizes in place.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// RestartAnnotation, "reported" on a pod (its DaemonSet's template), has the
// kubelet's model report an upgrade in place step by step: the pod not
// Ready and its changed containers waiting, then started; without it the
// restart shows in one status write, the pod never reported not Ready.
const RestartAnnotation = "localcluster.edgeota.io/restart"

// RestartReported is RestartAnnotation's value for a restart reported step
// by step.
const RestartReported = "reported"

// waitsInPlace says whether the pod's upgrade in place waits for the
// simulator: bound, running, not being deleted, patched (its generation
// above its observedGeneration, or changed containers waiting for their
// start) and not released for its generation yet.
func waitsInPlace(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning ||
		pod.Annotations[PulledAnnotation] == strconv.FormatInt(pod.Generation, 10) {
		return false
	}
	return pod.Generation > pod.Status.ObservedGeneration || len(startingContainers(pod)) > 0
}

// startingContainers are the pod's containers (native sidecars included)
// whose image changed and that have not started under it: their status
// names another image, or they wait to be created.
func startingContainers(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, list := range []struct {
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
		init     bool
	}{{pod.Spec.Containers, pod.Status.ContainerStatuses, false}, {pod.Spec.InitContainers, pod.Status.InitContainerStatuses, true}} {
		for _, c := range list.specs {
			if list.init && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue // a regular init container never runs again
			}
			st := containerStatus(list.statuses, c.Name)
			if st == nil || st.Image != c.Image || st.State.Waiting != nil && st.State.Waiting.Reason == reasonContainerCreating {
				out[c.Name] = c.Image
			}
		}
	}
	return out
}

func containerStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// syncInPlace carries out the pull of a pod upgraded in place: nothing while
// its node is cut off; released for its generation once its node holds its
// changed containers' images; otherwise killed (the kubelet's first step, if
// not reported yet) and shown pulling.
func (s *pullSimulator) syncInPlace(ctx context.Context, pod *corev1.Pod) error {
	if s.cutOff(pod.Spec.NodeName) {
		return nil // its return queues its pods again
	}
	starting := startingContainers(pod)
	images := make([]string, 0, len(starting))
	for _, image := range starting {
		images = append(images, image)
	}
	shown := s.pullsFor(pod.Spec.NodeName, images)
	if len(shown) == 0 {
		return s.releaseGeneration(ctx, pod)
	}
	status := inPlaceWaitingStatus(pod, starting, shown, s.clock.Now())
	if pod.Generation <= pod.Status.ObservedGeneration && !inPlaceDiffers(pod, status) {
		return nil
	}
	return s.writeInPlaceStatus(ctx, pod, status)
}

// inPlaceWaitingStatus is what a kubelet shows of a pod upgraded in place
// while it pulls the new images of starting: its spec observed, those
// containers killed (their old container as last state, a restart more)
// and waiting as shown says (ContainerCreating, or the pull's error), the
// others as they were, and the pod not Ready.
func inPlaceWaitingStatus(pod *corev1.Pod, starting map[string]string, shown map[string]waiting, now time.Time) corev1.PodStatus {
	status := corev1.PodStatus{ObservedGeneration: pod.Generation}
	killed := pod.Generation > pod.Status.ObservedGeneration
	update := func(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
		out := make([]corev1.ContainerStatus, len(statuses))
		for i, st := range statuses {
			image, ok := starting[st.Name]
			if !ok {
				out[i] = st
				continue
			}
			w, ok := shown[image]
			if !ok {
				w = waiting{reason: reasonContainerCreating}
			}
			next := corev1.ContainerStatus{Name: st.Name, Image: image, RestartCount: st.RestartCount, LastTerminationState: st.LastTerminationState,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}}}
			if killed {
				next.RestartCount++
				term := &corev1.ContainerStateTerminated{ContainerID: st.ContainerID, Reason: "Completed", FinishedAt: metav1.NewTime(now)}
				if r := st.State.Running; r != nil {
					term.StartedAt = r.StartedAt
				}
				next.LastTerminationState = corev1.ContainerState{Terminated: term}
			}
			out[i] = next
		}
		return out
	}
	status.ContainerStatuses = update(pod.Status.ContainerStatuses)
	status.InitContainerStatuses = update(pod.Status.InitContainerStatuses)
	since := metav1.NewTime(now)
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionFalse {
		since = c.LastTransitionTime
	}
	status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady, LastTransitionTime: since},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady, LastTransitionTime: since},
	}
	return status
}

// inPlaceDiffers says whether the pod does not show status yet: its Ready
// condition, or a changed container's waiting reason or message.
func inPlaceDiffers(pod *corev1.Pod, status corev1.PodStatus) bool {
	if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
		return true
	}
	for _, pair := range [][2][]corev1.ContainerStatus{{pod.Status.ContainerStatuses, status.ContainerStatuses},
		{pod.Status.InitContainerStatuses, status.InitContainerStatuses}} {
		for _, want := range pair[1] {
			have := containerStatus(pair[0], want.Name)
			if want.State.Waiting == nil {
				continue
			}
			if have == nil || have.State.Waiting == nil || have.State.Waiting.Reason != want.State.Waiting.Reason ||
				have.State.Waiting.Message != want.State.Waiting.Message {
				return true
			}
		}
	}
	return false
}

// writeInPlaceStatus writes the status of a pod upgraded in place, provided
// it is still the version it was decided on (see writeStatus).
func (s *pullSimulator) writeInPlaceStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	body := map[string]any{
		"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
		"status": map[string]any{
			"observedGeneration":    status.ObservedGeneration,
			"conditions":            status.Conditions,
			"containerStatuses":     status.ContainerStatuses,
			"initContainerStatuses": status.InitContainerStatuses,
		}}
	patch, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: pullFieldManager}, "status")
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("writing the in-place pull status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// releaseGeneration lets KWOK's stages restart the pod's changed containers
// (pod-restart-in-place, pod-start-in-place): PulledAnnotation names the
// generation whose images its node holds.
func (s *pullSimulator) releaseGeneration(ctx context.Context, pod *corev1.Pod) error {
	ids, err := s.imageIDs(pod)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		PulledAnnotation: strconv.FormatInt(pod.Generation, 10), ImageIDsAnnotation: ids}}})
	if err != nil {
		return fmt.Errorf("encoding the release of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: pullFieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing pod %s/%s for generation %d: %w", pod.Namespace, pod.Name, pod.Generation, err)
	}
	return nil
}

// cutOff says whether the node is cut off (CutOffLabel), as the
// simulator's watch of the nodes last saw it.
func (s *pullSimulator) cutOff(node string) bool {
	obj, ok, _ := s.nodes.GetIndexer().GetByKey(node)
	return ok && obj.(*corev1.Node).Labels[CutOffLabel] == "true"
}

// nodeChanged queues the pods upgraded in place on a node that is no longer
// cut off: what waited for its return goes on.
func (s *pullSimulator) nodeChanged(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok || node.Labels[CutOffLabel] == "true" {
		return
	}
	objs, _ := s.pods.GetIndexer().ByIndex(nodeIndex, node.Name)
	for _, o := range objs {
		if pod := o.(*corev1.Pod); waitsInPlace(pod) {
			s.queue.Add(work{pod: cache.MetaObjectToName(pod).String()})
		}
	}
}

// slimNode keeps of a node its name, its cut-off label and its
// architecture (the digest its pulls resolve a tag to).
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, ResourceVersion: node.ResourceVersion}}
	for _, k := range []string{CutOffLabel, corev1.LabelArchStable} {
		if v, ok := node.Labels[k]; ok {
			if slim.Labels == nil {
				slim.Labels = map[string]string{}
			}
			slim.Labels[k] = v
		}
	}
	return slim, nil
}
