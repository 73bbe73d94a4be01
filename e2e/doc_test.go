//go:build e2e

// Package e2e is edgeota's end-to-end suite: Go tests against the embedded
// local cluster (package localcluster), running the real binaries bin/ota-server
// and bin/ota-controller as child processes, all started through package
// harness. `make test-e2e` runs it (build tag
// e2e); each scenario gets a cluster of its own, deleted when it ends, and
// keeps its logs in .cache/e2e/<test>/. Most scenarios run side by side
// (t.Parallel), E2E_PARALLEL at a time; those that must not share the
// machine run alone, first, each saying why above it (README.md in this
// directory: which, why, the parallelism, the logs and the JSON report).
// TestMain (main_test.go) deletes the clusters a run that died left behind.
// Its nodes heartbeat every 2-3 s
// (nodeHeartbeat, env_test.go): the controller's proof of life waits one
// heartbeat per rollout wave. leases_test.go's nodes heartbeat as kubelets
// do instead (newKubeletEnv: node Leases every 10 s, status every 5 minutes).
//
// Scenarios, one file each:
//   - cluster_test.go: the cluster itself: loopback only, cut-off nodes.
//   - pullsim_test.go: modelled image pulls: a new image's pod waits for
//     its pull, the next one on the node does not; a missing image's pod
//     shows ErrImagePull and ImagePullBackOff; a pre-pull Job's pull serves
//     a later DaemonSet pod on its node.
//   - predownload_test.go: pre-download (edgeota.io/pre-download) on
//     modelled pulls: the next node pulls while one bakes and each is
//     taken only once pulled; pulls before a closed window opens; an OTA
//     offer PULLED in the owner's view before the upgrade; a missing tag
//     halts with no pod deleted (RolloutHalted, PrePullFailed); a NotReady
//     node pulls once it returns; the parallelism bounds the Jobs.
//   - quickstart_test.go: the README's quick start and first rollout, its
//     commands read from README.md and run in bash as written (curl,
//     grpcurl, kubectl, the plugin) on a cluster set up as `make run` sets
//     one up, deploy/examples applied.
//   - guide_test.go: the example manifests of the operator's guides
//     (docs/operator/: windows in the vans' local time, OTA offers with a
//     deadline and a hold limit, pre-download with a canary and at night),
//     read from the guides and checked for what they say.
//   - ota_test.go: the OTA walk-through over REST and gRPC.
//   - inplace_test.go: upgrades in place (edgeota.io/update-method
//     InPlaceIfPossible): the same pods with new containers under deploy/'s
//     RBAC and admission policy, a same-digest tag, recreation with its
//     reason for an env change and a rollout restart, a crash-looping
//     version halted and rolled back in place, a node cut off mid-pull, and
//     the owner's OTA upgrade carried out in place.
//   - pin_test.go: upgrades pinned to what the canary ran (edgeota.io/pin):
//     a tag pushed again after the canary reaches no later node in place,
//     and halts a recreating rollout at max-failed naming both digests; a
//     mixed amd64/arm64 fleet pinned per architecture, its first wave the
//     canaries alone; an unpinnable imageID goes on with its reason shown.
//   - auto_test.go: `auto` upgrades connected nodes, the others on return.
//   - rolling_test.go: AdvancedRollingUpdate stays within max-unavailable.
//   - leases_test.go: on node Leases: a cut-off node stops renewing its
//     Lease and returns; an AdvancedRollingUpdate completes within its
//     budget, its proof of life drawn from the Leases.
//   - leasewatch_test.go: package leases on the real API server: its
//     Watcher reports every renewal of the nodes it follows that a plain
//     watch of all Leases sees, once, and nothing of the others.
//   - apiserver_cut_test.go: the agent cut off from the API server.
//   - offline_test.go: the offline-first agent through a dead zone: restarts
//     serving its stored view, queued upgrades run (or refused) on
//     reconnection, corrupt state files ignored; its restartable agent.
//   - owner_test.go: the owner's view: a watcher sees a new version with its
//     images, otactl upgrade --wait to UPGRADED and to FAILED
//     (CrashLoopBackOff), and the TypeScript SDK (sdk/ts) run by Node.js.
//   - rbac_test.go: deploy/ applies and its RBAC suffices, no more: the
//     agent's service account may impersonate its node and nothing else.
//   - identity_test.go: the agent acting as its node (deploy/'s pod-bound
//     token, NodeRestriction on) does its whole job while the API server
//     refuses its token everything beyond its node's pods; a token of another
//     node or one that cannot impersonate stops it; a start in a dead zone;
//     --identity=auto's fall back.
//   - answer_test.go: the agent answers the controller's proof-of-life
//     challenge on its node's pod, acting as its node and as its service
//     account under the admission policy; cut off, it answers nothing, and
//     answers once the link is back.
//   - chart_test.go: helm install of charts/edgeota and kubectl apply -k
//     deploy/ install the same objects, each node-scoped.
//   - nodescope_test.go: acting as its service account (deploy/serviceaccount/,
//     before 1.36), the API server's admission policy confines an agent's
//     writes to its own node's pods, whatever node name it is started with.
//   - controllerkill_test.go, unbound_test.go: a controller killed and
//     restarted mid-rollout completes it within the budget.
//   - leaderelection_test.go: two replicas, only the leader acts; a killed
//     leader hands over within the lease, a stopped one (SIGTERM) at the
//     standby's next retry, having released the Lease once its work
//     returned; no double deletions either way.
//   - apiserver_restart_test.go: an API server restart mid-rollout.
//   - brake_test.go: the failure brake: a version that cuts off its nodes
//     halts at max-unavailable (with and without minReadySeconds) and a fixed
//     one rolls on; a restarted controller stays halted; never-Ready versions
//     hold the budget; pause.
//   - controls_test.go: partition and node selector, for deletions and
//     offers; the admission policy confining the controller to its rollout
//     status; a pre-pull request without a reason, as yurthub writes it.
//   - hold_test.go: the owner's hold: through REST and gRPC, the held
//     nodes passed by while the rest rolls and upgraded once released; a
//     hold past edgeota.io/max-hold-seconds (asked with otactl) upgraded at
//     its limit; a hold queued in a dead zone by an agent acting as its node
//     reaches the pod once the link is back, one that ended meanwhile
//     dropped.
//   - settled_test.go: a settled node's power cycle (NotReady, then back
//     with its container restarted) is no failure: shown settled and
//     unavailable, it holds the budget, and the rollout completes once its
//     pod is back.
//   - offers_test.go: an offer is the controller's alone: a node's forged
//     or deleted copy is written again from the record and moves no
//     deadline; a PodNeedUpgrade=True the controller never wrote is written
//     back to False, never counted nor carried out; under a partition, an
//     owner's upgrade terminating through its grace period keeps its place.
//   - atrest_test.go: overdue OTA offers whose window is closed leave the
//     controller at rest (its syncs, its CPU from /proc), deleting nothing.
//   - undo_test.go: `kubectl rollout undo` makes a new target: a redone
//     offer gets a fresh upgrade deadline, an undo a fresh hold limit.
//   - record_test.go: a deleted rollout record, or one someone else edited
//     (a node's entry removed, a key of theirs added), is written again as
//     it was, its failure in it, with a Warning RolloutRecordRewritten.
//   - plugin_test.go: `kubectl edgeota` through bin/kubectl: pause and
//     resume, rollout status of a rollout that completes and of one that
//     halts, with their exit codes.
//   - startup_test.go: ota-controller's start-up checks: a missing record
//     or Lease namespace, or an identity without the Roles of its records
//     and its Lease, makes it exit 1 saying what to do; done as said, it
//     starts and leads, its dry-run probes never persisted.
//   - memlimit_test.go: ota-controller started in a memory cgroup limited
//     as deploy/'s container is gives the Go runtime a soft limit of 0.9
//     of it; --memory-limit-ratio=0 and a GOMEMLIMIT of the environment's
//     leave it be (cgroup v1's memory controller, as this machine has).
//   - maxprocs_test.go: ota-controller leaves the Go runtime its own
//     number of threads unless --max-procs says otherwise, and a
//     GOMAXPROCS of the environment's wins over the flag.
//   - monitoring_test.go: a real Prometheus (bin/prometheus), configured
//     as the Prometheus Operator would be from the chart's ServiceMonitor
//     and loaded with the chart's rules, scrapes two controller replicas
//     through a rollout's waves and a halt: every query of the dashboard
//     and the rules parses, names only metrics the controller registers and
//     matches series; the halt alert fires within its for, a scrape and two
//     evaluations of the RolloutHalted event; only the leader exports
//     rollout series.
//
// The manual names, beside each example, the scenario that runs it
// (<!-- e2e: TestName --> in Markdown, # e2e: TestName in deploy/examples);
// make mdlinks fails on a name that is no Test function here.
//
// Helpers: main_test.go (leftover clusters), env_test.go (a cluster per
// scenario, through the harness),
// processes_test.go and controllerprocess_test.go (the binaries, through the
// harness), prometheus_test.go (a Prometheus and its API),
// docexamples_test.go (the manual's marked examples), daemonset_test.go,
// slowrollout_test.go, deletionwatch_test.go, agentclient_test.go,
// wait_test.go.
package e2e
