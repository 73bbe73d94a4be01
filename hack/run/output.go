package main

import (
	"os"
	"os/signal"
	"syscall"
)

// surviveClosedOutput makes a write to a closed standard output or error fail
// (EPIPE) instead of killing the process with SIGPIPE, Go's default for
// those two descriptors. With `make run | tee run.log`, Ctrl-C ends tee too,
// and the first teardown message would otherwise kill the runner and leave
// the whole control plane running. Asking for SIGPIPE (and dropping it) is
// what turns the default off; unlike ignoring it, it is not inherited by
// the processes the run starts.
func surviveClosedOutput() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
