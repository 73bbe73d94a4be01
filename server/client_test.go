package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiRequest is what an API server sees of one request.
type apiRequest struct {
	Method, URL, ContentType, Accept, UserAgent, Body string
}

// recordingAPIServer records every request and answers each with a small
// JSON object: a watch gets an empty stream, anything else the pod "p" (a
// pod list when the path names no pod).
func recordingAPIServer(t *testing.T) (*httptest.Server, func() []apiRequest) {
	var mu sync.Mutex
	var seen []apiRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, apiRequest{r.Method, r.URL.String(), r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("User-Agent"), string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
		case strings.HasSuffix(r.URL.Path, "/pods"):
			_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"p","namespace":"default"}}]}`)
		default:
			_, _ = io.WriteString(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []apiRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]apiRequest(nil), seen...)
	}
}

// TestClientSendsWhatTheTypedClientSends makes every call the agent makes
// through NewClient and through client-go's typed clientset, and requires
// the API server to see the very same requests, and both to read the answers
// alike.
func TestClientSendsWhatTheTypedClientSends(t *testing.T) {
	ctx := context.Background()
	uid, rv, seconds := types.UID("uid-p"), "7", int64(30)
	calls := func(t *testing.T, c Client) []string {
		var got []string
		list, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + testNode, ResourceVersion: "0"})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		got = append(got, list.Items[0].Name)
		w, err := c.Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + testNode, ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: &seconds})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		for range w.ResultChan() {
		}
		list, err = c.Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + testNode + ",metadata.name=p"})
		if err != nil {
			t.Fatalf("List by name: %v", err)
		}
		got = append(got, list.Items[0].Name)
		if err := c.Pods("default").Delete(ctx, "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := c.Pods("default").Delete(ctx, "p", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			t.Fatalf("dry-run Delete: %v", err)
		}
		pod, err := c.Pods("default").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{FieldManager: FieldManager}, "status")
		if err != nil {
			t.Fatalf("Patch: %v", err)
		}
		return append(got, pod.Name)
	}

	leanSrv, leanSeen := recordingAPIServer(t)
	lean, err := NewClient(&rest.Config{Host: leanSrv.URL, UserAgent: "ota-server/test"})
	if err != nil {
		t.Fatal(err)
	}
	leanGot := calls(t, lean)

	typedSrv, typedSeen := recordingAPIServer(t)
	clientset, err := kubernetes.NewForConfig(&rest.Config{Host: typedSrv.URL, UserAgent: "ota-server/test"})
	if err != nil {
		t.Fatal(err)
	}
	typedGot := calls(t, typedClient{clientset})

	if diff := cmp.Diff(typedSeen(), leanSeen()); diff != "" {
		t.Errorf("requests (-typed +NewClient):\n%s", diff)
	}
	if diff := cmp.Diff(typedGot, leanGot); diff != "" {
		t.Errorf("answers read (-typed +NewClient):\n%s", diff)
	}
	if len(leanSeen()) != 6 {
		t.Errorf("the API server saw %d requests, want 6", len(leanSeen()))
	}
}
