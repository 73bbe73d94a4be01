package leases

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// wide follows every node the Watcher follows with one list and one watch
// of all the node Leases, while so many nodes are followed that their own
// watches would cost more (see Watcher.wideWantedLocked). It reports what a
// follower would: each node's renewTime when following it begins, then
// each renewTime that differs from the last reported, and a node without a
// Lease as Missing, once.
type wide struct {
	w      *Watcher
	cancel context.CancelFunc
	logger klog.Logger

	// Owned by the wide goroutine. renewals holds every Lease's renewTime
	// as last listed or watched (zero for a Lease without one), so that a
	// node started while the watch runs is reported at once; nodes, the
	// reports of each node followed.
	renewals map[string]time.Time
	nodes    map[string]*reporter

	// pending holds the nodes started since the goroutine last looked,
	// under mu; wake tells it there are some.
	mu      sync.Mutex
	pending []string
	wake    chan struct{}
}

// started has the node's current renewTime reported, from the goroutine.
// It never blocks: Start calls it holding the Watcher's lock.
func (wd *wide) started(node string) {
	wd.mu.Lock()
	wd.pending = append(wd.pending, node)
	wd.mu.Unlock()
	select {
	case wd.wake <- struct{}{}:
	default:
	}
}

// takePending returns the nodes started since the last call.
func (wd *wide) takePending() []string {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	nodes := wd.pending
	wd.pending = nil
	return nodes
}

// once lists every node Lease, then watches them from the list's
// resourceVersion.
func (wd *wide) once(ctx context.Context) (delivered bool, err error) {
	rv, err := wd.list(ctx)
	if err != nil {
		return false, err
	}
	return wd.watch(ctx, rv)
}

// list reads every node Lease from the watch cache, reports each followed
// node's renewTime, and returns the resourceVersion to watch from.
func (wd *wide) list(ctx context.Context) (string, error) {
	list, err := wd.w.listLeases(ctx, "")
	if err != nil {
		return "", fmt.Errorf("listing the node Leases in %s: %w", corev1.NamespaceNodeLease, err)
	}
	renewals := make(map[string]time.Time, len(list.Items))
	for i := range list.Items {
		if lease := &list.Items[i]; inNamespace(lease) {
			renewals[lease.Name] = renewTime(lease)
		}
	}
	wd.renewals = renewals
	wd.w.mu.Lock()
	wd.w.fleet = len(renewals)
	followed := make([]string, 0, len(wd.w.followed))
	for node := range wd.w.followed {
		followed = append(followed, node)
	}
	// The nodes started so far are all reported below; taken under the
	// Watcher's lock, as Start adds them, so that none falls between.
	wd.takePending()
	wd.w.mu.Unlock()
	nodes := make(map[string]*reporter, len(followed))
	for _, node := range followed {
		if r, ok := wd.nodes[node]; ok {
			nodes[node] = r
		}
	}
	wd.nodes = nodes
	for _, node := range followed {
		wd.report(ctx, node)
	}
	return list.ResourceVersion, nil
}

// watch watches every node Lease from resourceVersion rv and reports what
// it delivers for the nodes followed, and the current renewTime of each node
// started meanwhile (see Watcher.watchLeases).
func (wd *wide) watch(ctx context.Context, rv string) (delivered bool, err error) {
	delivered, err = wd.w.watchLeases(ctx, metav1.ListOptions{ResourceVersion: rv}, wd.logger, func(t watch.EventType, lease *coordinationv1.Lease) bool {
		if !inNamespace(lease) {
			return false
		}
		if t == watch.Deleted {
			delete(wd.renewals, lease.Name)
		} else {
			wd.renewals[lease.Name] = renewTime(lease)
		}
		wd.report(ctx, lease.Name)
		return true
	}, wd.wake, func() {
		for _, node := range wd.takePending() {
			delete(wd.nodes, node) // followed again: reported again
			wd.report(ctx, node)
		}
	})
	if err != nil {
		return delivered, fmt.Errorf("watching the node Leases in %s: %w", corev1.NamespaceNodeLease, err)
	}
	return delivered, nil
}

// report reports the node's renewTime as last seen, or that it has no
// Lease, as its reporter says, if the node is followed.
func (wd *wide) report(ctx context.Context, node string) {
	if !wd.w.isFollowed(node) || ctx.Err() != nil {
		return
	}
	r := wd.nodes[node]
	if r == nil {
		r = &reporter{node: node, logger: wd.logger.WithValues("node", node)}
		wd.nodes[node] = r
	}
	if renewed, ok := wd.renewals[node]; ok {
		r.seen(ctx, wd.w, renewed)
	} else {
		r.gone(wd.w)
	}
}

// inNamespace reports whether lease is a node Lease: the watch's namespace
// is never trusted alone.
func inNamespace(lease *coordinationv1.Lease) bool {
	return lease.Namespace == "" || lease.Namespace == corev1.NamespaceNodeLease
}

// renewTime is the Lease's renewTime, zero if it has none.
func renewTime(lease *coordinationv1.Lease) time.Time {
	if lease.Spec.RenewTime == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Time
}
