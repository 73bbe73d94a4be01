package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAreServedUncompressed: a scraper asking for gzip gets plain
// text, so that no gzip writer stays pooled in the controller's heap; the
// profiles are served only with --profiling.
func TestMetricsAreServedUncompressed(t *testing.T) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeota_test_total", Help: "A test counter."}))
	for _, profiling := range []bool{false, true} {
		mux := metricsMux(options{profiling: profiling}, registry)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		mux.ServeHTTP(rec, req)
		if got := rec.Header().Get("Content-Encoding"); got != "" {
			t.Errorf("got Content-Encoding %q, want none", got)
		}
		if body := rec.Body.String(); !strings.Contains(body, "edgeota_test_total 0") {
			t.Errorf("got body %q, want the counter in plain text", body)
		}
		rec = httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling]; rec.Code != want {
			t.Errorf("profiling %v: got /debug/pprof/ %d, want %d", profiling, rec.Code, want)
		}
	}
}
