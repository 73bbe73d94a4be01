package main

import (
	"slices"
	"strings"
	"testing"
	"time"
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
