package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/decision"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

// tracker is everything the controller keeps about one DaemonSet between
// syncs: its rollout record and its incremental Rollout, and the nodes to
// judge again. The sync worker of the DaemonSet (the work queue runs one at
// a time per key) alone reads and writes record and rollout; handlers only
// mark nodes dirty, and read the ledger through ledger().
type tracker struct {
	key string
	mu  sync.Mutex // guards what handlers touch: dirty, and the fields below as pointers
	uid types.UID
	// record is the rollout record of the target revision; nil before the
	// first sync.
	record *recordstore.Record
	// rollout is the incremental Rollout; nil until built, and dropped
	// when its basis changes.
	rollout *decision.Rollout
	basis   string
	// dirty are the nodes to judge again at the next sync.
	dirty map[string]bool
	// offersWaiting: offers wait for their entries to be written; the
	// write that lands them syncs the DaemonSet again.
	offersWaiting atomic.Bool
}

// ledger returns the tracker's ledger, nil before its first sync.
func (t *tracker) ledger() *decision.Ledger {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.record == nil {
		return nil
	}
	return t.record.Ledger
}

// trackerFor returns the DaemonSet's tracker, creating it.
func (c *Controller) trackerFor(key string) *tracker {
	c.trackersMu.Lock()
	defer c.trackersMu.Unlock()
	t, ok := c.trackers[key]
	if !ok {
		t = &tracker{key: key, dirty: map[string]bool{}}
		c.trackers[key] = t
	}
	return t
}

// existingTracker returns the DaemonSet's tracker, nil if it has none.
func (c *Controller) existingTracker(key string) *tracker {
	c.trackersMu.Lock()
	defer c.trackersMu.Unlock()
	return c.trackers[key]
}

// markDirty has the node judged again at the DaemonSet's next sync.
func (c *Controller) markDirty(key, node string) {
	if t := c.existingTracker(key); t != nil {
		t.mu.Lock()
		t.dirty[node] = true
		t.mu.Unlock()
	}
}

// sync brings one DaemonSet's pods in line with its strategy: it gathers
// the facts, asks the decision once, acts on it and reports it. It only
// reads the caches and writes through the API; a nil error with nothing done
// means the DaemonSet is not ours or waits for its next change.
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
	if err != nil || target.Hash == "" {
		return err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("daemonset", klog.KObj(ds), "strategy", strategy, "revision", target.Hash))
	cfg, err := decision.ParseSettings(strategy, ds.Annotations, ds.Spec.MinReadySeconds)
	if !c.settingsValid(ds, key, err) {
		return nil
	}
	if cfg.PreDownload && c.rejections.rejected(ds.UID, target.Hash) != "" {
		cfg.PreDownload = false // admission refuses its Jobs: as without the annotation
	}

	t := c.trackerFor(key)
	now := c.now()
	statusValue, published := c.statuses.current(key, ds)
	r, err := c.refresh(ctx, t, ds, key, cfg, target, published, now)
	if err != nil {
		return err
	}
	d := r.Decide(now)

	c.heartbeats.set(key, r.Awaiting())
	c.metrics.awaitingProof(ds, len(r.Awaiting()))
	if !d.Wake.IsZero() {
		c.queue.AddAfter(key, d.Wake.Sub(now))
	}
	// Write before act: failures, and nodes taken in flight by someone
	// else's deletion, are written before the sync deletes or offers
	// anything, so that a restarted controller or a new leader, rebuilding
	// from the cluster, decides exactly as this one. The rest (settled
	// nodes, offers, clocks started) goes in the background: a budget
	// freed by a proof of life is used without waiting for a write.
	if err := c.writeRecord(ctx, t, len(d.Offered) > 0, len(d.Take) > 0); err != nil {
		return err
	}
	grew := failuresGrew(published, target, d.Status.Failed.Count)
	return c.publish(ctx, ds, key, statusValue, published, d.Status, grew, r.FailureSummary, func() error {
		return c.act(ctx, ds, key, t, r, &d)
	})
}

