// Command run is `make run`, the main job: it brings up edgeota's embedded
// local cluster with three simulated edge nodes, starts ota-controller and one
// ota-server (for edge-node-1, on 127.0.0.1:10267), applies deploy/examples
// and prints what to try. Ctrl-C tears everything down; a second run while
// one is up says so and exits.
//
// It is a thin client of package harness, which starts the cluster and the
// binaries; run.go holds the session, examples.go the examples, guide.go
// what it prints, output.go how it survives the loss of its output.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var opts options
	flag.StringVar(&opts.examples, "examples", "deploy/examples", "kustomize directory of the example DaemonSets, relative to the checkout root")
	flag.IntVar(&opts.nodes, "nodes", 3, "how many simulated edge nodes")
	flag.IntVar(&opts.agentPort, "agent-port", 10267, "loopback port of the node agent")
	flag.DurationVar(&opts.pullDelay, "pull-delay", 0, "model image pulls, each taking this long on a node that has not pulled the image (localcluster.ImagePulls); 0 starts every pod at once")
	flag.Parse()

	surviveClosedOutput()
	// A closed terminal (SIGHUP) tears down too: the cluster's components
	// run in sessions of their own and would outlive this process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}
