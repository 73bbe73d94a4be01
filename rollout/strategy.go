package rollout

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// Strategy is how the controller upgrades an opted-in DaemonSet's pods.
type Strategy string

const (
	// StrategyOTA leaves upgrades to the node's owner, through the node
	// agent: the controller offers the target revision and, past an upgrade
	// deadline, carries the offer out itself.
	StrategyOTA Strategy = "OTA"
	// StrategyAdvancedRollingUpdate rolls pods on Ready nodes within
	// max-unavailable and upgrades disconnected nodes when they come back.
	StrategyAdvancedRollingUpdate Strategy = "AdvancedRollingUpdate"
)

// StrategyOf reads a DaemonSet's opt-in. ok is false when the DaemonSet does
// not opt in; legacy reports that only LegacyStrategyAnnotation was found;
// err says why an opted-in DaemonSet cannot be handled (an unknown value, an
// update strategy other than OnDelete), with s set when the value itself was
// understood.
func StrategyOf(ds *appsv1.DaemonSet) (s Strategy, legacy, ok bool, err error) {
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
