package controller

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Proof of life needs one heartbeat from each in-flight node after its new
// pod settled, and nothing from the rest of the fleet. A kubelet's heartbeat
// is its Lease, renewed every 10 s; its Node status is written every 5
// minutes. Watching every Lease would cost the controller an event per node
// every 10 s whether or not anything rolls (1,000 a second at 10,000 nodes),
// so the controller reads only the Leases of the nodes it waits on
// (leaseReader), and takes Node status heartbeats from the Node informer it
// needs anyway for readiness (nodes without Leases keep working that way).

// heartbeats remembers the latest heartbeat seen from each node, by either
// way, and which DaemonSets wait for a heartbeat from which nodes, so that a
// heartbeat syncs only the DaemonSets it settles: not those of other nodes,
// nor for one sent before the new pod settled (timestamps in whole seconds
// make that common: a heartbeat in the second the pod settled proves
// nothing).
type heartbeats struct {
	mu     sync.Mutex
	latest map[string]time.Time            // node → latest heartbeat seen
	byKey  map[string]map[string]time.Time // key → node → proof after
	byNode map[string]map[string]time.Time // node → key → proof after
	// reader follows the Leases of the nodes waited on; nil reads none
	// (tests that feed heartbeats by hand).
	reader *leaseReader
}

func newHeartbeats(reader *leaseReader) *heartbeats {
	return &heartbeats{latest: map[string]time.Time{}, byKey: map[string]map[string]time.Time{},
		byNode: map[string]map[string]time.Time{}, reader: reader}
}

// seen is the latest heartbeat seen from the node's Lease, zero if none.
func (h *heartbeats) seen(node string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest[node]
}

// observe records a heartbeat the node sent at sent and returns the
// DaemonSets it settles.
func (h *heartbeats) observe(node string, sent time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sent.After(h.latest[node]) {
		h.latest[node] = sent
	}
	var keys []string
	for key, after := range h.byNode[node] {
		if ProvesAlive(sent, after) {
			keys = append(keys, key)
		}
	}
	return keys
}

// ProvesAlive reports whether a heartbeat sent at sent proves a node alive
// after its new pod settled at settled: the failure brake's proof of life,
// which the bench replays. A pod's conditions say when it turned ready to
// the second only, while a Lease's renewTime has microseconds: a renewal at
// 10.5 s may come before a pod that turned ready at 10.7 s, shown as 10 s.
// Only a heartbeat from the next whole second on is surely later.
func ProvesAlive(sent, settled time.Time) bool {
	return !sent.Before(settled.Truncate(time.Second).Add(time.Second))
}

// set replaces the nodes the DaemonSet key waits on, each with the time after
// which a heartbeat settles it, and has the Leases of exactly the nodes some
// DaemonSet waits on read.
func (h *heartbeats) set(key string, nodes map[string]time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if maps.EqualFunc(h.byKey[key], nodes, time.Time.Equal) {
		return // as most syncs find it: nothing to re-index
	}
	for node := range h.byKey[key] {
		if keys := h.byNode[node]; keys != nil {
			delete(keys, key)
			if len(keys) == 0 {
				delete(h.byNode, node)
				if h.reader != nil {
					h.reader.stop(node)
				}
			}
		}
	}
	if len(nodes) == 0 {
		delete(h.byKey, key)
		return
	}
	h.byKey[key] = maps.Clone(nodes)
	for node, after := range nodes {
		if h.byNode[node] == nil {
			h.byNode[node] = map[string]time.Time{}
			if h.reader != nil {
				h.reader.start(node)
			}
		}
		h.byNode[node][key] = after
	}
}

