// Package harness starts edgeota on this machine, for `make run` (hack/run),
// the end-to-end suite (e2e) and the benchmarks (bench), so that each of these
// is written once: the checkout root, the check that bin/ holds every binary,
// the log directory, the local cluster (package localcluster), and starting
// and stopping ota-controller and ota-server with their flags. The flag lists
// of the two binaries are assembled here and nowhere else outside cmd/.
//
// One Harness is one run: it holds the run's lock, log directory, cluster
// and child processes, and Close tears all of them down, newest first.
//
// Where each concern lives:
//   - root.go: finding the checkout.
//   - harness.go: a run: its binaries, lock, logs, cluster and children.
//   - binaries.go: ota-controller's and ota-server's options and flags.
//   - proxy.go: a TCP proxy that can cut a client off from the API server.
//
// Processes, ports and locks come from package proc; the cluster needs Linux
// (localcluster.ErrNeedsLinux), the rest builds everywhere.
package harness
