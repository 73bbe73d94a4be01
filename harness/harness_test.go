package harness

import (
	"os"
	"testing"
	"time"
)

// sleeperEnv makes the test binary a child that sleeps until stopped, so
// that these tests run wherever Go does.
const sleeperEnv = "HARNESS_TEST_SLEEPER"

func TestMain(m *testing.M) {
	if os.Getenv(sleeperEnv) != "" {
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCloseStopsEveryChildOnce: Close stops what Stop has not, and a second
// Close finds nothing left to do.
func TestCloseStopsEveryChildOnce(t *testing.T) {
	t.Setenv(sleeperEnv, "1")
	h := &Harness{LogDir: t.TempDir()}
	first, err := h.Start("first", os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.Start("second", os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = first.Stop(), second.Stop() })

	if err := h.Stop(first); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := h.Processes(); len(got) != 1 || got[0] != second {
		t.Fatalf("after Stop(first): got %d children, want only second", len(got))
	}
	if second.Exited() != nil {
		t.Fatal("Stop(first) stopped second too")
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if second.Exited() == nil {
		t.Error("after Close: second still runs")
	}
	if got := h.Processes(); len(got) != 0 {
		t.Errorf("after Close: got %d children, want none", len(got))
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
}

func TestUniqueClusterNamesDiffer(t *testing.T) {
	a, b := UniqueClusterName("e2e"), UniqueClusterName("e2e")
	if a == b || len(a) != len("e2e-")+6 {
		t.Errorf("got %q and %q, want two different names of prefix, dash and 6 hex digits", a, b)
	}
}
