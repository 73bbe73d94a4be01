package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/localcluster"
)

// params are the run's sizes, read from the environment so that a quick run
// (BENCH_NODES=100) and the full one (500) are the same program.
type params struct {
	// nodes is N, the number of KWOK nodes (BENCH_NODES).
	nodes int
	// loadTime is how long each node-API load level runs (BENCH_SECONDS).
	loadTime time.Duration
	// pairs is how many alternating edgeota/baseline runs a ratio is the
	// median of (BENCH_PAIRS).
	pairs int
	// upgrades is how many upgrades the upgrade scenario times per method
	// (BENCH_UPGRADES).
	upgrades int
	// qps and burst are the controller's client limits, which the marking
	// ceiling's client uses too.
	qps   float64
	burst int
	// verbosity is the measured controllers' klog -v (BENCH_CONTROLLER_V), to
	// see in .cache/bench/ what a controller did when; 0 for figures.
	verbosity int
	// controllerBin replaces bin/ota-controller (BENCH_CONTROLLER_BIN), to
	// measure a candidate build of the controller against the same baselines.
	controllerBin string
	// scenarios names the scenarios to run (BENCH_SCENARIOS, comma
	// separated); empty runs them all.
	scenarios []string
	// rolloutHeartbeat is how the nodes heartbeat during the rollout and
	// cut-off scenarios (BENCH_HEARTBEAT): their status every 2-3 s
	// (nodeHeartbeat) unless it names another interval, or node Leases as
	// kubelets renew them ("lease").
	rolloutHeartbeat localcluster.Heartbeat
	// atRestWindow is how long the at-rest scenario samples the controller
	// (BENCH_ATREST_SECONDS).
	atRestWindow time.Duration
	// agents runs simulated node agents on every node during the rollout
	// and cut-off scenarios (BENCH_AGENTS=1): the controller's challenges
	// are answered, and proof of life comes from the answers.
	agents bool
	// atRestTimed adds to the at-rest scenario what issue 19's verdicts,
	// which change with the clock, read (BENCH_ATREST_TIMED=1): a
	// maintenance window on every DaemonSet, a tenth of the pods held, and
	// OTA offers outstanding with an upgrade deadline. atRestOverdue
	// (BENCH_ATREST_TIMED=2, issue 25) makes every offer overdue, its
	// deadline passed while the window is closed: a controller that set
	// its timers in the past would spin.
	atRestTimed, atRestOverdue bool
	// audit has the API server log the metadata of every pod write
	// (BENCH_AUDIT=1), which the in-place scenario breaks down by writer:
	// for a separate run, whose timings are not figures (audit.go).
	audit bool
	// inPlacePair has the in-place scenario's rounds run only its pair, in
	// place with the agents' answers and native (BENCH_INPLACE_PAIR=1),
	// for a ratio at a scale where the other two would take long.
	inPlacePair bool
	// imagePulls, when set, models image pulls on the cluster
	// (BENCH_PULL_DELAY, the delay of every pull): a pod waits for its
	// node to pull its images before it starts. Nil: every pod starts at
	// once, as KWOK alone starts them.
	imagePulls *localcluster.ImagePulls
	// recordNodes are the fleet sizes the record scenario replays rollouts
	// at (BENCH_RECORD_NODES), and recordPadded those it replays again with
	// larger in-flight entries (BENCH_RECORD_PADDED).
	recordNodes, recordPadded []int
}

// defaultNodes is N when BENCH_NODES is not set: the scale the targets are
// written for.
const defaultNodes = 500

