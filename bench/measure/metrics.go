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
	family := m[name]
	if family == nil {
		return 0
	}
	var total float64
	for _, sample := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range sample.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range match {
			matches = matches && labels[k] == v
		}
		if matches {
			total += sample.GetCounter().GetValue() + sample.GetUntyped().GetValue()
		}
	}
	return total
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

// ScrapeAPIServer reads the API server's request counters; the client must
// be allowed GET /metrics.
func ScrapeAPIServer(ctx context.Context, client kubernetes.Interface) (APIRequests, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APIRequests{}, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	m, err := ParseMetrics(body)
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
