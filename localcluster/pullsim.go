package localcluster

// The pull simulator: ImagePulls carried out on a running cluster. One shared
// informer watches the bound pods; a bounded pool of workers writes what the
// pods show and releases them (PulledAnnotation), and carries out the pulls'
// steps, each timed by a clock's AfterFunc (a runtime timer, not a goroutine
// sleeping per pod or per pull) that queues it when due.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/clock"
)

// pullWorkers bounds the simulator's API writes in flight: two per pod that
// pulls, one per pod that does not. Four times kwok-controller's own stage
// players (podPlayStageParallelism), they keep the simulator ahead of KWOK:
// with 2,000 pods created at once on 2,000 nodes, KWOK's Ready after the
// release took longer than the pulls and the writes before it.
const pullWorkers = 16

// pullSyncTimeout bounds the simulator's first list of the pods.
const pullSyncTimeout = time.Minute

// Write retries back off from pullRetryMin to pullRetryMax per item: an API
// server restarted mid-test comes back within seconds.
const (
	pullRetryMin = 100 * time.Millisecond
	pullRetryMax = 10 * time.Second
)

// pullFieldManager names the simulator's writes in the pods' managedFields.
const pullFieldManager = "localcluster-pull-simulator"

// nodeIndex indexes the informer's pods by node name.
const nodeIndex = "node"

// pullKey is one image on one node.
type pullKey struct{ node, image string }

// pullStep is a timed step of a pull's attempt.
type pullStep int

const (
	// attemptEnds: the attempt succeeds or fails.
	attemptEnds pullStep = iota + 1
	// showBackOff: the waiting pods turn from ErrImagePull to
	// ImagePullBackOff.
	showBackOff
	// retryPull: the back-off is over, the next attempt starts.
	retryPull
)

// work is an item of the simulator's queue: a pod to look at (namespace/name),
// or a step of a pull's attempt.
type work struct {
	pod     string
	pull    pullKey
	attempt int
	step    pullStep
}

// waiting is what a container shows while its image is not there.
type waiting struct{ reason, message string }

// pull is a node's pull of an image, under way or backing off.
type pull struct {
	// attempt is the attempt under way or last made, 1-based; the steps of
	// earlier attempts are stale.
	attempt int
	// fail is why the attempt under way fails; empty when it succeeds.
	fail string
	// failures counts this pull's failed attempts, for its back-off.
	failures int
	// shown is what the containers of this image show.
	shown waiting
}

// pullSimulator carries out ImagePulls on a cluster (see ImagePulls).
type pullSimulator struct {
	opts      ImagePulls
	preloaded sets.Set[string]
	client    kubernetes.Interface
	clock     clock.WithTickerAndDelayedExecution
	log       klog.Logger

	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	// nodes tells the cut-off nodes (CutOffLabel), whose pods upgraded in
	// place wait for their return (inplace.go).
	nodes  cache.SharedIndexInformer
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[work]

	mu sync.Mutex
	// pulled are the images each node holds, by node name.
	pulled map[string]sets.Set[string]
	// resolved are the imageIDs of the images nodes hold, as the registry
	// named them when each node pulled them (or first ran them).
	resolved map[pullKey]string
	// pushes counts, by image, the pushes of its tag again (repush).
	pushes map[string]int
	// pulls are the pulls under way or backing off.
	pulls map[pullKey]*pull
	// failures counts the failed attempts of each image on each node over
	// the cluster's life, for TransientFailures.
	failures map[pullKey]int

	cancel  context.CancelFunc
	workers sync.WaitGroup
}

