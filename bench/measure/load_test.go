package measure

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer answers GET on loopback and counts requests and new
// connections; fail decides which request numbers (from 1) answer 500.
func countingServer(t *testing.T, fail func(n int64) bool) (srv *httptest.Server, requests *atomic.Int64, conns func() int) {
	t.Helper()
	requests = new(atomic.Int64)
	var mu sync.Mutex
	seen := map[net.Conn]bool{}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail(requests.Add(1)) {
			http.Error(w, "refused on purpose", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"items":[]}`))
	}))
	srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			seen[c] = true
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, requests, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
}

func TestDriveMakesTheBoundedCountOverOneConnectionPerClient(t *testing.T) {
	srv, requests, conns := countingServer(t, func(int64) bool { return false })
	const clients, perClient = 4, 50
	// The count ends the run; the duration only proves an answer, not a hang.
	r, err := Drive(context.Background(), Load{Clients: clients, Duration: time.Minute, MaxPerClient: perClient}, HTTPGet(srv.URL+"/pods"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != clients*perClient || r.Errors != 0 {
		t.Errorf("answered %d, failed %d; want %d answered, 0 failed", r.Requests, r.Errors, clients*perClient)
	}
	// One untimed warm-up call per client comes first.
	if got, want := requests.Load(), int64(clients*perClient+clients); got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
	if got := conns(); got != clients {
		t.Errorf("server saw %d connections, want %d (one keep-alive connection per client)", got, clients)
	}
	if r.RPS <= 0 || r.P50 <= 0 || r.P50 > r.P99 {
		t.Errorf("got rate %v, p50 %v, p99 %v; want a positive rate and 0 < p50 <= p99", r.RPS, r.P50, r.P99)
	}
}

func TestDriveCountsFailuresApartFromAnswers(t *testing.T) {
	// After the warm-up (request 1), every third request fails.
	srv, _, _ := countingServer(t, func(n int64) bool { return n > 1 && n%3 == 0 })
	r, err := Drive(context.Background(), Load{Clients: 1, Duration: time.Minute, MaxPerClient: 30}, HTTPGet(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 20 || r.Errors != 10 {
		t.Errorf("answered %d, failed %d; want 20 answered, 10 failed", r.Requests, r.Errors)
	}
	if r.FirstErr == nil || !strings.Contains(r.FirstErr.Error(), "500") {
		t.Errorf("first failure %v, want one naming the 500 answer", r.FirstErr)
	}
}

func TestDriveStopsAtTheDuration(t *testing.T) {
	srv, _, _ := countingServer(t, func(int64) bool { return false })
	start := time.Now()
	r, err := Drive(context.Background(), Load{Clients: 2, Duration: 200 * time.Millisecond}, HTTPGet(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	// Generous: the run must end by itself, long before a test timeout.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("a 200 ms run took %v", took)
	}
	if r.Requests == 0 {
		t.Error("no request answered in 200 ms")
	}
}

func TestDriveFailsWhenTheWarmUpFails(t *testing.T) {
	srv, _, _ := countingServer(t, func(int64) bool { return true })
	if _, err := Drive(context.Background(), Load{Clients: 1, Duration: time.Minute, MaxPerClient: 1}, HTTPGet(srv.URL)); err == nil || !strings.Contains(err.Error(), "warming up") {
		t.Errorf("got %v, want a warm-up failure", err)
	}
}
