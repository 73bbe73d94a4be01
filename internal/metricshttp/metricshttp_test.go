package metricshttp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAreServedUncompressed: a scraper asking for gzip gets plain
// text, so that no gzip writer stays pooled in the process's heap.
func TestMetricsAreServedUncompressed(t *testing.T) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeota_test_total", Help: "A test counter."}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	Handler(registry).ServeHTTP(rec, req)
	if got := rec.Header().Get("Content-Encoding"); got != "" {
		t.Errorf("got Content-Encoding %q, want none", got)
	}
	if body := rec.Body.String(); !strings.Contains(body, "edgeota_test_total 0") {
		t.Errorf("got body %q, want the counter in plain text", body)
	}
}
