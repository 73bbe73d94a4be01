//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// prometheusBinary is the real Prometheus (3.16.0) that make tools builds
// from hack/prometheus, without its web UI: its API and rules are what the
// suite needs.
const prometheusBinary = "prometheus"

// prometheusServer is a Prometheus the test runs on a loopback port, with its
// configuration, rules and data in the test's log directory, stopped with the
// test's other processes.
type prometheusServer struct {
	url string
}

// startPrometheus runs bin/prometheus with the configuration (rule_files
// naming rules.yaml, written beside it from rules) and waits until it is
// ready.
func (e *env) startPrometheus(config string, rules []byte) *prometheusServer {
	e.t.Helper()
	if err := e.h.Tools.Check(prometheusBinary); err != nil {
		e.t.Fatal(err)
	}
	dir := filepath.Join(e.logDir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	for name, data := range map[string][]byte{"prometheus.yml": []byte(config), "rules.yaml": rules} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	addr := net.JoinHostPort("127.0.0.1", freePort(e))
	p, err := e.h.Start("prometheus", e.h.Tools.Path(prometheusBinary),
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	if err != nil {
		e.t.Fatal(err)
	}
	s := &prometheusServer{url: "http://" + addr}
	if err := p.WaitReady(e.t.Context(), s.url+"/-/ready", waitTimeout); err != nil {
		e.t.Fatalf("prometheus: %v (log: %s)", err, e.h.LogPath("prometheus"))
	}
	return s
}

// api calls the Prometheus HTTP API at path (under /api/v1/) and decodes the
// data of a successful answer into out.
func (s *prometheusServer) api(ctx context.Context, path string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/"+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("prometheus %s: %d %s", path, resp.StatusCode, body)
	}
	if answer.Status != "success" {
		return fmt.Errorf("prometheus %s %v: %s", path, params, answer.Error)
	}
	return json.Unmarshal(answer.Data, out)
}

// selector is a vector selector of a query, as Prometheus parsed it.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Type  string `json:"type"`
}

// metric is the selector's metric name, "" when it matches by labels only.
func (s selector) metric() string {
	if s.name != "" {
		return s.name
	}
	for _, m := range s.matchers {
		if m.Name == "__name__" && m.Type == "=" {
			return m.Value
		}
	}
	return ""
}

// String is the selector as PromQL, every matcher in braces.
func (s selector) String() string {
	parts := make([]string, len(s.matchers))
	for i, m := range s.matchers {
		parts[i] = m.Name + m.Type + strconv.Quote(m.Value)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// selectors returns every vector selector of query, those under a range
// included, as Prometheus's own parser finds them (/api/v1/parse_query);
// an error if the query does not parse.
func (s *prometheusServer) selectors(ctx context.Context, query string) ([]selector, error) {
	var ast any
	if err := s.api(ctx, "parse_query", url.Values{"query": {query}}, &ast); err != nil {
		return nil, err
	}
	var out []selector
	var walk func(any) error
	walk = func(n any) error {
		switch n := n.(type) {
		case map[string]any:
			if t, _ := n["type"].(string); t == "vectorSelector" || t == "matrixSelector" {
				raw, err := json.Marshal(n["matchers"])
				if err != nil {
					return err
				}
				sel := selector{}
				sel.name, _ = n["name"].(string)
				if err := json.Unmarshal(raw, &sel.matchers); err != nil {
					return fmt.Errorf("matchers %s: %w", raw, err)
				}
				out = append(out, sel)
				return nil
			}
			for _, v := range n {
				if err := walk(v); err != nil {
					return err
				}
			}
		case []any:
			for _, v := range n {
				if err := walk(v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(ast); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no vector selector")
	}
	return out, nil
}

// series counts the series matching sel between since and now.
func (s *prometheusServer) series(ctx context.Context, sel selector, since time.Time) (int, error) {
	var series []map[string]string
	err := s.api(ctx, "series", url.Values{"match[]": {sel.String()},
		"start": {strconv.FormatInt(since.Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Unix()+1, 10)}}, &series)
	return len(series), err
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// number is the sample's value.
func (s promSample) number() float64 {
	str, _ := s.Value[1].(string)
	f, _ := strconv.ParseFloat(str, 64)
	return f
}

// query runs an instant query now.
func (s *prometheusServer) query(ctx context.Context, q string) ([]promSample, error) {
	var answer struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := s.api(ctx, "query", url.Values{"query": {q}}, &answer); err != nil {
		return nil, err
	}
	if answer.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: got a %s, want a vector", q, answer.ResultType)
	}
	return answer.Result, nil
}

// alert is one alert of /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
}

// alerts lists the alerts pending or firing now.
func (s *prometheusServer) alerts(ctx context.Context) ([]alert, error) {
	var answer struct {
		Alerts []alert `json:"alerts"`
	}
	err := s.api(ctx, "alerts", nil, &answer)
	return answer.Alerts, err
}

// ruleFor is one alerting rule of /api/v1/rules: its name and `for`.
type ruleFor struct {
	Name     string  `json:"name"`
	Duration float64 `json:"duration"` // seconds
	Type     string  `json:"type"`
	Health   string  `json:"health"`
}

// rules lists the alerting rules loaded.
func (s *prometheusServer) rules(ctx context.Context) ([]ruleFor, error) {
	var answer struct {
		Groups []struct {
			Rules []ruleFor `json:"rules"`
		} `json:"groups"`
	}
	if err := s.api(ctx, "rules", url.Values{"type": {"alert"}}, &answer); err != nil {
		return nil, err
	}
	var out []ruleFor
	for _, g := range answer.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// chartRules renders the chart's PrometheusRule with helm template (bin/helm)
// and the values set, and returns its rule groups as a Prometheus rule file:
// the bytes of monitoring/alerts.yaml as the chart ships them.
func (e *env) chartRules(set ...string) []byte {
	e.t.Helper()
	home := filepath.Join(e.logDir, "helm")
	args := []string{"template", "edgeota", filepath.Join(e.root, "charts", "edgeota"), "--namespace", systemNamespace,
		"--show-only", "templates/monitoring.yaml", "--set", "monitoring.prometheusRule.enabled=true"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(e.ctx(), e.h.Tools.Path("helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("helm template: %v\n%s", err, stderr.Bytes())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Groups []any `json:"groups"`
			} `json:"spec"`
		}
		if err := dec.Decode(&obj); err != nil {
			e.t.Fatalf("no PrometheusRule in the chart's monitoring objects: %v", err)
		}
		if obj.Kind == "PrometheusRule" {
			data, err := json.Marshal(map[string]any{"groups": obj.Spec.Groups})
			if err != nil {
				e.t.Fatal(err)
			}
			return data // JSON is YAML
		}
	}
}
