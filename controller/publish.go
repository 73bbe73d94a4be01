package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// statusWriteInterval is the least time between two writes of one
// DaemonSet's rollout status: a 1,000-node rollout changes its figures on
// every pod event.
const statusWriteInterval = time.Second

// statusWrites remembers, per DaemonSet, the last rollout status written and
// when: the cache shows a write only after the watch delivers it, and until
// then the written one is the truth; the time paces writes. (Which
// DaemonSets have a write under way is an expectation: see expectations.)
type statusWrites struct {
	mu   sync.Mutex
	last map[string]statusWrite
	// parsed is the status current returned last, by DaemonSet: every sync
	// reads it, and it changes at most once a statusWriteInterval, so it is
	// parsed once per value, not once per sync (about a third of a sync's
	// CPU at 500 nodes).
	parsed map[string]parsedStatus
}

// parsedStatus is a rollout status annotation's value and what it parses
// to: nil when it does not.
type parsedStatus struct {
	value  string
	status *rollout.Status
}

type statusWrite struct {
	uid   types.UID
	value string
	at    time.Time
}

func newStatusWrites() *statusWrites {
	return &statusWrites{last: map[string]statusWrite{}, parsed: map[string]parsedStatus{}}
}

// current returns the DaemonSet's latest rollout status: the one this process
// wrote last, unless the cache shows a DaemonSet it did not write to. prev is
// shared between syncs: read it, never change it.
func (w *statusWrites) current(key string, ds *appsv1.DaemonSet) (value string, prev *rollout.Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	value = ds.Annotations[rollout.RolloutStatusAnnotation]
	if last, ok := w.last[key]; ok && last.uid == ds.UID {
		value = last.value
	}
	if p, ok := w.parsed[key]; ok && p.value == value {
		return value, p.status
	}
	var s rollout.Status
	if value != "" && json.Unmarshal([]byte(value), &s) == nil {
		prev = &s
	}
	w.parsed[key] = parsedStatus{value: value, status: prev}
	return value, prev
}

// due returns how long until the pacing allows the DaemonSet's next write,
// zero when it does now.
func (w *statusWrites) due(key string, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.last[key]; ok {
		return max(last.at.Add(statusWriteInterval).Sub(now), 0)
	}
	return 0
}

func (w *statusWrites) record(key string, uid types.UID, value string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[key] = statusWrite{uid: uid, value: value, at: at}
}

func (w *statusWrites) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
	delete(w.parsed, key)
}

// writeRolloutStatus patches the annotation alone (a merge patch touches no
// other key), which is all the controller's admission policy lets it change
// on a DaemonSet.
func (c *Controller) writeRolloutStatus(ctx context.Context, ds *appsv1.DaemonSet, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{rollout.RolloutStatusAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encoding the rollout status patch: %w", err)
	}
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("writing the rollout status of daemonset %s: %w", key, err)
	}
	c.statuses.record(key, ds.UID, value, c.now())
	return nil
}

// publish writes the rollout status around act, the sync's deletions or
// offers:
//   - before act when the failures grew since the status last written
//     (grew): people see the halt, and its event, before anything more
//     happens; until the write is due (the writes are paced), act waits for
//     the sync it queued. The failures themselves are in the rollout record,
//     written before this;
//   - after act otherwise, and in the background, so that the write never
//     delays a deletion that the budget allows, nor the next sync.
func (c *Controller) publish(ctx context.Context, ds *appsv1.DaemonSet, key, current string, prev *rollout.Status,
	status rollout.Status, grew bool, failures func() string, act func() error) error {
	if grew {
		write, upToDate, err := c.statusUpdate(ctx, ds, key, current, prev, status, failures)
		if err != nil {
			return err
		}
		if write != nil {
			if err := write(); err != nil {
				return err
			}
			upToDate = true
		}
		if !upToDate {
			klog.FromContext(ctx).V(2).Info("Holding deletions and offers until the rollout status shows the failures", "failed", status.Failed.Count)
			return nil
		}
		return act()
	}
	actErr := act()
	write, _, err := c.statusUpdate(ctx, ds, key, current, prev, status, failures)
	if write != nil {
		c.inBackground(ctx, key, write)
	}
	return errors.Join(actErr, err)
}

// failuresGrew reports whether the record holds more failures than the
// status prev shows for the same revision.
func failuresGrew(prev *rollout.Status, target decision.Target, failed int) bool {
	if prev == nil || prev.Revision != target.Number || prev.Hash != target.Hash {
		return failed > 0
	}
	return failed > prev.Failed.Count
}

