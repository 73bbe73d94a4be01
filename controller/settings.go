package controller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/rollout"
)

// settings are a DaemonSet's rollout controls, resolved against its nodes.
type settings struct {
	maxUnavailable int
	maxFailed      int
	deadline       time.Duration
	paused         bool
	selector       labels.Selector // nil: every node
	partition      string          // "" when absent; validated
	timingSettings
}

// settingsError is an annotation whose value the controller cannot use.
type settingsError struct {
	annotation, value, want string
}

func (e *settingsError) Error() string {
	return fmt.Sprintf("annotation %s: invalid value %q: %s", e.annotation, e.value, e.want)
}

// rolloutSettings reads the DaemonSet's controls; nodes is how many nodes the
// rollout may touch, the base of percentages. An invalid value is an error
// naming the annotation and its value.
func rolloutSettings(ds *appsv1.DaemonSet, nodes int) (settings, error) {
	var s settings
	var err error
	if s.maxUnavailable, err = maxUnavailable(ds.Annotations[rollout.MaxUnavailableAnnotation], nodes); err != nil {
		return s, err
	}
	s.maxFailed = s.maxUnavailable
	if v, ok := ds.Annotations[rollout.MaxFailedAnnotation]; ok {
		// Zero is refused as written ("0", "0%"); a percentage of few nodes
		// rounds up to at least 1.
		if n, err := scaledCount(v, 1); err != nil || n < 1 {
			return s, &settingsError{rollout.MaxFailedAnnotation, v, "want a positive integer or a percentage between 1% and 100%"}
		}
		n, _ := scaledCount(v, nodes)
		s.maxFailed = max(n, 1)
	}
	s.deadline = health.DefaultDeadline
	if v, ok := ds.Annotations[rollout.ProgressDeadlineAnnotation]; ok {
		d, err := health.ParseProgressDeadline(v)
		if err != nil {
			return s, &settingsError{rollout.ProgressDeadlineAnnotation, v, "want a positive number of seconds"}
		}
		s.deadline = d
	}
	if v, ok := ds.Annotations[rollout.PausedAnnotation]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return s, &settingsError{rollout.PausedAnnotation, v, `want "true" or "false"`}
		}
		s.paused = b
	}
	if v, ok := ds.Annotations[rollout.RolloutNodeSelectorAnnotation]; ok {
		sel, err := labels.Parse(v)
		if err != nil {
			return s, &settingsError{rollout.RolloutNodeSelectorAnnotation, v, "want a label selector as kubectl takes it: " + err.Error()}
		}
		s.selector = sel
	}
	if v, ok := ds.Annotations[rollout.PartitionAnnotation]; ok {
		if _, err := scaledCount(v, 0); err != nil {
			return s, &settingsError{rollout.PartitionAnnotation, v, "want a non-negative integer or a percentage between 0% and 100%"}
		}
		s.partition = v
	}
	if s.timingSettings, err = parseTiming(ds.Annotations); err != nil {
		return s, err
	}
	return s, nil
}

// scaledCount resolves an integer or a percentage of total, rounded up.
func scaledCount(value string, total int) (int, error) {
	value = strings.TrimSpace(value)
	percent, isPercent := strings.CutSuffix(value, "%")
	n, err := strconv.Atoi(strings.TrimSpace(percent))
	if err != nil || n < 0 || (isPercent && n > 100) {
		return 0, fmt.Errorf("%q is not a non-negative integer or a percentage between 0%% and 100%%", value)
	}
	if !isPercent {
		return n, nil
	}
	return (n*total + 99) / 100, nil
}

// settingsValid records a Warning event when the DaemonSet's controls do not
// parse (once per distinct error, not on every sync) and reports whether
// they did.
func (c *Controller) settingsValid(ds *appsv1.DaemonSet, key string, err error) bool {
	var invalid *settingsError
	reason := rollout.ReasonInvalidMaxUnavailable
	if errors.As(err, &invalid) {
		reason = rollout.ReasonInvalidAnnotation
	}
	if err == nil {
		c.eventMemo.clear(key, rollout.ReasonInvalidMaxUnavailable, rollout.ReasonInvalidAnnotation)
		return true
	}
	c.eventOnChange(ds, key, corev1.EventTypeWarning, reason, err.Error()+"; nothing is deleted or newly offered until it is fixed")
	return false
}
