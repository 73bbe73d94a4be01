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
// With Options.ImagePulls the cluster also models image pulls: a pod whose
// node has not pulled its images waits for them before KWOK starts it, and
// missing images and flaky registries fail as on a kubelet. A simulator in
// the process that created the cluster carries that out (see ImagePulls for
// how, and what it leaves out); without the option every pod starts at once.
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
//   - pulls.go: modelled image pulls: their options (ImagePulls), what a
//     pod waits for and the kubelet's messages; pullsim.go: the simulator
//     that carries them out (one pod informer, bounded writers, timers);
//     stages.go gates the stages that start a pod on its pull.
//   - inplace.go: the kubelet's part of an upgrade in place (container IDs,
//     observedGeneration, a patched container killed, pulled and restarted
//     under a new ID; stages/pod-*-in-place.yaml), and what the pull
//     simulator adds to it; images.go: the bad images and ImageID.
package localcluster
