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
)

// rollingUpdate deletes out-of-date pods on Ready nodes within max-unavailable,
// by the native DaemonSet controller's rules for maxSurge=0, so that the
// DaemonSet controller (OnDelete) recreates them from the current template.
// NotReady nodes are neither counted nor touched: they cannot take an upgrade
// now and would otherwise hold the budget forever; their pods are upgraded
// when they come back (the node handler requeues the DaemonSet).
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, key, target string, pods []*corev1.Pod) error {
	logger := klog.FromContext(ctx)
	podsByNode := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			podsByNode[pod.Spec.NodeName] = append(podsByNode[pod.Spec.NodeName], pod)
		}
	}
	// Nodes whose pod was deleted and not yet replaced still run the
	// DaemonSet, for the percentage as for the count of unavailable ones.
	var awaiting []string
	for _, node := range c.expectations.awaitingReplacement(key) {
		if _, seen := podsByNode[node]; !seen {
			awaiting = append(awaiting, node)
		}
	}
	budget, err := maxUnavailable(ds.Annotations[MaxUnavailableAnnotation], len(podsByNode)+len(awaiting))
	if err != nil {
		c.recorder.Event(ds, corev1.EventTypeWarning, ReasonInvalidMaxUnavailable, err.Error()+"; no pod is deleted until it is fixed")
		return nil
	}
	if !c.expectations.satisfied(key) {
		logger.V(4).Info("Waiting for issued deletions to show in the cache")
		return nil
	}

	now := time.Now()
	unavailable, recheck := 0, time.Duration(0)
	var replaceNow, candidates []*corev1.Pod
	for node, nodePods := range podsByNode {
		if !c.nodeIsReady(node) {
			continue
		}
		newPod, oldPod, ok := splitByRevision(ds, target, nodePods)
		if newPod != nil || oldPod != nil {
			c.expectations.replaced(key, node)
		}
		switch {
		case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++
		case newPod != nil:
			if ok, wait := available(newPod, ds.Spec.MinReadySeconds, now); !ok {
				unavailable++
				if wait > 0 && (recheck == 0 || wait < recheck) {
					recheck = wait
				}
			}
		default:
			if ok, _ := available(oldPod, ds.Spec.MinReadySeconds, now); !ok {
				replaceNow = append(replaceNow, oldPod) // down already: replacing it costs nothing
			} else {
				candidates = append(candidates, oldPod)
			}
		}
	}
	for _, node := range awaiting {
		if c.nodeIsReady(node) {
			unavailable++
		}
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}

	allowed := min(max(budget-unavailable, 0), len(candidates))
	toDelete := append(replaceNow, candidates[:allowed]...)
	verbosity := 4
	if len(toDelete) > 0 {
		verbosity = 2
	}
	logger.V(verbosity).Info("Rolling update", "nodes", len(podsByNode)+len(awaiting), "maxUnavailable", budget,
		"unavailable", unavailable, "candidates", len(candidates), "deleting", len(toDelete))
	return c.deletePods(ctx, ds, key, target, toDelete)
}

// splitByRevision finds the node's one up-to-date and one out-of-date pod,
// ignoring terminating ones; ok is false when there are several of a kind.
func splitByRevision(ds *appsv1.DaemonSet, target string, pods []*corev1.Pod) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		slot := &oldPod
		if upToDate(ds, target, pod) {
			slot = &newPod
		}
		if *slot != nil {
			return nil, nil, false
		}
		*slot = pod
	}
	return newPod, oldPod, true
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
	return err == nil && nodeReady(node)
}
