package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/decision"
)

// reactionVerbosity is the least klog -v at which ota-controller logs both
// the heartbeats and answers that settle a node and its deletions.
const reactionVerbosity = 4

// logEvent is one line of an ota-controller log that the bench times: a
// proof of life taken in a handler (a heartbeat, an agent's answer, with
// its node) or a deletion sent.
type logEvent struct {
	// at is the line's time: the machine's local time, as klog writes it,
	// in the year the reader was given (klog writes none).
	at time.Time
	// node is the node a proof or a deletion is about.
	node string
	// proof is what proved the node alive; "" for a deletion.
	proof decision.Proof
	// revision is, for a deletion, the revision it rolls out.
	revision string
}

// nodeField and revisionField are the node and the revision a structured
// klog line names.
var (
	nodeField     = regexp.MustCompile(`\bnode="([^"]+)"`)
	revisionField = regexp.MustCompile(`\brevision="([^"]+)"`)
)

// readControllerLog reads an ota-controller log (klog's text format, at
// reactionVerbosity) into the events the bench times, in their order, with
// times in year. Lines it cannot date are skipped.
func readControllerLog(log io.Reader, year int) ([]logEvent, error) {
	var out []logEvent
	lines := bufio.NewScanner(log)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		var e logEvent
		switch {
		case strings.Contains(line, `] "`+controller.LogHeartbeatSettles+`"`):
			e.proof = decision.ProofHeartbeat
		case strings.Contains(line, `] "`+controller.LogAnswerSettles+`"`):
			e.proof = decision.ProofAnswer
		case strings.Contains(line, `] "`+controller.LogDeletingPod+`"`), strings.Contains(line, `] "`+controller.LogPatchingPod+`"`):
			// A take: a deletion, or a patch in place.
		default:
			continue
		}
		at, ok := klogTime(line)
		if !ok {
			continue
		}
		e.at = time.Date(year, at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.Local)
		if m := nodeField.FindStringSubmatch(line); m != nil {
			e.node = m[1]
		}
		if e.proof == "" {
			if m := revisionField.FindStringSubmatch(line); m != nil {
				e.revision = m[1]
			}
		}
		out = append(out, e)
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("reading the controller's log: %w", err)
	}
	return out, nil
}

// reactions returns, for each proof that settled a node and was followed
// by a deletion, the time from the first such proof in the controller's
// cache to the deletion it sent next, by what the proof was: the
// controller's own share of "budget freed → next deletion", without the
// API server's delivery of the proof and of the deletion. A proof while one
// is pending (the budget freed already) starts nothing; the first deletion
// of another revision answers the image change, not a proof (the last
// wave's proofs have nothing left to free budget for).
func reactions(events []logEvent) map[decision.Proof][]time.Duration {
	out := map[decision.Proof][]time.Duration{}
	var freed logEvent
	var revision string
	pending := false
	for _, e := range events {
		switch {
		case e.proof != "":
			if !pending {
				freed, pending = e, true
			}
		default:
			if pending && e.revision == revision {
				out[freed.proof] = append(out[freed.proof], e.at.Sub(freed.at))
			}
			revision, pending = e.revision, false
		}
	}
	return out
}

// turns returns, for each node of taken (its first proof, see firstProofs)
// whose old pod's deletion events logs before that proof, the time from
// the first such deletion to the proof: the node's turn in the rollout, on
// the controller's clock.
func turns(events []logEvent, taken map[string]logEvent) []time.Duration {
	deleted := map[string]time.Time{}
	for _, e := range events {
		if _, seen := deleted[e.node]; e.proof == "" && e.node != "" && !seen {
			deleted[e.node] = e.at
		}
	}
	var out []time.Duration
	for node, proof := range taken {
		if at, ok := deleted[node]; ok && proof.at.After(at) {
			out = append(out, proof.at.Sub(at))
		}
	}
	return out
}

// controllerReaction is the controller's reactions to every proof of life
// in the log (see reactions), to heartbeats first, then to answers.
func controllerReaction(log io.Reader) ([]time.Duration, error) {
	events, err := readControllerLog(log, time.Now().Year())
	if err != nil {
		return nil, err
	}
	r := reactions(events)
	return append(r[decision.ProofHeartbeat], r[decision.ProofAnswer]...), nil
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

// controllerLogOf is readControllerLog of the log file at path, in the
// current year.
func controllerLogOf(path string) ([]logEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readControllerLog(f, time.Now().Year())
}

// firstProofs returns, for each node, the first proof the controller logged
// for it within [from, to): when it took the node's proof of life.
func firstProofs(events []logEvent, from, to time.Time) map[string]logEvent {
	out := map[string]logEvent{}
	for _, e := range events {
		if e.proof == "" || e.node == "" || e.at.Before(from) || !e.at.Before(to) {
			continue
		}
		if _, seen := out[e.node]; !seen {
			out[e.node] = e
		}
	}
	return out
}

// klogTime is the time in a klog text header ("I1123 18:00:42.895357 ..."),
// in a year of its own.
func klogTime(line string) (time.Time, bool) {
	const layout = "0102 15:04:05.000000"
	if len(line) < 1+len(layout) {
		return time.Time{}, false
	}
	t, err := time.Parse(layout, line[1:1+len(layout)])
	return t, err == nil
}
