package measure

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestMetricsSumMatchesEveryLabelGiven(t *testing.T) {
	body, err := os.ReadFile("testdata/apiserver.metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"apiserver_request_total", nil, 502},
		{"apiserver_request_total", map[string]string{"resource": "pods", "subresource": "status", "verb": "PATCH"}, 483},
		{"apiserver_request_total", map[string]string{"code": "409"}, 5},
		{"apiserver_request_total", map[string]string{"code": "409", "resource": "pods"}, 3},
		{"apiserver_request_total", map[string]string{"verb": "DELETE"}, 0},
		{"edgeota_controller_conditions_written_total", map[string]string{"type": "PodNeedUpgrade"}, 500},
		{"no_such_family", nil, 0},
		{"process_cpu_seconds_total", nil, 0}, // a gauge: not summed
	} {
		if got := m.Sum(tc.name, tc.match); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.match, got, tc.want)
		}
	}
}

func TestMetricsByResource(t *testing.T) {
	body, err := os.ReadFile("testdata/apiserver.metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	// Pods: 480 + 3 status patches and 5 creations; daemonsets: 2 updates
	// (the 409s count: the API server answered them); the LIST is no write.
	if got, want := m.WritesByResource(), map[string]float64{"pods": 488, "daemonsets": 2}; !maps.Equal(got, want) {
		t.Errorf("WritesByResource: got %v, want %v", got, want)
	}
	watch := m.WatchEventsByResource()
	if want := map[string]float64{"leases": 27, "pods": 4, "nodes": 6}; !maps.Equal(watch, want) {
		t.Errorf("WatchEventsByResource: got %v, want %v", watch, want)
	}
	if got, want := m.ByLabel("edgeota_controller_conditions_written_total", "type"), map[string]float64{"PodNeedUpgrade": 500, "PodImageReady": 7}; !maps.Equal(got, want) {
		t.Errorf("ByLabel: got %v, want %v", got, want)
	}
	if got := m.ByLabel("no_such_family", "type"); len(got) != 0 {
		t.Errorf("ByLabel of an absent family: got %v, want none", got)
	}
	earlier := map[string]float64{"leases": 20, "pods": 4, "gone": 3}
	if got, want := Delta(watch, earlier), map[string]float64{"leases": 7, "pods": 0, "nodes": 6}; !maps.Equal(got, want) {
		t.Errorf("Delta: got %v, want %v", got, want)
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	if m, err := ParseMetrics([]byte("apiserver_request_total{code=\"200\" 1\n")); err == nil {
		t.Errorf("got %v, want a parse error", m)
	}
}

func TestScrapeAPIServerCountsRequests(t *testing.T) {
	body, err := os.ReadFile("testdata/apiserver.metrics")
	if err != nil {
		t.Fatal(err)
	}
	// An API server's /metrics on loopback, read by a real clientset.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ScrapeAPIServer(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if want := (APIRequests{StatusPatches: 483, Total: 502, Conflicts: 5}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	earlier := APIRequests{StatusPatches: 400, Total: 450, Conflicts: 1}
	if got, want := got.Minus(earlier), (APIRequests{StatusPatches: 83, Total: 52, Conflicts: 4}); got != want {
		t.Errorf("Minus: got %+v, want %+v", got, want)
	}
}

// TestMetricsGaugeReadsAGoRuntimesHeap: a gauge family (go_memstats_*, as
// client_golang's Go collector writes it) is read, a counter is not.
func TestMetricsGaugeReadsAGoRuntimesHeap(t *testing.T) {
	m, err := ParseMetrics([]byte("# TYPE go_memstats_next_gc_bytes gauge\ngo_memstats_next_gc_bytes 4.194304e+06\n" +
		"# TYPE edgeota_controller_pods_deleted_total counter\nedgeota_controller_pods_deleted_total 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Gauge("go_memstats_next_gc_bytes"); got != 4<<20 {
		t.Errorf("got next GC goal %v, want %v", got, 4<<20)
	}
	if got := m.Gauge("edgeota_controller_pods_deleted_total"); got != 0 {
		t.Errorf("got %v from a counter, want 0: gauges only", got)
	}
	if got := m.Gauge("no_such_family"); got != 0 {
		t.Errorf("got %v for an absent family, want 0", got)
	}
}
