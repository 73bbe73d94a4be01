package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The test binary doubles as the child these tests start, so that they run
// wherever Go does, without sleep or true on the PATH.
const (
	helperEnv   = "PROC_TEST_HELPER"
	helperSleep = "sleep" // runs until stopped
	helperExit  = "exit"  // exits at once, successfully
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case helperSleep:
		time.Sleep(time.Hour)
		os.Exit(0)
	case helperExit:
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startHelper starts the test binary as a child in the given helper mode,
// stopped when the test ends.
func startHelper(t *testing.T, name, mode string) *Process {
	t.Helper()
	t.Setenv(helperEnv, mode) // inherited by the child; restored after the test
	p, err := Start(name, filepath.Join(t.TempDir(), name+".log"), os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// startSleeper runs a child that outlives the test unless stopped.
func startSleeper(t *testing.T) *Process {
	t.Helper()
	return startHelper(t, "sleeper", helperSleep)
}

// waitExited fails the test unless the process exits within a generous bound.
func waitExited(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("%s still runs", p.Name)
	}
}

func TestStopEndsAChild(t *testing.T) {
	p := startSleeper(t)
	if err := p.Exited(); err != nil {
		t.Fatalf("before Stop: got %v, want the child running", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitExited(t, p)
	if p.Exited() == nil {
		t.Error("after Stop: Exited is nil, want how it exited")
	}
}

func TestKillEndsAChild(t *testing.T) {
	p := startSleeper(t)
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	waitExited(t, p)
	if p.Err() == nil {
		t.Error("a killed child reports a clean exit")
	}
}

// TestStopAfterExitDoesNothing: a child that exited on its own is not
// signalled again, as its PID may already name another process.
func TestStopAfterExitDoesNothing(t *testing.T) {
	p := startHelper(t, "quitter", helperExit)
	waitExited(t, p)
	if err := p.Err(); err != nil {
		t.Fatalf("the helper failed: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: got %v, want nil", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill: got %v, want nil", err)
	}
}

// TestFreePortsAreDistinct: ports are never handed out twice by one
// process, even across calls, and come from below the kernel's ephemeral
// range, where outgoing connections never take them.
func TestFreePortsAreDistinct(t *testing.T) {
	low, high := portRange()
	seen := map[string]bool{}
	for range 20 {
		ports, err := FreePorts(5)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("got port %s twice, want every port once", p)
			}
			seen[p] = true
			if n, _ := strconv.Atoi(p); n < low || n >= high {
				t.Errorf("got port %s, want one in [%d, %d)", p, low, high)
			}
		}
	}
	if high > 32768 {
		t.Errorf("the ports' range ends at %d, want it below kwokctl's own scan from 32767", high)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	var b TailBuffer
	for range maxErrorOutput {
		_, _ = b.Write([]byte("x"))
	}
	_, _ = b.Write([]byte("the end"))
	if got := b.String(); len(got) != maxErrorOutput || got[len(got)-7:] != "the end" {
		t.Errorf("got %d bytes ending %q, want %d ending %q", len(got), got[max(0, len(got)-7):], maxErrorOutput, "the end")
	}
}
