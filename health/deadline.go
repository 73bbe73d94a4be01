package health

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProgressDeadlineAnnotation, on a DaemonSet, is how many seconds a new pod
// may take to become available before it counts as failed (see Judge), in
// place of DefaultDeadline. The DaemonSet controller copies a DaemonSet's
// annotations onto its ControllerRevisions, so the node agent reads it from
// the target revision without reading the DaemonSet.
const ProgressDeadlineAnnotation = "edgeota.io/progress-deadline-seconds"

// ParseProgressDeadline parses a ProgressDeadlineAnnotation value: a positive
// whole number of seconds, spaces around it ignored.
func ParseProgressDeadline(value string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of seconds", ProgressDeadlineAnnotation, value)
	}
	return time.Duration(n) * time.Second, nil
}
