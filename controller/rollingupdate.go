package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// rollingUpdate deletes out-of-date pods on Ready nodes within max-unavailable,
// by the native DaemonSet controller's rules for maxSurge=0, so that the
// DaemonSet controller (OnDelete) recreates them from the current template,
// and halts the rollout once max-failed upgraded nodes failed (see judgeNode).
// NotReady nodes that are not in flight are neither counted nor touched: they
// cannot take an upgrade now and would otherwise hold the budget forever;
// their pods are upgraded when they come back (the node handler requeues the
// DaemonSet).
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, key string, target revision, pods []*corev1.Pod) error {
	// Deletions issued and not yet seen in the cache leave it counting too
	// few nodes down: it may still show those pods running, or already gone
	// while their nodes do not await a replacement yet. Their nodes are in
	// flight all the same, counted from what this process issued rather than
	// from the cache, so that a sync on a cache lagging its own deletions
	// decides at once, and never past the budget.
	pending := c.expectations.pendingDeletions(key)
	nodes := podsByNode(ds, target.hash, pods)
	// Nodes whose pod was deleted and not yet replaced still run the
	// DaemonSet, for the percentage as for the count of unavailable ones.
	awaiting := sets.New[string]()
	for _, node := range c.expectations.awaitingReplacement(key) {
		awaiting.Insert(node)
	}
	for _, node := range pending {
		awaiting.Insert(node)
	}
	for node := range nodes {
		awaiting.Delete(node)
	}
	// Nodes the DaemonSet should run on that show no pod and are not awaited
	// either: their pod is being replaced (the new one not created yet, or not
	// yet bound by the scheduler, so without a node) by a deletion this
	// process does not remember, as after a restart or a leader handover.
	// They are down all the same. The count rests on the DaemonSet's status,
	// which lags by one of its controller's syncs at most; pods still running
	// on nodes it no longer schedules to (a NotReady node's taint) offset it,
	// so it can fall short, not over.
	missing := max(int(ds.Status.DesiredNumberScheduled)-len(nodes)-awaiting.Len(), 0)
	total := len(nodes) + awaiting.Len() + missing
	cfg, err := rolloutSettings(ds, total)
	if !c.settingsValid(ds, key, err) {
		return nil
	}
	statusValue, prev := c.statusWrites.current(key, ds)
	record := recordFor(prev, target)
	a := c.assess(ds, key, nodes, awaiting, pending, cfg, record)
	a.unavailable += missing
	if a.recheck > 0 {
		c.queue.AddAfter(key, a.recheck)
	}

	// The operator's controls: the selector and partition hold some nodes
	// back; a pause holds back all.
	names := make([]string, 0, len(nodes)+awaiting.Len())
	for n := range nodes {
		names = append(names, n)
	}
	names = append(names, awaiting.UnsortedList()...)
	scope := c.newScope(&cfg, names, func(n string) bool {
		np, ok := nodes[n]
		return !ok || np.newPod != nil || np.oldPod == nil || np.oldPodDeleted(pending) // awaiting, upgraded, or in flight
	})
	admitted, held := scope.admit(append(slices.Clone(a.replaceNow), a.candidates...))
	a.inFlight += awaiting.Len() + missing
	status := newRolloutStatus(target, &a, record, &cfg, total, len(held), len(admitted), "nodes")
	return c.publish(ctx, ds, key, statusValue, prev, status, record, func() error {
		c.deleteWithinBudget(ctx, ds, key, target, &cfg, &a, &status, admitted)
		return nil
	})
}

// deleteWithinBudget deletes the admitted pods the budget allows: the old
// pods that are down anyway, then the candidates in node name order.
func (c *Controller) deleteWithinBudget(ctx context.Context, ds *appsv1.DaemonSet, key string, target revision,
	cfg *settings, a *assessment, status *RolloutStatus, admitted []*corev1.Pod) {
	logger := klog.FromContext(ctx)
	var toDelete []*corev1.Pod
	if !status.Halted && !cfg.paused {
		// Replacing an old pod that is down anyway costs no budget, and frees
		// none: its node counted as unavailable before and does after. Other
		// candidates go in node name order within the budget.
		down := sets.New(a.replaceNow...)
		var candidates []*corev1.Pod
		for _, p := range admitted {
			if down.Has(p) {
				toDelete = append(toDelete, p)
			} else {
				candidates = append(candidates, p)
			}
		}
		allowed := min(max(cfg.maxUnavailable-a.unavailable, 0), len(candidates))
		toDelete = append(toDelete, candidates[:allowed]...)
	}
	verbosity := 4
	if len(toDelete) > 0 {
		verbosity = 2
	}
	logger.V(verbosity).Info("Rolling update", "nodes", status.Total, "maxUnavailable", cfg.maxUnavailable,
		"unavailable", a.unavailable, "inFlight", status.InFlight, "failed", status.Failed.Count, "maxFailed", cfg.maxFailed,
		"halted", status.Halted, "paused", cfg.paused, "candidates", len(a.candidates), "deleting", len(toDelete),
		"daemonSetResourceVersion", ds.ResourceVersion, "podsResourceVersion", a.newestPodVersion)
	c.deletePods(ctx, ds, key, target.hash, toDelete)
}

