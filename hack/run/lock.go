package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// errAlreadyRunning is returned when another `make run` holds the lock.
var errAlreadyRunning = errors.New("edgeota's local cluster is already running")

// lock is an exclusive flock on a file that also records the holder's PID.
// The kernel releases it when the holder dies, however it dies, so a crashed
// run never blocks the next one.
type lock struct{ file *os.File }

// acquireLock takes the lock at path or, if another process holds it, returns
// errAlreadyRunning naming that process.
func acquireLock(path string) (*lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (pid %s, lock %s); stop it with Ctrl-C in its terminal, or use the running one",
				errAlreadyRunning, bytes.TrimSpace(holder), path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing the lock file: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing the lock file: %w", err)
	}
	return &lock{file: f}, nil
}

// release removes the lock file and unlocks it.
func (l *lock) release() {
	_ = os.Remove(l.file.Name())
	_ = l.file.Close()
}
