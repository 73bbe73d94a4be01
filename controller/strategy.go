package controller

import (
	"fmt"

	"github.com/edgeota/edgeota/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// strategyFor returns the DaemonSet's strategy and whether the controller
// should act on it, recording why not on the DaemonSet. Configuration errors
// are not returned as errors: retrying cannot fix them, the next change to the
// DaemonSet brings it back to the queue.
// Each event is recorded when its cause appears or changes, not on every sync.
func (c *Controller) strategyFor(ds *appsv1.DaemonSet, key string) (rollout.Strategy, bool) {
	s, legacy, ok, err := rollout.StrategyOf(ds)
	if !ok {
		c.eventMemo.forget(key)
		return "", false
	}
	if legacy {
		c.eventOnChange(ds, key, corev1.EventTypeNormal, rollout.ReasonDeprecatedAnnotation,
			fmt.Sprintf("annotation %s is accepted for compatibility; use %s", rollout.LegacyStrategyAnnotation, rollout.StrategyAnnotation))
	} else {
		c.eventMemo.clear(key, rollout.ReasonDeprecatedAnnotation)
	}
	if err != nil {
		reason := rollout.ReasonInvalidStrategy
		if s != "" {
			reason = rollout.ReasonUnsupportedUpdateStrategy
		}
		c.eventOnChange(ds, key, corev1.EventTypeWarning, reason, err.Error())
		return "", false
	}
	c.eventMemo.clear(key, rollout.ReasonInvalidStrategy, rollout.ReasonUnsupportedUpdateStrategy)
	return s, true
}