// assessment is where a rollout stands.
type assessment struct {
	unavailable int           // nodes counting against the budget: in flight, failed, down
	inFlight    int           // nodes being upgraded
	settled     int           // nodes upgraded and proven alive
	skipped     int           // NotReady nodes not in flight
	replaceNow  []*corev1.Pod // old pods down anyway: replacing them frees no budget
	candidates  []*corev1.Pod // old available pods, deleted within the budget in node name order (scope.admit sorts)
	recheck     time.Duration // when a verdict changes by the clock alone
	// newestPodVersion is the highest resourceVersion among the pods judged,
	// logged with each decision so that it can be set against a watch.
	newestPodVersion string
}

// assess judges every node (judgeNode), adds the new failures to record and
// counts what holds the budget: in-flight, failed and down nodes. Nodes
// awaiting a replacement pod are in flight if Ready, as are Ready nodes whose
// old pod pending (pod UID → node) says this process deleted.
func (c *Controller) assess(ds *appsv1.DaemonSet, key string, nodes map[string]nodePods, awaiting sets.Set[string],
	pending map[types.UID]string, cfg settings, record *failureRecord) assessment {
	var a assessment
	now := time.Now()
	var newest uint64
	waiters := map[string]time.Time{} // node → a heartbeat after it proves the node alive
	for node, np := range nodes {
		if np.newPod != nil || np.oldPod != nil {
			c.expectations.replaced(key, node)
		}
		for _, p := range []*corev1.Pod{np.newPod, np.oldPod} {
			if p != nil {
				if v, err := strconv.ParseUint(p.ResourceVersion, 10, 64); err == nil && v > newest {
					newest, a.newestPodVersion = v, p.ResourceVersion
				}
			}
		}
		v := c.judgeNode(node, np, ds.Spec.MinReadySeconds, cfg.deadline, now)
		if v.state == nodeFailed {
			record.add(node, v.why)
		}
		if v.recheck > 0 && (a.recheck == 0 || v.recheck < a.recheck) {
			a.recheck = v.recheck
		}
		if v.awaitsHeartbeat {
			waiters[node] = v.proofAfter
		}
		switch {
		case record.has(node):
			// Failed for this revision, now or before: it stands, and holds
			// the budget, even if the node recovered; its pod is left alone.
			a.unavailable++
		case (v.state == nodeOld || v.state == nodeOldDown) && np.oldPodDeleted(pending):
			// Deleted by this process, still running in a lagging cache:
			// in flight, and not to be deleted again.
			a.unavailable++
			a.inFlight++
		case v.state == nodeOld:
			a.candidates = append(a.candidates, np.oldPod)
		case v.state == nodeOldDown:
			a.unavailable++
			a.replaceNow = append(a.replaceNow, np.oldPod)
		case v.state == nodeInFlight:
			a.unavailable++
			a.inFlight++
		case v.state == nodeSettled:
			a.settled++
		case v.state == nodeSkipped:
			if np.newPod != nil {
				a.settled++ // upgraded, then went offline
			}
			a.skipped++
		}
	}
	c.heartbeats.set(key, waiters)
	for node := range awaiting {
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

// oldPodDeleted reports whether this process deleted the node's live old
// pod, by the deletions pending (pod UID → node) it has not yet seen.
func (np nodePods) oldPodDeleted(pending map[types.UID]string) bool {
	if np.oldPod == nil {
		return false
	}
	_, ok := pending[np.oldPod.UID]
	return ok
}

// deletePods deletes the pods in parallel and in the background, expecting
// the deletions first: until the cache shows them, the syncs that follow
// count their nodes as in flight (pendingDeletions), so none deletes past the
// budget, and none waits for these round trips either: on a loaded API server
// they take tens of milliseconds, and the budget the next heartbeat frees is
// used at once. A failed deletion drops its expectation and says
// FailedDelete.
func (c *Controller) deletePods(ctx context.Context, ds *appsv1.DaemonSet, key, target string, pods []*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	expected := make(map[types.UID]string, len(pods))
	for _, pod := range pods {
		expected[pod.UID] = pod.Spec.NodeName
		logger.V(2).Info(LogDeletingPod, "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "podResourceVersion", pod.ResourceVersion)
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
	c.inBackground(ctx, key, func() error {
		return errors.Join(runParallel(ctx, tasks)...)
	})
}
