package controller

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Annotations read on DaemonSets, spelled as OpenYurt spells them so that
// manifests written for its upgrade model work unchanged.
const (
	// StrategyAnnotation opts a DaemonSet in and names its strategy.
	StrategyAnnotation = "apps.openyurt.io/update-strategy"
	// LegacyStrategyAnnotation is the key as the original design proposal
	// spelled it; accepted, with an event pointing at StrategyAnnotation.
	LegacyStrategyAnnotation = "apps.openyurt.io/upgrade-strategy"
	// MaxUnavailableAnnotation bounds how many Ready nodes an
	// AdvancedRollingUpdate takes down at once.
	MaxUnavailableAnnotation = "apps.openyurt.io/max-unavailable"
)

// Strategy is how the controller upgrades an opted-in DaemonSet's pods.
type Strategy string

const (
	// StrategyOTA leaves every upgrade to the node's owner: the controller
	// only keeps the conditions the node agent serves and pre-pulls images.
	StrategyOTA Strategy = "OTA"
	// StrategyAdvancedRollingUpdate rolls pods on Ready nodes within
	// max-unavailable and upgrades disconnected nodes when they come back.
	StrategyAdvancedRollingUpdate Strategy = "AdvancedRollingUpdate"
)

// strategyOf reads the DaemonSet's opt-in. ok is false when the DaemonSet does
// not opt in; legacy reports that only LegacyStrategyAnnotation was found; err
// says why an opted-in DaemonSet cannot be handled.
func strategyOf(ds *appsv1.DaemonSet) (s Strategy, legacy, ok bool, err error) {
	value, ok := ds.Annotations[StrategyAnnotation]
	if !ok {
		value, ok = ds.Annotations[LegacyStrategyAnnotation]
		legacy = ok
	}
	if !ok {
		return "", false, false, nil
	}
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "ota":
		s = StrategyOTA
	case "advancedrollingupdate", "auto":
		s = StrategyAdvancedRollingUpdate
	default:
		return "", legacy, true, fmt.Errorf("unknown update strategy %q: want OTA, AdvancedRollingUpdate or auto", value)
	}
	if t := ds.Spec.UpdateStrategy.Type; t != appsv1.OnDeleteDaemonSetStrategyType {
		return s, legacy, true, fmt.Errorf("update strategy %s needs spec.updateStrategy.type %s, not %s; leaving the DaemonSet to the native controller",
			s, appsv1.OnDeleteDaemonSetStrategyType, t)
	}
	return s, legacy, true, nil
}

// strategyFor returns the DaemonSet's strategy and whether the controller
// should act on it, recording why not on the DaemonSet. Configuration errors
// are not returned as errors: retrying cannot fix them, the next change to the
// DaemonSet brings it back to the queue.
// Each event is recorded when its cause appears or changes, not on every sync.
func (c *Controller) strategyFor(ds *appsv1.DaemonSet, key string) (Strategy, bool) {
	s, legacy, ok, err := strategyOf(ds)
	if !ok {
		c.eventMemo.forget(key)
		return "", false
	}
	if legacy {
		c.eventOnChange(ds, key, corev1.EventTypeNormal, ReasonDeprecatedAnnotation,
			fmt.Sprintf("annotation %s is accepted for compatibility; use %s", LegacyStrategyAnnotation, StrategyAnnotation))
	} else {
		c.eventMemo.clear(key, ReasonDeprecatedAnnotation)
	}
	if err != nil {
		reason := ReasonInvalidStrategy
		if s != "" {
			reason = ReasonUnsupportedUpdateStrategy
		}
		c.eventOnChange(ds, key, corev1.EventTypeWarning, reason, err.Error())
		return "", false
	}
	c.eventMemo.clear(key, ReasonInvalidStrategy, ReasonUnsupportedUpdateStrategy)
	return s, true
}
