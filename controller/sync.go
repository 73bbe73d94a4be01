package controller

import (
	"context"
	"fmt"

	"github.com/edgeota/edgeota/rollout"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// sync brings one DaemonSet's pods in line with its strategy. It only reads
// the caches and writes through the API; a nil error with nothing done means
// the DaemonSet is not ours or waits for its next change.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we queued; retrying cannot fix it
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(ctx, key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting daemonset %s: %w", key, err)
	}
	strategy, ok := c.strategyFor(ds, key)
	if !ok {
		c.forgetTracker(key)
		return nil
	}
	target, err := c.targetRevision(ds, key)
	if err != nil || target.hash == "" {
		return err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("daemonset", klog.KObj(ds), "strategy", strategy, "revision", target.hash))
	if strategy == rollout.StrategyOTA {
		return c.syncOTA(ctx, ds, key, target)
	}
	return c.rollingUpdate(ctx, ds, key, target)
}

// forget drops what the controller remembers of a deleted DaemonSet, and
// deletes its rollout records.
func (c *Controller) forget(ctx context.Context, key string) {
	c.trackersMu.Lock()
	t := c.trackers[key]
	delete(c.trackers, key)
	c.trackersMu.Unlock()
	if t != nil && t.uid != "" {
		c.deleteRecords(ctx, key, c.recordsOf(t.uid))
	}
	c.statusWrites.forget(key)
	c.eventMemo.forget(key)
	c.targetImages.forget(key)
	c.heartbeats.set(key, nil)
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		c.metrics.forgetRollout(namespace, name)
	}
}

// forgetTracker drops what the controller keeps about a DaemonSet it no
// longer acts on (opted out); its records stay until it is deleted or
// rolls another revision.
func (c *Controller) forgetTracker(key string) {
	c.trackersMu.Lock()
	defer c.trackersMu.Unlock()
	delete(c.trackers, key)
}

// podsControlledBy returns the cached pods of the DaemonSet with the UID.
// Read only.
func (c *Controller) podsControlledBy(uid types.UID) []*corev1.Pod {
	// ByIndex fails only for an index that does not exist; NewController
	// registers this one.
	objs, _ := c.podIndexer.ByIndex(byControllerUID, string(uid))
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*corev1.Pod))
	}
	return pods
}

// runParallel runs the tasks on up to WriteParallelism goroutines and returns
// the errors of those that failed, so that one sync spends the API budget
// without serialising hundreds of round trips.
func runParallel(ctx context.Context, tasks []func(context.Context) error) []error {
	errs := make([]error, len(tasks))
	workqueue.ParallelizeUntil(ctx, WriteParallelism, len(tasks), func(i int) {
		errs[i] = tasks[i](ctx)
	})
	failed := errs[:0]
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}
