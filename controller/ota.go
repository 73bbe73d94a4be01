package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// syncOTA keeps PodNeedUpgrade on every pod of the DaemonSet, disconnected
// nodes included, and serves the pods' pre-pull requests. It never deletes a
// pod: upgrades are the node owner's call, through the node agent. It offers
// the target revision (True) to out-of-date pods the operator's controls let
// the rollout take, holds back the others (False, NotOffered), and once
// max-failed nodes that owners upgraded have failed by the same rule as
// AdvancedRollingUpdate's (judgeNode; an upgrade whose replacement never
// comes included), withdraws the offers not yet taken (False,
// RolloutHalted).
func (c *Controller) syncOTA(ctx context.Context, ds *appsv1.DaemonSet, key string, target revision) error {
	r, err := c.assess(ctx, ds, key, rollout.StrategyOTA, target)
	if r == nil || err != nil {
		return err
	}
	pods := c.podsControlledBy(ds.UID)
	revisionMessage := podcondition.RevisionMessage(target.hash)
	standing := map[*corev1.Pod]bool{} // out-of-date pods holding an offer of the target
	offeredOn := map[string]bool{}     // their nodes
	var fresh []*corev1.Pod            // out-of-date pods not offered the target yet
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || upToDate(ds, target.hash, pod) {
			continue
		}
		if c := podcondition.Get(&pod.Status, podcondition.NeedUpgrade); c != nil && c.Status == corev1.ConditionTrue && c.Message == revisionMessage {
			standing[pod], offeredOn[nodeOfPod(pod)] = true, true
		} else {
			fresh = append(fresh, pod)
		}
	}
	admitted, held := c.admitOffers(&r.cfg, r.view, fresh, offeredOn)
	status := r.status(len(held), len(admitted), "upgraded nodes")
	status.Offered = c.offersOutstanding(standing, &r.cfg, target)
	// Offers past their deadline are carried out as AdvancedRollingUpdate
	// would: within max-unavailable (the owners' own upgrades in flight
	// count against it), in the node's window, after any hold's limit,
	// under the brake. Never while paused or halted.
	v := r.view
	var due []*nodeInfo
	if r.cfg.upgradeDeadline > 0 && !status.Halted && !r.cfg.paused {
		unavailable := v.counts[nodeInFlight] + v.counts[nodeFailed] + v.counts[nodeOldDown]
		ch := v.choose(&r.cfg, max(r.cfg.maxUnavailable-unavailable, 0), false)
		due = append(ch.replace, ch.take...)
	}
	return c.publish(ctx, ds, key, r.statusValue, r.prev, status, r.grew, r.failures, func() error {
		if err := c.offer(ctx, ds, target, &r.cfg, &status, pods, standing, admitted); err != nil {
			return err
		}
		if len(due) > 0 {
			klog.FromContext(ctx).V(2).Info("Carrying out offers past their deadline", "deadline", r.cfg.upgradeDeadline, "nodes", len(due))
			if err := c.deleteOldPods(ctx, ds, key, r.tracker, target, due); err != nil {
				return err
			}
			c.writeIntents(ctx, key, r, due, false)
		}
		return nil
	})
}

// offersOutstanding counts the offers standing, with the earliest upgrade
// deadline among them (none without edgeota.io/upgrade-deadline-seconds).
func (c *Controller) offersOutstanding(standing map[*corev1.Pod]bool, cfg *settings, target revision) *rollout.TimedNodes {
	if len(standing) == 0 {
		return nil
	}
	out := &rollout.TimedNodes{Count: len(standing)}
	if cfg.upgradeDeadline == 0 {
		return out
	}
	in := &judgeInput{cfg: cfg, target: target, now: c.now()}
	var first time.Time
	for pod := range standing {
		if _, deadline := deadlineDue(pod, in); !deadline.IsZero() && (first.IsZero() || deadline.Before(first)) {
			first = deadline
		}
	}
	if !first.IsZero() {
		out.At = &metav1.Time{Time: first}
	}
	return out
}

