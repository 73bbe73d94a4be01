package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podcondition"
)

const (
	testNode   = "edge-1"
	testHash   = "6b7c9d5f8"
	testTarget = "controllerrevision: " + testHash
)

// fixture runs a real agent on a loopback port: the pod cache is fed by a
// fake clientset, and callers reach it with net/http and a grpc-go client.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	base   string
	rpc    edgeotav1.OTAServiceClient
}

type fixtureOptions struct {
	// actions, when set, receives Upgrade's and ImagePull's API calls instead
	// of the fake clientset that feeds the cache.
	actions kubernetes.Interface
	// unsynced keeps the pod cache from ever syncing.
	unsynced bool
	// apiTimeout bounds live API calls (DefaultAPIServerTimeout when zero).
	apiTimeout time.Duration
}

func newFixture(t *testing.T, opts fixtureOptions, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	factory := NewPodInformerFactory(client, testNode)
	actions := opts.actions
	if actions == nil {
		actions = client
	}
	svc := New(testNode, actions, factory.Core().V1().Pods(), opts.apiTimeout)
	if opts.unsynced {
		svc.synced = func() bool { return false }
	}
	h, err := NewHandler(ctx, svc)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	factory.Start(ctx.Done())
	if !opts.unsynced {
		factory.WaitForCacheSync(ctx.Done())
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, h, 5*time.Second) }()

	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		factory.Shutdown()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after its context ended")
		}
	})
	return &fixture{t: t, client: client, base: "http://" + l.Addr().String(), rpc: edgeotav1.NewOTAServiceClient(conn)}
}

// response is an HTTP answer read whole.
type response struct {
	status      int
	contentType string
	header      http.Header
	body        string
}

// do sends one REST request with the given Accept header ("" sends none) and
// extra headers as key, value pairs.
func (f *fixture) do(method, path, accept string, headers ...string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, nil)
	if err != nil {
		f.t.Fatalf("NewRequest %s %s: %v", method, path, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header, body: string(body)}
}

// podOption adjusts a test pod.
type podOption func(*corev1.Pod)

// dsPod returns a DaemonSet pod on testNode that needs an upgrade to testHash.
func dsPod(name string, opts ...podOption) *corev1.Pod {
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       "default",
			UID:             types.UID("uid-" + name),
			ResourceVersion: "7",
			Labels:          map[string]string{"app": "demo", "controller-revision-hash": "old"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: "demo", UID: "ds-uid", Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{{Name: "app", Image: "nginx:1.19.4"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue, Message: testTarget},
			},
		},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func onNode(node string) podOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

func inNamespace(ns string) podOption { return func(p *corev1.Pod) { p.Namespace = ns } }

func deleting() podOption {
	return func(p *corev1.Pod) {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"test/keep"}
	}
}

func ownedBy(kind string) podOption {
	return func(p *corev1.Pod) { p.OwnerReferences[0].Kind = kind }
}

func withCondition(c corev1.PodCondition) podOption {
	return func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == c.Type {
				p.Status.Conditions[i] = c
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, c)
	}
}

func withoutCondition(t corev1.PodConditionType) podOption {
	return func(p *corev1.Pod) {
		kept := p.Status.Conditions[:0]
		for _, c := range p.Status.Conditions {
			if c.Type != t {
				kept = append(kept, c)
			}
		}
		p.Status.Conditions = kept
	}
}

// imageReady is a PodImageReady condition for the given revision message.
func imageReady(status corev1.ConditionStatus, reason, message string) corev1.PodCondition {
	return corev1.PodCondition{Type: podcondition.ImageReady, Status: status, Reason: reason, Message: message}
}
