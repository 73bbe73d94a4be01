// Package monitoring checks the monitoring objects of charts/edgeota as
// helm renders them (bin/helm, or $HELM): off by default, they add nothing
// to today's objects; on, they add exactly a Service, a ServiceMonitor, a
// PrometheusRule and the dashboard's ConfigMap, each decoding strictly into
// its Go type (the Prometheus Operator's own for its kinds: no misspelt or
// misplaced field passes), the ServiceMonitor scraping the Service, the
// rules being monitoring/alerts.yaml with each `for` from the values, and
// every runbook link landing on a section of docs/operations/runbooks.md.
// The local cluster has no Prometheus Operator: this is the objects' check.
package monitoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The checkout's files the tests read.
var (
	root      = filepath.Join("..", "..")
	chart     = filepath.Join(root, "charts", "edgeota")
	alerts    = filepath.Join(chart, "monitoring", "alerts.yaml")
	dashboard = filepath.Join(chart, "monitoring", "dashboard.json")
	runbooks  = filepath.Join(root, "docs", "operations", "runbooks.md")
)

const (
	namespace = "edgeota-system"
	// runbookBase is where every alert's runbook_url points, but for the
	// section's anchor.
	runbookBase = "https://github.com/edgeota/edgeota/blob/main/docs/operations/runbooks.md#"
	// maxDashboard is what a ConfigMap applied with client-side kubectl
	// apply may hold (its copy in an annotation).
	maxDashboard = 256 << 10
)

// allOn turns every monitoring object on.
var allOn = []string{"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
	"--set", "monitoring.dashboard.enabled=true"}

