package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/statedir"
)

const (
	testNode   = "edge-1"
	testHash   = "6b7c9d5f8"
	testTarget = "controllerrevision: " + testHash
)

// fixture runs a real agent on a loopback port: the pod cache is fed by a
// fake clientset, and callers reach it with net/http and a grpc-go client.
type fixture struct {
	t       testing.TB
	client  *fake.Clientset
	svc     *Server
	pods    *PodCache
	handler *Handler
	base    string
	addr    string
	rpc     edgeotav1.OTAServiceClient
	http    *http.Client
	// stop ends Serve's context and returns what Serve returned.
	stop func() error
}

type fixtureOptions struct {
	// actions, when set, receives Upgrade's and ImagePull's API calls instead
	// of the fake clientset that feeds the cache.
	actions Client
	// unsynced keeps the pod cache from ever syncing.
	unsynced bool
	// apiTimeout bounds live API calls (DefaultAPIServerTimeout when zero).
	apiTimeout time.Duration
	// auth configures authentication; the zero value is anonymous access.
	auth ownerauth.Authenticator
	// tls serves TLS with this configuration; clientTLS is what the fixture's
	// own clients present.
	tls, clientTLS *tls.Config
	// tweak adjusts the service before it is served.
	tweak func(*Server)
	// logger receives the agent's logs.
	logger *klog.Logger
	// limits replaces the default timeouts and sizes when set.
	limits *limits
	// watcher, when set, is the watch the pod cache gets from the fake API
	// server, so a test decides what it hears and when.
	watcher *watch.FakeWatcher
	// stateDir keeps the pod view and the action queue on disk; nil keeps
	// nothing and refuses queuing.
	stateDir *statedir.Dir
	// queuedActionTTL is the queue's TTL (DefaultQueuedActionTTL when zero).
	queuedActionTTL time.Duration
	// link, when set, stands between the agent's live calls and the fake API
	// server, installed before the agent starts.
	link *link
	// upgrades configures the owner's view.
	upgrades UpgradeOptions
	// reactors, when set, prepends the test's own reactors to the fake API
	// server before the agent starts (the chain must not change while it
	// runs); they run before the link's.
	reactors func(*fake.Clientset)
	// identity, when set, stands between the agent and the fake API server
	// as cmd/ota-server puts it there, not settled: the fixture does not wait
	// for the cache to sync.
	identity *APIIdentity
}

