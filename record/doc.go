// Package record persists rollout records: for the target revision of each
// DaemonSet, every node's stage as the controller holds it (decision.Ledger),
// in ConfigMaps of the controller's own namespace. It decides nothing: what
// goes in a record is package decision's; when it must be written (before
// the controller acts, or in the background) is the controller's.
//
// What it does decide is how a record reaches the cluster:
//   - layout: one key per node (its decision.Entry as JSON), and "_meta"
//     (decision.Meta) in the first ConfigMap; at most shardBytes of data per
//     ConfigMap. Failed and in-flight entries ("active": few, written before
//     the controller acts) live in ConfigMaps apart from offered and settled
//     ones ("progress": one per node and rollout, written at most every
//     ProgressInterval per ConfigMap, never per node), since every merge
//     patch costs the whole ConfigMap twice: in etcd's history until
//     compaction, and in the controller's own watch of its records.
//   - moves: a node whose entry moves from an active to a progress
//     ConfigMap (in flight, then settled) is removed from the first only
//     once the second holds it, so that a controller restarted in between
//     finds it in one or both; read back, the later stage wins
//     (decision.Stage.Rank).
//   - reads: a record is read from the API server when a rollout is
//     (re)built (Load); the controller's informer holds each ConfigMap
//     without its data (Cached: name, labels, a digest of the data), which
//     is all that finding and watching them needs.
//   - loss: the store knows what each ConfigMap holds (the answer to its own
//     last write); a ConfigMap deleted, or changed by anyone else (a newer
//     resourceVersion, with another digest), is rewritten from the ledger,
//     whole, and the caller told, for a Warning event.
//   - a restarted controller that published more failures (in the rollout
//     status) than it finds keeps counting them (decision.Meta.LostFailures)
//     and names those the status named.
//
// An owner reference cannot cross namespaces, so the controller deletes the
// records itself: those of other revisions when the target moves, all of a
// DaemonSet's when it is deleted, and at start those of DaemonSets that no
// longer exist.
package record
