package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

// hostileSegments seed both fuzz targets with the path parameters the node
// API must refuse cleanly.
var hostileSegments = []string{
	"p", "default", "", ".", "..", "%2E%2E", "a%2Fb", "a/b", "p%00", "p\x00", "p%C3%A9", "pé", "UPPER",
	strings.Repeat("a", 254), strings.Repeat("a", 64<<10), "\xff", "a%", "%zz", "a?b", "a#b", "a;b",
}

// FuzzREST sends arbitrary requests, parsed as net/http's server parses them,
// through the whole handler with authentication on: whatever comes, the
// agent never panics (the recover middleware would turn that into a 500),
// never answers 5xx (the cache is synced and the API server answers), and
// never redirects.
func FuzzREST(f *testing.F) {
	fx := newFixture(f, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(f, testTokens)}}, dsPod("p"), dsPod("q"))
	for _, seg := range hostileSegments {
		for _, verb := range []string{"upgrade", "imagepull"} {
			f.Add(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/"+seg+"/"+verb, "*/*", "Bearer upgrader-token", "")
			f.Add(http.MethodPost, "/openyurt.io/v1/namespaces/"+seg+"/pods/p/"+verb, "application/json", "Bearer viewer-token", "{}")
		}
		f.Add(http.MethodPost, "/edgeota.io/v1/namespaces/default/pods/"+seg+"/hold?duration=1h", "*/*", "Bearer upgrader-token", "")
		f.Add(http.MethodDelete, "/edgeota.io/v1/namespaces/"+seg+"/pods/p/hold", "application/json", "Bearer upgrader-token", "")
		f.Add(http.MethodPost, "/edgeota.io/v1/hold?duration="+url.QueryEscape(seg)+"&reason="+url.QueryEscape(seg), "*/*", "Bearer upgrader-token", "")
		f.Add(http.MethodPost, "/edgeota.io/v1/namespaces/default/pods/p/hold?until="+url.QueryEscape(seg), "application/json", "Bearer upgrader-token", "")
	}
	for _, query := range []string{"duration=2h&reason=driving", "until=2999-01-01T00:00:00Z", "duration=1h&until=2999-01-01T00:00:00Z",
		"duration=1h&queue_if_offline=true", "duration=1e309h", "duration=1h&namespace=default", "duration=1h&reason=%00%1B%FF", "until=0000-01-01T00:00:00Z"} {
		f.Add(http.MethodPost, "/edgeota.io/v1/hold?"+query, "*/*", "Bearer upgrader-token", "")
		f.Add(http.MethodPost, "/edgeota.io/v1/namespaces/default/pods/q/hold?"+query, "application/json", "Bearer upgrader-token", "")
	}
	for _, seed := range [][5]string{
		{"GET", "/pods", "", "Bearer viewer-token", ""},
		{"GET", "/pods", "application/json", "Bearer wrong", ""},
		{"DELETE", "/pods", "", "", ""},
		{"GET", "//pods", "", "Basic dXNlcjpwdw==", ""},
		{"GET", "/openyurt.io/v1/namespaces/default/pods/../upgrade", "", "Bearer upgrader-token", ""},
		{"GET", "/healthz", "", "", ""},
		{"OPTIONS", "*", "", "", ""},
		{"POST", "/readyz?x=%zz", "text/html", "bearer  upgrader-token ", "x"},
		{"PRI", "/openyurt.io/v1/namespaces/default/pods/p/upgrade", "", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4])
	}
	f.Fuzz(func(t *testing.T, method, target, accept, authorization, body string) {
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: agent\r\nAccept: %s\r\nAuthorization: %s\r\nContent-Length: %d\r\n\r\n%s",
			method, target, accept, authorization, len(body), body)
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil || r.ProtoMajor != 1 {
			return // the server answers 400 before any handler runs
		}
		// A watch streams until its caller leaves: this one leaves soon.
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		fx.handler.ServeHTTP(w, r.WithContext(ctx))
		if w.Code >= 500 || w.Code >= 300 && w.Code < 400 {
			t.Fatalf("%s %q: got %d %q, want neither 3xx nor 5xx", method, target, w.Code, w.Body.String())
		}
	})
}

// FuzzGRPCActions sends arbitrary namespaces and names to Upgrade,
// ImagePull, Hold and ReleaseHold, and arbitrary durations and reasons to
// Hold, over a real gRPC connection: anything validation refuses is
// InvalidArgument, and nothing ends in Internal, Unknown or a dropped call.
// Hold and ReleaseHold take no namespace and no name for every app of the
// node.
func FuzzGRPCActions(f *testing.F) {
	fx := newFixture(f, fixtureOptions{}, dsPod("p"), dsPod("q"))
	for _, seg := range hostileSegments {
		f.Add("default", seg, "1h", seg)
		f.Add(seg, "p", seg, "driving")
	}
	f.Add("", "", "2h", "driving")
	f.Add("", "p", "1d12h", "")
	f.Add("default", "q", "1e309h", "a\x1b[31m")
	f.Add("default", "q", "720h0.5s", strings.Repeat("é", 200))
	allowed := map[codes.Code]bool{
		codes.OK: true, codes.InvalidArgument: true, codes.NotFound: true, codes.PermissionDenied: true,
		codes.FailedPrecondition: true, codes.Aborted: true,
	}
	f.Fuzz(func(t *testing.T, namespace, name, duration, reason string) {
		if !utf8.ValidString(namespace) || !utf8.ValidString(name) || !utf8.ValidString(duration) || !utf8.ValidString(reason) {
			return // protobuf strings are UTF-8: the client cannot send these
		}
		invalid := validatePodRef(namespace, name) != nil
		_, whole := wholeNode(namespace, name)
		ctx := context.Background()
		_, upgradeErr := fx.rpc.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: namespace, Name: name})
		_, pullErr := fx.rpc.ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: namespace, Name: name})
		_, holdErr := fx.rpc.Hold(ctx, &edgeotav1.HoldRequest{Namespace: namespace, Name: name, Duration: duration, Reason: reason})
		_, releaseErr := fx.rpc.ReleaseHold(ctx, &edgeotav1.ReleaseHoldRequest{Namespace: namespace, Name: name})
		for rpc, err := range map[string]error{"Upgrade": upgradeErr, "ImagePull": pullErr} {
			code := status.Code(err)
			if invalid && code != codes.InvalidArgument || !allowed[code] {
				t.Fatalf("%s(%q, %q): got %v, want InvalidArgument for invalid input and a contract code otherwise", rpc, namespace, name, err)
			}
		}
		for rpc, err := range map[string]error{"Hold": holdErr, "ReleaseHold": releaseErr} {
			code := status.Code(err)
			if whole != nil && code != codes.InvalidArgument || !allowed[code] {
				t.Fatalf("%s(%q, %q, %q, %q): got %v, want InvalidArgument for invalid input and a contract code otherwise",
					rpc, namespace, name, duration, reason, err)
			}
		}
	})
}
