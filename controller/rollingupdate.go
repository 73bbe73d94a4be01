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
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// rollingUpdate deletes out-of-date pods on Ready nodes within max-unavailable,
// by the native DaemonSet controller's rules for maxSurge=0, so that the
// DaemonSet controller (OnDelete) recreates them from the current template,
// and halts the rollout once max-failed nodes failed (see judgeNode).
// NotReady nodes that are not in flight are neither counted nor touched: they
// cannot take an upgrade now and would otherwise hold the budget forever;
// their pods are upgraded when they come back (the node handler requeues the
// DaemonSet).
func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, key string, target revision) error {
	r, err := c.assess(ctx, ds, key, rollout.StrategyAdvancedRollingUpdate, target)
	if r == nil || err != nil {
		return err
	}
	// Budget: in-flight, failed and down nodes count against it; the
	// controller deletes within what is left, the down ones at no cost.
	v := r.view
	unavailable := v.counts[nodeInFlight] + v.counts[nodeFailed] + v.counts[nodeOldDown]
	allowed := max(r.cfg.maxUnavailable-unavailable, 0)
	ch := v.choose(&r.cfg, allowed, true)
	status := r.status(ch.heldBack, v.olds.Len()-(ch.heldBack-v.outside-v.zoneInvalid), "nodes")
	return c.publish(ctx, ds, key, r.statusValue, r.prev, status, r.grew, r.failures, func() error {
		var toDelete []*nodeInfo
		if !status.Halted && !r.cfg.paused {
			toDelete = append(ch.replace, ch.take...)
		}
		verbosity := 4
		if len(toDelete) > 0 {
			verbosity = 2
		}
		klog.FromContext(ctx).V(verbosity).Info("Rolling update", "nodes", status.Total, "maxUnavailable", r.cfg.maxUnavailable,
			"unavailable", unavailable, "inFlight", status.InFlight, "failed", status.Failed.Count, "maxFailed", r.cfg.maxFailed,
			"halted", status.Halted, "paused", r.cfg.paused, "candidates", v.olds.Len(), "deleting", len(toDelete),
			"daemonSetResourceVersion", ds.ResourceVersion)
		if err := c.deleteOldPods(ctx, ds, key, r.tracker, target, toDelete); err != nil {
			return err
		}
		if !status.Halted && !r.cfg.paused {
			c.writeIntents(ctx, key, r, toDelete, true)
		}
		c.showHoldLimits(ctx, ds, key, r)
		return nil
	})
}

// showHoldLimits writes, in the background, the offer on each held pod so
// that its owner sees the limit that will end the hold (the node agent
// reads nothing but its pods). AdvancedRollingUpdate writes no offer
// otherwise: one write per held pod, once.
func (c *Controller) showHoldLimits(ctx context.Context, ds *appsv1.DaemonSet, key string, r *assessment) {
	var tasks []func(context.Context) error
	for node := range r.view.heldNodes {
		pod := r.view.nodes[node].pods.oldPod
		if pod == nil || c.written.pending(pod, offerWrite) {
			continue
		}
		want := offerFor(ds, r.target, &r.cfg, pod, false, c.now())
		if current, err := podchannel.OfferOf(pod); err == nil && want.Equal(current) {
			continue
		}
		tasks = append(tasks, func(ctx context.Context) error { return c.writeOffer(ctx, pod, want) })
	}
	if len(tasks) > 0 {
		c.inBackground(ctx, key, func() error { return errors.Join(runParallel(ctx, tasks)...) })
	}
}

// intentsMark is what a writeIntents scan saw: the view and record it
// read, how often the takeable nodes had changed, and how many it took.
type intentsMark struct {
	view            *dsView
	record          *rolloutRecord
	takeableChanges uint64
	limit           int
	partitioned     bool
}

// rollout is where one sync found a DaemonSet's rollout: its settings, its
// view of the nodes, the record, and the status it last wrote.
type assessment struct {
	tracker     *tracker
	view        *dsView
	record      *rolloutRecord
	cfg         settings
	target      revision
	strategy    rollout.Strategy
	statusValue string
	prev        *rollout.Status
	// grew: the record holds failures the status does not show yet;
	// failures names them for an event.
	grew     bool
	failures string
}

