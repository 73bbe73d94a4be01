package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Lock is an exclusive lock on a file that also records the holder's PID,
// so that one checkout runs one `make run` or one `make bench` at a time. The
// kernel releases it when the holder dies, however it dies, so a crashed run
// never blocks the next one.
type Lock struct{ file *os.File }

// LockedError says that another process holds the lock, and which.
type LockedError struct {
	// Path is the lock file.
	Path string
	// Holder is the PID the holder recorded in it.
	Holder string
}

// Error names the holder and the lock, e.g. "pid 4242, lock .kwok/run.pid".
func (e *LockedError) Error() string {
	return fmt.Sprintf("pid %s, lock %s", e.Holder, e.Path)
}

// AcquireLock takes the lock at path, or returns a *LockedError if another
// process holds it. Keep the Lock until done: the lock lives as long as its
// open file.
func AcquireLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLocked) {
			holder, _ := os.ReadFile(path)
			return nil, &LockedError{Path: path, Holder: string(bytes.TrimSpace(holder))}
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
	return &Lock{file: f}, nil
}

// errLocked is lockFile's answer when another process holds the lock.
var errLocked = errors.New("locked by another process")

// Release empties the lock file and unlocks it. The file stays: removing it
// would race with a process that opened it just before and locks it just
// after, holding a lock on a file nobody else sees while a third process
// creates and locks a new one. Its content means something only while it is
// locked.
func (l *Lock) Release() {
	_ = l.file.Truncate(0)
	_ = l.file.Close() // closing the last descriptor releases the lock
}
