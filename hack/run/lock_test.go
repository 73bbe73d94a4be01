package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondRunIsRefused: while one run holds the lock, another is told so,
// with the holder's PID; once released, the lock can be taken again.
func TestSecondRunIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.pid")
	first, err := acquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireLock(path)
	if !errors.Is(err, errAlreadyRunning) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second acquire: got %v, want %v naming pid %d", err, errAlreadyRunning, os.Getpid())
	}
	first.Release()
	again, err := acquireLock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}
