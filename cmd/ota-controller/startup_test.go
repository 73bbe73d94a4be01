package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/internal/kube/kubetest"
)

const (
	testNamespace = "edgeota-system"
	testUser      = "system:serviceaccount:edgeota-system:ota-controller"
)

// testChecker retries at once: the tests count attempts, never time.
var testChecker = checker{backoff: wait.Backoff{Duration: time.Millisecond}, attemptTimeout: time.Minute}

// fakeAPI is a fake clientset answering the probes as scripted.
type fakeAPI struct {
	*fake.Clientset
	mu      sync.Mutex
	answers map[string][]error // by resource; nil answers OK, and so does an exhausted script
	creates []k8stesting.CreateActionImpl
	// rbacAllows is the SelfSubjectAccessReview's answer; user the
	// SelfSubjectReview's ("" for an error).
	rbacAllows bool
	user       string
	// onCreate, if set, runs before each probe create is answered.
	onCreate func(attempt int)
}

func newFakeAPI(answers map[string][]error) *fakeAPI {
	api := &fakeAPI{Clientset: fake.NewClientset(), answers: answers, user: testUser}
	probe := func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateActionImpl)
		api.mu.Lock()
		api.creates = append(api.creates, create)
		attempt, resource := len(api.creates), create.GetResource().Resource
		var err error
		if script := api.answers[resource]; len(script) > 0 {
			err, api.answers[resource] = script[0], script[1:]
		}
		onCreate := api.onCreate
		api.mu.Unlock()
		if onCreate != nil {
			onCreate(attempt)
		}
		if err != nil {
			return true, nil, err
		}
		return true, create.GetObject(), nil
	}
	api.PrependReactor("create", "configmaps", probe)
	api.PrependReactor("create", "leases", probe)
	api.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: api.rbacAllows}}, nil
	})
	api.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		if api.user == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, "", errors.New("no"))
		}
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: api.user}}}, nil
	})
	return api
}

// attempts is how many probe creates the API server received.
func (api *fakeAPI) attempts() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.creates)
}

// check runs testChecker's checks of o against api.
func (api *fakeAPI) check(ctx context.Context, o options) error {
	client := kubetest.Wrap(api)
	return testChecker.run(ctx, client, startupChecks(o, client))
}

// withNamespaces is options with the record and Lease namespaces, leader
// election on unless lease is "".
func withNamespaces(record, lease string) options {
	return options{recordNS: record, leaseNamespace: lease, leaderElect: lease != ""}
}

// namespaceMissing is the API server's 404 for a create in a namespace that
// does not exist (its NamespaceLifecycle admission).
func namespaceMissing(namespace string) error {
	return apierrors.NewNotFound(corev1.Resource("namespaces"), namespace)
}

// rbacForbids is RBAC's 403 for a create of resource.
func rbacForbids(group, resource, namespace string) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, "",
		fmt.Errorf("User %q cannot create resource %q in API group %q in the namespace %q", testUser, resource, group, namespace))
}

// expectMessage fails the test unless err's message holds every part.
func expectMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("got error %q, want it to say %q", err, p)
		}
	}
}