// refresh brings the DaemonSet's Rollout up to date at now: built afresh on
// the first sync, a new leader, a new target or a changed basis (its
// template, annotations: as a fresh controller builds it), else the dirty
// nodes and those whose timer is due judged again. It fails only when the
// record cannot be read; the next sync builds the Rollout afresh.
func (c *Controller) refresh(ctx context.Context, t *tracker, ds *appsv1.DaemonSet, key string, cfg decision.Settings,
	target decision.Target, published *rollout.Status, now time.Time) (*decision.Rollout, error) {
	t.mu.Lock()
	rec, uid := t.record, t.uid
	dirty := t.dirty
	t.dirty = map[string]bool{}
	t.mu.Unlock()

	if rec == nil || uid != ds.UID || !rec.Target().Same(target) {
		// First sync, a new leader, or a new target: the record of the
		// target as the cluster holds it; records of other revisions go.
		if uid != "" && uid != ds.UID {
			c.expect.forget(key) // a namesake DaemonSet: nothing of the old one applies
		}
		if rec != nil {
			c.records.Forget(rec)
		}
		loaded, stale, err := c.records.Load(ctx, ds.UID, key, target, published)
		if err != nil {
			return nil, err
		}
		rec = loaded
		if rec.Lost > 0 {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonRecordLost,
				"The rollout status published %d more failed nodes of revision %d than the rollout record in namespace %s holds (deleted while no controller ran); they are counted, and the rollout stays halted until %s is raised or the template changes",
				rec.Lost, target.Number, c.records.Namespace(), rollout.MaxFailedAnnotation)
		}
		if len(stale) > 0 {
			c.inBackground(ctx, key, func() error { return c.records.Delete(ctx, stale) })
		}
		t.mu.Lock()
		t.record, t.uid, t.rollout = rec, ds.UID, nil
		t.mu.Unlock()
	}
	facts := c.factsOf(ds, key, target, now)
	basis := rolloutBasis(ds, &cfg, target)
	if t.rollout == nil || t.basis != basis {
		r := decision.New(cfg, target, rec.Ledger, rec.Adopt)
		rec.Adopt = false
		c.notice(ds, r.Build(now, c.nodesOf(ds.UID, key), facts))
		t.rollout, t.basis = r, basis
		return r, nil
	}
	c.notice(ds, t.rollout.Refresh(now, dirty, facts))
	return t.rollout, nil
}

// rolloutBasis is what a Rollout depends on beyond its nodes: a change to any
// of it builds a new one. The rollout status is left out: the controller
// writes it itself.
func rolloutBasis(ds *appsv1.DaemonSet, cfg *decision.Settings, target decision.Target) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%s|%s|%d|%d|%v|%v", ds.UID, ds.Generation, cfg.Strategy, target.Hash, target.Number, ds.Spec.MinReadySeconds, cfg.PreDownload,
		target.TemplateCurrent)
	// The revisions whose pods may move in place: one pruned, or one come
	// back, changes their plans.
	for _, h := range slices.Sorted(maps.Keys(target.Templates)) {
		fmt.Fprintf(&b, "|rev=%s", h)
	}
	for _, k := range slices.Sorted(maps.Keys(ds.Annotations)) {
		if k != rollout.RolloutStatusAnnotation {
			fmt.Fprintf(&b, "|%s=%s", k, ds.Annotations[k])
		}
	}
	return b.String()
}

// notice records the events of what a refresh saw change.
func (c *Controller) notice(ds *appsv1.DaemonSet, notices []decision.Notice) {
	for _, n := range notices {
		switch n.Kind {
		case decision.NoticeHoldEnded:
			why := "ended"
			if n.LimitReached {
				why = fmt.Sprintf("reached its limit (%s after the controller first rolled out the revision)", rollout.MaxHoldAnnotation)
			}
			c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonHoldEnded, "The owner's hold on pod %s on node %s %s at %s; the node is upgraded in its turn",
				n.Pod.Name, n.Node, why, n.At.UTC().Format(time.RFC3339))
		case decision.NoticePullFailed:
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonPrePullFailed, "Pre-download on node %s failed for good; its old pod still serves, and it counts toward %s: %s",
				n.Node, rollout.MaxFailedAnnotation, n.Why)
		case decision.NoticeProven:
			c.metrics.proven(ds, n.Proof, n.Wait, n.Waited)
		case decision.NoticePinned:
			what := "digests"
			if len(n.Pin.Digests) > 0 {
				c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonPinned, "Pinned revision %s on %s to what canary node %s ran: %s; later nodes get these digests",
					n.Revision, archName(n.Arch), n.Node, imageList(n.Pin.Digests))
				what = "other containers"
			}
			if len(n.Pin.Unpinnable) > 0 {
				c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonUnpinnable, "Could not pin revision %s on %s to what canary node %s ran, no %s pinned: %s; they go on with the template's tags",
					n.Revision, archName(n.Arch), n.Node, what, imageList(n.Pin.Unpinnable))
			}
		case decision.NoticeDigestMismatch:
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonDigestMismatch, "Node %s failed as it settled, counted toward %s: %s",
				n.Node, rollout.MaxFailedAnnotation, n.Why)
		case decision.NoticeZoneInvalid:
			if node := c.nodeByName(n.Node); node != nil {
				c.nodeEventOnChange(node, rollout.ReasonInvalidTimeZone, n.Err.Error()+"; windowed rollouts pass this node by until it is fixed")
			}
		}
	}
}

