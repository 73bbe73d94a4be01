//go:build e2e

// Package e2e is edgeota's end-to-end suite: Go tests against the embedded
// local cluster (package localcluster), running the real binaries bin/ota-server
// and bin/ota-controller as child processes. `make test-e2e` runs it (build tag
// e2e); each scenario gets a cluster of its own, deleted when it ends, and
// keeps its logs in .cache/e2e/<test>/.
//
// Scenarios, one file each:
//   - cluster_test.go: the cluster itself: loopback only, cut-off nodes.
//   - ota_test.go: the OTA walk-through over REST and gRPC.
//   - auto_test.go: `auto` upgrades connected nodes, the others on return.
//   - rolling_test.go: AdvancedRollingUpdate stays within max-unavailable.
//   - apiserver_cut_test.go: the agent cut off from the API server.
//   - rbac_test.go: deploy/ applies and its RBAC suffices, no more.
package e2e