// newPullSimulator prepares a simulator of opts on the cluster client talks
// to, timed by clk, logging to log; start runs it.
func newPullSimulator(client kubernetes.Interface, opts ImagePulls, clk clock.WithTickerAndDelayedExecution, log klog.Logger) (*pullSimulator, error) {
	s := &pullSimulator{
		opts:      opts,
		preloaded: sets.New(opts.Preloaded...),
		client:    client,
		clock:     clk,
		log:       log,
		pulled:    map[string]sets.Set[string]{},
		resolved:  map[pullKey]string{},
		pushes:    map[string]int{},
		pulls:     map[pullKey]*pull{},
		failures:  map[pullKey]int{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[work](pullRetryMin, pullRetryMax),
			workqueue.TypedRateLimitingQueueConfig[work]{Clock: clk}),
	}
	s.factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slim))
	// Bound pods only: a node pulls for the pods it runs.
	s.pods = s.factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, resync, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName!=" })
	})
	s.nodes = s.factory.Core().V1().Nodes().Informer()
	if _, err := s.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { s.nodeChanged(obj) }}); err != nil {
		return nil, fmt.Errorf("watching the nodes: %w", err)
	}
	if err := s.pods.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing the pods by node: %w", err)
	}
	handler, err := s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.podSeen,
		UpdateFunc: func(_, obj any) { s.podSeen(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching the pods: %w", err)
	}
	s.synced = func() bool { return handler.HasSynced() && s.nodes.HasSynced() }
	return s, nil
}

// startPullSimulator runs a simulator of opts on the cluster client talks to,
// logging to out, until stop.
func startPullSimulator(ctx context.Context, client kubernetes.Interface, opts ImagePulls, out io.Writer) (*pullSimulator, error) {
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out))).WithName("pull-simulator")
	s, err := newPullSimulator(client, opts, clock.RealClock{}, log)
	if err != nil {
		return nil, err
	}
	return s, s.start(ctx)
}

// start runs the informer and, once every pod the cluster had is known, the
// workers. ctx bounds the wait for that; the simulator runs until stop.
func (s *pullSimulator) start(ctx context.Context) error {
	run, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.factory.Start(run.Done())
	wait, cancelWait := context.WithTimeout(ctx, pullSyncTimeout)
	defer cancelWait()
	if !cache.WaitForCacheSync(wait.Done(), s.synced) {
		s.stop()
		return fmt.Errorf("the image pull simulator's first list of the pods: %w", errors.Join(context.Cause(wait), ctx.Err()))
	}
	for range pullWorkers {
		s.workers.Go(func() {
			for s.next(run) {
			}
		})
	}
	s.log.Info("Started", "delay", s.opts.Delay, "transientFailures", s.opts.TransientFailures, "preloaded", len(s.opts.Preloaded))
	return nil
}

// stop stops the workers and the informer and waits for them.
func (s *pullSimulator) stop() {
	s.cancel()
	s.queue.ShutDown()
	s.workers.Wait()
	s.factory.Shutdown()
}

// next processes one item of the queue; false once the queue shuts down.
func (s *pullSimulator) next(ctx context.Context) bool {
	w, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(w)
	if w.pod == "" {
		s.stepPull(w)
		return true
	}
	if err := s.syncPod(ctx, w.pod); err != nil {
		if ctx.Err() == nil {
			s.log.Error(err, "Writing a pod, will retry", "pod", w.pod)
		}
		s.queue.AddRateLimited(w)
		return true
	}
	s.queue.Forget(w)
	return true
}

// podSeen notes the images of a pod's containers that started as pulled on
// its node, and queues a pod that waits for the simulator: to start, or to
// restart the containers its upgrade in place changed.
func (s *pullSimulator) podSeen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if podStarted(pod) {
		s.mu.Lock()
		held := s.pulled[pod.Spec.NodeName]
		if held == nil {
			held = sets.New[string]()
			s.pulled[pod.Spec.NodeName] = held
		}
		held.Insert(startedImages(pod)...)
		s.mu.Unlock()
	}
	if waitsForPull(pod) || waitsInPlace(pod) {
		s.queue.Add(work{pod: cache.MetaObjectToName(pod).String()})
	}
}

