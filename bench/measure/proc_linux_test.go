package measure

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The readers on this test's own process: /proc exists on Linux only.

func TestReadMemoryOfThisProcess(t *testing.T) {
	before, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.AnonRSS <= 0 || before.AnonRSS > before.RSS || before.RSS > before.PeakRSS {
		t.Fatalf("got %+v, want 0 < AnonRSS <= RSS <= PeakRSS", before)
	}
	// Touching 64 MiB must raise the high-water mark by most of it.
	const grow = 64 << 20
	ballast := make([]byte, grow)
	for i := range ballast {
		ballast[i] = 1
	}
	after, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.PeakRSS < before.PeakRSS+grow/2 {
		t.Errorf("PeakRSS after touching %d MiB: got %d MiB, want at least %d MiB", grow>>20, after.PeakRSS>>20, (before.PeakRSS+grow/2)>>20)
	}
	_ = ballast[grow-1]
}

func TestCPUTimeOfThisProcessGrowsWithWork(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged at least 50 ms more, or give up after
	// a generous deadline: the reader must see the work.
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		now, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 50*time.Millisecond {
			return
		}
	}
	t.Errorf("CPU time did not grow by 50 ms in 30 s of spinning (%d)", x)
}

func TestReadIOOfThisProcessCountsItsWrites(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/burst")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, err := ReadIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const writes, size = 110, 4096
	chunk := make([]byte, size)
	for range writes {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ReadIO(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines of the test binary may write too: at least, not exactly.
	if d := after.Minus(before); d.WriteCalls < writes || d.WrittenBytes < writes*size {
		t.Errorf("after %d writes of %d bytes: got %d calls, %d bytes; want at least %d, %d", writes, size, d.WriteCalls, d.WrittenBytes, writes, writes*size)
	}
}

func TestCPUTimeOfNoProcess(t *testing.T) {
	// PID 0 has no /proc entry.
	if d, err := CPUTime(0); err == nil || !strings.Contains(err.Error(), "process 0") {
		t.Errorf("CPUTime(0) = %v, %v; want an error naming process 0", d, err)
	}
}

func TestLoadAverage(t *testing.T) {
	if got := strings.Fields(LoadAverage()); len(got) != 3 {
		t.Errorf("LoadAverage() = %q, want three numbers", got)
	}
}

func TestKernelRelease(t *testing.T) {
	if got := KernelRelease(); got == "unknown" || strings.ContainsAny(got, " \n") {
		t.Errorf("KernelRelease() = %q, want one word", got)
	}
}

func TestReadEnvironOfAChild(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	cmd.Env = []string{"GOGC=off", "GOMEMLIMIT=64MiB"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Start returns as the child execs, which may be a moment before the
	// kernel shows its new environment.
	var env map[string]string
	for deadline := time.Now().Add(5 * time.Second); len(env) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if env, err = ReadEnviron(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if env["GOGC"] != "off" || env["GOMEMLIMIT"] != "64MiB" || len(env) != 2 {
		t.Errorf("got %q, want exactly GOGC=off and GOMEMLIMIT=64MiB", env)
	}
}
