package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/edgeota/edgeota/internal/kube"
)

// apiServer answers every request with an empty object of JSON and records
// the method, path and Accept header of each.
type apiServer struct {
	mu       sync.Mutex
	requests []string
	accepts  []string
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"metadata":{}}`))
}

// TestEachResourceIsAskedAtItsPath: every call the controller makes goes to
// its group's path, preferring protobuf, as client-go's typed clients send
// them.
func TestEachResourceIsAskedAtItsPath(t *testing.T) {
	api := &apiServer{}
	server := httptest.NewServer(api)
	defer server.Close()
	client, err := kube.NewForConfig(&rest.Config{Host: server.URL, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	ctx := context.Background()
	calls := []struct {
		want string
		call func() error
	}{
		{"GET /api/v1/pods", func() error { _, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }},
		{"PATCH /api/v1/namespaces/ns/pods/p/status", func() error {
			_, err := client.CoreV1().Pods("ns").Patch(ctx, "p", types.StrategicMergePatchType, []byte("{}"), metav1.PatchOptions{}, "status")
			return err
		}},
		{"DELETE /api/v1/namespaces/ns/pods/p", func() error { return client.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}) }},
		{"GET /api/v1/nodes", func() error { _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
		{"DELETE /api/v1/namespaces/ns/configmaps/c", func() error { return client.CoreV1().ConfigMaps("ns").Delete(ctx, "c", metav1.DeleteOptions{}) }},
		{"POST /api/v1/namespaces/ns/events", func() error {
			_, err := kube.EventSink{Client: client}.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}})
			return err
		}},
		{"PATCH /api/v1/namespaces/ns/events/e", func() error {
			_, err := kube.EventSink{Client: client}.Patch(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, []byte("{}"))
			return err
		}},
		{"PATCH /apis/apps/v1/namespaces/ns/daemonsets/d", func() error {
			_, err := client.AppsV1().DaemonSets("ns").Patch(ctx, "d", types.MergePatchType, []byte("{}"), metav1.PatchOptions{})
			return err
		}},
		{"GET /apis/apps/v1/namespaces/ns/controllerrevisions", func() error {
			_, err := client.AppsV1().ControllerRevisions("ns").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"POST /apis/batch/v1/namespaces/ns/jobs", func() error {
			_, err := client.BatchV1().Jobs("ns").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}}, metav1.CreateOptions{})
			return err
		}},
		{"GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/l", func() error {
			_, err := client.CoordinationV1().Leases("ns").Get(ctx, "l", metav1.GetOptions{})
			return err
		}},
		{"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews", func() error {
			_, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
			return err
		}},
		{"POST /apis/authentication.k8s.io/v1/selfsubjectreviews", func() error {
			_, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			return err
		}},
	}
	var want []string
	for _, c := range calls {
		want = append(want, c.want)
		if err := c.call(); err != nil {
			t.Errorf("%s: %v", c.want, err)
		}
	}
	if !slices.Equal(api.requests, want) {
		t.Errorf("got requests\n%q\nwant\n%q", api.requests, want)
	}
	for i, accept := range api.accepts {
		if !strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf") {
			t.Errorf("%s: got Accept %q, want protobuf first", api.requests[i], accept)
		}
	}
}

// TestSchemeHoldsTheControllersGroupsAlone: the event recorder names kinds
// from it; no group the controller does not call is linked through it.
func TestSchemeHoldsTheControllersGroupsAlone(t *testing.T) {
	scheme, err := kube.Scheme()
	if err != nil {
		t.Fatalf("Scheme: %v", err)
	}
	var groups []string
	for gv := range scheme.AllKnownTypes() {
		if gv.Version != runtime.APIVersionInternal && !slices.Contains(groups, gv.GroupVersion().String()) {
			groups = append(groups, gv.GroupVersion().String())
		}
	}
	slices.Sort(groups)
	want := []string{"apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "batch/v1", "coordination.k8s.io/v1", "v1"}
	if !slices.Equal(groups, want) {
		t.Errorf("got groups %q, want %q", groups, want)
	}
}
