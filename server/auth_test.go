package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

const testTokens = `
viewer-token,vera,1001,"edgeota:viewers"
upgrader-token,uli,1002,"edgeota:viewers,edgeota:upgraders"
nobody-token,nora,1003
`

func mustTokens(t testing.TB, csv string) *ownerauth.TokenFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := ownerauth.LoadTokenFile(path)
	if err != nil {
		t.Fatalf("LoadTokenFile: %v", err)
	}
	return tf
}

// withToken returns ctx carrying a bearer token for a gRPC call ("" none).
func withToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// operation is one call the agent serves, over one protocol; allowed is the
// answer of a caller that passes authorization (the acting RPCs name a pod
// that does not exist, so an allowed call ends in NotFound and changes
// nothing).
type operation struct {
	name        string
	need        ownerauth.Access
	rest        string // "METHOD path" for REST, "" for gRPC
	stream      bool   // the REST answer is a stream: only its status is read
	grpc        func(context.Context, *grpc.ClientConn) error
	allowedHTTP int
	allowedCode codes.Code
}

var operations = []operation{
	{name: "REST ListPods", need: ownerauth.View, rest: "GET /pods", allowedHTTP: 200},
	{name: "REST Upgrade", need: ownerauth.Upgrade, rest: "POST /openyurt.io/v1/namespaces/default/pods/ghost/upgrade", allowedHTTP: 404},
	{name: "REST ImagePull", need: ownerauth.Upgrade, rest: "POST /openyurt.io/v1/namespaces/default/pods/ghost/imagepull", allowedHTTP: 404},
	{name: "REST ListActions", need: ownerauth.View, rest: "GET /edgeota.io/v1/actions", allowedHTTP: 200},
	{name: "REST CancelAction", need: ownerauth.Upgrade, rest: "DELETE /edgeota.io/v1/namespaces/default/pods/ghost/actions/upgrade", allowedHTTP: 404},
	{name: "REST Hold", need: ownerauth.Upgrade, rest: "POST /edgeota.io/v1/namespaces/default/pods/ghost/hold?duration=1h", allowedHTTP: 404},
	{name: "REST ReleaseHold", need: ownerauth.Upgrade, rest: "DELETE /edgeota.io/v1/namespaces/default/pods/ghost/hold", allowedHTTP: 404},
	{name: "REST ListUpgrades", need: ownerauth.View, rest: "GET /edgeota.io/v1/upgrades", allowedHTTP: 200},
	{name: "REST WatchUpgrades", need: ownerauth.View, rest: "GET /edgeota.io/v1/watch/upgrades", stream: true, allowedHTTP: 200},
	{name: "REST metrics", need: ownerauth.View, rest: "GET /metrics", allowedHTTP: 200},
	{name: "REST unknown path", need: ownerauth.View, rest: "GET /nope", allowedHTTP: 404},
	{name: "healthz", need: ownerauth.Open, rest: "GET /healthz", allowedHTTP: 200},
	{name: "readyz", need: ownerauth.Open, rest: "GET /readyz", allowedHTTP: 200},
	{name: "gRPC ListPods", need: ownerauth.View, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).ListPods(ctx, &edgeotav1.ListPodsRequest{})
		return err
	}},
	{name: "gRPC Upgrade", need: ownerauth.Upgrade, allowedCode: codes.NotFound, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: "default", Name: "ghost"})
		return err
	}},
	{name: "gRPC ImagePull", need: ownerauth.Upgrade, allowedCode: codes.NotFound, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: "default", Name: "ghost"})
		return err
	}},
	{name: "gRPC Hold", need: ownerauth.Upgrade, allowedCode: codes.NotFound, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).Hold(ctx, &edgeotav1.HoldRequest{Namespace: "default", Name: "ghost", Duration: "1h"})
		return err
	}},
	{name: "gRPC ReleaseHold", need: ownerauth.Upgrade, allowedCode: codes.NotFound, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).ReleaseHold(ctx, &edgeotav1.ReleaseHoldRequest{Namespace: "default", Name: "ghost"})
		return err
	}},
	{name: "gRPC ListUpgrades", need: ownerauth.View, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
		return err
	}},
	{name: "gRPC WatchUpgrades", need: ownerauth.View, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		stream, err := edgeotav1.NewOTAServiceClient(c).WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
		if err != nil {
			return err
		}
		// The snapshot, or the refusal.
		_, err = stream.Recv()
		return err
	}},
	{name: "gRPC ListActions", need: ownerauth.View, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).ListActions(ctx, &edgeotav1.ListActionsRequest{})
		return err
	}},
	{name: "gRPC CancelAction", need: ownerauth.Upgrade, allowedCode: codes.NotFound, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := edgeotav1.NewOTAServiceClient(c).CancelAction(ctx, &edgeotav1.CancelActionRequest{Namespace: "default", Name: "ghost", Action: "upgrade"})
		return err
	}},
	{name: "gRPC reflection", need: ownerauth.View, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		stream, err := reflectionpb.NewServerReflectionClient(c).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		// A Send refused because the server already ended the stream returns
		// io.EOF; the status comes with Recv either way.
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv()
		return err
	}},
	{name: "gRPC health", need: ownerauth.Open, allowedCode: codes.OK, grpc: func(ctx context.Context, c *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}},
}

