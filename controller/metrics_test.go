package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
)

// gather returns the fixture's metrics as its registry serves them.
func (f *fixture) gather() []*dto.MetricFamily {
	f.t.Helper()
	families, err := f.c.metrics.registerer.(prometheus.Gatherer).Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	return families
}

// seriesOf counts the series of each metric family.
func seriesOf(families []*dto.MetricFamily) map[string]int {
	out := map[string]int{}
	for _, mf := range families {
		out[mf.GetName()] = len(mf.GetMetric())
	}
	return out
}

// fleet is the test DaemonSet over n nodes (n >= 2) in every kind of state
// a rollout shows: node-0 settled on the target, node-1 failed on it
// (crash-looping), node-2 NotReady (skipped), the rest on the old revision,
// with pre-download on.
func fleet(ds *appsv1.DaemonSet, n int) []runtime.Object {
	ready := readyNodes(n)
	if n > 2 {
		ready[2] = corev1.ConditionUnknown
	}
	objs := cluster(ds, ready)
	objs = upgradedNode(objs, "0", corev1.ConditionTrue, 0)
	return upgradedNode(objs, "1", corev1.ConditionTrue, 0, crashLooping)
}

// TestSeriesPerDaemonSetNotPerNode: the same DaemonSets export the same
// series over 2 nodes as over 10, for either strategy, and no label value
// names a node or a pod: the cardinality follows the DaemonSets, never the
// fleet.
func TestSeriesPerDaemonSetNotPerNode(t *testing.T) {
	for _, strategy := range []string{"AdvancedRollingUpdate", "OTA"} {
		t.Run(strategy, func(t *testing.T) {
			series := map[int]map[string]int{}
			for _, nodes := range []int{2, 10} {
				ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, strategy),
					withAnnotation(rollout.MaxUnavailableAnnotation, "1"), withAnnotation(rollout.MaxFailedAnnotation, "5"),
					withAnnotation(rollout.PreDownloadAnnotation, "true"))
				f := newFixture(t, fleet(ds, nodes)...)
				for range 3 {
					f.sync()
					f.drainQueue()
				}
				families := f.gather()
				series[nodes] = seriesOf(families)
				for _, mf := range families {
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							if strings.HasPrefix(l.GetValue(), "node-") || strings.HasPrefix(l.GetValue(), "pod-") {
								t.Errorf("%s{%s=%q}: a label names a node or a pod", mf.GetName(), l.GetName(), l.GetValue())
							}
						}
					}
				}
			}
			for _, name := range []string{"edgeota_controller_rollout_nodes", "edgeota_controller_rollout_halt_reason",
				"edgeota_controller_rollout_pulls", "edgeota_controller_proof_wait_seconds"} {
				if series[10][name] == 0 {
					t.Errorf("got no series of %s: the test would prove nothing", name)
				}
			}
			for name, n := range series[10] {
				if series[2][name] != n {
					t.Errorf("%s: got %d series over 10 nodes, %d over 2: want the same", name, n, series[2][name])
				}
			}
			for name := range series[2] {
				if _, ok := series[10][name]; !ok {
					t.Errorf("%s: series over 2 nodes, none over 10", name)
				}
			}
		})
	}
}

// TestRolloutMetricsFollowStatus: every figure of the rollout status is
// exported, the halt's reason as the one label of its enum at 1, the target
// revision as a value.
func TestRolloutMetricsFollowStatus(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "agent"}}
	at := &metav1.Time{Time: time.Now()}
	s := rollout.Status{Revision: 7, Hash: "abc", Total: 20, Updated: 3, InFlight: 2, Skipped: 1,
		Failed: rollout.FailedNodes{Count: 3}, HeldBack: 4, Paused: true, Halted: true,
		Held: &rollout.TimedNodes{Count: 1, At: at}, WaitingForWindow: &rollout.TimedNodes{Count: 2, At: at},
		Offered: &rollout.TimedNodes{Count: 5}, SettledUnavailable: &rollout.NodeList{Count: 1},
		Pulls: &rollout.Pulls{InFlight: 1, Done: 2, Failed: 2, Waiting: 3, TimedOut: 1}}
	m.rollout(ds, &s)
	gauge := func(v *prometheus.GaugeVec, labels ...string) float64 {
		return testutil.ToFloat64(v.WithLabelValues(append([]string{"fleet", "agent"}, labels...)...))
	}
	for state, want := range map[string]float64{"updated": 3, "in_flight": 2, "skipped": 1, "failed": 3, "settled_unavailable": 1,
		"held_back": 4, "held": 1, "waiting_for_window": 2, "offered": 5} {
		if got := gauge(m.rolloutNodes, state); got != want {
			t.Errorf("rollout_nodes{state=%q}: got %v, want %v", state, got, want)
		}
	}
	for state, want := range map[string]float64{"in_flight": 1, "done": 2, "failed": 2, "waiting": 3, "timed_out": 1} {
		if got := gauge(m.rolloutPulls, state); got != want {
			t.Errorf("rollout_pulls{state=%q}: got %v, want %v", state, got, want)
		}
	}
	for _, r := range rollout.HaltReasons {
		want := 0.0
		if r == rollout.HaltNodesFailed {
			want = 1 // 3 failed, 2 of them pulls: one upgrade failed
		}
		if got := gauge(m.rolloutHaltReason, string(r)); got != want {
			t.Errorf("rollout_halt_reason{reason=%q}: got %v, want %v", r, got, want)
		}
	}
	for name, c := range map[string]struct {
		v    *prometheus.GaugeVec
		want float64
	}{"halted": {m.rolloutHalted, 1}, "paused": {m.rolloutPaused, 1}, "target_revision": {m.rolloutRevision, 7}, "desired_nodes": {m.rolloutDesired, 20}} {
		if got := gauge(c.v); got != c.want {
			t.Errorf("rollout_%s: got %v, want %v", name, got, c.want)
		}
	}

	// Resumed, with a new revision and no pull any more: zeros, not the
	// last values.
	m.rollout(ds, &rollout.Status{Revision: 8, Total: 20})
	for _, state := range pullStates {
		if got := gauge(m.rolloutPulls, state); got != 0 {
			t.Errorf("rollout_pulls{state=%q} after the pulls ended: got %v, want 0", state, got)
		}
	}
	for _, r := range rollout.HaltReasons {
		if got := gauge(m.rolloutHaltReason, string(r)); got != 0 {
			t.Errorf("rollout_halt_reason{reason=%q} once resumed: got %v, want 0", r, got)
		}
	}
	if got := gauge(m.rolloutRevision); got != 8 {
		t.Errorf("rollout_target_revision: got %v, want 8", got)
	}
}

