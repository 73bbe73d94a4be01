package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/edgeota/edgeota/controller"
)

// reactionVerbosity is the least klog -v at which ota-controller logs both
// the heartbeats that settle a node and its deletions.
const reactionVerbosity = 4

// controllerReaction reads an ota-controller log (klog's text format, at
// reactionVerbosity) and returns, for each heartbeat that settled a node and
// was followed by a deletion, the time from the first such heartbeat in the
// controller's cache to the deletion it sent next: the controller's own share
// of "budget freed → next deletion", without the API server's delivery of
// the heartbeat and of the deletion. Lines it cannot date are skipped.
func controllerReaction(log io.Reader) ([]time.Duration, error) {
	var out []time.Duration
	var freed time.Time
	pending := false
	lines := bufio.NewScanner(log)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		heartbeat := strings.Contains(line, `] "`+controller.LogHeartbeatSettles+`"`)
		deletion := strings.Contains(line, `] "`+controller.LogDeletingPod+`"`)
		if !heartbeat && !deletion {
			continue
		}
		at, ok := klogTime(line)
		if !ok {
			continue
		}
		switch {
		case heartbeat && !pending:
			freed, pending = at, true
		case deletion && pending:
			out = append(out, at.Sub(freed))
			pending = false
		}
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("reading the controller's log: %w", err)
	}
	return out, nil
}

// controllerReactionOf is controllerReaction of the log file at path.
func controllerReactionOf(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return controllerReaction(f)
}

// klogTime is the time in a klog text header ("I1123 18:00:42.895357 ..."),
// in a year of its own: only differences are used.
func klogTime(line string) (time.Time, bool) {
	const layout = "0102 15:04:05.000000"
	if len(line) < 1+len(layout) {
		return time.Time{}, false
	}
	t, err := time.Parse(layout, line[1:1+len(layout)])
	return t, err == nil
}
