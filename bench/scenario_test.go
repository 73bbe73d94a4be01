package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

func TestScenariosHaveDistinctNamesAndNeedOnlyEarlierOnes(t *testing.T) {
	word := regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	seen := map[string]bool{}
	for _, sc := range scenarios {
		if !word.MatchString(sc.name) {
			t.Errorf("scenario name %q: want one lower-case word", sc.name)
		}
		if seen[sc.name] {
			t.Errorf("two scenarios are named %q", sc.name)
		}
		for _, need := range sc.needs {
			if !seen[need] {
				t.Errorf("scenario %s needs %q, which does not run before it", sc.name, need)
			}
		}
		if sc.run == nil {
			t.Errorf("scenario %s has no run", sc.name)
		}
		seen[sc.name] = true
	}
}

func TestSelectScenarios(t *testing.T) {
	var all []string
	for _, sc := range scenarios {
		if sc.pullDelays == nil && !sc.onlyWhenNamed {
			all = append(all, sc.name)
		}
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  []string
	}{
		{"none named runs all but those on modelled pulls and those run only when named", nil, all},
		{"those on modelled pulls when named", []string{"badtag", "predownload"}, []string{"predownload", "badtag"}},
		{"the record's when named", []string{"record"}, []string{"record"}},
		{"a scenario brings what it needs, first", []string{"cutoff"}, []string{"rollout", "cutoff"}},
		{"run order, not the order named", []string{"upgrade", "marking"}, []string{"marking", "upgrade"}},
		{"named twice runs once", []string{"nodeapi", "nodeapi"}, []string{"nodeapi"}},
		{"proof alone", []string{"proof"}, []string{"proof"}},
	} {
		got, err := selectScenarios(tc.names)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if names := scenarioNames(got); !slices.Equal(names, tc.want) {
			t.Errorf("%s: selectScenarios(%q) runs %q, want %q", tc.name, tc.names, names, tc.want)
		}
	}
}

// TestImagePullsForScenarios: a scenario on modelled pulls has the run's
// cluster model them (with no delay unless BENCH_PULL_DELAY says one) with
// its images' delays; without one, BENCH_PULL_DELAY alone decides.
func TestImagePullsForScenarios(t *testing.T) {
	p := params{pairs: 2}
	if got := imagePullsFor(p, scenarios[:1]); got != nil {
		t.Errorf("rollout alone, no BENCH_PULL_DELAY: got %+v, want no model", got)
	}
	got := imagePullsFor(p, []scenario{rolloutScenario, preDownloadScenario})
	if got == nil || got.Delay != 0 || got.Delays[pullImage(pullVariants[2], 2)] != slowPull || got.Delays[pullImage(pullVariants[0], 1)] != 0 {
		t.Errorf("predownload: got %+v, want no delay but its images' (%s for the slow ones)", got, slowPull)
	}
	p.imagePulls = &localcluster.ImagePulls{Delay: 5 * time.Second}
	got = imagePullsFor(p, []scenario{badTagScenario, preDownloadScenario})
	if got == nil || got.Delay != 5*time.Second || len(got.Delays) != 2*len(pullVariants) || p.imagePulls.Delays != nil {
		t.Errorf("BENCH_PULL_DELAY=5s: got %+v, want 5 s and the scenario's images' delays, BENCH_PULL_DELAY's own left as it was", got)
	}
}

func TestSelectScenariosRefusesAnUnknownName(t *testing.T) {
	_, err := selectScenarios([]string{"rollout", "rollouts"})
	if err == nil || !strings.Contains(err.Error(), `"rollouts"`) || !strings.Contains(err.Error(), "cutoff") {
		t.Errorf("got %v, want an error naming %q and listing the scenarios", err, "rollouts")
	}
}

func TestLoadParams(t *testing.T) {
	t.Setenv("BENCH_NODES", "1000")
	t.Setenv("BENCH_SCENARIOS", " rollout, ,nodeapi ")
	p, err := loadParams()
	if err != nil {
		t.Fatal(err)
	}
	if p.nodes != 1000 || p.budget() != 100 || p.scale(1) != 2 {
		t.Errorf("BENCH_NODES=1000: got %d nodes, budget %d, scale(1) %v; want 1000, 100, 2", p.nodes, p.budget(), p.scale(1))
	}
	if want := []string{"rollout", "nodeapi"}; !slices.Equal(p.scenarios, want) {
		t.Errorf("BENCH_SCENARIOS: got %q, want %q", p.scenarios, want)
	}
	if p.pairs != 3 || p.upgrades != 20 || p.loadTime.Seconds() != 5 {
		t.Errorf("defaults: got %d pairs, %d upgrades, %v per level; want 3, 20, 5s", p.pairs, p.upgrades, p.loadTime)
	}
}

func TestLoadParamsRefusesTooFewNodes(t *testing.T) {
	t.Setenv("BENCH_NODES", "9")
	if _, err := loadParams(); err == nil || !strings.Contains(err.Error(), "BENCH_NODES") {
		t.Errorf("got %v, want an error naming BENCH_NODES", err)
	}
}