// syncPod releases the pod if its node holds all its images, and otherwise
// starts the pulls it needs and shows them on the pod.
func (s *pullSimulator) syncPod(ctx context.Context, key string) error {
	obj, exists, err := s.pods.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if waitsInPlace(pod) {
		return s.syncInPlace(ctx, pod)
	}
	if !waitsForPull(pod) {
		return nil
	}
	shown := s.pullsFor(pod.Spec.NodeName, podImages(pod))
	if len(shown) == 0 {
		return s.release(ctx, pod)
	}
	status := waitingStatus(pod, shown, s.clock.Now())
	if !differs(pod, status) {
		return nil
	}
	return s.writeStatus(ctx, pod, status)
}

// pullsFor starts the node's pulls of the images it does not hold, and
// returns what each of those images shows; none when it holds them all.
func (s *pullSimulator) pullsFor(node string, images []string) map[string]waiting {
	s.mu.Lock()
	defer s.mu.Unlock()
	shown := map[string]waiting{}
	for _, image := range images {
		if s.preloaded.Has(image) || s.pulled[node].Has(image) {
			continue
		}
		key := pullKey{node, image}
		p := s.pulls[key]
		if p == nil {
			p = &pull{shown: waiting{reason: reasonContainerCreating}}
			s.pulls[key] = p
			s.startAttempt(key, p)
		}
		shown[image] = p.shown
	}
	return shown
}

// startAttempt starts p's next attempt and times its end. s.mu is held.
func (s *pullSimulator) startAttempt(key pullKey, p *pull) {
	p.attempt++
	delay := s.opts.delay(key.image)
	switch {
	case s.opts.missing(key.image):
		p.fail, delay = notFoundMessage(key.image), 0 // the registry answers at once
	case slices.Contains(PullFailImages, key.image), s.failures[key] < s.opts.TransientFailures:
		p.fail = timeoutMessage(key.image)
	default:
		p.fail = ""
	}
	s.after(delay, work{pull: key, attempt: p.attempt, step: attemptEnds})
}

// after queues w once d has passed. The timer is set before after returns,
// so that a fake clock stepped afterwards fires it.
func (s *pullSimulator) after(d time.Duration, w work) {
	if d <= 0 {
		s.queue.Add(w)
		return
	}
	s.clock.AfterFunc(d, func() { s.queue.Add(w) })
}

// stepPull carries out a timed step of a pull, then queues the pods that
// wait for it, whose containers show it.
func (s *pullSimulator) stepPull(w work) {
	key := w.pull
	s.mu.Lock()
	p := s.pulls[key]
	if p == nil || p.attempt != w.attempt {
		s.mu.Unlock()
		return
	}
	switch w.step {
	case attemptEnds:
		if p.fail == "" {
			if s.pulled[key.node] == nil {
				s.pulled[key.node] = sets.New[string]()
			}
			s.pulled[key.node].Insert(key.image)
			s.resolved[key] = s.registryID(key)
			delete(s.pulls, key)
			s.log.Info("Pulled image", "node", key.node, "image", key.image, "attempt", p.attempt)
			break
		}
		s.failures[key]++
		p.failures++
		p.shown = waiting{reasonErrImagePull, p.fail}
		backOff := s.opts.backOff(p.failures)
		s.after(backOff/2, work{pull: key, attempt: p.attempt, step: showBackOff})
		s.after(backOff, work{pull: key, attempt: p.attempt, step: retryPull})
		s.log.Info("Failed to pull image", "node", key.node, "image", key.image, "attempt", p.attempt, "backOff", backOff, "err", p.fail)
	case showBackOff:
		p.shown = waiting{reasonImagePullBackOff, backOffMessage(key.image, p.fail)}
	case retryPull:
		if len(s.waitingFor(key)) == 0 {
			delete(s.pulls, key) // its pods are gone: so is the kubelet's back-off
		} else {
			s.startAttempt(key, p) // the pods go on showing ImagePullBackOff
		}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	for _, pod := range s.waitingFor(key) {
		s.queue.Add(work{pod: pod})
	}
}

// waitingFor names the pods on the key's node that wait for its image: to
// start, or to restart a container their upgrade in place changed.
func (s *pullSimulator) waitingFor(key pullKey) []string {
	objs, _ := s.pods.GetIndexer().ByIndex(nodeIndex, key.node)
	var names []string
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if waitsForPull(pod) && uses(pod, key.image) || waitsInPlace(pod) && slices.Contains(slices.Collect(maps.Values(startingContainers(pod))), key.image) {
			names = append(names, cache.MetaObjectToName(pod).String())
		}
	}
	return names
}

