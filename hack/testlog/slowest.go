package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// result is one top-level test's outcome in a report.
type result struct {
	name string
	// outcome is pass, fail, skip, or "running" for a test the run ended
	// during (a timeout).
	outcome string
	elapsed time.Duration
}

// readReport reads a `go test -json` report: the top-level tests with how
// long each took; a test still running at the report's end counts until its
// last event.
func readReport(r io.Reader) ([]result, error) {
	started := map[string]time.Time{}
	done := map[string]result{}
	var order []string
	var last time.Time
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Time.After(last) {
			last = e.Time
		}
		if e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		switch e.Action {
		case "run":
			started[e.Test] = e.Time
			order = append(order, e.Test)
		case "cont":
			// A parallel test's time counts from when it resumed, as go
			// test's own elapsed time does.
			started[e.Test] = e.Time
		case "pass", "fail", "skip":
			done[e.Test] = result{name: e.Test, outcome: e.Action, elapsed: time.Duration(e.Elapsed * float64(time.Second))}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]result, 0, len(order))
	for _, name := range order {
		r, ok := done[name]
		if !ok {
			r = result{name: name, outcome: "running", elapsed: last.Sub(started[name])}
		}
		out = append(out, r)
	}
	return out, nil
}

// printSlowest names the n slowest tests, slowest first.
func printSlowest(w io.Writer, tests []result, n int) {
	sorted := slices.Clone(tests)
	slices.SortStableFunc(sorted, func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) })
	sorted = sorted[:min(n, len(sorted))]
	fmt.Fprintf(w, "The %d slowest tests:\n", len(sorted))
	for i, r := range sorted {
		fmt.Fprintf(w, "  %2d. %8s  %-7s %s\n", i+1, seconds(r.elapsed), r.outcome, r.name)
	}
}
