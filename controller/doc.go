// Package controller is the reconciler of edgeota's upgrade model: for
// DaemonSets that opt in with the apps.openyurt.io/update-strategy annotation
// (and use the OnDelete update strategy) it gathers each node's facts from
// its caches, asks package decision once per sync what to do, does it, and
// reports it. It decides nothing itself: where a node fails, where a window
// or a hold holds one, where the brake halts and where an offer is made are
// in package decision; how the rollout record reaches the cluster is package
// record's; the keys, the status and the event reasons are package
// rollout's.
//
// Where each concern lives:
//   - controller.go, handlers.go, indexes.go: the informers (each narrowed
//     to what the controller reads, over internal/kube's client), the event
//     handlers mapping every change to the DaemonSet and node it concerns
//     (and marking that node dirty), the work queue.
//   - podrecord.go, noderecord.go, jobrecord.go, transform.go: the caches'
//     contents: DaemonSet pods, Nodes and pre-pull Jobs as compact records
//     of what the controller reads (decision.Pod for pods), without an
//     ObjectMeta; the rest trimmed. Their caches are read through their
//     indexers (typed listers cannot serve the records); stores.go makes
//     the same caches for measurement (the bench's cache scenario).
//   - sync.go: one sync: the target revision, the settings, the record
//     loaded, the incremental decision.Rollout refreshed (rebuilt when the
//     DaemonSet changed), the decision, the record written before acting.
//   - facts.go: a node's facts, from the caches and from what this process
//     knows they may not show yet.
//   - act.go: the writes a decision asks for: deletions and patches in
//     place (recorded first; InPlacePatch is the one patch of an upgrade in
//     place), PodNeedUpgrade and the offer, the held pods' offers;
//     challenges.go: the proof-of-life challenges this process issued (per
//     pod and generation) and their writes.
//   - expectations.go: what this process deleted or wrote and has not seen
//     in its caches yet, the one guard against acting twice on a stale cache.
//   - publish.go: the edgeota.io/rollout-status annotation and the events of
//     its transitions; events.go: events on change only, the strategy and
//     settings checks.
//   - heartbeats.go: which nodes each DaemonSet waits on for proof of life,
//     and their Leases followed; controller.go's learnRenewals reads every
//     node's last renewal once at start.
//   - revision.go: the target revision, its images, and for upgrades in
//     place every revision's template digests (package inplace) and whether
//     the DaemonSet's template as cached is the target's.
//   - prepull.go, prepulljob.go: image pre-pull Jobs.
//   - metrics.go: Prometheus figures, per DaemonSet never per node, and
//     the registry ota-controller serves (docs/operator/watching.md).
package controller
