package server

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// syncedAt reads the freshness header of GET /pods and of gRPC ListPods,
// checks that both say the same RFC 3339 time, and returns it.
func (f *fixture) syncedAt() time.Time {
	f.t.Helper()
	resp := f.do(http.MethodGet, "/pods", "")
	if resp.status != http.StatusOK {
		f.t.Fatalf("GET /pods: got %d %q, want 200", resp.status, resp.body)
	}
	if got := resp.header.Values("Grpc-Metadata-X-Edgeota-Synced-At"); len(got) != 0 {
		f.t.Errorf("got Grpc-Metadata-X-Edgeota-Synced-At %q, want the header under its own name only", got)
	}
	rest, err := time.Parse(time.RFC3339, resp.header.Get("X-Edgeota-Synced-At"))
	if err != nil {
		f.t.Fatalf("REST X-Edgeota-Synced-At: %v", err)
	}
	var md metadata.MD
	if _, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{}, grpc.Header(&md)); err != nil {
		f.t.Fatalf("gRPC ListPods: %v", err)
	}
	values := md.Get(SyncedAtHeader)
	if len(values) != 1 {
		f.t.Fatalf("gRPC header %s: got %q, want one value", SyncedAtHeader, values)
	}
	grpcAt, err := time.Parse(time.RFC3339, values[0])
	if err != nil {
		f.t.Fatalf("gRPC %s: %v", SyncedAtHeader, err)
	}
	if !rest.Equal(grpcAt) || rest.Location() != time.UTC {
		f.t.Errorf("got REST %s and gRPC %s, want the same UTC time", rest, grpcAt)
	}
	return rest
}

// TestListPodsSaysHowFreshTheCacheIs follows the freshness header through the
// cache's life: set by the first list, still while the API server is silent,
// forward when a watch event arrives, and still while the API server is out
// of reach — while the cache keeps answering.
func TestListPodsSaysHowFreshTheCacheIs(t *testing.T) {
	started := time.Now()
	watcher := watch.NewFakeWithChanSize(1, false)
	f := newFixture(t, fixtureOptions{watcher: watcher}, dsPod("p"))

	first := f.syncedAt()
	if first.Before(started) || first.After(time.Now()) {
		t.Errorf("got %s, want between the fixture's start %s and now", first, started)
	}
	time.Sleep(50 * time.Millisecond)
	if got := f.syncedAt(); !got.Equal(first) {
		t.Errorf("while the API server is silent: got %s, want still %s", got, first)
	}

	watcher.Add(dsPod("q"))
	second := first
	for deadline := time.Now().Add(10 * time.Second); !second.After(first) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		second = f.syncedAt()
	}
	if !second.After(first) {
		t.Fatalf("after a watch event: got %s, want later than %s", second, first)
	}

	refused := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	f.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
	f.client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) { return true, nil, refused })
	watcher.Stop() // the reflector watches or lists again, and fails
	time.Sleep(200 * time.Millisecond)
	if got := f.syncedAt(); !got.Equal(second) {
		t.Errorf("while the API server is unreachable: got %s, want still %s", got, second)
	}
	if resp := f.do(http.MethodGet, "/pods", ""); resp.status != http.StatusOK {
		t.Errorf("while the API server is unreachable: got GET /pods %d, want 200 from the cache", resp.status)
	}
}

func TestWatchErrorsAreNoContact(t *testing.T) {
	var c contactClock
	c.markEvent(watch.Event{Type: watch.Error})
	if !c.last().IsZero() {
		t.Errorf("after an error event: got %s, want no contact", c.last())
	}
	c.markEvent(watch.Event{Type: watch.Bookmark})
	if c.last().IsZero() {
		t.Errorf("after a bookmark: got no contact, want some")
	}
}
