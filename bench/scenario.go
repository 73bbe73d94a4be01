package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

// A scenario measures one thing on the session's cluster and reports it as
// one table of the report. It owns everything about it: its workload, its
// baseline, its rows and their targets (declared beside it, in its own file).
//
// A scenario starts on a quiet cluster and leaves one: it creates its own
// namespace and deletes it at the end, starts fresh measured processes
// (s.startController) so that their CPU and peak memory are its own, and
// stops them. To add one, see "Adding a scenario" in bench/README.md.
type scenario struct {
	// name selects the scenario in BENCH_SCENARIOS: one lower-case word.
	name string
	// needs names scenarios whose figures this one compares with (see
	// findings); they run before it even when BENCH_SCENARIOS leaves them out.
	needs []string
	// heartbeat is how the nodes heartbeat while it runs, given the run's
	// parameters; nil means the cluster's default, status every 10-15 s. A
	// scenario that waits for heartbeats shortens them (500 nodes' status
	// writes every 2 s would load the API server the other scenarios
	// measure), one about watching the fleet at rest sends node Leases.
	heartbeat func(params) localcluster.Heartbeat
	// clusterFree: it measures without the cluster (in a child process of
	// its own); a run of such scenarios alone creates none.
	clusterFree bool
	// run measures and returns the scenario's table. It may read the
	// findings of the scenarios it needs and write its own for later ones.
	run func(ctx context.Context, s *session, found *findings) (table, error)
	// onlyWhenNamed: the scenario runs only when BENCH_SCENARIOS names it
	// (it measures something else than the cluster, for long).
	onlyWhenNamed bool
	// pullDelays, when set, says the scenario needs image pulls modelled
	// (localcluster.ImagePulls) and names the images it rolls to with their
	// pull delays. The model changes what every scenario of the run
	// measures, so such a scenario runs only when BENCH_SCENARIOS names it.
	pullDelays func(params) map[string]time.Duration
}

// scenarios are every scenario, in the order they run: a scenario runs
// after those it needs, and those with the same heartbeat run together
// (changing it restarts kwok-controller: see session.setHeartbeat): proof's
// and atrest's node Leases follow the rollout's, which may be Leases too.
var scenarios = []scenario{
	cacheScenario,
	rolloutScenario,
	cutoffScenario,
	preDownloadScenario,
	badTagScenario,
	proofScenario,
	inPlaceScenario,
	atRestScenario,
	requestsScenario,
	recordScenario,
	markingScenario,
	requestedScenario,
	nodeAPIScenario,
	identityScenario,
	upgradeScenario,
	persistenceScenario,
	watchersScenario,
}

// findings carry figures from one scenario to a later one that compares with
// them; each field says who writes it and who reads it.
type findings struct {
	// rolloutWall is the median wall time of ota-controller's rollouts on
	// all-Ready nodes: written by rollout, the baseline of cutoff.
	rolloutWall time.Duration
}

// heartbeatIn is how the nodes heartbeat while sc runs with the run's
// parameters p.
func (sc scenario) heartbeatIn(p params) localcluster.Heartbeat {
	if sc.heartbeat == nil {
		return localcluster.Heartbeat{}
	}
	return sc.heartbeat(p)
}

// selectScenarios returns the scenarios named (all but those on modelled
// image pulls and those run only when named, when names is empty), with the
// scenarios they need, in run order.
func selectScenarios(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return slices.DeleteFunc(slices.Clone(scenarios), func(sc scenario) bool { return sc.pullDelays != nil || sc.onlyWhenNamed }), nil
	}
	byName := map[string]scenario{}
	for _, sc := range scenarios {
		byName[sc.name] = sc
	}
	want := map[string]bool{}
	var add func(name string) error
	add = func(name string) error {
		sc, ok := byName[name]
		if !ok {
			return fmt.Errorf("BENCH_SCENARIOS: no scenario %q; the scenarios are %s", name, strings.Join(scenarioNames(scenarios), ", "))
		}
		if want[name] {
			return nil
		}
		want[name] = true
		for _, n := range sc.needs {
			if err := add(n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(slices.Clone(scenarios), func(sc scenario) bool { return !want[sc.name] }), nil
}

// scenarioNames lists the scenarios' names.
func scenarioNames(scs []scenario) []string {
	return pick(scs, func(sc scenario) string { return sc.name })
}

// imagePullsFor is how the run's cluster models image pulls: as
// BENCH_PULL_DELAY says (p.imagePulls), and, when a selected scenario needs
// them, at least with no delay, with the delays of that scenario's images.
func imagePullsFor(p params, selected []scenario) *localcluster.ImagePulls {
	pulls := p.imagePulls
	for _, sc := range selected {
		if sc.pullDelays == nil {
			continue
		}
		if pulls == nil {
			pulls = &localcluster.ImagePulls{}
		} else if pulls == p.imagePulls {
			clone := *pulls
			pulls = &clone
		}
		for image, d := range sc.pullDelays(p) {
			if pulls.Delays == nil {
				pulls.Delays = map[string]time.Duration{}
			}
			pulls.Delays[image] = d
		}
	}
	return pulls
}
