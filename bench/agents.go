package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/apiidentity"
	"github.com/edgeota/edgeota/internal/metricshttp"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/server"
)

// agentsCommand runs this binary as the node agents of every simulated node
// instead of the benchmark: one process answering the controller's
// proof-of-life challenges for all of them (KWOK nodes run no agent), by
// the agent's own code (server.Answerer) with one watch of the pods for all
// nodes and each answer written as its node (system:node:<name>, which the
// API server authorizes by the Node authorizer and NodeRestriction, as it
// does a real agent acting as its node). A node labelled cut off
// (localcluster.CutOffLabel, or agentCutOffLabel for its agent's link
// alone) answers nothing: its answers fail as over a cut link and are tried
// again with the agent's backoff until the label goes.
const agentsCommand = "agents"

// agentsWorkers is how many answers the simulated agents write at once. A
// real fleet has one agent, one link and one writer per node; one process
// for every node needs a pool, big enough that a wave's answers (a budget's
// worth of nodes settling together) are not queued behind each other.
const agentsWorkers = 64

// nodesGroup is the group of every node's identity, which the Node
// authorizer and NodeRestriction require beside the user
// system:node:<name>. The API server fills it in for an agent's constrained
// impersonation; the bench impersonates with its admin credentials, where
// the groups are the request's to name.
const nodesGroup = "system:nodes"

// agentCutOffLabel, set to "true" on a node, cuts its simulated agent's
// link alone, as CutOffLabel cuts the node's: kwok-controller stops running
// a node labelled CutOffLabel, pods included, so the cutoff scenario cuts
// the agent of a node whose pod of a version that breaks its link appears,
// and the node itself only once KWOK reported that pod Ready (see
// cutOffImage).
const agentCutOffLabel = "bench.edgeota.io/agent-cut-off"

// errCutLink is what a cut-off node's simulated agent gets for every write:
// the error of a request over a dead link, which the agent tries again.
var errCutLink = errors.New("dial tcp: i/o timeout (the node is cut off: " + localcluster.CutOffLabel + "=true)")

// runAgents serves /metrics (edgeota_agent_alive_answers_total, every
// simulated agent's) and /readyz (200 once the caches have synced) on
// -addr, and answers until it is stopped.
func runAgents(args []string) error {
	fs := flag.NewFlagSet(agentsCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig, allowed to impersonate every node")
	namespace := fs.String("namespace", "", "the namespace whose pods the agents answer on")
	selector := fs.String("selector", "", "the label selector of those pods")
	addr := fs.String("addr", "127.0.0.1:0", "loopback address of /metrics and /readyz")
	workers := fs.Int("workers", agentsWorkers, "answers written at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *kubeconfig, err)
	}
	config.QPS, config.Burst = -1, 0 // the watches: no client-side limit
	admin, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	pods := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(*namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = *selector }))
	podInformer := pods.Core().V1().Pods().Informer()
	if err := podInformer.SetTransform(dropManagedFields); err != nil {
		return err
	}
	// The cut-off nodes alone (their link, or their agent's): the others'
	// status writes (every 2 s on the default heartbeat) would cost this
	// process an event each.
	cutOff := informers.NewSharedInformerFactoryWithOptions(admin, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = localcluster.CutOffLabel + "=true" }))
	cutLister := cutOff.Core().V1().Nodes().Lister()
	cutInformer := cutOff.Core().V1().Nodes().Informer()
	agentCut := informers.NewSharedInformerFactoryWithOptions(admin, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = agentCutOffLabel + "=true" }))
	agentCutLister := agentCut.Core().V1().Nodes().Lister()
	agentCutInformer := agentCut.Core().V1().Nodes().Informer()

	clients := &nodeClients{config: config}
	answerer := server.NewAnswerer(server.AnswererOptions{
		Pods:    podInformer,
		Workers: *workers,
		ClientFor: func(node string) server.Client {
			if _, err := cutLister.Get(node); err == nil {
				return cutLink{}
			}
			if _, err := agentCutLister.Get(node); err == nil {
				return cutLink{}
			}
			return clients.of(node)
		},
	})
	pods.Start(ctx.Done())
	cutOff.Start(ctx.Done())
	agentCut.Start(ctx.Done())
	synced := func() bool { return podInformer.HasSynced() && cutInformer.HasSynced() && agentCutInformer.HasSynced() }

	registry := prometheus.NewRegistry()
	registry.MustRegister(answerer.Results())
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricshttp.Handler(registry))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		}
	})
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: mux}
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	var wg sync.WaitGroup
	wg.Go(func() { answerer.Run(ctx) })
	klog.FromContext(ctx).Info("Answering for every node", "namespace", *namespace, "selector", *selector, "workers", *workers)
	err = srv.Serve(l)
	stop()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serving: %w", err)
}

// dropManagedFields drops what the agents never read, as the agent's cache
// does.
func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}

// nodeClients makes, once per node, the client acting as that node: the
// core/v1 client of the admin configuration impersonating system:node:<node>
// in system:nodes. They share one HTTP transport (client-go caches it by
// TLS configuration; the impersonation is a wrapper per client), so the
// simulated agents share the bench's connection to the API server where
// real ones each have their own.
type nodeClients struct {
	config *rest.Config
	mu     sync.Mutex
	byNode map[string]server.Client
}

func (c *nodeClients) of(node string) server.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if client, ok := c.byNode[node]; ok {
		return client
	}
	config := rest.CopyConfig(c.config)
	config.QPS, config.Burst = 0, 0 // client-go's defaults, 5/s: more than an agent's answers
	config.Impersonate = rest.ImpersonationConfig{UserName: apiidentity.NodeUser(node), Groups: []string{nodesGroup}}
	core, err := corev1client.NewForConfig(config)
	if err != nil {
		// Only a configuration that builds no client at all fails here,
		// and the admin one built the watches: answer as a node that
		// cannot reach the API server.
		klog.Background().Error(err, "Building a node's client", "node", node)
		return cutLink{}
	}
	if c.byNode == nil {
		c.byNode = map[string]server.Client{}
	}
	c.byNode[node] = typedPods{core}
	return c.byNode[node]
}

// typedPods is client-go's typed core/v1 client as the agent's Client.
type typedPods struct{ corev1client.CoreV1Interface }

func (c typedPods) Pods(namespace string) server.Pods { return c.CoreV1Interface.Pods(namespace) }

// cutLink is a cut-off node's Client: every request fails as over a dead
// link.
type cutLink struct{}

func (cutLink) Pods(string) server.Pods { return cutLink{} }

func (cutLink) List(context.Context, metav1.ListOptions) (*corev1.PodList, error) {
	return nil, errCutLink
}

func (cutLink) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errCutLink
}

func (cutLink) Delete(context.Context, string, metav1.DeleteOptions) error { return errCutLink }

func (cutLink) Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.Pod, error) {
	return nil, errCutLink
}
