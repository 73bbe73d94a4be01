// Command bench is `make bench`: it measures edgeota on the embedded local
// cluster (KWOK nodes) and prints each figure beside a baseline run on the
// same cluster in the same run: the native DaemonSet controller for rollouts,
// a plain client at the controller's QPS for pod-condition writes, a plain
// server answering the same bytes for the node API, and a direct API delete
// for upgrades. This machine is shared and noisy, so only ratios are stable;
// memory and CPU figures are absolute.
//
// The benchmark is a list of scenarios, each a value owning its run, its
// table and its targets, run in order by a small driver; the report goes to
// standard output and to bench/results/latest.md, the one place results are
// kept. Sizes, durations and the scenarios to run come from the environment
// (see params.go and bench/README.md). Every child process and the cluster
// are removed on exit, Ctrl-C included.
//
// Where each concern lives:
//   - main.go: the entry point, and the sub-commands of the ceiling
//     server, the simulated agents and the cache and requests scenarios'
//     measuring children.
//   - params.go: BENCH_* variables, the budget, scaling targets to N.
//   - scenario.go: the scenario type, the ordered list of scenarios, the
//     findings passed from one to a later one, BENCH_SCENARIOS.
//   - run.go: the driver: session, scenarios in order, the results file.
//   - report.go: tables, the report's header, rows and cell formats shared
//     by scenarios.
//   - session.go: the cluster and the measured processes; the only place
//     that starts either or changes the nodes' heartbeat (status every few
//     seconds, or node Leases as kubelets).
//   - child.go: a measured process: its CPU time, memory and HTTP port.
//   - rollout.go, cutoff.go, proof.go, inplace.go, atrest.go, requests.go,
//     requested.go, marking.go, nodeapi.go, identity.go, upgrade.go,
//     persistence.go, watchers.go: one scenario each, with its targets and
//     its table (requests.go also its measuring child); predownload.go: the
//     two on modelled image pulls (predownload, badtag), run only when named.
//   - audit.go: the API server's audit log (BENCH_AUDIT=1) read into the
//     pod writes by writer, for inplace.
//   - waves.go: the rollout scenarios' default node heartbeat interval, and
//     a rollout's pod, node and Lease events and agents' answers replayed
//     into proof-of-life waits, budget-to-deletion latencies and waves.
//   - reaction.go: an ota-controller log read into the proofs of life it
//     took and the deletions it sent, for its reaction and the time it took
//     each proof.
//   - agents.go: the simulated node agents (this binary, sub-command): one
//     process answering the proof-of-life challenges of every node, each
//     answer written as its node, by the agent's own code.
//   - ceiling.go: the node API's ceiling server (this binary, sub-command).
//   - recordstore.go: the record scenario (issue 46), run only when named:
//     synthetic rollouts written through record.Store on a throwaway etcd
//     and kube-apiserver of its own, in a measuring child (this binary,
//     sub-command).
//   - cache.go, cacheobjects.go: the cluster-free cache scenario, its
//     measuring child (this binary, sub-command) and the representative
//     pods and nodes it decodes as the API server streams them.
//   - workload.go: DaemonSets, namespaces, image changes, pod readiness.
//   - watch.go: informer-backed views a scenario waits on while it samples.
//   - measure/: the measuring instruments (statistics, /proc, load
//     generator, metrics), unit-tested apart.
package main
