//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/rollout"
)

// The test's Prometheus: a scrape and an evaluation every second, and a
// short `for` for the halt alert (the chart's value, set as a user would).
const (
	scrapeInterval = time.Second
	evalInterval   = time.Second
	haltFor        = 5 * time.Second
	haltAlert      = "EdgeotaRolloutHalted"
)

// scrapeConfig is the Prometheus configuration the Prometheus Operator would
// generate from the chart's ServiceMonitor, scraping each replica with the
// target labels the Operator adds (namespace, pod, service, endpoint,
// container; job from the Service's name) and honouring the controller's
// own labels, as the ServiceMonitor's honorLabels says.
func scrapeConfig(replicas ...*controllerProcess) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global:
  scrape_interval: %s
  scrape_timeout: %s
  evaluation_interval: %s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: ota-controller
    honor_labels: true
    static_configs:
`, scrapeInterval, scrapeInterval, evalInterval)
	for _, r := range replicas {
		fmt.Fprintf(&b, `      - targets: [%q]
        labels: {namespace: %s, pod: %s, service: ota-controller, endpoint: metrics, container: ota-controller}
`, r.metricsAddr, systemNamespace, r.Name)
	}
	return b.String()
}

// monitoringQuery is one PromQL query the chart ships: where it is, and the
// query with Grafana's variables substituted.
type monitoringQuery struct {
	where, expr string
}

// grafanaVariables are what the test's Grafana would substitute: the
// namespace and DaemonSet picked (one each: a regex matching it alone) and
// the rate interval.
func (e *env) grafanaVariables() map[string]string {
	return map[string]string{
		"namespace":       regexp.QuoteMeta(e.ns),
		"daemonset":       regexp.QuoteMeta(dsName),
		"__rate_interval": "1m",
	}
}

// substitute replaces Grafana's $name and ${name} with their values; an
// unknown variable is an error.
func substitute(expr string, vars map[string]string) (string, error) {
	var unknown []string
	out := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`).ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		value, ok := vars[name]
		if !ok {
			unknown = append(unknown, v)
		}
		return value
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v in %s", unknown, expr)
	}
	return out, nil
}

// monitoringQueries lists every query of the dashboard the chart ships (its
// panels' and its variables' label_values selectors) and of the rules,
// Grafana's variables substituted.
func (e *env) monitoringQueries(rules []byte) []monitoringQuery {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.root, "charts", "edgeota", "monitoring", "dashboard.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		e.t.Fatal(err)
	}
	var raw []monitoringQuery
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			raw = append(raw, monitoringQuery{fmt.Sprintf("panel %q, query %s", p.Title, q.RefID), q.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_]+\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			e.t.Fatalf("variable %s: query %q is no label_values(selector, label)", v.Name, q)
		}
		raw = append(raw, monitoringQuery{"variable " + v.Name, m[1]})
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(rules, &file); err != nil {
		e.t.Fatal(err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			raw = append(raw, monitoringQuery{"alert " + r.Alert, r.Expr})
		}
	}
	if len(raw) < 20 {
		e.t.Fatalf("got %d queries from the dashboard and the rules, want all of them", len(raw))
	}
	vars := e.grafanaVariables()
	for i := range raw {
		expr, err := substitute(raw[i].expr, vars)
		if err != nil {
			e.t.Fatalf("%s: %v", raw[i].where, err)
		}
		raw[i].expr = expr
	}
	return raw
}

// unregistered returns the metric names of names the registry does not
// register; a histogram's series (_bucket, _sum, _count) count as its own.
func unregistered(names []string, registered []string) []string {
	var out []string
	for _, n := range names {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(registered, b) {
				base = b
			}
		}
		if !slices.Contains(registered, base) {
			out = append(out, n)
		}
	}
	return out
}

