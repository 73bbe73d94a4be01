package health

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

// ParseProgressDeadline parses a ProgressDeadlineAnnotation value: a positive
// whole number of seconds, spaces around it ignored.
func ParseProgressDeadline(value string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of seconds", rollout.ProgressDeadlineAnnotation, value)
	}
	return time.Duration(n) * time.Second, nil
}
