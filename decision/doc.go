// Package decision is the one place where a rollout is decided, for both
// strategies. From each node's facts (its Node, the DaemonSet's pods there,
// its proofs of life, what this process is deleting), the DaemonSet's
// settings, the rollout record and the clock, it computes:
//   - each node's verdict: old, in flight, settled, failed, skipped
//     (judge.go, clock.go), and what the record must hold about it (a
//     failure, a node settled, in flight, offered);
//   - whether the rollout halts, and why; which old pods to take within
//     the budget, each deleted or patched in place (a Take, its plan from
//     package inplace's rule); which nodes to offer the target (OTA), and
//     which owners' requests for an upgrade in place to carry out; when to
//     wake next; and the status that reports it all (decide.go).
//
// Where to look: the failure brake halts in Decide (decide.go), a node
// fails in judge (judge.go), a window or a hold holds a node in clockHolds
// (clock.go), an offer is made in offer (decide.go), the budget and the
// partition in Decide and choose.
//
// It reaches no API server and imports no client-go: package controller
// gathers the facts from its caches, asks once per sync, acts on the
// Decision (deletions, condition writes, record writes) and publishes the
// status; package record persists the Ledger. A Rollout is incremental (see
// rollout.go): a sync costs what changed, not the fleet.
//
// What it does not decide: how a write reaches the cluster, in which order
// writes go (the record before the deletion it covers), how fast they are
// paced, and what events say; those are the controller's.
package decision
