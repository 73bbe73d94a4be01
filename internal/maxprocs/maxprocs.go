// Package maxprocs sets how many OS threads run the controller's Go code at
// once (the Go runtime's GOMAXPROCS), for operators who trade the
// controller's reaction for its CPU. The controller waits on the API server
// far more than it computes: a rollout of 2,000 nodes keeps it busy a tenth
// of one core. With a thread per core, every watch event that wakes a
// goroutine also wakes an idle thread, which spins looking for work and
// parks again: on two cores, a sixth of the controller's CPU in a rollout's
// profile. One thread spends 9–15 % less CPU per rollout, but the
// controller then reacts to a proof of life after the events decoded
// before it: at 2,000 nodes its reaction's p99 was 10.6 ms against 4.6 on
// two threads (bench/README.md, "Controller CPU per rollout"). So the
// default leaves the runtime's choice.
package maxprocs

import (
	"fmt"
	"os"
	"runtime"
)

// Default leaves the runtime's choice: the container's CPU limit, else
// every core.
const Default = 0

// Set gives the Go runtime n threads for Go code, and returns n. It returns
// 0, having set nothing, when n is 0 (the runtime's own choice stands: the
// container's CPU limit, else every core) or when GOMAXPROCS is set in the
// environment (the operator's word wins, and the runtime read it at start).
func Set(n int) int {
	if n == 0 || os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	runtime.GOMAXPROCS(n)
	return n
}

// Validate refuses a negative count.
func Validate(n int) error {
	if n < 0 {
		return fmt.Errorf("%d threads is not 0 (the Go runtime's choice) or more", n)
	}
	return nil
}
