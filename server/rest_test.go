package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const (
	upgradePath   = "/openyurt.io/v1/namespaces/default/pods/p/upgrade"
	imagePullPath = "/openyurt.io/v1/namespaces/default/pods/p/imagepull"
)

// TestPlainTextBodiesForCurl keeps the exact bodies OpenYurt's and ACK Edge's
// agents answered with, for callers that do not ask for JSON.
func TestPlainTextBodiesForCurl(t *testing.T) {
	cases := []struct {
		name, path, accept string
		headers            []string
		want               string
	}{
		{name: "upgrade, curl's default", path: upgradePath, accept: "*/*", want: "Start updating pod default/p\n"},
		{name: "upgrade, no Accept", path: upgradePath, want: "Start updating pod default/p\n"},
		{name: "imagepull, curl's default", path: imagePullPath, accept: "*/*", want: "Image pre-pull requested for pod default/p\n"},
		{name: "Content-Type does not decide", path: upgradePath, accept: "*/*", headers: []string{"Content-Type", "application/json"}, want: "Start updating pod default/p\n"},
		{name: "text asked for", path: upgradePath, accept: "text/plain", want: "Start updating pod default/p\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{}, dsPod("p"))
			resp := f.do(http.MethodPost, tc.path, tc.accept, tc.headers...)
			if resp.status != http.StatusOK || resp.body != tc.want {
				t.Errorf("got %d %q, want 200 %q", resp.status, resp.body, tc.want)
			}
			if resp.contentType != "text/plain; charset=utf-8" {
				t.Errorf("got Content-Type %q, want text/plain; charset=utf-8", resp.contentType)
			}
		})
	}
}

func TestJSONBodiesWhenAskedFor(t *testing.T) {
	cases := []struct{ name, path, accept, want string }{
		{name: "plain", path: upgradePath, accept: "application/json", want: "Start updating pod default/p"},
		{name: "with charset", path: upgradePath, accept: "application/json; charset=utf-8", want: "Start updating pod default/p"},
		{name: "among other ranges", path: imagePullPath, accept: "text/html, application/json;q=0.9, */*;q=0.1", want: "Image pre-pull requested for pod default/p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{}, dsPod("p"))
			resp := f.do(http.MethodPost, tc.path, tc.accept)
			var body map[string]any
			if err := json.Unmarshal([]byte(resp.body), &body); err != nil {
				t.Fatalf("got %d %q, want JSON: %v", resp.status, resp.body, err)
			}
			if resp.status != http.StatusOK || len(body) != 1 || body["message"] != tc.want {
				t.Errorf("got %d %v, want 200 {\"message\": %q}", resp.status, body, tc.want)
			}
			if resp.contentType != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", resp.contentType)
			}
		})
	}
}

// statusBody is grpc-gateway's error shape.
type statusBody struct {
	Code    *int              `json:"code"`
	Message *string           `json:"message"`
	Details *[]map[string]any `json:"details"`
}

func decodeStatus(t *testing.T, resp response) statusBody {
	t.Helper()
	var s statusBody
	if err := json.Unmarshal([]byte(resp.body), &s); err != nil {
		t.Fatalf("got %q, want a JSON status: %v", resp.body, err)
	}
	if s.Code == nil || s.Message == nil || s.Details == nil {
		t.Fatalf("got %q, want code, message and details", resp.body)
	}
	if resp.contentType != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", resp.contentType)
	}
	return s
}

func TestErrorBodies(t *testing.T) {
	cases := []struct {
		name, method, path string
		pods               bool
		wantHTTP, wantCode int
		wantText           string
	}{
		{name: "refused upgrade", method: http.MethodPost, path: "/openyurt.io/v1/namespaces/default/pods/other/upgrade", pods: true,
			wantHTTP: 403, wantCode: 9, wantText: "Pod is not-updatable: pod default/other has no newer version (condition PodNeedUpgrade is missing)\n"},
		{name: "unknown path", method: http.MethodGet, path: "/nope",
			wantHTTP: 404, wantCode: 5, wantText: "Not Found: GET \"/nope\"\n"},
		{name: "route too short", method: http.MethodPost, path: "/openyurt.io/v1/namespaces/default/pods/upgrade",
			wantHTTP: 404, wantCode: 5, wantText: "Not Found: POST \"/openyurt.io/v1/namespaces/default/pods/upgrade\"\n"},
		{name: "GET on upgrade", method: http.MethodGet, path: upgradePath,
			wantHTTP: 405, wantCode: 12, wantText: "Method Not Allowed: GET \"" + upgradePath + "\"\n"},
		{name: "POST on pods", method: http.MethodPost, path: "/pods",
			wantHTTP: 405, wantCode: 12, wantText: "Method Not Allowed: POST \"/pods\"\n"},
		{name: "DELETE on imagepull", method: http.MethodDelete, path: imagePullPath,
			wantHTTP: 405, wantCode: 12, wantText: "Method Not Allowed: DELETE \"" + imagePullPath + "\"\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{}, dsPod("p"), dsPod("other", withoutCondition("PodNeedUpgrade")))

			text := f.do(tc.method, tc.path, "*/*")
			if text.status != tc.wantHTTP || text.body != tc.wantText {
				t.Errorf("text: got %d %q, want %d %q", text.status, text.body, tc.wantHTTP, tc.wantText)
			}
			if text.contentType != "text/plain; charset=utf-8" {
				t.Errorf("text: got Content-Type %q, want text/plain; charset=utf-8", text.contentType)
			}

			js := f.do(tc.method, tc.path, "application/json")
			s := decodeStatus(t, js)
			if js.status != tc.wantHTTP || *s.Code != tc.wantCode || *s.Message+"\n" != tc.wantText {
				t.Errorf("JSON: got %d code %d %q, want %d code %d %q", js.status, *s.Code, *s.Message, tc.wantHTTP, tc.wantCode, strings.TrimSpace(tc.wantText))
			}
		})
	}
}

func TestNoRedirects(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	for _, path := range []string{
		"/openyurt.io/v1/namespaces/default/pods/../upgrade",
		"/openyurt.io/v1/namespaces/default/pods/./p/upgrade",
		"//pods",
		"/pods/",
	} {
		resp := f.do(http.MethodPost, path, "")
		if resp.status >= 300 && resp.status < 400 || resp.status >= 500 {
			t.Errorf("POST %s: got %d (Location %q), want a 4xx answer", path, resp.status, resp.header.Get("Location"))
		}
	}
}

func TestProbes(t *testing.T) {
	synced := newFixture(t, fixtureOptions{})
	unsynced := newFixture(t, fixtureOptions{unsynced: true})
	cases := []struct {
		name     string
		f        *fixture
		method   string
		path     string
		wantHTTP int
	}{
		{"healthz", synced, http.MethodGet, "/healthz", 200},
		{"healthz before sync", unsynced, http.MethodGet, "/healthz", 200},
		{"readyz", synced, http.MethodGet, "/readyz", 200},
		{"readyz before sync", unsynced, http.MethodGet, "/readyz", 503},
		{"healthz POST", synced, http.MethodPost, "/healthz", 405},
		{"pods before sync", unsynced, http.MethodGet, "/pods", 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if resp := tc.f.do(tc.method, tc.path, ""); resp.status != tc.wantHTTP {
				t.Errorf("got %d %q, want %d", resp.status, resp.body, tc.wantHTTP)
			}
		})
	}
}