func TestStartupChecksCreateNothing(t *testing.T) {
	for _, tt := range []struct {
		name          string
		o             options
		wantResources []string
	}{
		{"with leader election", withNamespaces("records", "leases"), []string{"configmaps", "leases"}},
		{"without leader election", withNamespaces("records", ""), []string{"configmaps"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(nil)
			if err := api.check(t.Context(), tt.o); err != nil {
				t.Fatalf("got %v, want the checks to pass", err)
			}
			var got []string
			for _, c := range api.creates {
				got = append(got, c.GetResource().Resource)
				if opts := c.GetCreateOptions(); len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll || opts.FieldManager != controller.FieldManager {
					t.Errorf("%s: got options %+v, want dry-run All by field manager %s", c.GetResource().Resource, opts, controller.FieldManager)
				}
				meta := objectMeta(t, c.GetObject())
				wantNamespace := map[string]string{"configmaps": tt.o.recordNS, "leases": tt.o.leaseNamespace}[c.GetResource().Resource]
				if c.GetNamespace() != wantNamespace || meta.Namespace != wantNamespace {
					t.Errorf("%s: got namespace %q (object %q), want %q", c.GetResource().Resource, c.GetNamespace(), meta.Namespace, wantNamespace)
				}
				// Nothing of a probe may look like a rollout record
				// (edgeota-rollout-<uid>-<revision>-<shard>, labelled
				// controller.RecordLabel), nor like the Lease ota-controller.
				if meta.Name != "" || meta.GenerateName != probeGenerateName || strings.HasPrefix(meta.GenerateName, "edgeota-rollout-") ||
					strings.HasPrefix(meta.GenerateName, leaseName) {
					t.Errorf("%s: got name %q, generateName %q; want a name generated from %q", c.GetResource().Resource, meta.Name, meta.GenerateName, probeGenerateName)
				}
				if len(meta.Labels) != 0 || len(meta.Annotations) != 0 || len(meta.OwnerReferences) != 0 {
					t.Errorf("%s: got labels %v, annotations %v, owners %v; want none", c.GetResource().Resource, meta.Labels, meta.Annotations, meta.OwnerReferences)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantResources, ",") {
				t.Errorf("got probes of %v, want %v", got, tt.wantResources)
			}
		})
	}
}

// objectMeta is a probe object's metadata.
func objectMeta(t *testing.T, obj runtime.Object) metav1.ObjectMeta {
	t.Helper()
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if len(o.Data) != 0 || len(o.BinaryData) != 0 {
			t.Errorf("probe ConfigMap holds data %v %v, want none", o.Data, o.BinaryData)
		}
		return o.ObjectMeta
	case *coordinationv1.Lease:
		if o.Spec.HolderIdentity != nil {
			t.Errorf("probe Lease names holder %q, want none", *o.Spec.HolderIdentity)
		}
		return o.ObjectMeta
	}
	t.Fatalf("got a probe of type %T", obj)
	return metav1.ObjectMeta{}
}

func TestExitsWhenRecordNamespaceMissing(t *testing.T) {
	api := newFakeAPI(map[string][]error{"configmaps": {namespaceMissing("edgeota-absent")}})
	err := api.check(t.Context(), withNamespaces("edgeota-absent", testNamespace))
	expectMessage(t, err, "cannot create configmaps in namespace edgeota-absent", "its rollout records (--record-namespace)",
		"the namespace does not exist", "kubectl create namespace edgeota-absent", "or pass --record-namespace naming an existing namespace")
	if strings.Contains(err.Error(), "leases") {
		t.Errorf("got %q, want nothing said of the Lease, whose namespace exists", err)
	}
	if got := api.attempts(); got != 2 {
		t.Errorf("got %d probes, want 2: one each, the 404 final", got)
	}
}

func TestExitsWhenLeaseNamespaceMissing(t *testing.T) {
	api := newFakeAPI(map[string][]error{"leases": {namespaceMissing("edgeota-absent")}})
	err := api.check(t.Context(), withNamespaces(testNamespace, "edgeota-absent"))
	expectMessage(t, err, "cannot create leases.coordination.k8s.io in namespace edgeota-absent",
		"the leader-election Lease ota-controller (--leader-elect-namespace)", "kubectl create namespace edgeota-absent",
		"or pass --leader-elect-namespace naming an existing namespace")
	if strings.Contains(err.Error(), "configmaps") {
		t.Errorf("got %q, want nothing said of the records, whose namespace exists", err)
	}
}

