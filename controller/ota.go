package controller

import (
	"context"
	"errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/podcondition"
)

// syncOTA keeps PodNeedUpgrade on every pod of the DaemonSet, disconnected
// nodes included, and serves the pods' pre-pull requests. It never deletes a
// pod: upgrades are the node owner's call, through the node agent.
func (c *Controller) syncOTA(ctx context.Context, ds *appsv1.DaemonSet, target string, pods []*corev1.Pod) error {
	var tasks []func(context.Context) error
	message := podcondition.RevisionMessage(target)
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if task := c.needUpgradeTask(ds, target, message, pod); task != nil {
			tasks = append(tasks, task)
		}
		if task := c.prePullTask(ds, target, pod); task != nil {
			tasks = append(tasks, task)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Updating OTA state of pods", "writes", len(tasks), "pods", len(pods))
	errs := runParallel(ctx, tasks)
	if len(errs) == 0 {
		return nil
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedCondition,
		"%d of %d OTA writes failed, will retry; first: %v", len(errs), len(tasks), errs[0])
	return errors.Join(errs...)
}

// needUpgradeTask returns the write that makes the pod's PodNeedUpgrade say
// whether it runs the target revision (message names it), or nil when it
// already does or a write to that end is on its way to the cache.
func (c *Controller) needUpgradeTask(ds *appsv1.DaemonSet, target, message string, pod *corev1.Pod) func(context.Context) error {
	want := corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue, Message: message}
	if upToDate(ds, target, pod) {
		want.Status = corev1.ConditionFalse
	}
	if podcondition.Equal(&pod.Status, want) || c.written.pending(pod, want.Type) {
		return nil
	}
	return func(ctx context.Context) error { return c.setCondition(ctx, pod, want) }
}

// setCondition writes one condition on the pod's status, remembers it until
// the cache shows it, and counts it.
func (c *Controller) setCondition(ctx context.Context, pod *corev1.Pod, want corev1.PodCondition) error {
	if _, err := podcondition.Set(ctx, c.client.CoreV1(), pod, want, FieldManager); err != nil {
		return err
	}
	c.written.record(pod, want.Type)
	c.metrics.conditionWritten(want.Type)
	return nil
}