// TestMonitoringAgainstPrometheus: a real Prometheus, configured as the
// Prometheus Operator would configure it from the chart's ServiceMonitor,
// with the chart's rules (the halt alert's `for` set to 5 s through the
// chart's value), scrapes two controller replicas while a rollout goes
// through its waves and a broken version halts. Then:
//   - every query of the dashboard and the rules parses, and names only
//     metrics the controller registers (read from its registry, so that a
//     metric without a series yet counts);
//   - every vector selector of them matches at least one series, once
//     Grafana's variables are substituted;
//   - the halt alert fires, with its reason, within `for` + a scrape
//     interval + two evaluation intervals of the RolloutHalted event;
//   - Prometheus saw the waves (nodes in flight, never over the budget);
//     only the leader exported rollout series, under the DaemonSet's
//     namespace; the leader gauge says which replica leads.
//
// It runs alone (e2e/README.md): it bounds how long the alert takes to
// fire, which load on the machine could bend.
func TestMonitoringAgainstPrometheus(t *testing.T) {
	const nodes, budget = 6, 2
	start := time.Now()
	e := brakeEnv(t, nodes, budget, 0, nil)
	leader, standby := e.waitLeader(
		e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-a", LeaseNamespace: e.ns}),
		e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-b", LeaseNamespace: e.ns}))
	rules := e.chartRules(fmt.Sprintf("monitoring.prometheusRule.for.%s=%s", haltAlert, haltFor))
	prom := e.startPrometheus(scrapeConfig(leader, standby), rules)

	// The queries name only registered metrics: checked first, since it
	// needs no series.
	registry, _ := controller.NewRegistry()
	registered, err := registry.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	if got := unregistered([]string{"edgeota_controller_rollout_nodez", "edgeota_controller_proof_wait_seconds_bucket"}, registered); !slices.Equal(got, []string{"edgeota_controller_rollout_nodez"}) {
		t.Fatalf("unregistered: got %v, want only the misspelt name: the check would prove nothing", got)
	}
	queries := e.monitoringQueries(rules)
	ctx := e.ctx()
	selectors := map[string][]selector{}
	for _, q := range queries {
		sels, err := prom.selectors(ctx, q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		selectors[q.where] = sels
		var names []string
		for _, s := range sels {
			names = append(names, s.metric())
		}
		if bad := unregistered(names, registered); len(bad) > 0 {
			t.Errorf("%s names %v, which the controller does not register: %s", q.where, bad, q.expr)
		}
	}

	// Waves, then a halt.
	e.waitRolloutStatus("the first revision settled", func(s *rollout.Status) bool { return s.Updated == nodes })
	e.setImage(newImage)
	rolled := e.waitRolloutStatus("the second revision settled", func(s *rollout.Status) bool {
		return s.Revision == 2 && s.Updated == nodes && s.InFlight == 0
	})
	events := e.watchEventsOf(rollout.ReasonRolloutHalted)
	firing := prom.watchFiring(t, haltAlert, dsName)
	e.cutOffNodesRunning(cutOffImage)
	e.setImage(cutOffImage)
	halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
	var eventAt, firedAt time.Time
	select {
	case eventAt = <-events:
	case <-time.After(waitTimeout):
		t.Fatalf("no %s event", rollout.ReasonRolloutHalted)
	}
	var fired firingAlert
	select {
	case fired = <-firing:
		firedAt = fired.seen
	case <-time.After(waitTimeout):
		t.Fatalf("%s never fired", haltAlert)
	}
	bound := haltFor + scrapeInterval + 2*evalInterval
	t.Logf("%s fired %s after the %s event (bound %s)", haltAlert, firedAt.Sub(eventAt).Round(time.Millisecond), rollout.ReasonRolloutHalted, bound)
	if d := firedAt.Sub(eventAt); d > bound {
		t.Errorf("%s fired %s after the %s event, want within for + scrape interval + 2 evaluation intervals = %s", haltAlert, d, rollout.ReasonRolloutHalted, bound)
	}
	want := map[string]string{"alertname": haltAlert, "namespace": e.ns, "daemonset": dsName, "reason": string(halted.HaltReason()), "severity": "critical"}
	if !maps.Equal(fired.Labels, want) {
		t.Errorf("got %s labels %v, want %v", haltAlert, fired.Labels, want)
	}
	if !strings.Contains(fired.Annotations["description"], e.ns+"/"+dsName) {
		t.Errorf("got description %q, want it to name %s/%s", fired.Annotations["description"], e.ns, dsName)
	}

	// Every selector matches a series, now that the rollout went through.
	ctx = e.ctx()
	checked := 0
	for _, q := range queries {
		for _, s := range selectors[q.where] {
			checked++
			n, err := prom.series(ctx, s, start)
			if err != nil {
				t.Fatalf("%s: %v", q.where, err)
			}
			if n == 0 {
				t.Errorf("%s: selector %s matches no series (query %s)", q.where, s, q.expr)
			}
		}
	}

	t.Logf("%d queries of the dashboard and the rules, %d vector selectors checked against the series", len(queries), checked)

	// Only the chart's value changed a `for`; the other alerts are quiet.
	loaded, err := prom.rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 6 {
		t.Errorf("got %d alerting rules loaded, want 6", len(loaded))
	}
	for _, r := range loaded {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q", r.Name, r.Health)
		}
		if r.Name == haltAlert && r.Duration != haltFor.Seconds() {
			t.Errorf("%s: for %gs, want %s as set", r.Name, r.Duration, haltFor)
		}
	}
	active, err := prom.alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range active {
		switch a.Labels["alertname"] {
		case "EdgeotaControllerDown", "EdgeotaControllerNoLeader", "EdgeotaRolloutStalled":
			t.Errorf("%s is %s with a leader up and the rollout halted", a.Labels["alertname"], a.State)
		}
	}

	// What Prometheus saw of the rollout and the replicas.
	inFlight, err := prom.query(ctx, fmt.Sprintf(`max_over_time(edgeota_controller_rollout_nodes{namespace=%q, daemonset=%q, state="in_flight"}[10m])`, e.ns, dsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(inFlight) != 1 || inFlight[0].number() < 1 || inFlight[0].number() > budget {
		t.Errorf("got the most nodes in flight %v, want one series between 1 and the budget %d: the waves", inFlight, budget)
	}
	revisions, err := prom.query(ctx, fmt.Sprintf(`edgeota_controller_rollout_target_revision{namespace=%q, daemonset=%q}`, e.ns, dsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(revisions) != 1 || revisions[0].number() != float64(halted.Revision) || halted.Revision <= rolled.Revision {
		t.Errorf("got target revision %v, want one series of %d", revisions, halted.Revision)
	}
	rolloutSeries, err := prom.query(ctx, `edgeota_controller_rollout_nodes`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rolloutSeries {
		if s.Metric["pod"] != leader.Name || s.Metric["namespace"] != e.ns || s.Metric["exported_namespace"] != "" {
			t.Errorf("rollout series %v: want it from the leader %s alone, under the DaemonSet's namespace %s", s.Metric, leader.Name, e.ns)
		}
	}
	leading, err := prom.query(ctx, `edgeota_controller_leader`)
	if err != nil {
		t.Fatal(err)
	}
	byPod := map[string]float64{}
	for _, s := range leading {
		byPod[s.Metric["pod"]] = s.number()
		if s.Metric["namespace"] != systemNamespace {
			t.Errorf("leader series %v: want the target's namespace %s", s.Metric, systemNamespace)
		}
	}
	if want := map[string]float64{leader.Name: 1, standby.Name: 0}; !maps.Equal(byPod, want) {
		t.Errorf("got edgeota_controller_leader %v, want %v", byPod, want)
	}
}

// watchEventsOf sends the time the test sees the DaemonSet's first event
// with the reason, as the API server delivers it (a watch).
func (e *env) watchEventsOf(reason string) <-chan time.Time {
	e.t.Helper()
	w, err := e.cluster.Client.CoreV1().Events(e.ns).Watch(e.t.Context(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "DaemonSet", "involvedObject.name": dsName, "reason": reason}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	seen := make(chan time.Time, 1)
	go func() {
		for ev := range w.ResultChan() {
			if _, ok := ev.Object.(*corev1.Event); ok {
				seen <- time.Now()
				return
			}
		}
	}()
	return seen
}

// firingAlert is an alert and when the test first saw it firing.
type firingAlert struct {
	alert
	seen time.Time
}

// watchFiring polls the alerts every 100 ms and sends the first alert named
// alertname of the DaemonSet once it fires.
func (s *prometheusServer) watchFiring(t *testing.T, alertname, daemonset string) <-chan firingAlert {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	fired := make(chan firingAlert, 1)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			alerts, err := s.alerts(ctx)
			if err != nil {
				continue // a slow answer: the next tick asks again
			}
			for _, a := range alerts {
				if a.Labels["alertname"] == alertname && a.Labels["daemonset"] == daemonset && a.State == "firing" {
					fired <- firingAlert{a, time.Now()}
					return
				}
			}
		}
	}()
	return fired
}