func TestOneMessageForAMissingNamespaceBothFlagsName(t *testing.T) {
	api := newFakeAPI(map[string][]error{"configmaps": {namespaceMissing("edgeota-absent")}, "leases": {namespaceMissing("edgeota-absent")}})
	err := api.check(t.Context(), withNamespaces("edgeota-absent", "edgeota-absent"))
	expectMessage(t, err, "cannot create configmaps or leases.coordination.k8s.io in namespace edgeota-absent",
		"its rollout records (--record-namespace) and the leader-election Lease ota-controller (--leader-elect-namespace)",
		"or pass --record-namespace and --leader-elect-namespace naming an existing namespace")
	if n := strings.Count(err.Error(), "kubectl create namespace"); n != 1 {
		t.Errorf("got %q, saying to create the namespace %d times, want once", err, n)
	}
}

func TestExitsWhenForbidden(t *testing.T) {
	for _, tt := range []struct {
		name    string
		o       options
		answers map[string][]error
		user    string
		want    []string
	}{
		{"records, as a service account", withNamespaces(testNamespace, ""),
			map[string][]error{"configmaps": {rbacForbids("", "configmaps", testNamespace)}}, testUser,
			[]string{"cannot create configmaps in namespace edgeota-system, where ota-controller keeps its rollout records (--record-namespace): forbidden",
				`User "` + testUser + `" cannot create resource "configmaps"`, "as deploy/'s Role ota-controller-rollout-records does",
				"kubectl -n edgeota-system create role ota-controller-rollout-records --verb=list,watch,create,patch,delete --resource=configmaps && " +
					"kubectl -n edgeota-system create rolebinding ota-controller-rollout-records --role=ota-controller-rollout-records --serviceaccount=edgeota-system:ota-controller;",
				"or pass --record-namespace naming a namespace where it has them"}},
		{"the Lease, as a user", withNamespaces("records", "leases"),
			map[string][]error{"leases": {rbacForbids("coordination.k8s.io", "leases", "leases")}}, "alice",
			[]string{"cannot create leases.coordination.k8s.io in namespace leases, where ota-controller keeps the leader-election Lease ota-controller (--leader-elect-namespace): forbidden",
				"kubectl -n leases create role ota-controller-leader-election --verb=get,create,update --resource=leases.coordination.k8s.io && " +
					"kubectl -n leases create rolebinding ota-controller-leader-election --role=ota-controller-leader-election --user=alice;",
				"or pass --leader-elect-namespace naming a namespace where it has them"}},
		{"identity unknown", withNamespaces(testNamespace, ""),
			map[string][]error{"configmaps": {rbacForbids("", "configmaps", testNamespace)}}, "",
			[]string{"--role=ota-controller-rollout-records --user=<the user named above>;"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(tt.answers)
			api.user = tt.user
			err := api.check(t.Context(), tt.o)
			expectMessage(t, err, tt.want...)
			if !apierrors.IsForbidden(err) {
				t.Errorf("got %v, want it to wrap the API server's 403", err)
			}
			if got, want := api.attempts(), len(startupChecks(tt.o, kubetest.Wrap(api))); got != want {
				t.Errorf("got %d probes, want %d: one each, the 403 final", got, want)
			}
		})
	}
}

func TestExitsWhenAdmissionRefuses(t *testing.T) {
	refusal := apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("exceeded quota: records, requested: count/configmaps=1, used: count/configmaps=10, limited: count/configmaps=10"))
	api := newFakeAPI(map[string][]error{"configmaps": {refusal}})
	api.rbacAllows = true
	err := api.check(t.Context(), withNamespaces(testNamespace, ""))
	expectMessage(t, err, "cannot create configmaps in namespace edgeota-system", "refused by admission, not by RBAC", "exceeded quota",
		"or pass --record-namespace naming another namespace")
	if strings.Contains(err.Error(), "create role") {
		t.Errorf("got %q, want no Role suggested: RBAC allows it", err)
	}
}

