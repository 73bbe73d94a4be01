package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// generated is the dashboard as generate writes it, decoded loosely: what
// Grafana reads.
type generated struct {
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Datasource  *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr       string `json:"expr"`
			RefID      string `json:"refId"`
			Datasource struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
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

func decode(t *testing.T) ([]byte, generated) {
	t.Helper()
	data, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	var d generated
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	return data, d
}

// TestDashboardIsSmallAndVersioned: under the 256 KiB a ConfigMap applied
// with kubectl apply may hold, Grafana's v1 model at schemaVersion 42, a
// stable uid, ending in a newline as the committed file does.
func TestDashboardIsSmallAndVersioned(t *testing.T) {
	data, d := decode(t)
	if len(data) >= maxSize {
		t.Errorf("got %d bytes, want under %d", len(data), maxSize)
	}
	if d.SchemaVersion != 42 || d.UID != "edgeota-rollouts" {
		t.Errorf("got schemaVersion %d and uid %q, want 42 and edgeota-rollouts", d.SchemaVersion, d.UID)
	}
	if !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("want the JSON to end with a newline")
	}
}

// TestEveryQueryUsesTheDatasourceVariable: every panel and target reads the
// ${datasource} variable, which lists Prometheus data sources; queries use
// no variable but the dashboard's own and Grafana's $__rate_interval.
func TestEveryQueryUsesTheDatasourceVariable(t *testing.T) {
	_, d := decode(t)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" || vars["daemonset"] != "query" {
		t.Errorf("got variables %v, want datasource, namespace and daemonset", vars)
	}
	known := regexp.MustCompile(`^\$(namespace|daemonset|__rate_interval)$`)
	queries := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: got data source %+v, want ${datasource}", p.Title, p.Datasource)
		}
		for _, q := range p.Targets {
			queries++
			if q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q, query %s: got data source %+v, want ${datasource}", p.Title, q.RefID, q.Datasource)
			}
			for _, v := range regexp.MustCompile(`\$\{?[A-Za-z_]+\}?`).FindAllString(q.Expr, -1) {
				if !known.MatchString(v) {
					t.Errorf("panel %q, query %s: unknown variable %s in %s", p.Title, q.RefID, v, q.Expr)
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("got %d queries, want the dashboard's", queries)
	}
}

// TestPanelsReadAtAGlance: state timelines and time series (bars for the
// waves), never a stat or a table, each with a title and a description,
// under a unique id.
func TestPanelsReadAtAGlance(t *testing.T) {
	_, d := decode(t)
	var ids []int
	types := map[string]int{}
	for _, p := range d.Panels {
		types[p.Type]++
		if slices.Contains(ids, p.ID) {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids = append(ids, p.ID)
		if p.Type == "row" {
			continue
		}
		if !slices.Contains([]string{"state-timeline", "timeseries"}, p.Type) {
			t.Errorf("panel %q is a %s", p.Title, p.Type)
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: got title %q and description %q, want both", p.ID, p.Title, p.Description)
		}
	}
	if types["state-timeline"] < 3 || types["row"] != 4 {
		t.Errorf("got panels %v, want state timelines and four rows", types)
	}
}
