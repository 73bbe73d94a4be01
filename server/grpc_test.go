package server

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func dial(t testing.TB, f *fixture) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestGRPCHealthFollowsCacheSync: the OTA service is SERVING once a view of
// the pods is served: the live one once the cache has synced, or the stored
// one an earlier run left, at once, even if the API server never answers
// (a restart in a dead zone); NOT_SERVING with neither.
func TestGRPCHealthFollowsCacheSync(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unsynced bool
		stored   bool
		want     healthpb.HealthCheckResponse_ServingStatus
	}{
		{"synced", false, false, healthpb.HealthCheckResponse_SERVING},
		{"unsynced", true, false, healthpb.HealthCheckResponse_NOT_SERVING},
		{"unsynced, serving the stored view after a restart", true, true, healthpb.HealthCheckResponse_SERVING},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := fixtureOptions{unsynced: tc.unsynced}
			if tc.stored {
				opts.stateDir = openStateDir(t)
				first := newFixture(t, fixtureOptions{stateDir: opts.stateDir}, dsPod("p"))
				if err := first.stop(); err != nil {
					t.Fatal(err)
				}
			}
			f := newFixture(t, opts)
			health := healthpb.NewHealthClient(dial(t, f))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got healthpb.HealthCheckResponse_ServingStatus
			for ctx.Err() == nil {
				resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "edgeota.v1.OTAService"})
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if got = resp.GetStatus(); got == tc.want || tc.want == healthpb.HealthCheckResponse_NOT_SERVING {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGRPCReflectionListsTheService(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(dial(t, f)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"edgeota.v1.OTAService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("got services %v, want %s among them", names, want)
		}
	}
}

// TestServeStopsWithItsContext proves graceful shutdown returns once the
// context ends, closing the port.
func TestServeStopsWithItsContext(t *testing.T) {
	var addr string
	// Registered first, so it runs after the fixture's cleanup stopped Serve.
	t.Cleanup(func() {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("port %s still accepts connections after shutdown", addr)
		}
	})
	f := newFixture(t, fixtureOptions{})
	addr = f.addr
	if resp := f.do("GET", "/healthz", ""); resp.status != 200 {
		t.Fatalf("got %d, want 200", resp.status)
	}
}
