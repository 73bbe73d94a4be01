package maxprocs

import (
	"runtime"
	"testing"
)

// TestSetUnlessTheEnvironmentSaysOtherwise: a count sets GOMAXPROCS; 0, or
// GOMAXPROCS in the environment, leaves the runtime's as it is.
func TestSetUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	for _, tc := range []struct {
		name      string
		env       string
		n, before int
		wantSet   int
		wantProcs int
	}{
		{"a count", "", 1, 3, 1, 1},
		{"two", "", 2, 1, 2, 2},
		{"zero: the runtime's choice", "", 0, 3, 0, 3},
		{"GOMAXPROCS set: the operator's", "3", 1, 3, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			runtime.GOMAXPROCS(tc.before)
			if got := Set(tc.n); got != tc.wantSet {
				t.Errorf("got Set(%d) = %d, want %d", tc.n, got, tc.wantSet)
			}
			if got := runtime.GOMAXPROCS(0); got != tc.wantProcs {
				t.Errorf("got GOMAXPROCS %d, want %d", got, tc.wantProcs)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for n, wantErr := range map[int]bool{-1: true, 0: false, 1: false, 8: false} {
		if err := Validate(n); (err != nil) != wantErr {
			t.Errorf("got Validate(%d) = %v, want an error: %v", n, err, wantErr)
		}
	}
}
