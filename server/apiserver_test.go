package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// clientFor returns the agent's real API client for host, never retrying.
func clientFor(t *testing.T, host string) Client {
	t.Helper()
	c, err := NewClient(&rest.Config{Host: host, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnreachableAPIServerAnswers503 proves that a cut-off node gets an answer
// rather than a hang: the API server below accepts connections and never
// answers; another refuses them.
func TestUnreachableAPIServerAnswers503(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()

	for name, host := range map[string]string{"hanging": hang.URL, "refusing": refused} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{actions: clientFor(t, host), apiTimeout: 300 * time.Millisecond}, dsPod("p"))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := f.rpc.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p"})
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "unreachable or did not answer within 300ms") {
				t.Errorf("Upgrade: got %v %q, want Unavailable naming the timeout", st.Code(), st.Message())
			}
			resp := f.do(http.MethodPost, imagePullPath, "")
			if resp.status != http.StatusServiceUnavailable {
				t.Errorf("imagepull: got %d %q, want 503", resp.status, resp.body)
			}
			// The cache still answers.
			if resp := f.do(http.MethodGet, "/pods", ""); resp.status != http.StatusOK || !strings.Contains(resp.body, `"name":"p"`) {
				t.Errorf("GET /pods: got %d %q, want 200 with pod p", resp.status, resp.body)
			}
		})
	}
}
