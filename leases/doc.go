// Package leases follows the node Leases (namespace kube-node-lease) of the
// nodes a caller names, and reports each renewal as the API server sees it:
// the failure brake's proof that an upgraded node still reaches the API
// server, taken from the heartbeat kubelets send every 10 s.
//
// # What it decides
//
// Watcher.Start(node) begins following one node's Lease, Stop(node) ends it.
// For each node followed, the Watcher reports (the renew callback) the
// Lease's current renewTime once following begins, then every renewTime
// that differs from the last one reported, as the watch delivers it: a
// renewal is reported as soon as the API server has it, not at a time
// predicted from the last one. A timed read that lands just before a renewal
// waits a whole period more, which made a 200-node rollout at 10 % take
// 91-93 s (issue 28).
//
// Per node followed, one goroutine:
//  1. watches the node's Lease (fieldSelector=metadata.name=<node>) from its
//     current state: the API server's watch list (sendInitialEvents,
//     resourceVersion "0": served from its watch cache) sends the Lease as
//     an ADDED event, or nothing if the node has none, then a bookmark that
//     ends the initial events, then each change. It reports the Lease's
//     renewTime, or that the node has no Lease at the bookmark; then each
//     renewTime an ADDED or MODIFIED event carries, and a DELETED Lease as
//     missing. One request where a list and a watch take two;
//  2. where the API server refuses that (400 or 422: its WatchList feature
//     is off, or it predates Kubernetes 1.27), lists the node's Lease with
//     the same selector and watches it from the list's resourceVersion,
//     for this node and every other the Watcher follows from then on;
//  3. follows it again when the watch ends: closed by the server (each
//     watch asks for a timeout of 5-10 min, so that watches opened together
//     end apart), or expired (410 Gone / Expired);
//  4. after a failed list or watch, or a watch that ended without
//     delivering anything past its initial events, waits 1 s, doubling to
//     10 s (plus up to a quarter of jitter), and never spins; a watch that
//     delivers resets the wait.
//
// ListAll, called once before Run, lists every node Lease in pages of
// ListAllPageSize and reports each renewTime: a caller that has just started
// learns which nodes renewed since whatever it waits for, in one request per
// 500 nodes, instead of following every node it finds waiting.
//
// At most ListsAtOnce lists (default 32), or watches until their initial
// events end, are under way at once: a fresh controller may start following
// hundreds of nodes in the same instant.
//
// # One watch for many
//
// While at least Options.WideAt nodes (default 100, one HTTP/2 connection's
// streams) and at least a quarter of the fleet are followed, one list and
// one watch of every Lease in the namespace replace the nodes' own (the
// fleet is the count of ListAll's list, or of the wide list itself; before
// any, no wide watch starts). It reports exactly what the nodes' own
// watches would, for the followed nodes only: each one's renewTime when
// following begins (a node started meanwhile is answered from the last
// renewTimes seen, at once), then each change. Followed again by fewer than
// half of either threshold, the nodes get their own watches back. On the
// switch a node's current renewTime may be reported a second time.
// Events for another object than the node's Lease are ignored, so the
// selector is never trusted alone (client-go's fake clientset ignores it).
//
// Options.Mode (the controller's --lease-watch) can fix either way:
// ModeEachNode never watches wide; ModeEveryLease watches every Lease from
// Run on, followed nodes or not, as an informer of all the Leases would, so
// that the bench can set the two side by side on the same cluster
// (scenario leasewatch).
//
// # What it costs
//
// Nothing for the nodes not followed. For each node followed: one watch
// open, one event per renewal (a kubelet's every 10 s), and a new watch each
// time one ends (every 5-10 min); a list before each, where the API server
// does not stream. The API server resolves both by name: a list (or a
// watch's initial events) whose field selector requires one metadata.name
// is a single-key lookup in the watch cache, and the cacher
// indexes watchers by the name their selector requires, so a renewal is
// handed to the watches of that node only, not filtered by every watch of
// every Lease. Watches are long-running requests: they do not hold
// max-requests-inflight (or API Priority and Fairness) seats once started.
//
//   - 200 nodes in flight: 200 watches, 20 events a second, their initial
//     events when they start (at most 32 at once), then under one new watch
//     a second across all of them as watches end and are replaced.
//   - 2,000 nodes in flight: 2,000 watches, 200 events a second, 3-7 new
//     watches a second as watches end. The API server allows 100 concurrent
//     HTTP/2 streams per connection by default, so the client holds about
//     20 connections (Go's HTTP/2 client opens another when one is full);
//     each request takes a token from the client's rate limiter, so the
//     client given to the Watcher should have its own, sized for the
//     in-flight nodes (2,000 requests at a fresh start, 4,000 where the
//     server does not stream: a burst of 1,000 and 500 QPS start them all
//     in 2-6 s).
//
// Watching every Lease instead costs an event per node per renewal whether
// or not anything rolls: 1,000 events a second at 10,000 nodes. Hence the
// wide watch only while a quarter of the fleet is followed, when it costs
// at most four times the events of the nodes' own watches, and saves their
// streams, connections and goroutines: a controller started on 500 nodes
// just upgraded followed 350 at once, over a dozen new TLS connections.
// (Measured: bench atrest, GODEBUG=gctrace=1 and goroutine profiles.)
//
// # What it does not do
//
//   - It does not judge life: it reports renewTimes (the node's clock), and
//     whether a renewal proves a node alive after its pod settled is the
//     caller's rule. A renewTime that differs from the last is reported even
//     if it is earlier (a node's clock set back, or a list answered by a
//     lagging API server); the caller keeps the latest.
//   - It reads no Node status: a node without a Lease is only counted
//     (Missing) and logged, and its renewal reported once a Lease appears;
//     the caller falls back to the Node status heartbeats it already has.
//   - It does not remember a node once Stop is called: following it again
//     reports its current renewTime again.
//   - Stop does not wait: a report already under way for the node may still
//     arrive after it returns, none later.
//   - It keeps no cache of Lease objects and never writes one.
package leases