// loadParams reads the parameters from the environment, with their
// defaults, refusing values too small to measure anything.
func loadParams() (params, error) {
	p := params{qps: controller.DefaultKubeAPIQPS, burst: controller.DefaultKubeAPIBurst}
	var seconds, atRestSeconds, timed, agents, audit, pair int
	for _, v := range []struct {
		name     string
		dst      *int
		def, min int
	}{
		{"BENCH_NODES", &p.nodes, defaultNodes, 10},
		{"BENCH_SECONDS", &seconds, 5, 1},
		{"BENCH_PAIRS", &p.pairs, 3, 1},
		{"BENCH_UPGRADES", &p.upgrades, 20, 2},
		{"BENCH_CONTROLLER_V", &p.verbosity, 0, 0},
		{"BENCH_ATREST_SECONDS", &atRestSeconds, 60, 10},
		{"BENCH_ATREST_TIMED", &timed, 0, 0},
		{"BENCH_AGENTS", &agents, 0, 0},
		{"BENCH_AUDIT", &audit, 0, 0},
		{"BENCH_INPLACE_PAIR", &pair, 0, 0},
	} {
		*v.dst = v.def
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min {
			return p, fmt.Errorf("%s=%q: want an integer of at least %d", v.name, s, v.min)
		}
		*v.dst = n
	}
	p.loadTime = time.Duration(seconds) * time.Second
	p.atRestWindow = time.Duration(atRestSeconds) * time.Second
	if timed > 2 {
		return p, fmt.Errorf("BENCH_ATREST_TIMED=%d: want 0, 1 or 2", timed)
	}
	p.atRestTimed, p.atRestOverdue = timed >= 1, timed == 2
	if agents > 1 {
		return p, fmt.Errorf("BENCH_AGENTS=%d: want 0 or 1", agents)
	}
	p.agents = agents == 1
	if audit > 1 {
		return p, fmt.Errorf("BENCH_AUDIT=%d: want 0 or 1", audit)
	}
	p.audit = audit == 1
	if pair > 1 {
		return p, fmt.Errorf("BENCH_INPLACE_PAIR=%d: want 0 or 1", pair)
	}
	p.inPlacePair = pair == 1
	var err error
	if p.rolloutHeartbeat, err = parseHeartbeat(os.Getenv("BENCH_HEARTBEAT")); err != nil {
		return p, err
	}
	if p.imagePulls, err = parseImagePulls(os.Getenv("BENCH_PULL_DELAY")); err != nil {
		return p, err
	}
	if p.recordNodes, err = parseSizes("BENCH_RECORD_NODES", "2000,20000,100000"); err != nil {
		return p, err
	}
	if p.recordPadded, err = parseSizes("BENCH_RECORD_PADDED", "20000"); err != nil {
		return p, err
	}
	p.controllerBin = os.Getenv("BENCH_CONTROLLER_BIN")
	for _, name := range strings.Split(os.Getenv("BENCH_SCENARIOS"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			p.scenarios = append(p.scenarios, name)
		}
	}
	return p, nil
}

// parseHeartbeat reads BENCH_HEARTBEAT: empty for status heartbeats every
// nodeHeartbeat, "lease" for node Leases as kubelets, or a status interval
// of at least a second.
func parseHeartbeat(s string) (localcluster.Heartbeat, error) {
	switch s {
	case "":
		return localcluster.Heartbeat{Interval: nodeHeartbeat}, nil
	case "lease":
		return localcluster.Heartbeat{Leases: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return localcluster.Heartbeat{}, fmt.Errorf("BENCH_HEARTBEAT=%q: want \"lease\" or a status interval of at least 1s", s)
	}
	return localcluster.Heartbeat{Interval: d}, nil
}

// parseImagePulls reads BENCH_PULL_DELAY: empty leaves image pulls out, a
// duration (0s included) models them, each pull taking that long.
func parseImagePulls(s string) (*localcluster.ImagePulls, error) {
	if s == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("BENCH_PULL_DELAY=%q: want a duration of at least 0s, or nothing to leave image pulls out", s)
	}
	return &localcluster.ImagePulls{Delay: d}, nil
}

// budget is the number of nodes a 10% maxUnavailable allows to be without an
// available pod: both controllers round the percentage up.
func (p params) budget() int {
	return (p.nodes + 9) / 10
}

// scale turns a target stated for 500 nodes into one for N nodes.
func (p params) scale(at500 float64) float64 {
	return at500 * float64(p.nodes) / 500
}

// parseSizes reads a comma-separated list of fleet sizes from the variable
// name, def when it is not set ("none": no size).
func parseSizes(name, def string) ([]int, error) {
	s, ok := os.LookupEnv(name)
	if !ok {
		s = def
	}
	if s == "none" {
		return nil, nil
	}
	sizes, err := parseInts(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return sizes, nil
}