// call runs op with token ("" for none) and returns the HTTP status or the
// gRPC code it got, and the REST answer.
func (f *fixture) call(op operation, token string) (int, codes.Code, response) {
	f.t.Helper()
	if op.grpc != nil {
		ctx, cancel := context.WithTimeout(withToken(context.Background(), token), 10*time.Second)
		defer cancel()
		return 0, status.Code(op.grpc(ctx, dial(f.t, f))), response{}
	}
	method, path, _ := strings.Cut(op.rest, " ")
	var headers []string
	if token != "" {
		headers = []string{"Authorization", "Bearer " + token}
	}
	if op.stream {
		resp := f.streamStatus(method, path, headers...)
		return resp.status, 0, resp
	}
	resp := f.do(method, path, "", headers...)
	return resp.status, 0, resp
}

// streamStatus sends a request whose answer streams and returns its status
// and header, without waiting for the stream's end.
func (f *fixture) streamStatus(method, path string, headers ...string) response {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := f.http.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header}
}

// TestAuthorizesByGroup runs every operation, over both protocols, as every
// kind of caller, and checks who gets through: with tokens configured, only
// the health checks are open, viewers may list, upgraders may also act.
func TestAuthorizesByGroup(t *testing.T) {
	f := newFixture(t, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	callers := []struct {
		name, token string
		allowed     ownerauth.Access // the most this caller may do
		refusal     codes.Code       // what it gets beyond that
		refusalHTTP int
	}{
		{name: "no credentials", token: "", allowed: ownerauth.Open, refusal: codes.Unauthenticated, refusalHTTP: 401},
		{name: "invalid token", token: "wrong-token", allowed: ownerauth.Open, refusal: codes.Unauthenticated, refusalHTTP: 401},
		{name: "no group", token: "nobody-token", allowed: ownerauth.Open, refusal: codes.PermissionDenied, refusalHTTP: 403},
		{name: "viewer", token: "viewer-token", allowed: ownerauth.View, refusal: codes.PermissionDenied, refusalHTTP: 403},
		{name: "upgrader", token: "upgrader-token", allowed: ownerauth.Upgrade},
	}
	for _, c := range callers {
		for _, op := range operations {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				wantHTTP, wantCode := op.allowedHTTP, op.allowedCode
				if op.need > c.allowed {
					wantHTTP, wantCode = c.refusalHTTP, c.refusal
				}
				gotHTTP, gotCode, resp := f.call(op, c.token)
				if op.grpc != nil && gotCode != wantCode {
					t.Errorf("got code %v, want %v", gotCode, wantCode)
				}
				if op.grpc == nil && gotHTTP != wantHTTP {
					t.Errorf("got HTTP %d %q, want %d", gotHTTP, resp.body, wantHTTP)
				}
				if challenge := resp.header.Get("WWW-Authenticate"); (gotHTTP == 401) != (challenge == `Bearer realm="edgeota"`) {
					t.Errorf("got HTTP %d with WWW-Authenticate %q, want the Bearer challenge exactly on 401", gotHTTP, challenge)
				}
			})
		}
	}
}

// TestAnonymousWithoutAuthentication keeps the loopback default: with no
// authentication configured every call is allowed, whatever credentials come.
func TestAnonymousWithoutAuthentication(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	for _, token := range []string{"", "anything"} {
		for _, op := range operations {
			t.Run(fmt.Sprintf("%s/token %q", op.name, token), func(t *testing.T) {
				gotHTTP, gotCode, resp := f.call(op, token)
				if op.grpc != nil && gotCode != op.allowedCode {
					t.Errorf("got code %v, want %v", gotCode, op.allowedCode)
				}
				if op.grpc == nil && gotHTTP != op.allowedHTTP {
					t.Errorf("got HTTP %d %q, want %d", gotHTTP, resp.body, op.allowedHTTP)
				}
			})
		}
	}
}