// assess brings the DaemonSet's view up to date (see refresh) and writes
// what the rollout record must hold before anything is deleted or offered:
// new failures, and in-flight entries the judgement established. It
// requeues the DaemonSet for its next change by the clock. A nil rollout
// with a nil error means the DaemonSet waits for a change (invalid
// settings, said in an event).
func (c *Controller) assess(ctx context.Context, ds *appsv1.DaemonSet, key string, strategy rollout.Strategy, target revision) (*assessment, error) {
	cfg, err := rolloutSettings(ds, 0)
	if !c.settingsValid(ds, key, err) {
		return nil, nil
	}
	statusValue, prev := c.statusWrites.current(key, ds)
	t := c.trackerFor(key)
	now := c.now()

	t.mu.Lock()
	if t.record == nil || t.record.dsUID != ds.UID || !t.record.rev.same(target) {
		// First sync, a new leader, or a new target: the record of the
		// target as the cluster holds it; records of other revisions go.
		if t.uid != "" && t.uid != ds.UID {
			clear(t.deleting) // a namesake DaemonSet: nothing of the old one applies
		}
		var stale []string
		t.record, stale = c.loadRecord(ds, key, target, prev)
		t.uid, t.view = ds.UID, nil
		c.deleteRecords(ctx, key, stale)
	}
	in := &judgeInput{ds: ds, strategy: strategy, target: target, cfg: &cfg, record: t.record, deleting: t.deleting, now: now}
	c.refresh(t, in)
	r := &assessment{tracker: t, view: t.view, record: t.record, target: target, strategy: strategy, statusValue: statusValue, prev: prev}
	t.mu.Unlock()

	// Percentages are of the nodes running the DaemonSet, now known.
	if r.cfg, err = rolloutSettings(ds, len(r.view.nodes)); !c.settingsValid(ds, key, err) {
		return nil, nil
	}
	c.heartbeats.set(key, r.view.awaiting)
	if next := r.view.nextChange(); !next.IsZero() {
		c.queue.AddAfter(key, next.Sub(now))
	}
	// Write before act: failures, and nodes taken in flight by someone
	// else's deletion, are written before the sync deletes or offers
	// anything, so that a restarted controller or a new leader, rebuilding
	// from the cluster, decides exactly as this one. The rest (entries of
	// nodes that got their pod, clocks started) goes in the background:
	// a budget freed by a heartbeat is used without waiting for a write.
	switch pending, urgent := r.record.pending(); {
	case urgent:
		if err := c.writeRecord(ctx, r.record); err != nil {
			return nil, err
		}
	case pending:
		c.inBackground(ctx, key, func() error { return c.writeRecord(ctx, r.record) })
	}
	shown, failures := r.record.display()
	r.failures = failures
	r.grew = failuresGrew(prev, target, shown.Count)
	return r, nil
}

// status summarises the rollout for the annotation, and says why it is
// halted or paused if it is; failed names what failed ("nodes", "upgraded
// nodes"). heldBack counts the candidates the selector and the partition
// hold back; a pause holds back the admitted ones as well.
func (r *assessment) status(heldBack, admitted int, failed string) rollout.Status {
	v := r.view
	shown, _ := r.record.display()
	s := rollout.Status{
		Revision: r.target.number, Hash: r.target.hash, Strategy: r.strategy,
		Updated: v.counts[nodeSettled] + v.skippedUpdated, Total: len(v.nodes),
		InFlight: v.counts[nodeInFlight], Skipped: v.counts[nodeSkipped], Failed: shown, HeldBack: heldBack,
		Paused: r.cfg.paused, Halted: shown.Count >= r.cfg.maxFailed,
	}
	if n := v.held.total(); n > 0 {
		s.Held = &rollout.TimedNodes{Count: n, At: &metav1.Time{Time: v.held.latest()}}
	}
	if n := v.waiting.total(); n > 0 {
		s.WaitingForWindow = &rollout.TimedNodes{Count: n, At: &metav1.Time{Time: v.waiting.earliest()}}
	}
	switch {
	case s.Halted:
		s.Reason = fmt.Sprintf("%d %s failed (max-failed %d)", s.Failed.Count, failed, r.cfg.maxFailed)
	case r.cfg.paused:
		s.Reason = rollout.PausedAnnotation + " is true"
		s.HeldBack += admitted
	}
	return s
}