// helm runs helm template of the chart with args, failing the test on error.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helmErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmErr runs helm template of the chart with args.
func helmErr(args ...string) ([]byte, error) {
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(root, "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no helm at %s (make tools builds bin/helm; HELM names another): %w", bin, err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"template", "edgeota", chart, "--namespace", namespace}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// object is one rendered manifest: its identity, as YAML, and as a generic
// map for comparisons.
type object struct {
	key  string // kind/namespace/name
	yaml []byte
	body map[string]any
}

// objects splits a rendered manifest into its objects, keyed.
func objects(t *testing.T, manifest []byte) map[string]object {
	t.Helper()
	out := map[string]object{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := yaml.Unmarshal(doc, &body); err != nil {
			t.Fatalf("decoding %s: %v", doc, err)
		}
		if body == nil {
			continue // a comment or an empty document
		}
		var meta struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		key := meta.Kind + "/" + meta.Metadata.Namespace + "/" + meta.Metadata.Name
		if _, dup := out[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		out[key] = object{key: key, yaml: doc, body: body}
	}
}

// The monitoring objects, by key.
const (
	serviceKey        = "Service/" + namespace + "/ota-controller"
	serviceMonitorKey = "ServiceMonitor/" + namespace + "/ota-controller"
	ruleKey           = "PrometheusRule/" + namespace + "/edgeota"
	dashboardKey      = "ConfigMap/" + namespace + "/edgeota-dashboard"
)

// TestOffRendersTodaysObjects: with the monitoring values at their defaults,
// or explicitly off, the chart renders deploy/edgeota.yaml's objects and no
// other; with them on, it adds the four monitoring objects and changes
// nothing else.
func TestOffRendersTodaysObjects(t *testing.T) {
	deployed, err := os.ReadFile(filepath.Join(root, "deploy", "edgeota.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	today := objects(t, deployed)
	if len(today) == 0 {
		t.Fatal("deploy/edgeota.yaml holds no object")
	}
	create := []string{"--set", "namespace.create=true"} // as deploy/ is rendered
	off := []string{"--set", "monitoring.serviceMonitor.enabled=false", "--set", "monitoring.prometheusRule.enabled=false",
		"--set", "monitoring.dashboard.enabled=false"}
	for name, args := range map[string][]string{"defaults": create, "explicitly off": append(create, off...)} {
		if diff := diffObjects(today, objects(t, helm(t, args...))); diff != "" {
			t.Errorf("%s: the chart renders other objects than deploy/edgeota.yaml:\n%s", name, diff)
		}
	}

	on := objects(t, helm(t, append(create, allOn...)...))
	var added []string
	for key := range on {
		if _, ok := today[key]; !ok {
			added = append(added, key)
		}
	}
	slices.Sort(added)
	if want := []string{dashboardKey, ruleKey, serviceKey, serviceMonitorKey}; !slices.Equal(added, want) {
		t.Errorf("monitoring on adds %v, want %v", added, want)
	}
	for _, key := range added {
		delete(on, key)
	}
	if diff := diffObjects(today, on); diff != "" {
		t.Errorf("monitoring on changes today's objects:\n%s", diff)
	}
}

// diffObjects describes how two sets of objects differ; "" when they do not.
func diffObjects(want, got map[string]object) string {
	var b strings.Builder
	for key, w := range want {
		g, ok := got[key]
		switch {
		case !ok:
			fmt.Fprintf(&b, "missing %s\n", key)
		case !reflect.DeepEqual(w.body, g.body):
			fmt.Fprintf(&b, "%s differs:\n--- want\n%s\n--- got\n%s\n", key, w.yaml, g.yaml)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			fmt.Fprintf(&b, "extra %s\n", key)
		}
	}
	return b.String()
}

// strict decodes an object's YAML into out, refusing any field out does not
// have.
func strict(t *testing.T, o object, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.yaml, out); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v\n%s", o.key, out, err, o.yaml)
	}
}

// TestServiceMonitorScrapesTheControllers: the ServiceMonitor, the Service
// and the Deployment decode strictly, and the ServiceMonitor selects the
// Service in its namespace by the port the Service serves, which forwards
// to the controller pods' metrics port; labels are honoured, and the extra
// labels land on the ServiceMonitor.
func TestServiceMonitorScrapesTheControllers(t *testing.T) {
	objs := objects(t, helm(t, append(allOn, "--set", "monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
		"--set", "monitoring.serviceMonitor.interval=30s")...))
	var sm monitoringv1.ServiceMonitor
	var svc corev1.Service
	var deploy appsv1.Deployment
	strict(t, objs[serviceMonitorKey], &sm)
	strict(t, objs[serviceKey], &svc)
	strict(t, objs["Deployment/"+namespace+"/ota-controller"], &deploy)

	if sm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("got ServiceMonitor labels %v, want the extra release label", sm.Labels)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if selector.Empty() || !selector.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %s does not select the Service (labels %v)", selector, svc.Labels)
	}
	ns := sm.Spec.NamespaceSelector
	selects := ns.Any || slices.Contains(ns.MatchNames, svc.Namespace) || len(ns.MatchNames) == 0 && sm.Namespace == svc.Namespace
	if !selects {
		t.Errorf("ServiceMonitor in %s selects namespaces %+v, not the Service's %s", sm.Namespace, ns, svc.Namespace)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("got %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == ep.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		t.Fatalf("endpoint port %q is no port of the Service %+v", ep.Port, svc.Spec.Ports)
	}
	if !ep.HonorLabels {
		t.Errorf("honorLabels is off: the rollout series' namespace label would become exported_namespace")
	}
	if ep.Interval != "30s" || ep.Path != "/metrics" {
		t.Errorf("got interval %q and path %q, want 30s and /metrics", ep.Interval, ep.Path)
	}

	pods := labels.SelectorFromSet(svc.Spec.Selector)
	if len(svc.Spec.Selector) == 0 || !pods.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the controller's pods (labels %v)", svc.Spec.Selector, deploy.Spec.Template.Labels)
	}
	found := false
	for _, c := range deploy.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port.TargetPort.String() || p.ContainerPort == port.TargetPort.IntVal {
				found = true
				if !slices.ContainsFunc(c.Args, func(a string) bool { return a == fmt.Sprintf("--metrics-bind-address=:%d", p.ContainerPort) }) {
					t.Errorf("container port %s (%d) is not where the controller serves its metrics (args %v)", p.Name, p.ContainerPort, c.Args)
				}
			}
		}
	}
	if !found {
		t.Errorf("the Service's target port %s is no port of the controller's containers", port.TargetPort.String())
	}
}

// rulesFile is monitoring/alerts.yaml, strictly decoded.
func rulesFile(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	data, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		t.Fatalf("%s does not decode strictly into a PrometheusRule's spec: %v", alerts, err)
	}
	return spec
}

// renderedRules is the chart's PrometheusRule rendered with args, strictly
// decoded.
func renderedRules(t *testing.T, args ...string) monitoringv1.PrometheusRule {
	t.Helper()
	var rule monitoringv1.PrometheusRule
	strict(t, objects(t, helm(t, append(allOn, args...)...))[ruleKey], &rule)
	return rule
}

// TestPrometheusRuleIsTheFile: the PrometheusRule rendered with the default
// values holds monitoring/alerts.yaml exactly (the values' `for` are the
// file's, which promtool tests), its {{ $labels }} untouched by Helm; a
// `for` set in the values replaces that alert's alone; extra labels land.
func TestPrometheusRuleIsTheFile(t *testing.T) {
	file := rulesFile(t)
	rule := renderedRules(t, "--set", "monitoring.prometheusRule.labels.release=kube-prometheus-stack")
	if !reflect.DeepEqual(rule.Spec, file) {
		got, _ := yaml.Marshal(rule.Spec)
		t.Errorf("the PrometheusRule rendered with the default values differs from %s:\n%s", alerts, got)
	}
	if rule.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("got PrometheusRule labels %v, want the extra release label", rule.Labels)
	}

	changed := renderedRules(t, "--set", "monitoring.prometheusRule.for.EdgeotaRolloutStalled=2h")
	n := 0
	for g, group := range changed.Spec.Groups {
		for r, got := range group.Rules {
			want := file.Groups[g].Rules[r]
			if got.Alert == "EdgeotaRolloutStalled" {
				n++
				if got.For == nil || *got.For != "2h" {
					t.Errorf("EdgeotaRolloutStalled: got for %v, want 2h", got.For)
				}
				got.For = want.For
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s changed with another alert's for: got %+v, want %+v", want.Alert, got, want)
			}
		}
	}
	if n != 1 {
		t.Errorf("got %d EdgeotaRolloutStalled rules, want 1", n)
	}
}

