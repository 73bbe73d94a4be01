//go:build e2e

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeota/edgeota/harness"
)

// TestControllerTakesItsSoftMemoryLimitFromItsContainer: ota-controller
// started in a memory cgroup limited to 256 MiB, as deploy/'s container
// is, gives the Go runtime a soft limit of 0.9 of it, which the runtime's
// own metric (go_gc_gomemlimit_bytes) shows; started in the same cgroup
// with --memory-limit-ratio=0 it keeps none, and with GOMEMLIMIT in its
// environment it keeps that one.
//
// It runs alone (e2e/README.md): it measures the controller's own CPU, syncs
// or threads.
func TestControllerTakesItsSoftMemoryLimitFromItsContainer(t *testing.T) {
	e := newEnv(t, 0)
	const limit = 256 << 20
	group := e.memoryCgroup(limit)
	for _, tc := range []struct {
		name, env string
		flags     []string
		want      float64
	}{
		{"ota-controller-in-256mib", "", nil, 241591910}, // 0.9 × 256 MiB, rounded down
		{"ota-controller-ratio-0", "", []string{"--memory-limit-ratio=0"}, math.MaxInt64},
		{"ota-controller-gomemlimit", "GOMEMLIMIT=100MiB", nil, 100 << 20},
	} {
		c := e.startKillableControllerWith(harness.ControllerOptions{Name: tc.name, Binary: e.controllerLauncher(group, tc.name, tc.env), Flags: tc.flags})
		if got := e.mustMetric(c, "go_gc_gomemlimit_bytes"); got != tc.want {
			t.Errorf("%s: got go_gc_gomemlimit_bytes %.0f, want %.0f", tc.name, got, tc.want)
		}
		if err := e.h.Stop(c.Process); err != nil {
			t.Fatal(err)
		}
		c.killed = true // stopped: nothing left for the cleanup to stop
	}
}

// memoryCgroup creates a memory cgroup limited to limit bytes under the
// test's own, removed when the test ends (after the processes in it: a
// cleanup registered earlier runs later). It reads the test's cgroup from
// /proc/self/cgroup at the usual mount points, independently of
// internal/memlimit, whose reading it checks. Linux's cgroup v1 memory
// controller only: under cgroup v2 a cgroup holding processes, as the
// test's does, cannot give its children a memory controller.
func (e *env) memoryCgroup(limit int64) string {
	e.t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		e.t.Fatalf("this test needs Linux's memory cgroups: %v", err)
	}
	defer f.Close()
	own := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		if fields := strings.SplitN(s.Text(), ":", 3); len(fields) == 3 && strings.Contains(","+fields[1]+",", ",memory,") {
			own = filepath.Join("/sys/fs/cgroup/memory", fields[2])
		}
	}
	if own == "" {
		e.t.Fatal("this test needs the cgroup v1 memory controller, as this machine has it: /proc/self/cgroup names no memory hierarchy")
	}
	dir := filepath.Join(own, "edgeota-e2e-"+strings.ToLower(filepath.Base(e.logDir)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		e.t.Fatalf("creating a memory cgroup for the controller (the test runs as root, as make test does): %v", err)
	}
	e.t.Cleanup(func() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Errorf("removing the test's memory cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(fmt.Sprint(limit)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// controllerLauncher writes a script that moves itself into the cgroup
// group (none when empty) and, with env (NAME=value, or nothing) added to
// its environment, becomes bin/ota-controller with the arguments it was
// given: the controller then starts in the cgroup, as a container's
// process does, and with the environment an operator gave it.
func (e *env) controllerLauncher(group, name, env string) string {
	e.t.Helper()
	script := filepath.Join(e.t.TempDir(), name)
	body := "#!/bin/sh\n"
	if group != "" {
		body += fmt.Sprintf("echo $$ > %s/cgroup.procs || exit 1\n", group)
	}
	body += fmt.Sprintf("exec env %s %s \"$@\"\n", env, e.h.Tools.Path(harness.ControllerBinary))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return script
}