// deleteOldPods deletes the nodes' old pods, in parallel and in the
// background, each once its in-flight entry is written: the entries
// written ahead (writeIntents) serve at once; a node without one has it
// written first, so that a restarted controller knows what this one took
// away even if no replacement ever comes. The deletions count as in flight
// from now on (tracker.deleting), so that no sync deletes past the budget on
// a cache that does not show them yet, and none waits for their round trips
// either: the budget the next heartbeat frees is used at once. A failed
// deletion puts the node back, says FailedDelete and requeues with backoff.
func (c *Controller) deleteOldPods(ctx context.Context, ds *appsv1.DaemonSet, key string, t *tracker, target revision, nodes []*nodeInfo) error {
	if len(nodes) == 0 {
		return nil
	}
	r := t.record
	unwritten := false
	for _, n := range nodes {
		if e, ok := r.entry(n.name); !ok || e.Pod != n.pods.oldPod.UID || e.Since != nil {
			r.set(n.name, recordEntry{State: entryInFlight, Pod: n.pods.oldPod.UID})
		}
		unwritten = unwritten || !r.written(n.name)
	}
	if unwritten {
		if err := c.writeRecord(ctx, r); err != nil {
			return fmt.Errorf("recording the nodes about to be upgraded: %w", err)
		}
	}

	logger := klog.FromContext(ctx)
	now := c.now()
	// Whole seconds, as the record keeps them: a restarted controller
	// computes the same deadline.
	since := &metav1.Time{Time: now.Truncate(time.Second)}
	t.mu.Lock()
	for _, n := range nodes {
		pod := n.pods.oldPod
		t.deleting[n.name] = deletion{pod: pod.UID, until: now.Add(deletionWait)}
		t.dirty[n.name] = true
		r.set(n.name, recordEntry{State: entryInFlight, Pod: pod.UID, Since: since})
		logger.V(2).Info(LogDeletingPod, "pod", klog.KObj(pod), "node", n.name, "podResourceVersion", pod.ResourceVersion)
	}
	t.mu.Unlock()

	tasks := make([]func(context.Context) error, len(nodes))
	for i, n := range nodes {
		pod := n.pods.oldPod
		tasks[i] = func(ctx context.Context) error {
			err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &pod.UID},
			})
			if err == nil || apierrors.IsNotFound(err) {
				if err == nil {
					c.metrics.podDeleted()
					c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonDeletedPod, "Deleted pod %s on node %s to upgrade it to revision %s", pod.Name, n.name, target.hash)
				}
				return nil // gone, by us or before us: its node is in flight
			}
			// No deletion is coming: the node is a candidate again, and its
			// entry one written ahead.
			t.mu.Lock()
			if d, ok := t.deleting[n.name]; ok && d.pod == pod.UID {
				delete(t.deleting, n.name)
			}
			t.dirty[n.name] = true
			t.mu.Unlock()
			r.set(n.name, recordEntry{State: entryInFlight, Pod: pod.UID})
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedDelete, "Deleting pod %s on node %s failed: %v", pod.Name, n.name, err)
			return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	c.inBackground(ctx, key, func() error {
		err := errors.Join(runParallel(ctx, tasks)...)
		// The deletion times, after the deletions: the entries written
		// ahead already hold the nodes; these start their clocks.
		return errors.Join(err, c.writeRecord(ctx, r))
	})
	return nil
}

// writeIntents writes, in the background, in-flight entries ahead for the
// nodes the rollout takes next (as many as the budget), so that when a
// heartbeat frees the budget the deletions go at once, without waiting for
// a write; taken are the nodes being deleted now.
//
// A sync that changed none of the takeable nodes (most of a rollout's: a
// new pod's progress, a heartbeat) finds the same nodes with their entries
// as the last scan left them, and skips the scan: at 2,000 nodes it walked
// 200 of them at every sync. An entry lost meanwhile costs only time:
// deleteOldPods writes any entry missing before it deletes.
func (c *Controller) writeIntents(ctx context.Context, key string, r *assessment, taken []*nodeInfo, partitioned bool) {
	limit := r.cfg.maxUnavailable + len(taken)
	mark := intentsMark{view: r.view, record: r.record, takeableChanges: r.view.takeableChanges, limit: limit, partitioned: partitioned}
	if len(taken) == 0 && r.tracker.intents == mark {
		return
	}
	r.tracker.intents = mark
	skip := make(map[string]bool, len(taken))
	for _, n := range taken {
		skip[n.name] = true
	}
	ch := r.view.choose(&r.cfg, limit, partitioned)
	added := false
	for _, n := range ch.take {
		if skip[n.name] {
			continue
		}
		if e, ok := r.record.entry(n.name); !ok || e.Pod != n.pods.oldPod.UID {
			r.record.set(n.name, recordEntry{State: entryInFlight, Pod: n.pods.oldPod.UID})
			added = true
		}
	}
	if added {
		c.inBackground(ctx, key, func() error { return c.writeRecord(ctx, r.record) })
	}
}
