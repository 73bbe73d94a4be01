package apiidentity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// apiServer answers Settle's two requests as kube-apiserver would for a
// token whose review names user and extra node, and lets it impersonate
// allowedNode (none when empty). Its first unanswered requests get a 503.
type apiServer struct {
	user, node, allowedNode string
	unanswered              int

	mu       *sync.Mutex
	requests []*http.Request
}

// newAPIServer is s, ready to serve.
func newAPIServer(s apiServer) *apiServer {
	s.mu = &sync.Mutex{}
	return &s
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	down := len(s.requests) <= s.unanswered
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if down {
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "etcd is away")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
		if r.Header.Get("Impersonate-User") != "" {
			writeStatus(w, http.StatusBadRequest, "BadRequest", "the review is asked as the credentials, never impersonated")
			return
		}
		review := authenticationv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"}}
		review.Status.UserInfo.Username = s.user
		if s.node != "" {
			review.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{NodeNameExtra: {s.node}}
		}
		_ = json.NewEncoder(w).Encode(review)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods":
		as := r.Header.Get("Impersonate-User")
		if s.allowedNode == "" || as != NodeUser(s.allowedNode) || r.URL.Query().Get("fieldSelector") != "spec.nodeName="+s.allowedNode {
			writeStatus(w, http.StatusForbidden, "Forbidden", `users "`+as+`" is forbidden: User "`+s.user+`" cannot impersonate:associated-node resource "nodes"`)
			return
		}
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
	default:
		writeStatus(w, http.StatusNotFound, "NotFound", "no route "+r.URL.Path)
	}
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg})
}

func (s *apiServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

const agentSA = "system:serviceaccount:edgeota-system:ota-server"

var fast = Options{Timeout: 2 * time.Second, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

func settle(t *testing.T, s *apiServer, want Mode) (Settled, string, error) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	logs := &logBuffer{}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(t.Context(), logger)
	got, err := Settle(ctx, &rest.Config{Host: srv.URL}, "edge-1", want, fast)
	if underlier, ok := logger.GetSink().(ktesting.Underlier); ok {
		for _, e := range underlier.GetBuffer().Data() {
			logs.add(e.Message)
		}
	}
	return got, logs.String(), err
}

type logBuffer struct{ lines []string }

func (b *logBuffer) add(s string)   { b.lines = append(b.lines, s) }
func (b *logBuffer) String() string { return strings.Join(b.lines, "\n") }

// TestSettle is the identity selection: each answer of the API server, in
// each mode.
func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		name         string
		server       apiServer
		want         Mode
		wantMode     Mode
		wantUser     string
		wantErr      string // "" for none
		wantFellBack string
	}{
		{name: "node: bound token allowed to impersonate", server: apiServer{user: agentSA, node: "edge-1", allowedNode: "edge-1"},
			want: Node, wantMode: Node, wantUser: "system:node:edge-1"},
		{name: "node: token of another node", server: apiServer{user: agentSA, node: "edge-2", allowedNode: "edge-2"},
			want: Node, wantErr: `bound to a pod on node "edge-2", not on --node-name "edge-1"`},
		{name: "node: token naming no node", server: apiServer{user: "kubernetes-admin"},
			want: Node, wantErr: `(user "kubernetes-admin") name no node`},
		{name: "node: impersonation refused", server: apiServer{user: agentSA, node: "edge-1"},
			want: Node, wantErr: "needs Kubernetes 1.36 or later"},
		{name: "auto: works", server: apiServer{user: agentSA, node: "edge-1", allowedNode: "edge-1"},
			want: Auto, wantMode: Node, wantUser: "system:node:edge-1"},
		{name: "auto: impersonation refused", server: apiServer{user: agentSA, node: "edge-1"},
			want: Auto, wantMode: ServiceAccount, wantUser: agentSA, wantFellBack: "refused to let the agent act as node"},
		{name: "auto: token naming no node", server: apiServer{user: "kubernetes-admin"},
			want: Auto, wantMode: ServiceAccount, wantUser: "kubernetes-admin", wantFellBack: "name no node"},
		{name: "auto: token of another node", server: apiServer{user: agentSA, node: "edge-2", allowedNode: "edge-2"},
			want: Auto, wantErr: `not on --node-name "edge-1"`},
		{name: "node: a dead zone first", server: apiServer{user: agentSA, node: "edge-1", allowedNode: "edge-1", unanswered: 5},
			want: Node, wantMode: Node, wantUser: "system:node:edge-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(tc.server)
			got, logs, err := settle(t, s, tc.want)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("got %v, want %s", err, tc.wantMode)
			}
			if got.Mode != tc.wantMode || got.User != tc.wantUser || !strings.Contains(got.FellBack, tc.wantFellBack) || (tc.wantFellBack == "") != (got.FellBack == "") {
				t.Errorf("got %+v, want mode %s user %s fell back for %q", got, tc.wantMode, tc.wantUser, tc.wantFellBack)
			}
			warned := strings.Count(logs, "WARNING: --identity=auto")
			if tc.wantFellBack != "" && warned != 1 || tc.wantFellBack == "" && warned != 0 {
				t.Errorf("got %d fall-back warnings in the log, want %d:\n%s", warned, map[bool]int{true: 1}[tc.wantFellBack != ""], logs)
			}
			if s.unanswered > 0 && s.count() != s.unanswered+2 {
				t.Errorf("got %d requests, want %d unanswered and the 2 that settle", s.count(), s.unanswered)
			}
		})
	}
}

func TestServiceAccountAsksNothing(t *testing.T) {
	s := newAPIServer(apiServer{})
	got, _, err := settle(t, s, ServiceAccount)
	if err != nil || got.Mode != ServiceAccount || s.count() != 0 {
		t.Errorf("got %+v, %v after %d requests; want the service account and no request", got, err, s.count())
	}
}

// TestSettleWaitsUntilCancelled: an API server that never answers keeps
// Settle asking until its context ends, which it then says.
func TestSettleWaitsUntilCancelled(t *testing.T) {
	srv := httptest.NewServer(newAPIServer(apiServer{unanswered: 1 << 30}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := Settle(ctx, &rest.Config{Host: srv.URL}, "edge-1", Node, fast)
	if err == nil || !strings.Contains(err.Error(), "settling the agent's identity") {
		t.Errorf("got %v, want the wait's end", err)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range Modes {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q): got %q, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "Node", "sa", "node "} {
		if _, err := ParseMode(bad); err == nil || !strings.Contains(err.Error(), "want node, serviceaccount or auto") {
			t.Errorf("ParseMode(%q): got %v, want an error naming the modes", bad, err)
		}
	}
}

func TestAsNode(t *testing.T) {
	base := &rest.Config{Host: "https://example.invalid", BearerToken: "t"}
	c := AsNode(base, "edge-1")
	if c.Impersonate.UserName != "system:node:edge-1" || len(c.Impersonate.Groups) != 0 || base.Impersonate.UserName != "" || c.BearerToken != "t" {
		t.Errorf("got %+v (base %+v), want a copy impersonating system:node:edge-1 only", c.Impersonate, base.Impersonate)
	}
}
