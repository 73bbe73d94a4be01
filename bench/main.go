// Command bench is `make bench`: it measures edgeota on the embedded local
// cluster (KWOK nodes) and prints each figure beside a baseline run on the
// same cluster in the same run: the native DaemonSet controller for rollouts,
// a plain client at the controller's QPS for pod-condition writes, a plain
// server answering the same bytes for the node API, and a direct API delete
// for upgrades. This machine is shared and noisy, so only ratios are stable;
// memory and CPU figures are absolute.
//
// The table goes to standard output and to bench/results/latest.md. Sizes and
// durations come from the environment (see params.go). Every child process
// and the cluster are removed on exit, Ctrl-C included.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == ceilingCommand {
		if err := runCeiling(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench ceiling:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted; the cluster and every child process are removed (%w)", err)
		}
		fmt.Fprintln(os.Stderr, "make bench:", err)
		os.Exit(1)
	}
}
