// Package record persists rollout records: for the target revision of each
// DaemonSet, every node's stage as the controller holds it (decision.Ledger),
// in ConfigMaps of the controller's own namespace. It decides nothing: what
// goes in a record is package decision's; when it must be written (before
// the controller acts, or in the background) is the controller's.
//
// What it does decide is how a record reaches the cluster, so that a write
// costs what changed, not the record, and a rollout's bytes in etcd grow
// with its nodes, not faster:
//   - layout: a journal of segments (segment.go). Each write is one new
//     segment holding the keys that changed since the last: a node's
//     decision.Entry as JSON (an empty value for one removed), "_meta"
//     (decision.Meta). Each ConfigMap is created once and never patched:
//     a write costs etcd the changes and one object's metadata, whatever
//     the record's size. Entries are opaque JSON here, so fields added to
//     Entry or Meta need no change in this package.
//   - pacing: failed and in-flight entries and the meta go at once (the
//     controller writes some before it acts); offered and settled ones,
//     and removals, ride along with the next such write, or go
//     ProgressInterval after the last write.
//   - merges (Compact, in the background): once fanIn segments of one level
//     follow each other, one segment holding their keys' current values
//     replaces them. A key is rewritten once per level, a record holds a
//     few dozen ConfigMaps at 100,000 nodes, and a ConfigMap holds at most
//     partBytes before compression (a segment larger than that is split
//     into parts).
//   - reads: a record is read from the API server when a rollout is
//     (re)built (Load): segments apply in order, the later value of a key
//     winning; one lacking a part is a write cut short and not read, one
//     within a merge's range a source not yet deleted. The controller's
//     informer holds each ConfigMap's metadata alone (Cached): the watch
//     carries no data, and a create's answer is metadata alone too.
//   - loss: since the store writes each ConfigMap once, a resourceVersion
//     other than its create's answer is someone else's change, and a
//     deletion it did not make a loss (Observe): an event that comes
//     before the create's answer is judged by it, and one no newer than
//     what Load read is history. Either has the record written anew: every
//     key, in one segment superseding all others, which then go; the
//     caller is told, for a Warning event.
//   - a restarted controller that published more failures (in the rollout
//     status) than it finds keeps counting them (decision.Meta.LostFailures)
//     and names those the status named.
//   - an older edgeota's record (one key per node, split at 800 KiB) is
//     read, and written anew in this layout at the first write.
//
// An owner reference cannot cross namespaces, so the controller deletes the
// records itself: those of other revisions when the target moves, all of a
// DaemonSet's when it is deleted, and at start those of DaemonSets that no
// longer exist.
package record
