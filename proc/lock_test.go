package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSecondHolderIsRefused: while one holds the lock, another is told so,
// with the holder's PID; once released, the lock can be taken again.
func TestSecondHolderIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.pid")
	first, err := AcquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(path)
	var locked *LockedError
	if !errors.As(err, &locked) || locked.Holder != strconv.Itoa(os.Getpid()) || locked.Path != path {
		t.Fatalf("second acquire: got %v, want a LockedError naming pid %d and %s", err, os.Getpid(), path)
	}
	first.Release()
	again, err := AcquireLock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}
