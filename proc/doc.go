// Package proc is the process kit of edgeota's local runs (`make run`, the
// end-to-end suite, the benchmarks): edgeota's binaries run as child
// processes that can be stopped with everything they started, waits for
// their readiness probes, free loopback ports, a one-run-at-a-time lock, and
// a bounded capture of a command's error output. Nothing in it knows about
// Kubernetes; package harness puts it together with the local cluster.
//
// It builds on Linux, macOS and Windows. Linux adds that a child dies with
// its parent (Pdeathsig); on Windows a stop is a kill, as Windows has no
// SIGTERM to send.
//
// Where each concern lives:
//   - process.go: starting, stopping and killing a child; process_linux.go,
//     process_otherunix.go, process_unix.go, process_windows.go: how each OS
//     groups and signals it.
//   - ready.go: waiting until a child answers its readiness probe.
//   - ports.go: free loopback ports.
//   - lock.go, lock_flock.go, lock_windows.go: one run per checkout.
//   - buffer.go: the tail of a command's error output, for error messages.
package proc
