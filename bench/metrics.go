package main

import (
	"bytes"
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// metrics is one scrape of a Prometheus text endpoint.
type metrics map[string]*dto.MetricFamily

func parseMetrics(body []byte) (metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// sum adds the counter or untyped samples of the family whose labels include
// every pair of match.
func (m metrics) sum(name string, match map[string]string) float64 {
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

// apiRequests counts requests the API server has answered, from its
// apiserver_request_total: every client's, ours and the cluster's own.
type apiRequests struct {
	statusPatches float64 // PATCH pods/status
	total         float64 // every request
	conflicts     float64 // answered 409 Conflict
}

// scrapeAPIServer reads the API server's request counters as admin.
func scrapeAPIServer(ctx context.Context, client kubernetes.Interface) (apiRequests, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiRequests{}, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	m, err := parseMetrics(body)
	if err != nil {
		return apiRequests{}, err
	}
	const name = "apiserver_request_total"
	return apiRequests{
		statusPatches: m.sum(name, map[string]string{"resource": "pods", "subresource": "status", "verb": "PATCH"}),
		total:         m.sum(name, nil),
		conflicts:     m.sum(name, map[string]string{"code": "409"}),
	}, nil
}

func (a apiRequests) minus(b apiRequests) apiRequests {
	return apiRequests{a.statusPatches - b.statusPatches, a.total - b.total, a.conflicts - b.conflicts}
}
