package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockRun takes an exclusive lock on path for the life of the process (the
// kernel drops it however the process ends): two benchmarks at once on a
// shared machine would each measure the other, and share .cache/bench.
func lockRun(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("another `make bench` is running in this checkout (lock %s)", path)
		}
		return fmt.Errorf("locking %s: %w", path, err)
	}
	return nil // f stays open, and locked, until the process exits
}
