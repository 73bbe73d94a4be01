// Package controller is the cluster-side half of edgeota's upgrade model: for
// DaemonSets that opt in with the apps.openyurt.io/update-strategy annotation
// (and use the OnDelete update strategy) it keeps the OTA pod conditions the
// node agent serves, pre-pulls images on request, and rolls pods past
// disconnected nodes, which the native RollingUpdate cannot do, with a proof
// of life after each upgrade and a brake that halts a rollout whose version
// breaks nodes.
//
// Where each concern lives:
//   - controller.go, handlers.go, indexes.go, sync.go: the informers, the
//     event handlers mapping every change to its DaemonSet, the work queue.
//   - strategy.go, revision.go, settings.go, maxunavailable.go: what a
//     DaemonSet asks for (strategy, target revision, rollout controls).
//   - rollingupdate.go, proofoflife.go, expectations.go: AdvancedRollingUpdate,
//     the rule judging each node (in flight, settled, failed, skipped), and
//     the deletions issued but not yet seen (counted as in flight, so that a
//     sync never waits for them; deletions and status writes run in the
//     background, controller.go's inBackground).
//   - controls.go: pause, node selector and partition.
//   - rolloutstatus.go: the edgeota.io/rollout-status annotation, the failure
//     record it carries, and the transition events.
//   - ota.go, pendingwrites.go: OTA offers (PodNeedUpgrade) and its brake.
//   - prepull.go, prepulljob.go: image pre-pull Jobs.
//   - events.go, metrics.go, transform.go: event reasons, Prometheus figures,
//     the cache trimming.
package controller
