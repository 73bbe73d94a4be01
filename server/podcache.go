package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/statedir"
)

// PodCache is the agent's view of the pods bound to its node: an informer
// restricted to the node, the time it last heard from the API server, so that
// ListPods can say how fresh its answer is while the node is cut off, and a
// generation that changes with its content, so that ListPods rebuilds its
// answer only when there is something new. With a state directory it also
// keeps that view on disk, and holds the view stored by the previous run to be
// served until the informer syncs (see podview.go).
type PodCache struct {
	nodeName   string
	informer   cache.SharedIndexInformer
	contact    *contactClock
	generation *atomic.Uint64

	// stored is the view the previous run left on disk, nil if none could be
	// read; store keeps the live view there, nil without a state directory.
	stored *storedView
	store  *viewStore
}

// PodCacheOptions configures NewPodCache; the zero value keeps nothing on
// disk and tells the time by the node's clock.
type PodCacheOptions struct {
	// Clock times each contact with the API server; nil uses the node's clock.
	Clock *APIServerClock
	// StateDir, when set, keeps the view on disk and serves the stored one
	// from start until the informer syncs.
	StateDir *statedir.Dir
}

// NewPodCache returns a cache of the pods bound to nodeName (field selector
// spec.nodeName) that drops managedFields before caching: the agent never
// reads them and they are most of a pod's size. With opts.StateDir it reads
// the view the previous run stored, logging and ignoring a file it cannot use.
// Run starts it.
func NewPodCache(ctx context.Context, client Client, nodeName string, opts PodCacheOptions) *PodCache {
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	pods := func(opts *metav1.ListOptions) { opts.FieldSelector = selector }
	contact := &contactClock{clock: opts.Clock}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			pods(&opts)
			list, err := client.Pods(metav1.NamespaceAll).List(ctx, opts)
			if err == nil {
				contact.mark()
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			pods(&opts)
			w, err := client.Pods(metav1.NamespaceAll).Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			contact.mark()
			return watch.Filter(w, contact.markEvent), nil
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}})
	// Neither fails before the informer has started.
	_ = informer.SetTransform(dropManagedFields)
	generation := new(atomic.Uint64)
	changed := func(any) { generation.Add(1) }
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, DeleteFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) },
	})
	c := &PodCache{nodeName: nodeName, informer: informer, contact: contact, generation: generation}
	if opts.StateDir != nil {
		c.stored = loadView(ctx, opts.StateDir, nodeName)
		c.store = &viewStore{dir: opts.StateDir}
	}
	return c
}

// Run fills the cache and keeps it current until ctx is done; with a state
// directory it keeps the view stored meanwhile, and once more on the way out.
func (c *PodCache) Run(ctx context.Context) {
	if c.store == nil {
		c.informer.RunWithContext(ctx)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.informer.RunWithContext(ctx) })
	c.persist(ctx)
	wg.Wait()
}

// onChange calls f after every change to the cache; f must not block.
func (c *PodCache) onChange(f func()) {
	// Fails only once the informer has stopped.
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { f() }, DeleteFunc: func(any) { f() }, UpdateFunc: func(_, _ any) { f() },
	})
}

// HasSynced reports whether the cache holds a complete list of the node's
// pods.
func (c *PodCache) HasSynced() bool { return c.informer.HasSynced() }

func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}

// contactClock is the time of the cache's last successful contact with the
// API server: a list, an established watch, or a watch event — bookmarks
// included, which the reflector asks for and the API server sends about every
// minute, so that an idle but healthy watch keeps the clock moving.
type contactClock struct {
	clock *APIServerClock // nil: the node's clock

	mu sync.Mutex
	at time.Time
}

func (c *contactClock) mark() {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = now
}

// markEvent is a watch.FilterFunc that passes every event on, marking contact
// for all but the errors the watch reports.
func (c *contactClock) markEvent(e watch.Event) (watch.Event, bool) {
	if e.Type != watch.Error {
		c.mark()
	}
	return e, true
}

func (c *contactClock) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}