// Lease polling. A kubelet renews its Lease every quarter of the Lease's
// duration (10 s of 40 s), a few percent late at most. The reader reads a
// waited-on node's Lease at once, then every leasePoll until it has seen a
// renewal; from then on it knows the phase and reads around each expected
// renewal only. A read is served from the API server's watch cache
// (resourceVersion "0"): cheap, and fresh to within milliseconds.
const (
	leasePoll       = time.Second
	leaseNearPoll   = 250 * time.Millisecond
	noLeaseRecheck  = 40 * time.Second
	leaseReadBudget = 5 * time.Second
)

// leaseReader reads the Leases of the nodes some DaemonSet waits on, one
// goroutine each while waited on, and hands every renewal to onRenew.
type leaseReader struct {
	client  kubernetes.Interface
	onRenew func(node string, renewed time.Time)
	logger  klog.Logger

	mu      sync.Mutex
	ctx     context.Context // nil until run
	stopped map[string]context.CancelFunc
	wg      sync.WaitGroup
}

func newLeaseReader(client kubernetes.Interface, onRenew func(string, time.Time), logger klog.Logger) *leaseReader {
	return &leaseReader{client: client, onRenew: onRenew, logger: logger, stopped: map[string]context.CancelFunc{}}
}

// run lets reads start, until ctx ends; it returns once every read stopped.
func (r *leaseReader) run(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	pending := make([]string, 0, len(r.stopped))
	for node, cancel := range r.stopped {
		if cancel == nil {
			pending = append(pending, node)
		}
	}
	r.mu.Unlock()
	for _, node := range pending {
		r.start(node)
	}
	<-ctx.Done()
	r.wg.Wait()
}

// start follows the node's Lease; a node already followed is left as it is.
func (r *leaseReader) start(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel, ok := r.stopped[node]; ok && cancel != nil {
		return
	}
	if r.ctx == nil {
		r.stopped[node] = nil // started by run
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.stopped[node] = cancel
	r.wg.Go(func() { r.follow(ctx, node) })
}

// stop ends the reads of the node's Lease.
func (r *leaseReader) stop(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel := r.stopped[node]; cancel != nil {
		cancel()
	}
	delete(r.stopped, node)
}

// follow reads the node's Lease until ctx ends.
func (r *leaseReader) follow(ctx context.Context, node string) {
	var last time.Time               // the renewTime last seen
	var lastRead time.Time           // local time of the last read
	var spanStart, spanEnd time.Time // local times between which the last renewal came
	wait := time.Duration(0)
	backoff := leasePoll
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, leaseReadBudget)
		lease, err := r.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(rctx, node, metav1.GetOptions{ResourceVersion: "0"})
		cancel()
		now := time.Now()
		switch {
		case apierrors.IsNotFound(err):
			// No Lease: its Node status is the node's heartbeat, which the
			// Node informer delivers. Look again now and then.
			wait = noLeaseRecheck
			continue
		case err != nil:
			if ctx.Err() == nil {
				r.logger.V(4).Info("Reading a node Lease failed; retrying", "node", node, "err", err, "after", backoff)
			}
			wait, backoff = backoff, min(2*backoff, 10*time.Second)
			continue
		}
		backoff = leasePoll
		interval := 10 * time.Second
		if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
			interval = time.Duration(*d) * time.Second / 4
		}
		var renewed time.Time
		if lease.Spec.RenewTime != nil {
			renewed = lease.Spec.RenewTime.Time
		}
		if !renewed.Equal(last) {
			if !last.IsZero() {
				spanStart, spanEnd = lastRead, now // it came between the two reads
			}
			last = renewed
			r.onRenew(node, renewed)
		}
		lastRead = now
		wait = leasePoll
		if !spanStart.IsZero() {
			// The phase is known: the next renewal is due between these two
			// times (a kubelet renews a few percent late at most). Sleep
			// until the span, read closely within it; past it, the renewal
			// is late: read every leasePoll until it comes.
			from, to := spanStart.Add(interval), spanEnd.Add(interval+interval/10)
			switch {
			case now.Before(from):
				wait = from.Sub(now)
			case now.Before(to):
				wait = leaseNearPoll
			}
		}
	}
}
