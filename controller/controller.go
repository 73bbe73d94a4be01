package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/leases"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
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

// WriteParallelism bounds the API writes the controller has in flight, all
// DaemonSets' syncs and the deletions they left under way together: wide
// enough to spend a QPS budget of hundreds per second (a write takes a few
// milliseconds), narrow enough that they and the informers' watches share one
// HTTP/2 connection (the API server allows 100 streams on each). Per sync it
// let four workers hold 256 at once, and a fresh start on 500 nodes dialled
// over a hundred connections, each a TLS handshake and buffers kept.
const WriteParallelism = 64

// WriteBurst bounds the pod status writes one sync makes for its pods'
// conditions and offers, as the native DaemonSet controller's burstReplicas
// bounds its creations and deletions: each write's task and expectation are
// held until it lands, so a fresh controller marking every pod of a
// DaemonSet on 100,000 nodes must not make 100,000 of them at once. The
// pods past the burst are written by the next sync, queued at once.
const WriteBurst = 250

// The controller's default client rate limits (ota-controller's
// --kube-api-qps and --kube-api-burst): sized to mark 1,000 pods in seconds,
// where client-go's default of 5 per second would take minutes.
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// Log messages that tools read to time the controller's reactions (the
// bench's "controller's own reaction"): a heartbeat, or an agent's answer,
// that settles a node and so frees budget (-v=4, with the node), and a
// deletion or patch in place sent (-v=2).
const (
	LogHeartbeatSettles = "Heartbeat proves the node alive"
	LogAnswerSettles    = "Answer proves the node alive"
	LogDeletingPod      = "Deleting pod"
	LogPatchingPod      = "Patching pod in place"
)

// Controller reconciles opted-in DaemonSets. Work items are DaemonSet keys
// ("namespace/name"); every informer event is mapped to the DaemonSet it
// concerns, so a sync always sees the whole DaemonSet.
type Controller struct {
	client   kube.Interface
	recorder record.EventRecorder
	metrics  *Metrics
	// now is the clock verdicts are judged by; tests move it.
	now func() time.Time

	dsLister       appslisters.DaemonSetLister
	revisionLister appslisters.ControllerRevisionLister
	dsIndexer      cache.Indexer
	// The caches of the controller's own records (podRecord, nodeRecord,
	// jobRecord), which typed listers cannot serve.
	podIndexer  cache.Indexer
	nodeIndexer cache.Indexer
	jobIndexer  cache.Indexer
	prePullPods cache.Indexer
	records     *recordstore.Store
	synced      []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	// revisions keeps what the controller reads of each DaemonSet's
	// revisions: the target's images, the templates' digests.
	revisions   revisionCache
	trackersMu  sync.Mutex
	trackers    map[string]*tracker
	expect      *expectations
	statuses    *statusWrites
	heartbeats  *heartbeats
	leases      *leases.Watcher
	leaseClient kube.Interface
	leaseMode   leases.Mode
	challenges  *challenges
	rejections  *pullRejections
	eventMemo   *eventMemo
	// logger is NewController's: the informers' handlers have no context.
	logger klog.Logger
	// background tracks the writes a sync left under way (inBackground).
	background sync.WaitGroup
	// writeSlots holds a place for each API write in flight (runParallel):
	// WriteParallelism in all.
	writeSlots chan struct{}
}

// DaemonPodSelector selects the pods the DaemonSet controller creates: it
// labels each with its template generation, and nothing else does, so the
// controller's pod cache holds DaemonSet pods only, not every pod of the
// cluster.
const DaemonPodSelector = podTemplateGenerationLabel

// Informers are the caches the controller reads, each narrowed to what it
// reads: at 10,000 nodes a cache of every pod of the cluster, or a watch of
// every node Lease, costs more than the rollouts it serves.
//   - DaemonSets, ControllerRevisions and Nodes: all of them (any DaemonSet
//     may opt in; any node may run one; readiness decides); Nodes cached as
//     nodeRecords.
//   - Pods: DaemonSet pods (DaemonPodSelector), cached as podRecords; and
//     the pre-pull Jobs' pods.
//   - Jobs: the pre-pull Jobs (PrePullLabel), cached as jobRecords.
//   - ConfigMaps: the rollout records (record.Label), in the controller's
//     own namespace, watched by their metadata alone and cached without
//     their managedFields (record.Cached).
//
// Node Leases are not cached: the controller watches the Leases of the
// nodes it waits on alone, one watch each, or one for all while it waits on
// a quarter of the fleet (see heartbeats.go).
type Informers struct {
	DaemonSets          cache.SharedIndexInformer
	ControllerRevisions cache.SharedIndexInformer
	Nodes               cache.SharedIndexInformer
	// DaemonPods are the DaemonSet pods.
	DaemonPods cache.SharedIndexInformer
	// PrePullPods are the pre-pull Jobs' pods.
	PrePullPods cache.SharedIndexInformer
	// Jobs are the pre-pull Jobs.
	Jobs cache.SharedIndexInformer
	// Records are the rollout records.
	Records cache.SharedIndexInformer
	// RecordNamespace is where the rollout records live.
	RecordNamespace string

	wg sync.WaitGroup
}