// release lets KWOK's stages start the pod, with the imageIDs its node
// holds its images by.
func (s *pullSimulator) release(ctx context.Context, pod *corev1.Pod) error {
	ids, err := s.imageIDs(pod)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{PulledAnnotation: "true", ImageIDsAnnotation: ids}}})
	if err != nil {
		return fmt.Errorf("encoding the release of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: pullFieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// writeStatus writes the waiting status on the pod, provided it is still
// the version it was decided on: a write based on a stale view is refused,
// and the newer version, on its way through the watch, is decided again.
func (s *pullSimulator) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	body := map[string]any{"status": map[string]any{
		"conditions":            status.Conditions,
		"containerStatuses":     status.ContainerStatuses,
		"initContainerStatuses": status.InitContainerStatuses,
	}}
	if pod.ResourceVersion != "" {
		body["metadata"] = map[string]any{"resourceVersion": pod.ResourceVersion}
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: pullFieldManager}, "status")
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("writing the pull status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// waitingStatus is what a kubelet shows on a pod whose images are being
// pulled: Ready and ContainersReady False, every container waiting, those
// of the images in shown as shown, the others in ContainerCreating. The
// Initialized condition is left to KWOK's stages, whose bad images' stages
// select pods without it.
func waitingStatus(pod *corev1.Pod, shown map[string]waiting, now time.Time) corev1.PodStatus {
	since := metav1.NewTime(now)
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionFalse {
		since = c.LastTransitionTime
	}
	statuses := func(containers []corev1.Container) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, c := range containers {
			w, ok := shown[c.Image]
			if !ok {
				w = waiting{reason: reasonContainerCreating}
			}
			out = append(out, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.reason, Message: w.message}},
			})
		}
		return out
	}
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	message := "containers with unready status: [" + strings.Join(names, " ") + "]"
	conditions := []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady, Message: message, LastTransitionTime: since},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: reasonContainersNotReady, Message: message, LastTransitionTime: since},
	}
	return corev1.PodStatus{
		Conditions:            conditions,
		ContainerStatuses:     statuses(pod.Spec.Containers),
		InitContainerStatuses: statuses(pod.Spec.InitContainers),
	}
}

// differs says whether the pod does not show status yet: its Ready
// condition, or a container's waiting reason or message.
func differs(pod *corev1.Pod, status corev1.PodStatus) bool {
	if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
		return true
	}
	same := func(have, want []corev1.ContainerStatus) bool {
		if len(have) != len(want) {
			return false
		}
		for i := range want {
			h, w := have[i].State.Waiting, want[i].State.Waiting
			if have[i].Name != want[i].Name || h == nil || h.Reason != w.Reason || h.Message != w.Message {
				return false
			}
		}
		return true
	}
	return !same(pod.Status.ContainerStatuses, status.ContainerStatuses) || !same(pod.Status.InitContainerStatuses, status.InitContainerStatuses)
}

// waitsForPull says whether the pod is the simulator's to start: bound, not
// being deleted, Pending and not released yet.
func waitsForPull(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil &&
		(pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "") &&
		pod.Annotations[PulledAnnotation] != "true"
}

// podStarted says whether the pod's containers were started, and so the
// images they run pulled on its node (startedImages).
func podStarted(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && (pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded)
}