// writeRecord writes what the record does not hold yet: at once when
// something of it must be written before the controller acts (a failure, a
// node taken in flight by someone else's deletion, a new record's meta, new
// offers: now), else in the background, unless the decision deletes pods
// (deleting): the write that follows the deletions carries it then, so
// that a node's turn costs one write, not two. The merges the writes make
// due, and the deletions of what they replace, run in the background.
func (c *Controller) writeRecord(ctx context.Context, t *tracker, now, deleting bool) error {
	key, rec := t.key, t.record
	switch pending, urgent := rec.Pending(); {
	case urgent || pending && now:
		wait, err := c.records.Write(ctx, rec)
		if wait > 0 {
			c.queue.AddAfter(key, wait)
		}
		if err != nil {
			return err
		}
		if rec.CompactDue() {
			c.inBackground(ctx, key, func() error { return c.records.Compact(ctx, rec) })
		}
	case pending && !deleting:
		c.inBackground(ctx, key, func() error { return c.writeInBackground(ctx, t, rec) })
	}
	return nil
}

// writeInBackground writes what the record does not hold yet, wakes the
// DaemonSet when paced entries are due and when offers waited for their
// entries, then makes the merges the write made due.
func (c *Controller) writeInBackground(ctx context.Context, t *tracker, rec *recordstore.Record) error {
	wait, err := c.records.Write(ctx, rec)
	if wait > 0 {
		c.queue.AddAfter(t.key, wait)
	}
	if err == nil && t.offersWaiting.Swap(false) {
		c.queue.Add(t.key) // the offers' entries are written: make them
	}
	return errors.Join(err, c.records.Compact(ctx, rec))
}

// forget drops what the controller remembers of a deleted DaemonSet, and
// deletes its rollout records.
func (c *Controller) forget(ctx context.Context, key string) {
	c.trackersMu.Lock()
	t := c.trackers[key]
	delete(c.trackers, key)
	c.trackersMu.Unlock()
	if t != nil && t.uid != "" {
		c.rejections.forget(t.uid)
		uid, rec := t.uid, t.record
		c.inBackground(ctx, key, func() error { return c.records.DeleteAll(ctx, uid, rec) })
	}
	c.statuses.forget(key)
	c.expect.forget(key)
	c.eventMemo.forget(key)
	c.revisions.forget(key)
	c.heartbeats.set(key, nil)
	c.challenges.keepAwaited(key, nil)
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		c.metrics.forgetRollout(namespace, name)
	}
}

// forgetTracker drops what the controller keeps about a DaemonSet it no
// longer acts on (opted out); its records stay until it is deleted or
// rolls another revision.
func (c *Controller) forgetTracker(key string) {
	c.trackersMu.Lock()
	t := c.trackers[key]
	delete(c.trackers, key)
	c.trackersMu.Unlock()
	if t != nil && t.record != nil {
		c.records.Forget(t.record)
	}
	c.heartbeats.set(key, nil)
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); t != nil && err == nil {
		c.metrics.forgetRollout(namespace, name) // its series would stand still, as if it rolled
	}
}

// runParallel runs the tasks, each once it holds one of the controller's
// WriteParallelism write slots, and returns the errors of those that failed,
// so that one sync spends the API budget without serialising hundreds of
// round trips, and all syncs together never hold more than the slots.
func (c *Controller) runParallel(ctx context.Context, tasks []func(context.Context) error) []error {
	errs := make([]error, len(tasks))
	workqueue.ParallelizeUntil(ctx, WriteParallelism, len(tasks), func(i int) {
		select {
		case c.writeSlots <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			return
		}
		defer func() { <-c.writeSlots }()
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

// archName names an architecture's nodes for an event.
func archName(arch string) string {
	if arch == "" {
		return "the nodes without label " + corev1.LabelArchStable
	}
	return "the " + arch + " nodes"
}
