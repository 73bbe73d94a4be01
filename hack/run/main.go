// Command run is `make run`, the main job: it brings up edgeota's embedded
// local cluster with three simulated edge nodes, starts ota-controller and one
// ota-server (for edge-node-1, on 127.0.0.1:10267), applies deploy/examples
// and prints what to try. Ctrl-C tears everything down; a second run while
// one is up says so and exits.
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
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}