// TestScenariosRunGroupedByHeartbeat: changing the nodes' heartbeat
// restarts kwok-controller, so the scenarios sharing one run together,
// whichever BENCH_HEARTBEAT the rollout scenarios have; a whole run changes
// it at most twice. A cluster-free scenario leaves it as it is.
func TestScenariosRunGroupedByHeartbeat(t *testing.T) {
	for _, rollout := range []string{"", "lease", "5s"} {
		p := params{rolloutHeartbeat: mustHeartbeat(t, rollout)}
		var runs []localcluster.Heartbeat
		for _, sc := range scenarios {
			if sc.clusterFree {
				continue
			}
			if hb := sc.heartbeatIn(p); len(runs) == 0 || runs[len(runs)-1] != hb {
				runs = append(runs, hb)
			}
		}
		for i, hb := range runs {
			if slices.Contains(runs[:i], hb) {
				t.Errorf("BENCH_HEARTBEAT=%q: the scenarios %q come back to %v after leaving it", rollout, scenarioNames(scenarios), hb)
			}
		}
		if len(runs) > 3 {
			t.Errorf("BENCH_HEARTBEAT=%q: %d changes of the heartbeat along %q, want at most 2", rollout, len(runs)-1, scenarioNames(scenarios))
		}
	}
}

func mustHeartbeat(t *testing.T, s string) localcluster.Heartbeat {
	t.Helper()
	hb, err := parseHeartbeat(s)
	if err != nil {
		t.Fatal(err)
	}
	return hb
}

func TestLoadParamsHeartbeatAndAtRest(t *testing.T) {
	for _, tc := range []struct {
		heartbeat, seconds, timed string
		want                      localcluster.Heartbeat
		window                    time.Duration
		wantTimed                 bool
	}{
		{"", "", "", localcluster.Heartbeat{Interval: 2 * time.Second}, time.Minute, false},
		{"lease", "120", "1", localcluster.Heartbeat{Leases: true}, 2 * time.Minute, true},
		{"5s", "10", "0", localcluster.Heartbeat{Interval: 5 * time.Second}, 10 * time.Second, false},
		{"lease", "60", "2", localcluster.Heartbeat{Leases: true}, time.Minute, true},
	} {
		t.Setenv("BENCH_HEARTBEAT", tc.heartbeat)
		t.Setenv("BENCH_ATREST_SECONDS", tc.seconds)
		t.Setenv("BENCH_ATREST_TIMED", tc.timed)
		p, err := loadParams()
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		if p.rolloutHeartbeat != tc.want || p.atRestWindow != tc.window || p.atRestTimed != tc.wantTimed || p.atRestOverdue != (tc.timed == "2") {
			t.Errorf("%+v: got %v, %s, timed %t, overdue %t", tc, p.rolloutHeartbeat, p.atRestWindow, p.atRestTimed, p.atRestOverdue)
		}
	}
	for name, value := range map[string]string{"BENCH_HEARTBEAT": "leases", "BENCH_ATREST_SECONDS": "5", "BENCH_ATREST_TIMED": "3", "BENCH_AGENTS": "2"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			if _, err := loadParams(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: got %v, want an error naming it", name, value, err)
			}
		})
	}
	t.Setenv("BENCH_HEARTBEAT", "500ms")
	if _, err := loadParams(); err == nil {
		t.Errorf("BENCH_HEARTBEAT=500ms: got nil, want an error")
	}
}

func TestResultsFile(t *testing.T) {
	for _, tc := range []struct {
		p    params
		want string
	}{
		{params{nodes: defaultNodes}, "bench/results/latest.md"},
		{params{nodes: 1000}, "bench/results/latest-1000nodes.md"},
		{params{nodes: defaultNodes, atRestTimed: true}, "bench/results/latest-timed.md"},
		{params{nodes: 2000, atRestTimed: true}, "bench/results/latest-2000nodes-timed.md"},
		{params{nodes: defaultNodes, rolloutHeartbeat: localcluster.Heartbeat{Leases: true}}, "bench/results/latest-leases.md"},
		{params{nodes: 2000, rolloutHeartbeat: localcluster.Heartbeat{Leases: true}}, "bench/results/latest-2000nodes-leases.md"},
		{params{nodes: defaultNodes, imagePulls: &localcluster.ImagePulls{Delay: time.Second}}, "bench/results/latest-pulls.md"},
		{params{nodes: 2000, rolloutHeartbeat: localcluster.Heartbeat{Leases: true}, agents: true}, "bench/results/latest-2000nodes-leases-agents.md"},
		{params{nodes: 2000, scenarios: []string{"cache"}}, "bench/results/latest-cache.md"},
		{params{nodes: 2000, scenarios: []string{"cache", "rollout"}}, "bench/results/latest-2000nodes.md"},
	} {
		if got := resultsFile(tc.p); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.p, got, tc.want)
		}
	}
}

// TestLoadParamsPullDelay: BENCH_PULL_DELAY models image pulls with its
// delay, 0s included; unset leaves them out; anything else is refused.
func TestLoadParamsPullDelay(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  *localcluster.ImagePulls
	}{
		{"", nil},
		{"0s", &localcluster.ImagePulls{}},
		{"5s", &localcluster.ImagePulls{Delay: 5 * time.Second}},
	} {
		t.Setenv("BENCH_PULL_DELAY", tc.value)
		p, err := loadParams()
		if err != nil {
			t.Errorf("BENCH_PULL_DELAY=%q: %v", tc.value, err)
			continue
		}
		if (p.imagePulls == nil) != (tc.want == nil) || (p.imagePulls != nil && p.imagePulls.Delay != tc.want.Delay) {
			t.Errorf("BENCH_PULL_DELAY=%q: got %+v, want %+v", tc.value, p.imagePulls, tc.want)
		}
	}
	for _, value := range []string{"5", "-1s"} {
		t.Setenv("BENCH_PULL_DELAY", value)
		if _, err := loadParams(); err == nil || !strings.Contains(err.Error(), "BENCH_PULL_DELAY") {
			t.Errorf("BENCH_PULL_DELAY=%s: got %v, want an error naming it", value, err)
		}
	}
}
