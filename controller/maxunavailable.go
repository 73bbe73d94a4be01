package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edgeota/edgeota/rollout"
)

// defaultMaxUnavailablePercent applies when max-unavailable is absent or zero:
// a rollout that may take no node down would never progress.
const defaultMaxUnavailablePercent = 10

// maxUnavailable resolves the max-unavailable annotation value against the
// number of nodes running the DaemonSet's pods: an integer, or a percentage
// rounded up; absent, 0 and 0% mean 10%. The result is at least 1 whenever
// there is a node, so that a rollout always progresses.
func maxUnavailable(value string, nodes int) (int, error) {
	value = strings.TrimSpace(value)
	percent, isPercent := strings.CutSuffix(value, "%")
	if value == "" {
		percent, isPercent = "0", true
	}
	n, err := strconv.Atoi(strings.TrimSpace(percent))
	if err != nil || n < 0 || (isPercent && n > 100) {
		return 0, fmt.Errorf("%s %q must be a non-negative integer or a percentage between 0%% and 100%%", rollout.MaxUnavailableAnnotation, value)
	}
	if n == 0 {
		n, isPercent = defaultMaxUnavailablePercent, true
	}
	if !isPercent {
		return n, nil
	}
	return (n*nodes + 99) / 100, nil
}
