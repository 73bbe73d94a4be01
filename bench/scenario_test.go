package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
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
	all := scenarioNames(scenarios)
	for _, tc := range []struct {
		name  string
		names []string
		want  []string
	}{
		{"none named runs all", nil, all},
		{"a scenario brings what it needs, first", []string{"cutoff"}, []string{"rollout", "cutoff"}},
		{"run order, not the order named", []string{"upgrade", "marking"}, []string{"marking", "upgrade"}},
		{"named twice runs once", []string{"nodeapi", "nodeapi"}, []string{"nodeapi"}},
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

// TestScenariosChangeTheNodeHeartbeatAtMostOnce: changing the interval
// restarts kwok-controller, so the scenarios run grouped by it.
func TestScenariosChangeTheNodeHeartbeatAtMostOnce(t *testing.T) {
	changes := 0
	for i := 1; i < len(scenarios); i++ {
		if scenarios[i].nodeHeartbeat != scenarios[i-1].nodeHeartbeat {
			changes++
		}
	}
	if changes > 1 {
		t.Errorf("got %d changes of the node heartbeat along %q, want at most 1", changes, scenarioNames(scenarios))
	}
}
