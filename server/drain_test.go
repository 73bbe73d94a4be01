package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// slowDeletes is an API server that serves dsPod for any pod name and holds
// every delete until released, so that upgrades are in flight when a test
// wants them to be.
type slowDeletes struct {
	arrived chan string
	held    chan struct{}
	release func()
}

func newSlowDeletes(t *testing.T) (*slowDeletes, string) {
	held := make(chan struct{})
	s := &slowDeletes{arrived: make(chan string, 8), held: held, release: sync.OnceFunc(func() { close(held) })}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.release) // before srv.Close, which waits for held deletes
	return s, srv.URL
}

func (s *slowDeletes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodGet:
		// The agent's live read: a list of its node's pods by name.
		selector, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
		name, named := "", false
		if err == nil {
			name, named = selector.RequiresExactMatch("metadata.name")
		}
		if !named {
			http.Error(w, "want a list by name", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []corev1.Pod{*dsPod(name)}})
	case http.MethodDelete:
		s.arrived <- name
		<-s.held
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	default:
		http.Error(w, "unexpected", http.StatusMethodNotAllowed)
	}
}

// TestShutdownDrainsInFlightRequests starts an upgrade over each protocol,
// holds both inside the API server, and ends Serve's context: the port stops
// accepting at once, Serve waits, and both upgrades finish with success
// before Serve returns.
func TestShutdownDrainsInFlightRequests(t *testing.T) {
	api, host := newSlowDeletes(t)
	f := newFixture(t, fixtureOptions{actions: clientFor(t, host)})

	var wg sync.WaitGroup
	var restResp response
	var restErr, grpcErr error
	wg.Go(func() { restResp, restErr = f.send(http.MethodPost, upgradePath, "") })
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, grpcErr = f.rpc.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: "default", Name: "q"})
	})
	for range 2 {
		select {
		case <-api.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the upgrades never reached the API server")
		}
	}

	stopped := make(chan error, 1)
	go func() { stopped <- f.stop() }()
	refused := false
	for deadline := time.Now().Add(5 * time.Second); !refused && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		refused = true
	}
	if !refused {
		t.Errorf("the port still accepts connections while shutting down")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned (%v) before the in-flight requests finished", err)
	case <-time.After(100 * time.Millisecond):
	}

	api.release()
	wg.Wait()
	if restErr != nil || restResp.status != http.StatusOK || restResp.body != "Start updating pod default/p\n" {
		t.Errorf("REST upgrade: got %d %q, %v; want 200", restResp.status, restResp.body, restErr)
	}
	if grpcErr != nil {
		t.Errorf("gRPC upgrade: got %v, want success", grpcErr)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Serve: got %v, want nil after a clean drain", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Serve did not return after the in-flight requests finished")
	}
}
