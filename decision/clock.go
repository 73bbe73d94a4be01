package decision

import (
	"time"

	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// When a node may be upgraded, beside whether it may: the operator's
// maintenance windows, in each node's local time; the owner's hold, bounded
// by the operator's limit; and, for OTA, the deadline after which the
// controller carries out an offer its owner has not taken. Each makes a
// candidate's verdict depend on the clock, with a timer at its next change
// (a window opening or closing, a hold ending, a deadline falling): the
// controller never polls. Every time here comes from the controller's own
// record or the API server's clock, never from what a node may rewrite: the
// hold's end is the owner's to choose, and bounded by the limit, which
// counts from the record's TargetSince.

// clockHolds applies the clock to a candidate (a Ready node with an old
// pod): for OTA, whether its offer's deadline has passed (only then may the
// controller upgrade it); whether its owner's hold stands; whether its
// node's window is open. Each sets the verdict's next change, always after
// now: a deadline that has passed sets none, and a node it makes due waits
// for what else holds it (the window's opening, the hold's end) or for an
// event (budget, pause, halt).
func (j *judgement) clockHolds(v *verdict, node *Node, pod *Pod, entry Entry) {
	at := func(t time.Time) {
		if u := unixtime.Of(t); t.After(j.now) && (v.at.IsZero() || u < v.at) {
			v.at = u
		}
	}
	if j.cfg.Strategy == rollout.StrategyOTA {
		due, deadline := j.deadlineDue(entry)
		v.notDue = !due
		at(deadline)
	}
	v.holdUntil = unixtime.Of(pod.HoldUntil())
	if !v.holdUntil.IsZero() && j.cfg.MaxHold > 0 {
		end := v.holdUntil.Time()
		if limit := j.cfg.HoldLimit(j.meta.TargetSince.Time); limit.Before(end) {
			end = limit
		}
		if j.now.Before(end) {
			v.held, v.holdEnd = true, unixtime.Of(end)
			at(end)
		}
	}
	if j.cfg.Windowed {
		if node.ZoneErr != nil {
			v.zoneInvalid = true
			return
		}
		open, next := j.cfg.Schedule.At(j.now, node.Zone)
		v.windowClosed = !open
		if !open {
			v.opens = unixtime.Of(next)
		}
		at(next)
	}
}

// deadlineDue reports whether an OTA node's offer has passed its upgrade
// deadline, and when it falls (zero without one): it counts from the first
// offer the controller recorded.
func (j *judgement) deadlineDue(entry Entry) (bool, time.Time) {
	if j.cfg.UpgradeDeadline == 0 || entry.OfferedAt == nil {
		return false, time.Time{}
	}
	deadline := entry.OfferedAt.Add(j.cfg.UpgradeDeadline)
	return !j.now.Before(deadline), deadline
}