// admitOffers splits out-of-date pods not offered the target yet into those
// the operator's controls let the rollout offer it now and those they hold
// back: pods on nodes outside the selector, and, under a partition, pods
// past its quota in node name order or on NotReady nodes (passed over, not
// counted). A node running the target, or holding an offer of it, counts
// as taken by the partition.
func (c *Controller) admitOffers(cfg *settings, v *dsView, fresh []*corev1.Pod, offeredOn map[string]bool) (admitted, heldBack []*corev1.Pod) {
	quota := -1
	if cfg.partition != "" {
		eligible, taken := 0, 0
		for name, n := range v.nodes {
			if n.eligible {
				eligible++
				if n.pods.newPod != nil || offeredOn[name] {
					taken++
				}
			}
		}
		partition, _ := scaledCount(cfg.partition, eligible) // validated by rolloutSettings
		quota = max(eligible-partition-taken, 0)
	}
	slices.SortFunc(fresh, func(x, y *corev1.Pod) int { return strings.Compare(nodeOfPod(x), nodeOfPod(y)) })
	for _, p := range fresh {
		node := nodeOfPod(p)
		switch {
		case !cfg.matches(c, node):
			// Outside the selector: keeps the pod it has.
			heldBack = append(heldBack, p)
		case quota < 0:
			// No partition.
			admitted = append(admitted, p)
		case quota > 0 && c.nodeIsReady(node):
			// Within the partition's quota, in name order.
			quota--
			admitted = append(admitted, p)
		default:
			// Past the quota, or NotReady: passed over.
			heldBack = append(heldBack, p)
		}
	}
	return admitted, heldBack
}

// offer writes PodNeedUpgrade on every live pod: True on the target's offers
// (admitted, and standing ones), False with the reason on the others, and
// serves their pre-pull requests.
func (c *Controller) offer(ctx context.Context, ds *appsv1.DaemonSet, target revision, cfg *settings, status *rollout.Status,
	pods []*corev1.Pod, standing map[*corev1.Pod]bool, admitted []*corev1.Pod) error {
	revisionMessage := podcondition.RevisionMessage(target.hash)
	offered := map[*corev1.Pod]bool{} // admitted, and not paused
	for _, p := range admitted {
		offered[p] = !cfg.paused
	}
	var tasks []func(context.Context) error
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		want := corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse, Message: revisionMessage}
		switch {
		case upToDate(ds, target.hash, pod):
			// Runs the target: nothing to offer.
		case status.Halted:
			// Offers not taken yet are withdrawn.
			want.Reason, want.Message = podcondition.ReasonRolloutHalted, podcondition.FailureMessage(target.hash, "rollout halted: "+status.Reason)
		case standing[pod]:
			// An offer made stands, paused or not.
			want.Status = corev1.ConditionTrue
		case offered[pod]:
			want.Status = corev1.ConditionTrue
		default:
			// Held back by pause, selector or partition.
			want.Reason, want.Message = podcondition.ReasonNotOffered, podcondition.FailureMessage(target.hash, c.notOfferedWhy(cfg, pod))
		}
		var offer *podchannel.Offer
		if !upToDate(ds, target.hash, pod) {
			offer = offerFor(ds, target, cfg, pod, want.Status == corev1.ConditionTrue, c.now())
		}
		if task := c.conditionTask(pod, want, offer); task != nil {
			tasks = append(tasks, task)
		}
		if task := c.prePullTask(ds, target, pod); task != nil {
			tasks = append(tasks, task)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Updating OTA state of pods", "writes", len(tasks), "pods", len(pods),
		"offerable", len(admitted), "heldBack", status.HeldBack, "halted", status.Halted)
	errs := runParallel(ctx, tasks)
	if len(errs) == 0 {
		return nil
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedCondition,
		"%d of %d OTA writes failed, will retry; first: %v", len(errs), len(tasks), errs[0])
	return errors.Join(errs...)
}

