package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// FieldManager names the controller in managedFields of everything it writes,
// so that its condition entries are told apart from the node agent's.
const FieldManager = "edgeota-ota-controller"

// Component is the event source; events on DaemonSets say "ota-controller".
const Component = "ota-controller"

// podEventBatch is how long a pod or Job event waits before it syncs its
// DaemonSet, so that the burst of pod events a rollout causes (hundreds per
// second at 500 nodes) costs one sync per batch, not one per event.
// DaemonSet, ControllerRevision and Node events sync at once.
const podEventBatch = 250 * time.Millisecond

// WriteParallelism bounds the API calls one DaemonSet sync has in flight: wide
// enough to spend a QPS budget of hundreds per second on a 500-node rollout,
// narrow enough not to flood the API server with goroutines.
const WriteParallelism = 64

// The controller's default client rate limits (ota-controller's
// --kube-api-qps and --kube-api-burst): sized to mark 1,000 pods in seconds,
// where client-go's default of 5 per second would take minutes.
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// Log messages that tools read to time the controller's reactions (the
// bench's "controller's own reaction"): a heartbeat that settles a node and
// so frees budget (-v=4), and a deletion sent (-v=2).
const (
	LogHeartbeatSettles = "Heartbeat proves the node alive"
	LogDeletingPod      = "Deleting pod"
)

// Controller reconciles opted-in DaemonSets. Work items are DaemonSet keys
// ("namespace/name"); every informer event is mapped to the DaemonSet it
// concerns, so a sync always sees the whole DaemonSet.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	metrics  *Metrics

	dsLister       appslisters.DaemonSetLister
	revisionLister appslisters.ControllerRevisionLister
	podLister      corelisters.PodLister
	nodeLister     corelisters.NodeLister
	jobLister      batchlisters.JobLister
	leases         cache.Indexer
	podIndexer     cache.Indexer
	jobIndexer     cache.Indexer
	synced         []cache.InformerSynced

	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *expectations
	written      *pendingWrites
	statusWrites *statusWrites
	heartbeats   *heartbeatWaiters
	eventMemo    *eventMemo
	// logger is NewController's: the informers' handlers have no context.
	logger klog.Logger
	// background tracks the writes a sync left under way (inBackground).
	background sync.WaitGroup
}

// NewController wires the controller to the factory's DaemonSet, Pod, Node,
// ControllerRevision, Job and Lease informers (node Leases are heartbeats),
// adding the indexes it looks pods and Jobs up by; start the factory after
// calling it. Build the factory with
// informers.WithTransform(Transform) to keep the caches small. Events go to
// recorder (component Component) and figures to metrics.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, factory informers.SharedInformerFactory,
	recorder record.EventRecorder, metrics *Metrics) (*Controller, error) {
	dsInformer := factory.Apps().V1().DaemonSets()
	revisionInformer := factory.Apps().V1().ControllerRevisions()
	podInformer := factory.Core().V1().Pods()
	nodeInformer := factory.Core().V1().Nodes()
	jobInformer := factory.Batch().V1().Jobs()
	leaseInformer := factory.Coordination().V1().Leases()

	c := &Controller{
		client:         kubeClient,
		recorder:       recorder,
		metrics:        metrics,
		dsLister:       dsInformer.Lister(),
		revisionLister: revisionInformer.Lister(),
		podLister:      podInformer.Lister(),
		nodeLister:     nodeInformer.Lister(),
		jobLister:      jobInformer.Lister(),
		leases:         leaseInformer.Informer().GetIndexer(),
		podIndexer:     podInformer.Informer().GetIndexer(),
		jobIndexer:     jobInformer.Informer().GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "daemonsets"}),
		expectations: newExpectations(time.Now),
		written:      newPendingWrites(),
		statusWrites: newStatusWrites(),
		heartbeats:   newHeartbeatWaiters(),
		eventMemo:    newEventMemo(),
		logger:       klog.FromContext(ctx),
	}
	metrics.watchQueue(c.queue)
	if err := podInformer.Informer().AddIndexers(cache.Indexers{byControllerUID: indexByControllerUID, byNode: indexByNode}); err != nil {
		return nil, fmt.Errorf("adding pod indexes: %w", err)
	}
	if err := jobInformer.Informer().AddIndexers(cache.Indexers{byOwnerUID: indexByOwnerUID}); err != nil {
		return nil, fmt.Errorf("adding job indexes: %w", err)
	}
	if err := c.addHandlers(dsInformer.Informer(), revisionInformer.Informer(), podInformer.Informer(), nodeInformer.Informer(),
		jobInformer.Informer(), leaseInformer.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the caches, then runs workers until ctx ends; it returns once
// the in-flight syncs and their deletions have finished.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	var wg sync.WaitGroup
	defer c.background.Wait() // third: the writes they left under way finish
	defer wg.Wait()           // second: the in-flight syncs finish
	defer c.queue.ShutDown()  // first: idle workers return from Get
	logger := klog.FromContext(ctx)

	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return errors.New("failed to wait for caches to sync")
	}
	logger.Info("Starting workers", "count", workers)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for ctx.Err() == nil && c.processNextWorkItem(ctx) {
	}
}

// inBackground runs a write a sync leaves under way when it returns (pod
// deletions, the rollout status), so that the next sync, which a freed budget
// may be waiting for, need not wait for its round trips. A failure requeues
// the DaemonSet with backoff, as a failed sync would. Run waits for these
// writes before it returns.
func (c *Controller) inBackground(ctx context.Context, key string, write func() error) {
	c.background.Go(func() {
		if err := write(); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Error writing for daemonset; requeuing", "daemonset", key)
			c.queue.AddRateLimited(key)
		}
	})
}

// processNextWorkItem syncs one DaemonSet; errors requeue it with backoff,
// success forgets its backoff.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)

	start := time.Now()
	err := c.sync(ctx, key)
	took := time.Since(start)
	c.metrics.observeSync(took, err)
	klog.FromContext(ctx).V(4).Info("Finished syncing daemonset", "daemonset", key, "duration", took)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	utilruntime.HandleErrorWithContext(ctx, err, "Error syncing daemonset; requeuing", "daemonset", key)
	c.queue.AddRateLimited(key)
	return true
}
