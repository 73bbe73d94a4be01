package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

const (
	loadPods    = 110
	loadClients = 256
	loadCalls   = 10_000 // per protocol
)

// TestLoadListPodsFrom256Clients sends 10,000 GET /pods and 10,000 gRPC
// ListPods from 256 concurrent clients to one agent holding a full node's
// pods, and wants every one answered completely. It proves correctness
// under load; make bench measures speed.
func TestLoadListPodsFrom256Clients(t *testing.T) {
	t.Parallel()
	objs := make([]runtime.Object, 0, loadPods)
	for i := range loadPods {
		objs = append(objs, dsPod(fmt.Sprintf("pod-%03d", i)))
	}
	f := newFixture(t, fixtureOptions{}, objs...)
	f.http.Transport.(*http.Transport).MaxIdleConnsPerHost = loadClients
	wantREST := len(f.do(http.MethodGet, "/pods", "").body)
	list, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil || len(list.GetItems()) != loadPods {
		t.Fatalf("ListPods: got %d pods, %v; want %d", len(list.GetItems()), err, loadPods)
	}
	wantGRPC := proto.Size(list)
	conn := dial(t, f)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var next atomic.Int64
	var failures atomic.Int64
	var firstErr sync.Once
	fail := func(format string, args ...any) {
		failures.Add(1)
		firstErr.Do(func() { t.Errorf(format, args...) })
	}
	var wg sync.WaitGroup
	for range loadClients {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= 2*loadCalls {
					return
				}
				if n%2 == 0 {
					resp, err := f.send(http.MethodGet, "/pods", "")
					if err != nil || resp.status != http.StatusOK || len(resp.body) != wantREST {
						fail("GET /pods: got %d with %d bytes, %v; want 200 with %d bytes", resp.status, len(resp.body), err, wantREST)
					}
					continue
				}
				var raw []byte
				err := conn.Invoke(ctx, edgeotav1.OTAService_ListPods_FullMethodName, &edgeotav1.ListPodsRequest{}, &raw, grpc.ForceCodecV2(rawCodec{}))
				if err != nil || len(raw) != wantGRPC {
					fail("gRPC ListPods: got %d bytes, %v; want %d bytes", len(raw), err, wantGRPC)
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("got %d failed calls of %d, want none", n, 2*loadCalls)
	}
}

// rawCodec sends requests as protobuf and keeps responses as bytes: the load
// test checks that each answer is whole without paying to decode 20,000 of
// them.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
