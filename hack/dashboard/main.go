// Command dashboard writes edgeota's Grafana dashboard,
// charts/edgeota/monitoring/dashboard.json, with the Grafana Foundation SDK:
// `make dashboard` runs it, and `make fresh` (in make check) runs it again
// and fails when the committed file differs. The chart ships the file in a
// ConfigMap (templates/monitoring.yaml); e2e/monitoring_test.go runs every
// query of it against a real Prometheus scraping a controller.
//
// The dashboard is Grafana's v1 model at schemaVersion 42 (Grafana 12.2
// and later), as SDK v0.0.22 writes it. Its data source is the variable
// ${datasource}; $namespace and $daemonset pick DaemonSets (All: the fleet).
// Only the leader exports rollout series and a handover changes which pod
// does, so every per-DaemonSet query first takes max by (namespace,
// daemonset) over the replicas.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
)

// maxSize is the most the JSON may weigh: client-side kubectl apply keeps a
// copy of the ConfigMap in an annotation, which may not exceed 256 KiB.
const maxSize = 256 << 10

func main() {
	out := flag.String("o", "charts/edgeota/monitoring/dashboard.json", "file to write")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// write generates the dashboard into path.
func write(path string) error {
	data, err := generate()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// generate returns the dashboard's JSON, indented, with a final newline.
func generate() ([]byte, error) {
	d, err := build().Build()
	if err != nil {
		return nil, fmt.Errorf("building the dashboard: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // PromQL's <, > and & stay readable
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encoding the dashboard: %w", err)
	}
	if buf.Len() > maxSize {
		return nil, errors.New("the dashboard is over 256 KiB, which a ConfigMap applied with kubectl apply cannot hold")
	}
	return buf.Bytes(), nil
}

// datasource is every query's data source: the dashboard's variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
