// Package controller is the cluster-side half of edgeota's upgrade model: for
// DaemonSets that opt in with the apps.openyurt.io/update-strategy annotation
// (and use the OnDelete update strategy) it keeps the OTA pod conditions the
// node agent serves, pre-pulls images on request, and rolls pods past
// disconnected nodes, which the native RollingUpdate cannot do, with a proof
// of life after each upgrade and a brake that halts a rollout whose version
// breaks nodes, at the times the operator and the node's owner allow.
//
// Where each concern lives:
//   - controller.go, handlers.go, indexes.go, sync.go: the informers (each
//     narrowed to what the controller reads), the event handlers mapping
//     every change to the DaemonSet and node it concerns, the work queue.
//   - strategy.go, revision.go, settings.go, maxunavailable.go: what a
//     DaemonSet asks for (strategy, target revision, rollout controls).
//   - state.go: the incremental view of each DaemonSet's nodes (a node is
//     judged again on its events and timers; counts and ordered candidates
//     are kept, so that a sync costs what changed, not the fleet).
//   - verdict.go: the rule judging each node (in flight, settled, failed,
//     skipped), replacements missing or unscheduled included.
//   - record.go: the rollout record, in ConfigMaps of the controller's
//     namespace: every failure, and every node whose old pod it deletes,
//     written before it acts.
//   - heartbeats.go: proof of life, from Node status heartbeats and the
//     Leases of the nodes waited on, read by name.
//   - timing.go: maintenance windows, the owner's holds and their limit,
//     OTA upgrade deadlines: verdicts that change with the clock.
//   - rollingupdate.go: AdvancedRollingUpdate (deletions within the budget,
//     in the background); controls.go: node selector, partition, and the
//     choice of the nodes to take.
//   - rolloutstatus.go: the edgeota.io/rollout-status annotation and the
//     transition events.
//   - ota.go, pendingwrites.go: OTA offers (PodNeedUpgrade and the offer on
//     the pod, package podchannel), its brake and its deadline upgrades.
//   - prepull.go, prepulljob.go: image pre-pull Jobs.
//   - events.go, metrics.go, transform.go: event reasons, Prometheus figures,
//     the cache trimming.
package controller
