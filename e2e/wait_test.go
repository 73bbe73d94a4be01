//go:build e2e

package e2e

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Waits poll at pollInterval and give up after waitTimeout: generous bounds
// that turn a hang into a failure with the last state seen, never an
// assertion about speed.
const (
	pollInterval = 200 * time.Millisecond
	waitTimeout  = 2 * time.Minute
)

// eventually polls cond until it reports done, failing the test with what
// and cond's last description of the state if waitTimeout passes first or
// cond returns an error.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	var state string
	for {
		done, s, err := cond(ctx)
		if s != "" {
			state = s
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting for %s: %v (last state: %s)", what, err, state)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up after %s waiting for %s; last state: %s", waitTimeout, what, state)
		case <-time.After(pollInterval):
		}
	}
}

// consistently checks cond for the whole of d, failing the test the first
// time it does not hold: for promises that something does not happen.
func consistently(t *testing.T, what string, d time.Duration, cond func(ctx context.Context) (ok bool, state string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d+waitTimeout)
	defer cancel()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(pollInterval) {
		ok, state, err := cond(ctx)
		if err != nil {
			t.Fatalf("checking that %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected %s, but: %s", what, state)
		}
	}
}