// statusUpdate prepares the write of status when it differs from the current
// one (prev, as value), at most every statusWriteInterval (the first of a
// new target at once), and exports the
// figures. upToDate reports that the annotation holds status already; write,
// when not nil, writes it and records the events of the transitions it makes
// (failures describes the failed nodes for a halt). Neither means the write
// is not due yet, and the DaemonSet is queued for when it is.
func (c *Controller) statusUpdate(ctx context.Context, ds *appsv1.DaemonSet, key, current string, prev *rollout.Status,
	status rollout.Status, failures func() string) (write func() error, upToDate bool, err error) {
	c.metrics.rollout(ds, &status)
	data, err := json.Marshal(status)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the rollout status: %w", err)
	}
	value := string(data)
	if value == current {
		return nil, true, nil
	}
	// The first status of a new target goes at once: it announces the
	// rollout (RolloutStarted) and what it recreates instead of patching
	// in place (InPlaceNotPossible), which a paced write could miss when
	// its first wave is quick (a canary alone, settling within a second).
	newTarget := prev == nil || prev.Revision != status.Revision || prev.Hash != status.Hash
	if wait := c.statuses.due(key, c.now()); wait > 0 && !newTarget {
		c.queue.AddAfter(key, wait)
		return nil, false, nil
	}
	if !c.expect.expectStatus(key) {
		c.queue.AddAfter(key, statusWriteInterval) // one under way: never two racing to land out of order
		return nil, false, nil
	}
	return func() error {
		defer c.expect.statusDone(key)
		if err := c.writeRolloutStatus(ctx, ds, key, value); err != nil {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedStatus, "Writing annotation %s failed: %v", rollout.RolloutStatusAnnotation, err)
			return err
		}
		c.recordTransitions(ds, key, prev, &status, failures)
		return nil
	}, false, nil
}

// recordTransitions records an event for each way the rollout changed since
// prev, the status last written: events say what changed, never what still
// holds, so a restarted controller (which reads prev from the annotation)
// does not repeat them.
func (c *Controller) recordTransitions(ds *appsv1.DaemonSet, key string, prev, now *rollout.Status, failures func() string) {
	sameRevision := prev != nil && prev.Revision == now.Revision && prev.Hash == now.Hash
	complete := now.Complete()
	if !sameRevision && prev != nil && !complete {
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonRolloutStarted, "Rolling out revision %d (%s) to %d nodes", now.Revision, now.Hash, now.Total)
	}
	wasHalted := sameRevision && prev.Halted
	switch {
	case now.Halted && !wasHalted:
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonRolloutHalted, "Rollout of revision %d halted: %s: %s", now.Revision, now.Reason, failures())
	case !now.Halted && wasHalted:
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonRolloutResumed, "Rollout of revision %d resumed: %d failed nodes, under max-failed", now.Revision, now.Failed.Count)
	}
	wasPaused := prev != nil && prev.Paused
	switch {
	case now.Paused && !wasPaused:
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonRolloutPaused, "Rollout of revision %d paused by %s", now.Revision, rollout.PausedAnnotation)
	case !now.Paused && wasPaused:
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonRolloutResumed, "Rollout of revision %d resumed: %s removed", now.Revision, rollout.PausedAnnotation)
	}
	if now.Recreate != nil {
		// Nodes of an in-place rollout that are recreated instead: once
		// per reason and revision.
		for _, why := range slices.Sorted(maps.Keys(now.Recreate.Reasons)) {
			if sameRevision && prev.Recreate != nil && prev.Recreate.Reasons[why] > 0 {
				continue
			}
			c.inPlaceNotPossible(ds, key, now.Hash, fmt.Sprintf("Revision %d (%s): %s recreated instead of upgraded in place: %s",
				now.Revision, now.Hash, nodesCount(now.Recreate.Reasons[why]), why), why)
		}
	}
	wasComplete := sameRevision && prev.Complete()
	if complete && !wasComplete && prev != nil {
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonRolloutCompleted, "Revision %d (%s) runs on all %d nodes", now.Revision, now.Hash, now.Total)
	}
}

// inPlaceNotPossible records the InPlaceNotPossible event of a reason once
// per revision (hash), whichever comes first: the rollout status counting
// nodes that wait to be recreated for it, or the deletion of one (a wave
// can take every such node before any status is written).
func (c *Controller) inPlaceNotPossible(ds *appsv1.DaemonSet, key, hash, message, why string) {
	if c.eventMemo.changed(key, rollout.ReasonInPlaceNotPossible+": "+why, hash) {
		c.recorder.Event(ds, corev1.EventTypeNormal, rollout.ReasonInPlaceNotPossible, message)
	}
}
