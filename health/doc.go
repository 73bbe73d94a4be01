// Package health holds edgeota's rules for whether a node can take an upgrade
// and whether a pod is up, in one place: the controller's rolling update and
// failure brake, the node agent's owner view, the local cluster, the e2e suite
// and the bench all judge nodes and pods by these functions, so that they can
// never disagree about what "Ready", "available" or "failed" means.
//
//   - node.go: NodeReady, the one readiness rule for nodes.
//   - pod.go: PodAvailable, the native controllers' availability rule (Ready
//     for minReadySeconds), which budgets count against.
//   - facts.go: Pod, what the rules read of a pod: the node agent builds it
//     from a corev1.Pod (PodOf), the controller caches it in its own compact
//     pod records.
//   - verdict.go: Judge, the one rule deciding whether a new pod has settled,
//     is still progressing, or has failed (CrashLoopBackOff and configuration
//     errors at once; image pull errors and everything else at the deadline).
package health