// TestForgetRolloutDropsEverySeries: a DaemonSet deleted (or opted out)
// leaves no series behind, another's stay.
func TestForgetRolloutDropsEverySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, name := range []string{"gone", "kept"} {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		m.rollout(ds, &rollout.Status{Revision: 1, Total: 3, Halted: true, Failed: rollout.FailedNodes{Count: 1}})
		m.proven(ds, decision.ProofAnswer, time.Second, true)
		m.challengeWritten("fleet/" + name)
		m.awaitingProof(ds, 2)
	}
	m.forgetRollout("fleet", "gone")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, mf := range families {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() != "daemonset" {
					continue
				}
				if l.GetValue() == "gone" {
					t.Errorf("%s still has a series of the forgotten DaemonSet", mf.GetName())
				}
				kept++
			}
		}
	}
	if kept == 0 {
		t.Errorf("got no series of the other DaemonSet, want them kept")
	}
}

// TestRegistryNamesUnobservedMetrics: the registry names every metric the
// binary serves, those without a series yet included (a labelled metric
// nothing observed); Gather alone would miss them.
func TestRegistryNamesUnobservedMetrics(t *testing.T) {
	reg, _ := NewRegistry()
	names, err := reg.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]bool{}
	for _, mf := range families {
		gathered[mf.GetName()] = true
	}
	for _, want := range []string{"edgeota_controller_rollout_halt_reason", "edgeota_controller_api_requests_total",
		"edgeota_controller_proof_wait_seconds", "edgeota_controller_leader", "edgeota_controller_queue_depth",
		"go_goroutines", "process_cpu_seconds_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("got names %v, want %s among them", names, want)
		}
	}
	if gathered["edgeota_controller_rollout_halt_reason"] {
		t.Errorf("edgeota_controller_rollout_halt_reason has series before any rollout: the test proves nothing")
	}
	if !slices.IsSorted(names) {
		t.Errorf("got names %v, want them sorted", names)
	}
}

// TestLeaderAndAPIRequests: a standby reports 0 until it leads; the hook
// client-go calls counts requests by method and code.
func TestLeaderAndAPIRequests(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	if got := testutil.ToFloat64(m.leader); got != 0 {
		t.Errorf("leader before the election: got %v, want 0", got)
	}
	m.SetLeader(true)
	if got := testutil.ToFloat64(m.leader); got != 1 {
		t.Errorf("leader once leading: got %v, want 1", got)
	}
	hook := m.APIRequests()
	for range 3 {
		hook.Increment(context.Background(), "200", "GET", "127.0.0.1:6443")
	}
	hook.Increment(context.Background(), "<error>", "PATCH", "127.0.0.1:6443")
	for labels, want := range map[[2]string]float64{{"GET", "200"}: 3, {"PATCH", "<error>"}: 1} {
		if got := testutil.ToFloat64(m.apiRequests.WithLabelValues(labels[0], labels[1])); got != want {
			t.Errorf("api_requests_total%v: got %v, want %v", labels, got, want)
		}
	}
	if got := fmt.Sprint(testutil.CollectAndCount(m.apiRequests)); got != "2" {
		t.Errorf("got %s series of api_requests_total, want 2: the host is no label", got)
	}
}
