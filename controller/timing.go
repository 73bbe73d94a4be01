package controller

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// When a node may be upgraded, beside whether it may: the operator's
// maintenance windows, in each node's local time; the owner's hold, bounded
// by the operator's limit; and, for OTA, the deadline after which the
// controller carries out an offer its owner has not taken. Each makes a
// candidate's verdict depend on the clock, with a timer at its next change
// (a window opening or closing, a hold ending, a deadline falling): the
// controller never polls.

// DefaultMaxHold is how long a hold may delay an upgrade unless the
// DaemonSet says otherwise: a day, enough to finish a drive or a shift.
const DefaultMaxHold = 24 * time.Hour

// timingSettings are a DaemonSet's timing controls.
type timingSettings struct {
	schedule        window.Schedule // zero: always open
	windowed        bool            // the annotation is set
	maxHold         time.Duration   // 0: holds ignored
	upgradeDeadline time.Duration   // 0: none (OTA only)
}

// parseTiming reads the timing annotations; an invalid one is a
// settingsError naming it and its value.
func parseTiming(annotations map[string]string) (timingSettings, error) {
	t := timingSettings{maxHold: DefaultMaxHold}
	if v, ok := annotations[rollout.MaintenanceWindowAnnotation]; ok {
		s, err := window.Parse(v)
		if err != nil {
			return t, &settingsError{rollout.MaintenanceWindowAnnotation, v, err.Error()}
		}
		t.schedule, t.windowed = s, true
	}
	if v, ok := annotations[rollout.MaxHoldAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 {
			return t, &settingsError{rollout.MaxHoldAnnotation, v, "want a non-negative number of seconds (0 ignores holds)"}
		}
		t.maxHold = time.Duration(n) * time.Second
	}
	if v, ok := annotations[rollout.UpgradeDeadlineAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n <= 0 {
			return t, &settingsError{rollout.UpgradeDeadlineAnnotation, v, "want a positive number of seconds"}
		}
		t.upgradeDeadline = time.Duration(n) * time.Second
	}
	return t, nil
}

// holdLimit is when holds on the target revision's pods stop being
// honoured: its creation plus max-hold; its creation itself when holds are
// ignored.
func (t *timingSettings) holdLimit(target revision) time.Time {
	return target.created.Add(t.maxHold)
}

// clockHolds applies the clock to a candidate (a Ready node with an old
// pod): for OTA, whether its offer's deadline has passed (only then may the
// controller upgrade it); whether its owner's hold stands; whether its
// node's window is open. Each sets the verdict's next change.
func (c *Controller) clockHolds(v *nodeVerdict, node *corev1.Node, pod *corev1.Pod, in *judgeInput) {
	at := func(t time.Time) {
		if !t.IsZero() && (v.at.IsZero() || t.Before(v.at)) {
			v.at = t
		}
	}
	if in.strategy == rollout.StrategyOTA {
		due, deadline := deadlineDue(pod, in)
		v.notDue = !due
		at(deadline)
	}
	if h, err := podchannel.HoldOf(pod); err == nil && h != nil && in.cfg.maxHold > 0 {
		end := h.Until.Time
		if limit := in.cfg.holdLimit(in.target); limit.Before(end) {
			end = limit
		}
		if in.now.Before(end) {
			v.held, v.holdEnd = true, end
			at(end)
		}
	}
	if in.cfg.windowed {
		zone, err := window.NodeZone(node.Annotations)
		if err != nil {
			v.zoneInvalid = true
			c.nodeEventOnChange(node, rollout.ReasonInvalidTimeZone, err.Error()+"; windowed rollouts pass this node by until it is fixed")
			return
		}
		c.eventMemo.clear("node/"+node.Name, rollout.ReasonInvalidTimeZone)
		open, next := in.cfg.schedule.At(in.now, zone)
		v.windowClosed = !open
		if !open {
			v.opens = next
		}
		at(next)
	}
}

// deadlineDue reports whether an OTA pod's offer of the target has passed
// its upgrade deadline, and when it falls (zero without one): the pod must
// stand offered the target, since the deadline counts from the first offer.
func deadlineDue(pod *corev1.Pod, in *judgeInput) (bool, time.Time) {
	if in.cfg.upgradeDeadline == 0 || !offeredTarget(pod, in.target.hash) {
		return false, time.Time{}
	}
	o, err := podchannel.OfferOf(pod)
	if err != nil || o == nil || o.Revision != in.target.hash || o.OfferedAt == nil {
		return false, time.Time{} // the offer's start is written with the next offer write
	}
	deadline := o.OfferedAt.Add(in.cfg.upgradeDeadline)
	return !in.now.Before(deadline), deadline
}

// holdEnded records the event of a hold that stopped holding a node by the
// clock: it ended, or reached the DaemonSet's limit.
func (c *Controller) holdEnded(in *judgeInput, node string, before nodeVerdict, pod *corev1.Pod) {
	why := "ended"
	if h, err := podchannel.HoldOf(pod); err == nil && h != nil && h.Until.After(before.holdEnd) {
		why = fmt.Sprintf("reached its limit (%s %s after the revision's creation)", rollout.MaxHoldAnnotation, in.cfg.maxHold)
	}
	c.recorder.Eventf(in.ds, corev1.EventTypeNormal, rollout.ReasonHoldEnded, "The owner's hold on pod %s on node %s %s at %s; the node is upgraded in its turn",
		pod.Name, node, why, before.holdEnd.UTC().Format(time.RFC3339))
}

// offerWants is what the channel on an out-of-date pod should say beside
// PodNeedUpgrade: the target's images and deadlines, since when it is
// offered, and the hold limit.
func offerWants(o *podchannel.Offer, cfg *settings, target revision) {
	if cfg.upgradeDeadline > 0 && o.OfferedAt != nil {
		o.UpgradeDeadline = &metav1.Time{Time: o.OfferedAt.Add(cfg.upgradeDeadline)}
	}
	o.HoldLimit = &metav1.Time{Time: cfg.holdLimit(target)}
}
