package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAreServedUncompressed: a scraper asking for gzip gets plain
// text, so that no gzip writer stays pooled in the agent's heap.
func TestMetricsAreServedUncompressed(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	counter := prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeota_test_total", Help: "A test counter."})
	metricsHandler(nil, counter).ServeHTTP(rec, req)
	if got := rec.Header().Get("Content-Encoding"); got != "" {
		t.Errorf("got Content-Encoding %q, want none", got)
	}
	if body := rec.Body.String(); !strings.Contains(body, "edgeota_test_total 0") {
		t.Errorf("got body %q, want the counter in plain text", body)
	}
}
