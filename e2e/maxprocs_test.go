//go:build e2e

package e2e

import (
	"runtime"
	"testing"

	"github.com/edgeota/edgeota/harness"
)

// TestControllerRunsGoCodeOnTheThreadsItIsGiven: ota-controller leaves the
// Go runtime its own number of threads for Go code (as this test's own
// runtime chose them: the same machine, cgroup and environment) unless
// --max-procs says otherwise, as the runtime's own metric
// (go_sched_gomaxprocs_threads) shows; with GOMAXPROCS in its environment
// it keeps that, whatever the flag.
//
// It runs alone (e2e/README.md): it measures the controller's own CPU, syncs
// or threads.
func TestControllerRunsGoCodeOnTheThreadsItIsGiven(t *testing.T) {
	e := newEnv(t, 0)
	for _, tc := range []struct {
		name, env string
		flags     []string
		want      float64
	}{
		{"ota-controller-default-procs", "", nil, float64(runtime.GOMAXPROCS(0))},
		{"ota-controller-one-proc", "", []string{"--max-procs=1"}, 1},
		{"ota-controller-gomaxprocs", "GOMAXPROCS=3", []string{"--max-procs=1"}, 3},
	} {
		c := e.startKillableControllerWith(harness.ControllerOptions{Name: tc.name, Binary: e.controllerLauncher("", tc.name, tc.env), Flags: tc.flags})
		if got := e.mustMetric(c, "go_sched_gomaxprocs_threads"); got != tc.want {
			t.Errorf("%s: got go_sched_gomaxprocs_threads %.0f, want %.0f", tc.name, got, tc.want)
		}
		if err := e.h.Stop(c.Process); err != nil {
			t.Fatal(err)
		}
		c.killed = true // stopped: nothing left for the cleanup to stop
	}
}
