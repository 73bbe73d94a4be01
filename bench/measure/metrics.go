package measure

import (
	"bytes"
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Metrics is one scrape of a Prometheus text endpoint, by family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses a scrape in the Prometheus text format.
func ParseMetrics(body []byte) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// Sum adds the counter and untyped samples of the family name whose labels
// include every pair of match (nil matches all); 0 if the family is absent.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range m.samples(name, match) {
		total += s.value
	}
	return total
}

// Gauge adds the gauge samples of the family name (a Go runtime's
// go_memstats_*); 0 if the family is absent.
func (m Metrics) Gauge(name string) float64 {
	var total float64
	for _, s := range m[name].GetMetric() {
		total += s.GetGauge().GetValue()
	}
	return total
}

// ByLabel sums the counter and untyped samples of the family name by the
// value of one label (samples without it under ""); empty if the family is
// absent.
func (m Metrics) ByLabel(name, label string) map[string]float64 {
	sums := map[string]float64{}
	for _, s := range m.samples(name, nil) {
		sums[s.labels[label]] += s.value
	}
	return sums
}

// writeVerbs are the verbs of apiserver_request_total that change objects.
var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}

// WritesByResource sums the API server's answered writes (create, update,
// patch, delete, of the objects or any subresource, whatever the answer's
// code) by resource, from apiserver_request_total: every client's.
func (m Metrics) WritesByResource() map[string]float64 {
	writes := map[string]float64{}
	for _, verb := range writeVerbs {
		for _, sample := range m.samples("apiserver_request_total", map[string]string{"verb": verb}) {
			writes[sample.labels["resource"]] += sample.value
		}
	}
	return writes
}

// WatchEventsByResource sums the events the API server sent its watchers
// (apiserver_watch_events_total), by resource: each change is counted once
// per watcher that receives it.
func (m Metrics) WatchEventsByResource() map[string]float64 {
	return m.ByLabel("apiserver_watch_events_total", "resource")
}

// Delta is each key's increase from before to after, the keys of after:
// counters' values, or processes' CPU times.
func Delta[V ~int64 | ~float64](after, before map[string]V) map[string]V {
	d := make(map[string]V, len(after))
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// sample is one counter or untyped sample of a family, with its labels.
type sample struct {
	labels map[string]string
	value  float64
}

// samples lists the counter and untyped samples of family name whose labels
// include every pair of match (nil matches all).
func (m Metrics) samples(name string, match map[string]string) []sample {
	var out []sample
	for _, s := range m[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range match {
			matches = matches && labels[k] == v
		}
		if matches {
			out = append(out, sample{labels, s.GetCounter().GetValue() + s.GetUntyped().GetValue()})
		}
	}
	return out
}

// APIRequests counts requests the API server has answered, from its
// apiserver_request_total: every client's, the benchmark's and the
// cluster's own components'.
type APIRequests struct {
	// StatusPatches counts PATCH pods/status: condition writes.
	StatusPatches float64
	// Total counts every request.
	Total float64
	// Conflicts counts 409 Conflict answers: writers colliding.
	Conflicts float64
}

// ScrapeAPIServerMetrics reads the API server's metrics; the client must be
// allowed GET /metrics.
func ScrapeAPIServerMetrics(ctx context.Context, client kubernetes.Interface) (Metrics, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	return ParseMetrics(body)
}

// ScrapeAPIServer reads the API server's request counters; the client must
// be allowed GET /metrics.
func ScrapeAPIServer(ctx context.Context, client kubernetes.Interface) (APIRequests, error) {
	m, err := ScrapeAPIServerMetrics(ctx, client)
	if err != nil {
		return APIRequests{}, err
	}
	const name = "apiserver_request_total"
	return APIRequests{
		StatusPatches: m.Sum(name, map[string]string{"resource": "pods", "subresource": "status", "verb": "PATCH"}),
		Total:         m.Sum(name, nil),
		Conflicts:     m.Sum(name, map[string]string{"code": "409"}),
	}, nil
}

// Minus is the counts since an earlier scrape b.
func (a APIRequests) Minus(b APIRequests) APIRequests {
	return APIRequests{
		StatusPatches: a.StatusPatches - b.StatusPatches,
		Total:         a.Total - b.Total,
		Conflicts:     a.Conflicts - b.Conflicts,
	}
}