// notOfferedWhy says which control holds the pod back.
func (c *Controller) notOfferedWhy(cfg *settings, pod *corev1.Pod) string {
	switch {
	case cfg.paused:
		return rollout.PausedAnnotation + " is true"
	case !cfg.matches(c, nodeOfPod(pod)):
		return "node outside " + rollout.RolloutNodeSelectorAnnotation
	default:
		return "held back by " + rollout.PartitionAnnotation
	}
}

// offerFor is the channel entry (podchannel.Offer) that goes with the
// PodNeedUpgrade condition of an out-of-date pod: the target revision's
// images (its own, not the DaemonSet's template, which the cache may show
// a change ahead of its revision) and
// progress deadline, since when the revision has been offered to the pod
// (kept from the pod's current offer of the same revision, so that a pause
// or a restart does not move it; now when offering it first), the upgrade
// deadline that follows, and the limit of holds.
func offerFor(ds *appsv1.DaemonSet, target revision, cfg *settings, pod *corev1.Pod, offering bool, now time.Time) *podchannel.Offer {
	o := &podchannel.Offer{Revision: target.hash, Images: target.images}
	if o.Images == nil {
		o.Images = podchannel.ImagesOf(&ds.Spec.Template.Spec) // a revision whose data names no container
	}
	if v, ok := ds.Annotations[rollout.ProgressDeadlineAnnotation]; ok {
		if d, err := health.ParseProgressDeadline(v); err == nil {
			o.ProgressDeadlineSeconds = int64(d / time.Second)
		}
	}
	if prev, err := podchannel.OfferOf(pod); err == nil && prev != nil && prev.Revision == target.hash && prev.OfferedAt != nil {
		o.OfferedAt = prev.OfferedAt
	} else if offering {
		o.OfferedAt = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	offerWants(o, cfg, target)
	return o
}

// conditionTask returns the write that sets the pod's condition to want,
// with the offer (nil: none) in the same patch, or nil when the pod already
// says that or a write to that end is on its way to the cache.
func (c *Controller) conditionTask(pod *corev1.Pod, want corev1.PodCondition, offer *podchannel.Offer) func(context.Context) error {
	if c.written.pending(pod, want.Type) {
		return nil
	}
	current, err := podchannel.OfferOf(pod)
	if podcondition.Equal(&pod.Status, want) && (offer == nil || err == nil && offer.Equal(current)) {
		return nil
	}
	return func(ctx context.Context) error { return c.setCondition(ctx, pod, want, offer) }
}

// offerWrite is the pending-write key of an offer written alone (a held
// pod's hold limit, AdvancedRollingUpdate).
const offerWrite corev1.PodConditionType = "edgeota.io/offer"

// writeOffer writes the offer alone on the pod's status, and remembers it
// until the cache shows it.
func (c *Controller) writeOffer(ctx context.Context, pod *corev1.Pod, offer *podchannel.Offer) error {
	value, err := podchannel.Encode(offer)
	if err != nil {
		return err
	}
	if _, err := podcondition.Annotate(ctx, c.client.CoreV1(), pod, podcondition.Annotations{rollout.OfferAnnotation: &value}, FieldManager); err != nil {
		return err
	}
	c.written.record(pod, offerWrite)
	return nil
}

// setCondition writes one condition on the pod's status, with the offer in
// the same patch, remembers it until the cache shows it, and counts it.
func (c *Controller) setCondition(ctx context.Context, pod *corev1.Pod, want corev1.PodCondition, offer *podchannel.Offer) error {
	var annotations podcondition.Annotations
	if offer != nil {
		value, err := podchannel.Encode(offer)
		if err != nil {
			return err
		}
		annotations = podcondition.Annotations{rollout.OfferAnnotation: &value}
	}
	if _, err := podcondition.SetAnnotated(ctx, c.client.CoreV1(), pod, want, annotations, FieldManager); err != nil {
		return err
	}
	c.written.record(pod, want.Type)
	c.metrics.conditionWritten(want.Type)
	return nil
}
