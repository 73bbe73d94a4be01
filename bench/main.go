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
	if len(os.Args) > 1 && os.Args[1] == agentsCommand {
		if err := runAgents(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench agents:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == cacheCommand {
		if err := runCacheChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench cache:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == recordCommand {
		if err := runRecordChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench record:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == requestsCommand {
		if err := runRequestsChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench requests:", err)
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
