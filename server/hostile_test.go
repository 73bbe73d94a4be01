package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// TestHostilePathSegments sends what a hostile or broken client might put in
// the path parameters, over REST (raw, as sent on the wire) and gRPC (decoded):
// a clear 400 / InvalidArgument every time; 431 once the request line
// outgrows the header limit.
func TestHostilePathSegments(t *testing.T) {
	long := strings.Repeat("a", 64<<10)
	cases := []struct {
		name        string
		ns, pod     string // as sent over REST, percent-encoded
		grpcNS      string // as sent over gRPC ("" skips gRPC)
		grpcPod     string
		wantHTTP    int
		wantInBody  string
		wantCodeMsg string
	}{
		{name: "NUL", ns: "default", pod: "p%00", grpcNS: "default", grpcPod: "p\x00", wantHTTP: 400, wantInBody: `invalid pod name "p\x00"`},
		{name: "unicode", ns: "default", pod: "p%C3%A9", grpcNS: "default", grpcPod: "pé", wantHTTP: 400, wantInBody: `invalid pod name "p\u00e9"`},
		{name: "empty namespace", ns: "", pod: "p", grpcPod: "p", wantHTTP: 400, wantInBody: "pod namespace must not be empty"},
		{name: "empty name", ns: "default", pod: "", grpcNS: "default", wantHTTP: 400, wantInBody: "pod name must not be empty"},
		{name: "encoded dot-dot", ns: "default", pod: "%2E%2E", grpcNS: "default", grpcPod: "..", wantHTTP: 400, wantInBody: `must not be the path segment ".."`},
		{name: "upper case", ns: "Default", pod: "p", grpcNS: "Default", grpcPod: "p", wantHTTP: 400, wantInBody: "invalid pod namespace"},
		{name: "64 KiB name", ns: "default", pod: long, grpcNS: "default", grpcPod: long, wantHTTP: 400, wantInBody: "(65536 bytes): must be no more than 253 characters"},
		{name: "2 MiB name, past the header limit", ns: "default", pod: strings.Repeat("a", 2<<20), wantHTTP: 431},
	}
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	for _, tc := range cases {
		t.Run(tc.name+"/REST", func(t *testing.T) {
			resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/"+tc.ns+"/pods/"+tc.pod+"/upgrade", "")
			if resp.status != tc.wantHTTP || !strings.Contains(resp.body, tc.wantInBody) {
				t.Errorf("got %d %.200q, want %d containing %q", resp.status, resp.body, tc.wantHTTP, tc.wantInBody)
			}
			if len(resp.body) > 1024 {
				t.Errorf("got a %d-byte body, want the value echoed briefly", len(resp.body))
			}
		})
		if tc.grpcNS == "" && tc.grpcPod == "" {
			continue
		}
		t.Run(tc.name+"/gRPC", func(t *testing.T) {
			_, err := f.rpc.ImagePull(context.Background(), &edgeotav1.ImagePullRequest{Namespace: tc.grpcNS, Name: tc.grpcPod})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.wantInBody) {
				t.Errorf("got %v %.200q, want InvalidArgument containing %q", st.Code(), st.Message(), tc.wantInBody)
			}
		})
	}
}

// countingBody is a request body of n bytes that counts what is read.
type countingBody struct {
	left, read int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	n = min(n, b.left)
	b.left -= n
	b.read += n
	return int(n), nil
}

func (b *countingBody) Close() error { return nil }

// TestLargeBodiesAreNotRead sends 10 MiB bodies to the POST routes: the answer
// is the usual one, and the agent reads at most its body limit of them.
func TestLargeBodiesAreNotRead(t *testing.T) {
	const size = 10 << 20
	f := newFixture(t, fixtureOptions{}, dsPod("p"))

	req, err := http.NewRequest(http.MethodPost, f.base+upgradePath, bytes.NewReader(make([]byte, size)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatalf("POST with a 10 MiB body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "Start updating pod default/p\n" {
		t.Errorf("over the wire: got %d %q, want 200", resp.StatusCode, body)
	}

	// In-process, to see how much of the body the handler reads.
	h, err := NewHandler(context.Background(), f.svc)
	if err != nil {
		t.Fatal(err)
	}
	h.rest = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	counted := &countingBody{left: size}
	r := httptest.NewRequest(http.MethodPost, imagePullPath, nil)
	r.Body = counted
	h.ServeHTTP(httptest.NewRecorder(), r)
	if counted.read > defaultLimits.maxBody+32<<10 {
		t.Errorf("a handler that reads the whole body got %d bytes, want at most the %d-byte limit", counted.read, defaultLimits.maxBody)
	}
}

// TestSlowClientsAreCutOff dribbles a request's headers slower than the
// header timeout allows and wants the connection closed soon after it.
func TestSlowClientsAreCutOff(t *testing.T) {
	l := defaultLimits
	l.readHeader = 200 * time.Millisecond
	f := newFixture(t, fixtureOptions{limits: &l})
	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
	}()
	start := time.Now()
	request := "GET /healthz HTTP/1.1\r\nHost: agent\r\nX-Slow: " + strings.Repeat("x", 200) + "\r\n\r\n"
	for i := 0; i < len(request); i++ {
		select {
		case <-closed:
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("closed after %s, want about the 200ms header timeout", elapsed)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{request[i]}); err != nil {
			return // closed under us: cut off
		}
	}
	t.Errorf("a client sending its headers over %s was never cut off", time.Since(start))
}