// NewInformers builds the controller's informers on client, trimmed by
// Transform; start them with Start after NewController. DaemonSets and
// ControllerRevisions keep the namespace index their listers read; the
// other caches are read through their own indexes (indexes.go) and go
// without it (a set of every key per namespace).
func NewInformers(client kube.Interface, recordNamespace string) *Informers {
	byNamespace := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	apps, core := client.AppsV1(), client.CoreV1()
	prePull := PrePullLabel + "=true"
	return &Informers{
		DaemonSets:          newInformer(client, apps.DaemonSets(metav1.NamespaceAll), &appsv1.DaemonSet{}, "", byNamespace, Transform),
		ControllerRevisions: newInformer(client, apps.ControllerRevisions(metav1.NamespaceAll), &appsv1.ControllerRevision{}, "", byNamespace, Transform),
		Nodes:               newInformer(client, core.Nodes(), &corev1.Node{}, "", nodeIndexers, Transform),
		DaemonPods:          newInformer(client, core.Pods(metav1.NamespaceAll), &corev1.Pod{}, DaemonPodSelector, daemonPodIndexers, TransformDaemonPod),
		PrePullPods:         newInformer(client, core.Pods(metav1.NamespaceAll), &corev1.Pod{}, prePull, cache.Indexers{}, Transform),
		Jobs:                newInformer(client, client.BatchV1().Jobs(metav1.NamespaceAll), &batchv1.Job{}, prePull, jobIndexers, Transform),
		Records:             recordstore.NewInformer(client, recordNamespace),
		RecordNamespace:     recordNamespace,
	}
}

// newInformer is an informer of the objects lw lists that selector (a
// label selector, "" for all) selects, as client-go's typed informers make
// them: streaming its first list where client does, and each object
// trimmed by transform before it is stored.
func newInformer[L runtime.Object](client kube.Interface, lw kube.ListWatcher[L], example runtime.Object, selector string,
	indexers cache.Indexers, transform cache.TransformFunc) cache.SharedIndexInformer {
	narrow := func(opts *metav1.ListOptions) { opts.LabelSelector = selector }
	inf := cache.NewSharedIndexInformerWithOptions(kube.NewListWatch(client, lw, narrow), example,
		cache.SharedIndexInformerOptions{Indexers: indexers})
	// Only a started informer refuses a transform.
	_ = inf.SetTransform(transform)
	return inf
}

// Start runs every informer until ctx ends.
func (i *Informers) Start(ctx context.Context) {
	for _, inf := range i.all() {
		i.wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// Shutdown waits for the informers, once Start's ctx has ended.
func (i *Informers) Shutdown() { i.wg.Wait() }

func (i *Informers) all() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{i.DaemonSets, i.ControllerRevisions, i.Nodes, i.DaemonPods, i.PrePullPods, i.Jobs, i.Records}
}

// Option configures a Controller beyond what NewController requires.
type Option func(*Controller)

// WithLeaseClient has the controller watch node Leases (proof of life)
// through client: give it one of its own, with its own rate limiter, so
// that these requests never wait behind a rollout's deletions, nor these
// behind them. Without it the controller's client serves.
func WithLeaseClient(client kube.Interface) Option {
	return func(c *Controller) { c.leaseClient = client }
}

// WithLeaseMode sets how the node Leases of the nodes awaiting a proof of
// life are watched (--lease-watch); without it, leases.ModeAuto. Every mode
// proves life at the same renewals; they differ in what watching costs.
func WithLeaseMode(mode leases.Mode) Option {
	return func(c *Controller) { c.leaseMode = mode }
}

// NewController wires the controller to its informers (see Informers),
// adding the indexes it looks pre-pull pods and DaemonSets up by;
// start the informers after calling it. Events go to recorder (component Component) and figures to
// metrics.
func NewController(ctx context.Context, kubeClient kube.Interface, inf *Informers,
	recorder record.EventRecorder, metrics *Metrics, opts ...Option) (*Controller, error) {
	c := &Controller{
		writeSlots:     make(chan struct{}, WriteParallelism),
		client:         kubeClient,
		recorder:       recorder,
		metrics:        metrics,
		now:            time.Now,
		dsLister:       appslisters.NewDaemonSetLister(inf.DaemonSets.GetIndexer()),
		revisionLister: appslisters.NewControllerRevisionLister(inf.ControllerRevisions.GetIndexer()),
		dsIndexer:      inf.DaemonSets.GetIndexer(),
		podIndexer:     inf.DaemonPods.GetIndexer(),
		nodeIndexer:    inf.Nodes.GetIndexer(),
		prePullPods:    inf.PrePullPods.GetIndexer(),
		jobIndexer:     inf.Jobs.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "daemonsets"}),
		trackers:   map[string]*tracker{},
		expect:     newExpectations(),
		statuses:   newStatusWrites(),
		challenges: newChallenges(),
		rejections: &pullRejections{why: map[string]string{}, checked: map[types.UID]types.UID{}},
		eventMemo:  newEventMemo(),
		logger:     klog.FromContext(ctx),
	}
	c.records = recordstore.NewStore(kubeClient, inf.RecordNamespace, inf.Records.GetIndexer(), FieldManager,
		metrics.recordWritten, c.recordRewritten, func() time.Time { return c.now() }, c.logger)
	c.leaseClient = kubeClient
	for _, opt := range opts {
		opt(c)
	}
	c.leases = leases.NewWatcher(c.leaseClient, c.heartbeat, leases.Options{Counted: c.metrics.leaseCounted, Mode: c.leaseMode})
	c.heartbeats = newHeartbeats(c.leases)
	metrics.watchQueue(c.queue)
	metrics.watchLeases(c.leases)
	if err := inf.DaemonSets.AddIndexers(cache.Indexers{byUID: indexByUID}); err != nil {
		return nil, fmt.Errorf("adding daemonset indexes: %w", err)
	}
	if err := inf.PrePullPods.AddIndexers(cache.Indexers{byControllerUID: indexByControllerUID}); err != nil {
		return nil, fmt.Errorf("adding pre-pull pod indexes: %w", err)
	}
	if err := c.addHandlers(inf.DaemonSets, inf.ControllerRevisions, inf.DaemonPods, inf.PrePullPods,
		inf.Nodes, inf.Jobs, inf.Records); err != nil {
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
	c.sweepRecords(ctx)
	c.learnRenewals(ctx)
	wg.Go(func() { c.leases.Run(ctx) })
	logger.Info("Starting workers", "count", workers)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	return nil
}

