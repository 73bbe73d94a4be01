package main

import (
	"errors"
	"fmt"

	"github.com/edgeota/edgeota/localcluster"
)

// errAlreadyRunning is returned when another `make run` holds the lock.
var errAlreadyRunning = errors.New("edgeota's local cluster is already running")

// acquireLock takes the run's lock at path or, if another `make run` holds
// it, returns errAlreadyRunning naming that process and what to do.
func acquireLock(path string) (*localcluster.Lock, error) {
	l, err := localcluster.AcquireLock(path)
	var locked *localcluster.LockedError
	if errors.As(err, &locked) {
		return nil, fmt.Errorf("%w (%v); stop it with Ctrl-C in its terminal, or use the running one", errAlreadyRunning, locked)
	}
	return l, err
}
