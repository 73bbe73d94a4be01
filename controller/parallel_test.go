package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWritesInFlightNeverExceedTheSlots: four syncs writing at once hold
// WriteParallelism writes in flight between them, not that many each, and
// every write runs.
func TestWritesInFlightNeverExceedTheSlots(t *testing.T) {
	c := &Controller{writeSlots: make(chan struct{}, WriteParallelism)}
	var inFlight, most, ran atomic.Int64
	task := func(context.Context) error {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		inFlight.Add(-1)
		ran.Add(1)
		return nil
	}
	const syncs, perSync = 4, 3 * WriteParallelism
	var wg sync.WaitGroup
	for range syncs {
		tasks := make([]func(context.Context) error, perSync)
		for i := range tasks {
			tasks[i] = task
		}
		wg.Go(func() {
			if failed := c.runParallel(t.Context(), tasks); len(failed) != 0 {
				t.Errorf("got %d failed, want none", len(failed))
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got > WriteParallelism || got < 2 {
		t.Errorf("got %d writes in flight at most, want 2 to %d", got, WriteParallelism)
	}
	if got := ran.Load(); got != syncs*perSync {
		t.Errorf("got %d writes run, want %d", got, syncs*perSync)
	}
}

// TestWritesWaitingForASlotEndWithTheContext: a write still waiting for a
// slot when its context ends is not run, and says why.
func TestWritesWaitingForASlotEndWithTheContext(t *testing.T) {
	c := &Controller{writeSlots: make(chan struct{}, 1)}
	c.writeSlots <- struct{}{} // every slot held elsewhere
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	ran := false
	failed := c.runParallel(ctx, []func(context.Context) error{func(context.Context) error { ran = true; return nil }})
	if ran || len(failed) != 1 {
		t.Errorf("got ran=%v and %d failed, want not run and 1 failed", ran, len(failed))
	}
}
