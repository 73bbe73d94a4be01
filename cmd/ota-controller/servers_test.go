package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsMuxServesProfilesOnlyWhenAsked: /metrics always, the profiles
// only with --profiling.
func TestMetricsMuxServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		mux := metricsMux(options{profiling: profiling}, prometheus.NewRegistry())
		for path, want := range map[string]int{
			"/metrics":      http.StatusOK,
			"/debug/pprof/": map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[profiling],
		} {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("profiling %v: got %s %d, want %d", profiling, path, rec.Code, want)
			}
		}
	}
}
