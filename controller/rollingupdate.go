package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/health"
)

// rollingUpdate deletes out-of-date pods on Ready nodes within max-unavailable,
// by the native DaemonSet controller's rules for maxSurge=0, so that the
// DaemonSet controller (OnDelete) recreates them from the current template.
// NotReady nodes are neither counted nor touched: they cannot take an upgrade
// now and would otherwise hold the budget forever; their pods are upgraded
// when they come back (the node handler requeues the DaemonSet).
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, key, target string, pods []*corev1.Pod) error {
	logger := klog.FromContext(ctx)
	nodes := podsByNode(ds, target, pods)
	// Nodes whose pod was deleted and not yet replaced still run the
	// DaemonSet, for the percentage as for the count of unavailable ones.
	var awaiting []string
	for _, node := range c.expectations.awaitingReplacement(key) {
		if _, seen := nodes[node]; !seen {
			awaiting = append(awaiting, node)
		}
	}
	// Nodes the DaemonSet should run on that show no pod and are not awaited
	// either: their pod is being replaced (the new one not created yet, or not
	// yet bound by the scheduler, so without a node) by a deletion this
	// process does not remember, as after a restart or a leader handover.
	// They are down all the same. The count rests on the DaemonSet's status,
	// which lags by one of its controller's syncs at most; pods still running
	// on nodes it no longer schedules to (a NotReady node's taint) offset it,
	// so it can fall short, not over.
	missing := max(int(ds.Status.DesiredNumberScheduled)-len(nodes)-len(awaiting), 0)
	budget, err := maxUnavailable(ds.Annotations[MaxUnavailableAnnotation], len(nodes)+len(awaiting)+missing)
	if err != nil {
		c.recorder.Event(ds, corev1.EventTypeWarning, ReasonInvalidMaxUnavailable, err.Error()+"; no pod is deleted until it is fixed")
		return nil
	}
	if !c.expectations.satisfied(key) {
		logger.V(4).Info("Waiting for issued deletions to show in the cache")
		return nil
	}

	a := c.assess(ds, key, nodes, awaiting)
	a.unavailable += missing
	if a.recheck > 0 {
		c.queue.AddAfter(key, a.recheck)
	}

	allowed := min(max(budget-a.unavailable, 0), len(a.candidates))
	toDelete := append(a.replaceNow, a.candidates[:allowed]...)
	verbosity := 4
	if len(toDelete) > 0 {
		verbosity = 2
	}
	logger.V(verbosity).Info("Rolling update", "nodes", len(nodes)+len(awaiting)+missing, "maxUnavailable", budget,
		"unavailable", a.unavailable, "withoutPod", missing, "candidates", len(a.candidates), "deleting", len(toDelete))
	return c.deletePods(ctx, ds, key, target, toDelete)
}

// assessment is where a rollout stands on the Ready nodes.
type assessment struct {
	unavailable int           // nodes down: no live pod, new pod not available, or both kinds
	replaceNow  []*corev1.Pod // old pods down anyway: replacing them costs nothing
	candidates  []*corev1.Pod // old available pods, deleted within the budget
	recheck     time.Duration // when a new pod becomes available, if one will
}

// assess applies the native controller's maxSurge=0 rules to each Ready node;
// NotReady nodes are skipped. Nodes awaiting a replacement pod count as down.
func (c *Controller) assess(ds *appsv1.DaemonSet, key string, nodes map[string]nodePods, awaiting []string) assessment {
	var a assessment
	now := time.Now()
	for node, np := range nodes {
		if !c.nodeIsReady(node) {
			continue
		}
		if np.newPod != nil || np.oldPod != nil {
			c.expectations.replaced(key, node)
		}
		switch {
		case np.several, np.newPod == nil && np.oldPod == nil, np.newPod != nil && np.oldPod != nil:
			a.unavailable++
		case np.newPod != nil:
			if ok, wait := health.PodAvailable(np.newPod, ds.Spec.MinReadySeconds, now); !ok {
				a.unavailable++
				if wait > 0 && (a.recheck == 0 || wait < a.recheck) {
					a.recheck = wait
				}
			}
		default:
			if ok, _ := health.PodAvailable(np.oldPod, ds.Spec.MinReadySeconds, now); ok {
				a.candidates = append(a.candidates, np.oldPod)
			} else {
				a.replaceNow = append(a.replaceNow, np.oldPod)
			}
		}
	}
	for _, node := range awaiting {
		if c.nodeIsReady(node) {
			a.unavailable++
		}
	}
	return a
}

// nodePods is what a rolling update needs of one node's pods: its one live
// up-to-date and one live out-of-date pod; terminating pods are ignored, so a
// node with only those has neither.
type nodePods struct {
	newPod, oldPod *corev1.Pod
	several        bool // more than one live pod of a kind
}

// podsByNode groups the DaemonSet's scheduled pods by node, in one pass and
// without an allocation per node: it runs on every sync of every pod event.
func podsByNode(ds *appsv1.DaemonSet, target string, pods []*corev1.Pod) map[string]nodePods {
	nodes := make(map[string]nodePods, len(pods))
	for _, pod := range pods {
		name := pod.Spec.NodeName
		if name == "" {
			continue
		}
		np := nodes[name]
		if pod.DeletionTimestamp == nil {
			slot := &np.oldPod
			if upToDate(ds, target, pod) {
				slot = &np.newPod
			}
			np.several = np.several || *slot != nil
			*slot = pod
		}
		nodes[name] = np
	}
	return nodes
}

// deletePods deletes the pods in parallel, expecting the deletions first so
// that no sync on a lagging cache deletes past the budget meanwhile.
func (c *Controller) deletePods(ctx context.Context, ds *appsv1.DaemonSet, key, target string, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	expected := make(map[types.UID]string, len(pods))
	for _, pod := range pods {
		expected[pod.UID] = pod.Spec.NodeName
	}
	c.expectations.expectDeletions(key, expected)

	tasks := make([]func(context.Context) error, len(pods))
	for i, pod := range pods {
		tasks[i] = func(ctx context.Context) error {
			err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &pod.UID},
			})
			if err != nil {
				// Gone already: its node awaits a replacement. Failed: no
				// deletion is coming.
				c.expectations.deletionObserved(key, pod.UID, apierrors.IsNotFound(err))
				c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDelete, "Deleting pod %s on node %s failed: %v", pod.Name, pod.Spec.NodeName, err)
				return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			c.metrics.podDeleted()
			c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonDeletedPod, "Deleted pod %s on node %s to upgrade it to revision %s", pod.Name, pod.Spec.NodeName, target)
			return nil
		}
	}
	return errors.Join(runParallel(ctx, tasks)...)
}

// nodeIsReady reports whether the node exists and is Ready.
func (c *Controller) nodeIsReady(name string) bool {
	node, err := c.nodeLister.Get(name)
	return err == nil && health.NodeReady(node)
}
