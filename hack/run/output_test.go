package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// teardownHelperEnv, set to a file's path, makes the test binary the helper
// of TestTearDownSurvivesClosedStdout: it tears down as run does, with the
// standard output it was given, and the teardown writes the file.
const teardownHelperEnv = "RUN_TEST_TEARDOWN_MARKER"

func TestMain(m *testing.M) {
	if marker := os.Getenv(teardownHelperEnv); marker != "" {
		surviveClosedOutput() // as main does
		err := tearDown(os.Stdout, closerFunc(func() error {
			return os.WriteFile(marker, []byte("torn down"), 0o600)
		}))
		if err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestTearDownSurvivesClosedStdout: `make run | tee run.log`, then Ctrl-C,
// ends tee first; the runner's teardown then writes to a pipe nobody reads.
// It must still tear down, and exit cleanly, rather than die of SIGPIPE on
// its first message.
func TestTearDownSurvivesClosedStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // tee is gone
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "teardown")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), teardownHelperEnv+"="+marker)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	_ = w.Close()
	if err != nil {
		t.Fatalf("the teardown with a closed stdout: got %v (stderr: %q), want a clean exit", err, stderr.String())
	}
	if got, err := os.ReadFile(marker); err != nil || string(got) != "torn down" {
		t.Errorf("the teardown's work: got %q, %v; want %q", got, err, "torn down")
	}
}