func TestExitsWhenNamespaceTerminating(t *testing.T) {
	terminating := apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("unable to create new content in namespace edgeota-system because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace edgeota-system is being terminated", Field: "metadata.namespace"})
	api := newFakeAPI(map[string][]error{"configmaps": {terminating}})
	err := api.check(t.Context(), withNamespaces(testNamespace, ""))
	expectMessage(t, err, "cannot create configmaps in namespace edgeota-system", "the namespace is being deleted",
		"create it again (kubectl create namespace edgeota-system)", "or pass --record-namespace naming another namespace")
}

func TestExitsOnA404NotTheNamespaces(t *testing.T) {
	notFound := apierrors.NewGenericServerResponse(404, "POST", corev1.Resource("configmaps"), "", "404 page not found", 0, true)
	api := newFakeAPI(map[string][]error{"configmaps": {notFound}})
	err := api.check(t.Context(), withNamespaces(testNamespace, ""))
	expectMessage(t, err, "cannot create configmaps in namespace edgeota-system", "404 without naming the namespace", "the kubeconfig's server")
	if strings.Contains(err.Error(), "kubectl create namespace") {
		t.Errorf("got %q, want no namespace to create: the 404 is not the namespace's", err)
	}
}

func TestRetriesUntilTheAPIServerAnswers(t *testing.T) {
	transient := []error{
		fmt.Errorf("Post \"https://127.0.0.1:6443/api/v1/namespaces/edgeota-system/configmaps\": dial tcp 127.0.0.1:6443: %w", syscall.ECONNREFUSED),
		context.DeadlineExceeded,
		apierrors.NewInternalError(errors.New("etcdserver: leader changed")),
		apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
		apierrors.NewTimeoutError("request did not complete within requested timeout", 1),
		apierrors.NewTooManyRequests("too many requests", 1),
		apierrors.NewUnauthorized("Unauthorized"),
		apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New(namespacesNotReady)),
	}
	api := newFakeAPI(map[string][]error{"configmaps": transient, "leases": {apierrors.NewInternalError(errors.New("boom"))}})
	if err := api.check(t.Context(), withNamespaces(testNamespace, testNamespace)); err != nil {
		t.Fatalf("got %v, want the checks to pass once the API server answers", err)
	}
	if got, want := api.attempts(), len(transient)+1+2; got != want {
		t.Errorf("got %d probes, want %d: each transient answer retried", got, want)
	}
}

func TestRetriesUntilTheContextEnds(t *testing.T) {
	const stopAt = 5
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	refused := fmt.Errorf("dial tcp 127.0.0.1:6443: %w", syscall.ECONNREFUSED)
	api := newFakeAPI(map[string][]error{"configmaps": {refused, refused, refused, refused, refused, refused, refused}})
	api.onCreate = func(attempt int) {
		if attempt == stopAt {
			cancel()
		}
	}
	err := api.check(ctx, withNamespaces(testNamespace, testNamespace))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v, want the context's end and the last answer", err)
	}
	expectMessage(t, err, "checking that ota-controller may create configmaps in namespace edgeota-system: stopped", "after 5 attempts")
	if got := api.attempts(); got != stopAt {
		t.Errorf("got %d probes, want %d: none once the context ended, the Lease's neither", got, stopAt)
	}
}

// apiRequest is what a test API server received.
type apiRequest struct {
	method, path string
	query        url.Values
	body         []byte
}

// startAPIServer serves answer on loopback, recording each request, until
// the test ends, and returns a kubeconfig reaching it.
func startAPIServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) (kubeconfig string, requests func() []apiRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []apiRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, apiRequest{method: r.Method, path: r.URL.Path, query: r.URL.Query(), body: body})
		n := len(got)
		mu.Unlock()
		answer(w, r, n)
	}))
	t.Cleanup(srv.Close)
	config := clientcmdapi.NewConfig()
	config.Clusters["test"] = &clientcmdapi.Cluster{Server: srv.URL}
	config.AuthInfos["test"] = &clientcmdapi.AuthInfo{}
	config.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	config.CurrentContext = "test"
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, func() []apiRequest {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// writeJSON answers with code and obj as the API server would.
func writeJSON(t *testing.T, w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		t.Error(err)
	}
}

