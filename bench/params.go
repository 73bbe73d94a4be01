package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edgeota/edgeota/controller"
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
}

// defaultNodes is N when BENCH_NODES is not set: the scale the targets are
// written for.
const defaultNodes = 500

// loadParams reads the parameters from the environment, with their
// defaults, refusing values too small to measure anything.
func loadParams() (params, error) {
	p := params{qps: controller.DefaultKubeAPIQPS, burst: controller.DefaultKubeAPIBurst}
	var seconds int
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
	p.controllerBin = os.Getenv("BENCH_CONTROLLER_BIN")
	for _, name := range strings.Split(os.Getenv("BENCH_SCENARIOS"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			p.scenarios = append(p.scenarios, name)
		}
	}
	return p, nil
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