// startedImages are the images of a started pod's containers that run, or
// ran to their end, as their statuses name them: not the spec's, which an
// upgrade in place changes before its new images are pulled. A container
// its status does not name (a pod whose statuses were never written) ran
// its spec's image.
func startedImages(pod *corev1.Pod) []string {
	var images []string
	for _, list := range []struct {
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{pod.Spec.InitContainers, pod.Status.InitContainerStatuses}, {pod.Spec.Containers, pod.Status.ContainerStatuses}} {
		for _, c := range list.specs {
			switch st := containerStatus(list.statuses, c.Name); {
			case st == nil || st.Image == "":
				images = append(images, c.Image)
			case st.State.Running != nil || st.State.Terminated != nil:
				images = append(images, st.Image)
			}
		}
	}
	return images
}

// podImages are the images of the pod's init containers and containers,
// each once.
func podImages(pod *corev1.Pod) []string {
	var images []string
	seen := sets.New[string]()
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if !seen.Has(c.Image) {
				seen.Insert(c.Image)
				images = append(images, c.Image)
			}
		}
	}
	return images
}

// uses says whether one of the pod's containers runs the image.
func uses(pod *corev1.Pod, image string) bool {
	return slices.Contains(podImages(pod), image)
}

// podCondition is the pod's condition of type t, or nil.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// slim keeps of the pods and nodes the simulator watches what it reads.
func slim(obj any) (any, error) {
	if _, ok := obj.(*corev1.Node); ok {
		return slimNode(obj)
	}
	return slimPod(obj)
}

// slimPod keeps of a pod what the simulator reads, so that its cache of
// every bound pod stays small at 2,000 nodes: for an upgrade in place, its
// generations and its containers' statuses as a kill rewrites them.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	containers := func(list []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range list {
			out = append(out, corev1.Container{Name: c.Name, Image: c.Image, RestartPolicy: c.RestartPolicy})
		}
		return out
	}
	statuses := func(list []corev1.ContainerStatus) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, c := range list {
			out = append(out, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ContainerID: c.ContainerID, RestartCount: c.RestartCount,
				Ready: c.Ready, State: c.State, LastTerminationState: c.LastTerminationState})
		}
		return out
	}
	slim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, Generation: pod.Generation,
			ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			Containers:     containers(pod.Spec.Containers),
			InitContainers: containers(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			ObservedGeneration:    pod.Status.ObservedGeneration,
			ContainerStatuses:     statuses(pod.Status.ContainerStatuses),
			InitContainerStatuses: statuses(pod.Status.InitContainerStatuses),
		},
	}
	if v, ok := pod.Annotations[PulledAnnotation]; ok {
		slim.Annotations = map[string]string{PulledAnnotation: v}
	}
	if c := podCondition(pod, corev1.PodReady); c != nil {
		slim.Status.Conditions = []corev1.PodCondition{*c}
	}
	return slim, nil
}

// registryID is the imageID the registry names the key's image by for the
// key's node now (RegistryImageID: its architecture, the pushes so far).
// Called with s.mu held.
func (s *pullSimulator) registryID(key pullKey) string {
	arch := ""
	if obj, ok, _ := s.nodes.GetIndexer().GetByKey(key.node); ok {
		arch = obj.(*corev1.Node).Labels[corev1.LabelArchStable]
	}
	return RegistryImageID(key.image, arch, s.pushes[key.image])
}

// imageIDs is ImageIDsAnnotation's value for the pod: the imageID of each
// of its images on its node, resolved now for an image the node held
// before the simulator knew (preloaded, or run before it started).
func (s *pullSimulator) imageIDs(pod *corev1.Pod) (string, error) {
	s.mu.Lock()
	ids := map[string]string{}
	for _, image := range podImages(pod) {
		key := pullKey{pod.Spec.NodeName, image}
		id, ok := s.resolved[key]
		if !ok {
			id = s.registryID(key)
			s.resolved[key] = id
		}
		ids[image] = id
	}
	s.mu.Unlock()
	b, err := json.Marshal(ids)
	if err != nil {
		return "", fmt.Errorf("encoding the imageIDs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return string(b), nil
}

// repush has the registry name image by other bytes from now on.
func (s *pullSimulator) repush(image string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pushes[image]++
	s.log.Info("Pushed the tag again", "image", image, "pushes", s.pushes[image])
}