// learnRenewals takes every node's last Lease renewal from one paged list
// before the first sync (leases.Watcher.ListAll). Without it a fresh
// controller would find every upgraded node of a settled fleet waiting for
// a proof of life: a Lease watch per node and a challenge written on each of
// their pods (four DaemonSets on 500 nodes: 500 watches and 2,000 writes at
// start), only to learn what the next renewals would tell anyway. Renewals
// of nodes not in the Node cache are left out. A failed list costs only
// that: the nodes are followed one by one, as they would be anyway.
func (c *Controller) learnRenewals(ctx context.Context) {
	logger := klog.FromContext(ctx)
	learned := 0
	err := c.leases.ListAll(ctx, func(node string, renewed time.Time) {
		if _, known, _ := c.nodeIndexer.GetByKey(node); known {
			c.heartbeat(node, renewed)
			learned++
		}
	})
	if err != nil {
		logger.Info("Could not list the node Leases at start; the nodes awaiting a proof of life are followed one by one", "err", err)
		return
	}
	logger.V(2).Info("Learned the nodes' last Lease renewals", "nodes", learned)
}

func (c *Controller) runWorker(ctx context.Context) {
	for ctx.Err() == nil && c.processNextWorkItem(ctx) {
	}
}

// inBackground runs a write a sync leaves under way when it returns (pod
// deletions, the rollout status), so that the next sync, which a freed budget
// may be waiting for, need not wait for its round trips; the expectations
// stand for it meanwhile (see expectations). A failure requeues the
// DaemonSet with backoff, as a failed sync would. Run waits for these writes
// before it returns.
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

// sweepRecords deletes the records of DaemonSets that no longer exist
// (deleted while no controller ran), once the caches have synced.
func (c *Controller) sweepRecords(ctx context.Context) {
	live := map[types.UID]bool{}
	for _, obj := range c.dsIndexer.List() {
		live[obj.(*appsv1.DaemonSet).UID] = true
	}
	if stale := c.records.Orphans(live); len(stale) > 0 {
		klog.FromContext(ctx).Info("Deleting the rollout records of DaemonSets that no longer exist", "count", len(stale))
		c.inBackground(ctx, "", func() error { return c.records.Delete(ctx, stale) })
	}
}

// recordRewritten says that a DaemonSet's rollout record was deleted or
// changed by someone else, and syncs it so that it is written again.
func (c *Controller) recordRewritten(key string) {
	if ds, err := c.dsByKey(key); err == nil {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonRecordRewritten,
			"The rollout record in namespace %s was deleted or changed by someone else; writing it again from what the controller holds", c.records.Namespace())
	}
	c.queue.Add(key)
}

// dsByKey returns the cached DaemonSet of a key.
func (c *Controller) dsByKey(key string) (*appsv1.DaemonSet, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	return c.dsLister.DaemonSets(namespace).Get(name)
}
