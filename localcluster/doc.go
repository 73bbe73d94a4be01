// Package localcluster runs edgeota's embedded local cluster: a real
// Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) and KWOK simulating the edge nodes, all started by kwokctl's
// binary runtime from the binaries `make tools` builds into bin/. Package
// harness starts it for `make run`, the end-to-end suite and the benchmarks.
//
// It needs Linux: the components run as local Linux processes and are
// checked through /proc. On any other OS the package builds, so that what
// imports it builds and vets, but Create returns ErrNeedsLinux.
//
// Everything lives inside the checkout: kwokctl's work dir is .kwok/ and each
// cluster's kubeconfig is a file there, never ~/.kube/config. Every component
// listens on loopback only.
//
// Where each concern lives:
//   - tools.go: the binaries in bin/.
//   - heartbeat.go: how the nodes heartbeat (Heartbeat): status writes
//     every few seconds, or node Leases as kubelets, and what a cut-off node
//     does in each mode; kwok-controller's flags for it.
//   - stages.go, stages/: the kwokctl and kwok-controller configuration and
//     the KWOK stages (with the node-heartbeat stage's delay).
//   - cluster.go: creating and deleting a cluster.
//   - components_linux.go: the components' processes, and waiting until
//     every one of them is alive and listening (components_other.go: the
//     answer elsewhere).
//   - nodes.go: adding simulated edge nodes with stable names.
//   - cutoff.go: cutting a node off from the cluster and reconnecting it.
//   - listeners_linux.go: which addresses the cluster's components listen on.
//   - kubeconfig.go: kubeconfigs for service-account tokens or a proxy.
//   - token.go: service-account tokens, optionally bound to a pod.
//   - restart_linux.go: stopping a component and starting it again (API
//     server restarts mid-rollout; kwok-controller with another heartbeat,
//     SetHeartbeat).
package localcluster