// TestAuthErrorsFollowContentNegotiation keeps 401 and 403 in the REST error
// format: one line of text for curl, grpc-gateway's status JSON when asked.
func TestAuthErrorsFollowContentNegotiation(t *testing.T) {
	f := newFixture(t, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	cases := []struct {
		name, token string
		wantHTTP    int
		wantCode    int
		wantText    string
	}{
		{"no credentials", "", 401, 16, "authentication required: present a bearer token or a client certificate\n"},
		{"invalid token", "wrong", 401, 16, "authentication failed: invalid bearer token\n"},
		{"viewer upgrading", "viewer-token", 403, 7, `user "vera" is not allowed this call: it needs group edgeota:upgraders` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.token != "" {
				headers = []string{"Authorization", "Bearer " + tc.token}
			}
			text := f.do(http.MethodPost, upgradePath, "*/*", headers...)
			if text.status != tc.wantHTTP || text.body != tc.wantText || text.contentType != contentTypeText {
				t.Errorf("text: got %d %q (%s), want %d %q (%s)", text.status, text.body, text.contentType, tc.wantHTTP, tc.wantText, contentTypeText)
			}
			js := f.do(http.MethodPost, upgradePath, "application/json", headers...)
			s := decodeStatus(t, js)
			if js.status != tc.wantHTTP || *s.Code != tc.wantCode || *s.Message+"\n" != tc.wantText {
				t.Errorf("JSON: got %d code %d %q, want %d code %d %q", js.status, *s.Code, *s.Message, tc.wantHTTP, tc.wantCode, tc.wantText)
			}
		})
	}
}

// TestClientCertificatesAuthenticate serves mutual TLS: the certificate's CN
// is the user and O the groups; without tokens a certificate is required,
// with tokens it is optional and a token works instead.
func TestClientCertificatesAuthenticate(t *testing.T) {
	serverCA, clientCA, otherCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	cases := []struct {
		name      string
		tokens    bool
		cert      []tls.Certificate
		token     string
		wantList  codes.Code
		wantPull  codes.Code
		wantHTTPs int // GET /pods; 0 means the handshake fails
	}{
		{name: "viewer certificate", cert: []tls.Certificate{clientCA.clientCert("vera", ownerauth.GroupViewers)},
			wantList: codes.OK, wantPull: codes.PermissionDenied, wantHTTPs: 200},
		{name: "upgrader certificate", cert: []tls.Certificate{clientCA.clientCert("uli", "fleet", ownerauth.GroupUpgraders)},
			wantList: codes.OK, wantPull: codes.NotFound, wantHTTPs: 200},
		{name: "certificate without group", cert: []tls.Certificate{clientCA.clientCert("nora")},
			wantList: codes.PermissionDenied, wantPull: codes.PermissionDenied, wantHTTPs: 403},
		{name: "no certificate, certificates required",
			wantList: codes.Unavailable, wantPull: codes.Unavailable},
		{name: "certificate of another CA", cert: []tls.Certificate{otherCA.clientCert("mallory", ownerauth.GroupUpgraders)},
			wantList: codes.Unavailable, wantPull: codes.Unavailable},
		{name: "no certificate, token instead", tokens: true, token: "upgrader-token",
			wantList: codes.OK, wantPull: codes.NotFound, wantHTTPs: 200},
		{name: "no certificate, no token", tokens: true,
			wantList: codes.Unauthenticated, wantPull: codes.Unauthenticated, wantHTTPs: 401},
		{name: "viewer certificate, invalid token", tokens: true, cert: []tls.Certificate{clientCA.clientCert("vera", ownerauth.GroupViewers)}, token: "wrong",
			wantList: codes.Unauthenticated, wantPull: codes.Unauthenticated, wantHTTPs: 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth := ownerauth.Authenticator{ClientCerts: true}
			if tc.tokens {
				auth.Tokens = mustTokens(t, testTokens)
			}
			serverTLS, clientTLS := tlsPair(t, serverCA, clientCA, tc.tokens, tc.cert...)
			f := newFixture(t, fixtureOptions{auth: auth, tls: serverTLS, clientTLS: clientTLS}, dsPod("p"))
			ctx, cancel := context.WithTimeout(withToken(context.Background(), tc.token), 10*time.Second)
			defer cancel()
			if _, err := f.rpc.ListPods(ctx, &edgeotav1.ListPodsRequest{}); status.Code(err) != tc.wantList {
				t.Errorf("gRPC ListPods: got %v, want %v", err, tc.wantList)
			}
			if _, err := f.rpc.ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: "default", Name: "ghost"}); status.Code(err) != tc.wantPull {
				t.Errorf("gRPC ImagePull: got %v, want %v", err, tc.wantPull)
			}
			req, _ := http.NewRequest(http.MethodGet, f.base+"/pods", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := f.http.Do(req)
			switch {
			case tc.wantHTTPs == 0 && err == nil:
				resp.Body.Close()
				t.Errorf("GET /pods: got %d, want the TLS handshake to fail", resp.StatusCode)
			case tc.wantHTTPs != 0 && err != nil:
				t.Errorf("GET /pods: %v, want %d", err, tc.wantHTTPs)
			case err == nil:
				resp.Body.Close()
				if resp.StatusCode != tc.wantHTTPs {
					t.Errorf("GET /pods: got %d, want %d", resp.StatusCode, tc.wantHTTPs)
				}
			}
		})
	}
}