// status is err's Status as the API server writes it.
func status(err *apierrors.StatusError) metav1.Status {
	s := err.ErrStatus
	s.Kind, s.APIVersion = "Status", "v1"
	return s
}

// TestRetriesAHungRequest: an API server that does not answer (a
// black-holed link) is given up on after the attempt's timeout and asked
// again, and what goes on the wire is a dry-run by the controller's field
// manager of an object with a generated name.
func TestRetriesAHungRequest(t *testing.T) {
	kubeconfig, requests := startAPIServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			<-r.Context().Done() // until the client gives up
			return
		}
		writeJSON(t, w, http.StatusCreated, corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: probeGenerateName + "x1y2z", Namespace: testNamespace}})
	})
	client := clientFor(t, kubeconfig)
	k := checker{backoff: wait.Backoff{Duration: time.Millisecond}, attemptTimeout: 500 * time.Millisecond}
	if err := k.run(t.Context(), client, startupChecks(withNamespaces(testNamespace, ""), client)); err != nil {
		t.Fatalf("got %v, want the check to pass on the answered attempt", err)
	}
	got := requests()
	if len(got) < 2 {
		t.Fatalf("got %d requests, want the hung one and another", len(got))
	}
	for _, r := range got {
		if r.method != http.MethodPost || r.path != "/api/v1/namespaces/edgeota-system/configmaps" ||
			r.query.Get("dryRun") != metav1.DryRunAll || r.query.Get("fieldManager") != controller.FieldManager {
			t.Errorf("got %s %s?%s, want a dry-run POST of a ConfigMap in %s by %s", r.method, r.path, r.query.Encode(), testNamespace, controller.FieldManager)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(r.body, nil, nil)
		if cm, ok := obj.(*corev1.ConfigMap); err != nil || !ok || cm.Name != "" || cm.GenerateName != probeGenerateName {
			t.Errorf("got body %q (%v), want a ConfigMap named by generateName %s", r.body, err, probeGenerateName)
		}
	}
}

// TestChecksBeforeCampaigning: run checks before it campaigns for the Lease
// and exits on a final failure: the API server sees the two dry-run
// creates and nothing else (no read or write of the Lease ota-controller).
func TestChecksBeforeCampaigning(t *testing.T) {
	kubeconfig, requests := startAPIServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if strings.HasSuffix(r.URL.Path, "/configmaps") {
			writeJSON(t, w, http.StatusNotFound, status(apierrors.NewNotFound(corev1.Resource("namespaces"), "edgeota-absent")))
			return
		}
		writeJSON(t, w, http.StatusCreated, coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: probeGenerateName + "x1y2z", Namespace: testNamespace}})
	})
	o := options{kubeconfig: kubeconfig, workers: 1, qps: 100, burst: 100, leaderElect: true, leaseNamespace: testNamespace,
		recordNS: "edgeota-absent", metricsAddress: "0", healthzAddress: "0"}
	// A deadline turns a campaign (a regression) into a failure, not a hang.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := run(ctx, o)
	expectMessage(t, err, "cannot create configmaps in namespace edgeota-absent", "kubectl create namespace edgeota-absent")
	var paths []string
	for _, r := range requests() {
		paths = append(paths, r.method+" "+r.path)
		if r.query.Get("dryRun") != metav1.DryRunAll {
			t.Errorf("got %s %s?%s, want dry-runs only", r.method, r.path, r.query.Encode())
		}
	}
	want := []string{"POST /api/v1/namespaces/edgeota-absent/configmaps", "POST /apis/coordination.k8s.io/v1/namespaces/edgeota-system/leases"}
	if !slices.Equal(paths, want) {
		t.Errorf("got requests %v, want %v", paths, want)
	}
}

// clientFor is the controller's own client of the kubeconfig, speaking
// JSON as the kubeconfig's default.
func clientFor(t *testing.T, kubeconfig string) kube.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kube.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
