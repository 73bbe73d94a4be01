package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// panickingLister makes ListPods panic.
type panickingLister struct{ corelisters.PodLister }

func (panickingLister) List(labels.Selector) ([]*corev1.Pod, error) { panic("lister exploded") }

// TestRecoversFromPanicsOnBothProtocols makes the service panic and checks
// that REST answers 500 and gRPC Internal, the panic is logged with its stack,
// and the agent goes on serving.
func TestRecoversFromPanicsOnBothProtocols(t *testing.T) {
	logger, panics := capture(t, "Recovered from a panic")
	f := newFixture(t, fixtureOptions{logger: &logger, tweak: func(s *Server) { s.lister = panickingLister{} }})

	resp := f.do(http.MethodGet, "/pods", "")
	if want := "internal error serving GET \"/pods\"; the agent logged the details\n"; resp.status != 500 || resp.body != want {
		t.Errorf("REST: got %d %q, want 500 %q", resp.status, resp.body, want)
	}
	_, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "/edgeota.v1.OTAService/ListPods") {
		t.Errorf("gRPC: got %v %q, want Internal naming the method", st.Code(), st.Message())
	}
	logged := panics()
	if len(logged) != 2 {
		t.Fatalf("got %d panics logged, want 2", len(logged))
	}
	for _, kv := range logged {
		if len(kv) != 6 || kv[3] != "lister exploded" || !strings.Contains(kv[5].(string), "panickingLister.List") {
			t.Errorf("got %v, want the panic and a stack through panickingLister.List", kv)
		}
	}
	if resp := f.do(http.MethodGet, "/healthz", ""); resp.status != 200 {
		t.Errorf("after the panics: got /healthz %d, want 200", resp.status)
	}
}

func TestRecoverStream(t *testing.T) {
	ctx := context.Background()
	err := recoverStream(nil, streamWithContext{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/s/M"}, func(any, grpc.ServerStream) error { panic("stream exploded") })
	if status.Code(err) != codes.Internal {
		t.Errorf("got %v, want Internal", err)
	}
}

// streamWithContext is a server stream that only has a context.
type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }

// TestAbortHandlerStillAborts keeps http.ErrAbortHandler's meaning: the
// response is cut off, not turned into a 500.
func TestAbortHandlerStillAborts(t *testing.T) {
	h := &Handler{rest: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })}
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("got panic %v, want http.ErrAbortHandler", p)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/pods", nil))
}