func newFixture(t testing.TB, opts fixtureOptions, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if opts.logger != nil {
		ctx = klog.NewContext(ctx, *opts.logger)
	}
	client := fake.NewClientset(objs...)
	asAPIServer(client)
	if opts.link != nil {
		opts.link.install(client)
	}
	if opts.reactors != nil {
		opts.reactors(client)
	}
	if opts.watcher != nil {
		client.PrependWatchReactor("pods", k8stesting.DefaultWatchReactor(opts.watcher, nil))
	}
	var api Client = typedClient{client}
	if opts.identity != nil {
		api = identityClient{opts.identity, typedClient{client}}
	}
	podCache := NewPodCache(ctx, api, testNode, PodCacheOptions{StateDir: opts.stateDir})
	actions := opts.actions
	if actions == nil {
		actions = api
	}
	var queue *ActionQueue
	if opts.stateDir != nil {
		queue = NewActionQueue(ctx, opts.stateDir, opts.queuedActionTTL, nil)
	}
	svc := New(testNode, actions, podCache, Options{APITimeout: opts.apiTimeout, Auth: opts.auth, Queue: queue, Upgrades: opts.upgrades,
		Identity: opts.identity})
	if opts.unsynced {
		svc.synced = func() bool { return false }
	}
	if opts.tweak != nil {
		opts.tweak(svc)
	}
	h, err := NewHandler(ctx, svc)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	if opts.limits != nil {
		h.limits = *opts.limits
	}
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); podCache.Run(ctx) }()
	queueDone := make(chan struct{})
	go func() { defer close(queueDone); svc.RunQueue(ctx) }()
	answersDone := make(chan struct{})
	go func() { defer close(answersDone); svc.AnswerChallenges(ctx) }()
	if !opts.unsynced && opts.identity == nil {
		cache.WaitForCacheSync(ctx.Done(), podCache.HasSynced)
	}

	var l net.Listener
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	scheme, transport := "http", credentials.TransportCredentials(insecure.NewCredentials())
	httpTransport := &http.Transport{MaxIdleConnsPerHost: 64}
	if opts.tls != nil {
		l = tls.NewListener(l, opts.tls)
		scheme, transport = "https", credentials.NewTLS(opts.clientTLS)
		httpTransport.TLSClientConfig = opts.clientTLS
	}
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, l, h, 5*time.Second) }()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(transport))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	var stopped bool
	var serveErr error
	stop := func() error {
		if stopped {
			return serveErr
		}
		stopped = true
		cancel()
		select {
		case serveErr = <-served:
		case <-time.After(10 * time.Second):
			serveErr = errors.New("serve did not return within 10s after its context ended")
		}
		<-informerDone
		<-queueDone
		<-answersDone
		return serveErr
	}
	t.Cleanup(func() {
		conn.Close()
		httpTransport.CloseIdleConnections()
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &fixture{
		t: t, client: client, svc: svc, pods: podCache, base: scheme + "://" + addr, addr: addr,
		rpc: edgeotav1.NewOTAServiceClient(conn),
		http: &http.Client{
			Transport:     httpTransport,
			Timeout:       30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		handler: h,
		stop:    stop,
	}
}

// identityClient is an APIIdentity in front of the fake clientset that
// passes on the fake's lack of watch-list support (see typedClient): the
// fake's watch hands out the objects it stores, which the pod cache would
// then change under it.
type identityClient struct {
	*APIIdentity
	fake typedClient
}

func (c identityClient) IsWatchListSemanticsUnSupported() bool {
	return c.fake.IsWatchListSemanticsUnSupported()
}

// asAPIServer makes the fake clientset answer lists and deletes of pods as
// the API server does where the agent relies on it, which the fake alone does
// not: a list honours its field selector (spec.nodeName, metadata.name), and
// a delete its dry run and its preconditions (409 when the UID or
// resourceVersion differs). Reactors prepended later (a link, a failing call)
// run before these.
func asAPIServer(client *fake.Clientset) {
	tracker := client.Tracker()
	carryOut := k8stesting.ObjectReaction(tracker)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := carryOut(a)
		list, ok := obj.(*corev1.PodList)
		if !handled || err != nil || !ok {
			return handled, obj, err
		}
		selector := a.(k8stesting.ListAction).GetListRestrictions().Fields
		kept := list.Items[:0]
		for _, p := range list.Items {
			if selector == nil || selector.Matches(fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName}) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		del := a.(k8stesting.DeleteAction)
		obj, err := tracker.Get(podsGVR, del.GetNamespace(), del.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		opts := del.GetDeleteOptions()
		if pre := opts.Preconditions; pre != nil &&
			(pre.UID != nil && *pre.UID != pod.UID || pre.ResourceVersion != nil && *pre.ResourceVersion != pod.ResourceVersion) {
			return true, nil, apierrors.NewConflict(podsResource, pod.Name,
				errors.New("Precondition failed: the UID or resourceVersion in the precondition is not the pod's"))
		}
		if slices.Contains(opts.DryRun, metav1.DryRunAll) {
			return true, nil, nil
		}
		return false, nil, nil
	})
}

// liveRead reports whether a is one of the agent's live reads, not the pod
// cache's list of the node's pods: a list whose field selector names the
// pod, or a list of the whole node read from etcd (no resourceVersion: a
// hold of every app), where the cache's reflector always names one ("0" or
// the last it saw) to be served from the watch cache.
func liveRead(a k8stesting.Action) bool {
	list, ok := a.(k8stesting.ListActionImpl)
	if !ok {
		return false
	}
	_, named := list.GetListRestrictions().Fields.RequiresExactMatch("metadata.name")
	return named || list.ListOptions.ResourceVersion == ""
}

// typedClient is the agent's Client over client-go's typed clientset, real or
// fake.
type typedClient struct{ kubernetes.Interface }

func (c typedClient) Pods(namespace string) Pods { return c.CoreV1().Pods(namespace) }

// IsWatchListSemanticsUnSupported passes on the fake clientset's answer, which
// tells the pod cache's reflector to list and then watch: the fake cannot
// stream a list.
func (c typedClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

// response is an HTTP answer read whole.
type response struct {
	status      int
	contentType string
	header      http.Header
	body        string
}

// do sends one REST request with the given Accept header ("" sends none) and
// extra headers as key, value pairs, and fails the test if it gets no answer.
func (f *fixture) do(method, path, accept string, headers ...string) response {
	f.t.Helper()
	resp, err := f.send(method, path, accept, headers...)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// send is do for any goroutine: it returns the error instead.
func (f *fixture) send(method, path, accept string, headers ...string) (response, error) {
	req, err := http.NewRequest(method, f.base+path, nil)
	if err != nil {
		return response{}, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("reading the answer: %w", err)
	}
	return response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header, body: string(body)}, nil
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

func withAnnotation(key, value string) podOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

// offered puts the controller's offer of revision hash on the pod, as it
// writes it with PodNeedUpgrade: the target's images, and its progress
// deadline (zero: none).
func offered(hash string, images map[string]string, deadlineSeconds int64) podOption {
	value, err := podchannel.Encode(&podchannel.Offer{Revision: hash, Images: images, ProgressDeadlineSeconds: deadlineSeconds})
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return withAnnotation(rollout.OfferAnnotation, value)
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
