package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// sampleInterval is how often a wait re-evaluates even without an event, so
// that a sample is taken at least every 100 ms.
const sampleInterval = 100 * time.Millisecond

// view mirrors what an informer sees and lets a scenario wait for a state of
// it: the condition is evaluated at every event and every sampleInterval,
// with the time of evaluation, so that a scenario can time transitions and
// sample figures (such as unavailability) along the way.
type view[T any] struct {
	mu      sync.Mutex
	items   map[string]T
	changed chan struct{}
	stop    context.CancelFunc
	// observer, when set, sees every added or updated item as it arrives,
	// in the informer's order (by resourceVersion), under mu.
	observer func(now time.Time, item T)
}

// watchPods mirrors the pods of namespace ns matching selector.
func watchPods(ctx context.Context, client kubernetes.Interface, ns, selector string) (*view[*corev1.Pod], error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	return newView[*corev1.Pod](ctx, factory, factory.Core().V1().Pods().Informer())
}

// watchRevisions mirrors the ControllerRevisions of namespace ns.
func watchRevisions(ctx context.Context, client kubernetes.Interface, ns string) (*view[*appsv1.ControllerRevision], error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	return newView[*appsv1.ControllerRevision](ctx, factory, factory.Apps().V1().ControllerRevisions().Informer())
}

// watchLeases mirrors the node Leases (namespace kube-node-lease), named
// after their nodes.
func watchLeases(ctx context.Context, client kubernetes.Interface) (*view[*coordinationv1.Lease], error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(corev1.NamespaceNodeLease))
	return newView[*coordinationv1.Lease](ctx, factory, factory.Coordination().V1().Leases().Informer())
}

// watchNodes mirrors the cluster's nodes.
func watchNodes(ctx context.Context, client kubernetes.Interface) (*view[*corev1.Node], error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	return newView[*corev1.Node](ctx, factory, factory.Core().V1().Nodes().Informer())
}

func newView[T any](ctx context.Context, factory informers.SharedInformerFactory, informer cache.SharedIndexInformer) (*view[T], error) {
	ctx, stop := context.WithCancel(ctx)
	v := &view[T]{items: map[string]T{}, changed: make(chan struct{}, 1), stop: stop}
	set := func(obj any) {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		v.mu.Lock()
		v.items[key] = obj.(T)
		if v.observer != nil {
			v.observer(time.Now(), obj.(T))
		}
		v.mu.Unlock()
		v.notify()
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			v.mu.Lock()
			delete(v.items, key)
			v.mu.Unlock()
			v.notify()
		},
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("watching: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		stop()
		return nil, fmt.Errorf("watching: the cache did not sync: %w", ctx.Err())
	}
	return v, nil
}

func (v *view[T]) notify() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// observe calls f with every item added or updated from now on, until
// observe(nil); f must not block.
func (v *view[T]) observe(f func(now time.Time, item T)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.observer = f
}

// close stops the informer.
func (v *view[T]) close() { v.stop() }

// snapshot copies the items.
func (v *view[T]) snapshot() map[string]T {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.items)
}

// until evaluates done on every change and every sampleInterval, holding the
// view's lock (done must not keep the map), until it returns true or timeout
// passes. what names the awaited state in the error.
func (v *view[T]) until(ctx context.Context, timeout time.Duration, what string, done func(now time.Time, items map[string]T) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(sampleInterval)
	defer tick.Stop()
	for {
		v.mu.Lock()
		ok := done(time.Now(), v.items)
		v.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-v.changed:
		case <-tick.C:
		}
	}
}
