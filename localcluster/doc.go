// Package localcluster runs edgeota's embedded local cluster: a real
// Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and KWOK simulating the edge nodes, all started by kwokctl's
// binary runtime from the binaries `make tools` builds into bin/. It is shared
// by `make run`, the end-to-end suite and the benchmarks.
//
// Everything lives inside the checkout: kwokctl's work dir is .kwok/ and each
// cluster's kubeconfig is a file there, never ~/.kube/config. Every component
// listens on loopback only.
//
// Where each concern lives:
//   - root.go, tools.go: finding the checkout and the binaries in bin/.
//   - stages.go, stages/: the kwokctl configuration and KWOK stages (with
//     the node heartbeat interval, Options.NodeHeartbeat).
//   - cluster.go: creating and deleting a cluster.
//   - components.go: the components' processes and ports, and waiting until
//     every one of them is alive and listening.
//   - nodes.go: adding simulated edge nodes with stable names.
//   - cutoff.go: cutting a node off from the cluster and reconnecting it.
//   - listeners.go: which addresses the cluster's components listen on.
//   - process.go, ready.go: running edgeota's binaries as child processes and
//     waiting for their readiness probes.
//   - buffer.go: bounded capture of a command's error output.
//   - lock.go: one `make run` or `make bench` at a time per checkout.
//   - proxy.go: a TCP proxy that can cut a client off from the API server.
//   - kubeconfig.go: kubeconfigs for service-account tokens or a proxy.
//   - token.go: service-account tokens, optionally bound to a pod.
//   - restart.go: stopping a component and starting it again (API server
//     restarts mid-rollout).
package localcluster
