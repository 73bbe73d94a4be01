//go:build e2e

package e2e

import (
	"runtime"
	"testing"

	"github.com/edgeota/edgeota/harness"
)

// TestControllerRunsGoCodeOnOneThread: ota-controller gives the Go runtime
// one thread for Go code unless told otherwise (--max-procs), which the
// runtime's own metric (go_sched_gomaxprocs_threads) shows; with
// --max-procs=0 the runtime keeps its own choice (this machine's cores), and
// with GOMAXPROCS in its environment it keeps that.
func TestControllerRunsGoCodeOnOneThread(t *testing.T) {
	e := newEnv(t, 0)
	for _, tc := range []struct {
		name, env string
		flags     []string
		want      float64
	}{
		{"ota-controller-default-procs", "", nil, 1},
		{"ota-controller-runtime-procs", "", []string{"--max-procs=0"}, float64(runtime.NumCPU())},
		{"ota-controller-gomaxprocs", "GOMAXPROCS=3", nil, 3},
	} {
		c := e.startKillableControllerWith(harness.ControllerOptions{Name: tc.name, Binary: e.inCgroup("", tc.name, tc.env), Flags: tc.flags})
		if got := e.mustMetric(c, "go_sched_gomaxprocs_threads"); got != tc.want {
			t.Errorf("%s: got go_sched_gomaxprocs_threads %.0f, want %.0f", tc.name, got, tc.want)
		}
		if err := e.h.Stop(c.Process); err != nil {
			t.Fatal(err)
		}
		c.killed = true // stopped: nothing left for the cleanup to stop
	}
}