// TestBadForValuesRefused: a `for` that is no Prometheus duration, or names
// no alert, is refused by the chart's schema before anything renders.
func TestBadForValuesRefused(t *testing.T) {
	for _, set := range []string{"monitoring.prometheusRule.for.EdgeotaRolloutHalted=soon", "monitoring.prometheusRule.for.EdgeotaRolloutHalts=5m"} {
		if _, err := helmErr(append(allOn, "--set", set)...); err == nil {
			t.Errorf("--set %s: rendered, want refused", set)
		}
	}
}

// TestAlertsSayWhatToDo: every rule is an alert with a severity, a summary,
// a description naming the DaemonSet when it is about one, and a runbook
// URL whose anchor is a section of docs/operations/runbooks.md; the values
// set a `for` for each alert and no other, and every `for` is there.
func TestAlertsSayWhatToDo(t *testing.T) {
	doc, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[slug(m[1])] = true
	}
	var names []string
	for _, group := range rulesFile(t).Groups {
		for _, r := range group.Rules {
			names = append(names, r.Alert)
			if r.Alert == "" || r.For == nil {
				t.Errorf("rule %+v: want an alert with a for", r)
				continue
			}
			if !slices.Contains([]string{"critical", "warning"}, r.Labels["severity"]) {
				t.Errorf("%s: got severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			if strings.Contains(r.Expr.String(), "daemonset") && !strings.Contains(r.Annotations["description"], "$labels.daemonset") {
				t.Errorf("%s: its description does not name the DaemonSet", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not %s<a section of %s>", r.Alert, r.Annotations["runbook_url"], runbookBase, runbooks)
			}
			if anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook anchor %q, want the alert's own section", r.Alert, anchor)
			}
		}
	}
	var values struct {
		Monitoring struct {
			PrometheusRule struct {
				For map[string]string `json:"for"`
			} `json:"prometheusRule"`
		} `json:"monitoring"`
	}
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range values.Monitoring.PrometheusRule.For {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(names)
	if !slices.Equal(keys, names) {
		t.Errorf("values.yaml sets a for for %v, want one for each alert %v", keys, names)
	}
}

// slug is a Markdown heading's anchor as GitHub makes it: lower case,
// punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDashboardConfigMap: the dashboard's ConfigMap holds
// monitoring/dashboard.json byte for byte, under 256 KiB, labelled for
// Grafana's sidecar, in the namespace the values choose, with the extra
// labels and annotations; the sidecar's label value may be changed.
func TestDashboardConfigMap(t *testing.T) {
	file, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	if len(file) >= maxDashboard {
		t.Errorf("%s is %d bytes, want under %d", dashboard, len(file), maxDashboard)
	}
	if !json.Valid(file) {
		t.Errorf("%s is not JSON", dashboard)
	}
	objs := objects(t, helm(t, append(allOn, "--set", "monitoring.dashboard.namespace=monitoring",
		"--set", "monitoring.dashboard.labels.team=edge", "--set", "monitoring.dashboard.annotations.grafana_folder=Edge")...))
	key := "ConfigMap/monitoring/edgeota-dashboard"
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s rendered", key)
	}
	var cm corev1.ConfigMap
	strict(t, o, &cm)
	if got := cm.Data["edgeota.json"]; got != string(file) {
		t.Errorf("the ConfigMap's edgeota.json (%d bytes) is not %s (%d bytes)", len(got), dashboard, len(file))
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "edge" || cm.Annotations["grafana_folder"] != "Edge" {
		t.Errorf("got labels %v and annotations %v, want grafana_dashboard 1, team edge, grafana_folder Edge", cm.Labels, cm.Annotations)
	}

	objs = objects(t, helm(t, append(allOn, "--set", "monitoring.dashboard.labels.grafana_dashboard=edgeota")...))
	strict(t, objs[dashboardKey], &cm)
	if cm.Labels["grafana_dashboard"] != "edgeota" {
		t.Errorf("got grafana_dashboard %q, want the value set", cm.Labels["grafana_dashboard"])
	}
}
