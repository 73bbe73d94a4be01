package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/decision"
)

func TestControllerReaction(t *testing.T) {
	log := strings.Join([]string{
		`I1123 18:00:28.477517    4759 rollingupdate.go:262] "Deleting pod" pod="ns/a"`, // the image change's: no heartbeat before
		`I1123 18:00:30.100000    4759 handlers.go:233] "Heartbeat proves the node alive" node="n1"`,
		`I1123 18:00:30.101000    4759 handlers.go:233] "Heartbeat proves the node alive" node="n2"`, // budget already freed
		`I1123 18:00:30.102500    4759 rollingupdate.go:262] "Deleting pod" pod="ns/b"`,
		`I1123 18:00:30.103000    4759 rollingupdate.go:262] "Deleting pod" pod="ns/c"`, // the same reaction
		`garbage "Heartbeat proves the node alive"`,
		`I1123 18:00:31.000000    4759 handlers.go:233] "Heartbeat proves the node alive" node="n3"`,
		`I1123 18:00:31.020000    4759 rollingupdate.go:262] "Deleting pod" pod="ns/d"`,
		`I1123 18:00:32.000000    4759 handlers.go:233] "Heartbeat proves the node alive" node="n4"`, // nothing left to delete
	}, "\n")
	got, err := controllerReaction(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{2500 * time.Microsecond, 20 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestControllerLogEvents: the proofs of life a controller logs are read
// with their node and kind, in the machine's local time of the year given,
// and the reaction to each is filed under what the proof was, but for a
// proof whose next deletion rolls out another revision; the first proof of
// each node within a window is when the controller took it.
func TestControllerLogEvents(t *testing.T) {
	log := strings.Join([]string{
		`I1123 18:00:30.100000    4759 handlers.go:217] "Answer proves the node alive" node="n1" pod="ns/p1" daemonset="ns/ota"`,
		`I1123 18:00:30.105000    4759 act.go:102] "Deleting pod" pod="ns/b" node="n3"`,
		`I1123 18:00:31.000000    4759 handlers.go:320] "Heartbeat proves the node alive" node="n2" sent="2026-11-23 18:00:30.9 +0000 UTC" daemonset="ns/ota"`,
		`I1123 18:00:31.050000    4759 handlers.go:320] "Heartbeat proves the node alive" node="n2" sent="2026-11-23 18:00:31 +0000 UTC" daemonset="ns/ota"`,
		`I1123 18:00:31.010000    4759 act.go:102] "Deleting pod" pod="ns/c" node="n4"`,
		`I1123 18:00:31.500000    4759 handlers.go:217] "Answer proves the node alive" node="n4" pod="ns/p4" daemonset="ns/ota"`, // the last wave's
		`I1123 18:00:33.000000    4759 act.go:102] "Deleting pod" revision="r2" pod="ns/d" node="n1"`,                            // the next image change's
	}, "\n")
	events, err := readControllerLog(strings.NewReader(log), 2026)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s, us int) time.Time { return time.Date(2026, 11, 23, 18, 0, s, us*1000, time.Local) }
	got := reactions(events)
	want := map[decision.Proof][]time.Duration{decision.ProofAnswer: {5 * time.Millisecond}, decision.ProofHeartbeat: {10 * time.Millisecond}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got reactions %v, want %v", got, want)
	}
	proofs := firstProofs(events, at(30, 0), at(31, 400000))
	wantProofs := map[string]logEvent{
		"n1": {at: at(30, 100000), node: "n1", proof: decision.ProofAnswer},
		"n2": {at: at(31, 0), node: "n2", proof: decision.ProofHeartbeat},
	}
	if !maps.EqualFunc(proofs, wantProofs, func(a, b logEvent) bool { return a.at.Equal(b.at) && a.node == b.node && a.proof == b.proof }) {
		t.Errorf("got first proofs %v, want %v", proofs, wantProofs)
	}
	if got := firstProofs(events, at(30, 200000), at(31, 400000)); len(got) != 1 {
		t.Errorf("from 30.2 s: got %v, want n2's alone", got)
	}
	// n4's turn: deleted at 31.01, proven at 31.5; n1 was proven before
	// its deletion, n2 never deleted, n3 never proven.
	if got, want := turns(events, firstProofs(events, at(30, 0), at(34, 0))), []time.Duration{490 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("got turns %v, want %v", got, want)
	}
}
