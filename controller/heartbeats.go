package controller

import (
	"context"
	"sync"
	"time"

	"github.com/edgeota/edgeota/decision"
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
		if decision.ProvesAlive(sent, after) {
			keys = append(keys, key)
		}
	}
	return keys
}

// set replaces the nodes the DaemonSet key waits on, each with the time after
// which a heartbeat settles it, and has the Leases of exactly the nodes some
// DaemonSet waits on read: a node no DaemonSet waits on any more stops being
// read, a node waited on for the first time starts; the others go on as
// they were. It changes its own index in place: a sync calls it every time,
// with up to a wave's worth of nodes.
func (h *heartbeats) set(key string, nodes map[string]decision.Awaiting) {
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := h.byKey[key]
	for node := range mine {
		if _, still := nodes[node]; still {
			continue
		}
		delete(mine, node)
		keys := h.byNode[node]
		delete(keys, key)
		if len(keys) == 0 {
			delete(h.byNode, node)
			if h.reader != nil {
				h.reader.stop(node)
			}
		}
	}
	for node, a := range nodes {
		after := a.After
		if cur, ok := mine[node]; ok && cur.Equal(after) {
			continue
		}
		if mine == nil {
			mine = make(map[string]time.Time, len(nodes))
			h.byKey[key] = mine
		}
		mine[node] = after
		if h.byNode[node] == nil {
			h.byNode[node] = map[string]time.Time{}
			if h.reader != nil {
				h.reader.start(node)
			}
		}
		h.byNode[node][key] = after
	}
	if len(mine) == 0 {
		delete(h.byKey, key)
	}
}

// Lease reads. A kubelet renews its Lease every quarter of the Lease's
// duration (10 s of 40 s), up to 4% late. The reader reads a waited-on
// node's Lease at once, then once just after the renewal that should follow
// (its renewTime plus that period), so that a node in flight costs about one
// read per renewal, not a read a second. A renewTime is the node's clock, and
// a vehicle's clock may be off: the reader learns the offset between the
// node's clock and its own from each renewal it sees, and until then, or
// when a renewal comes late, reads every leaseNearPoll for a second, then
// every leasePoll. A read is served from the API server's watch cache
// (resourceVersion "0"): cheap, and fresh to within milliseconds.
const (
	leasePoll       = time.Second
	leaseNearPoll   = 250 * time.Millisecond
	leaseSlack      = 100 * time.Millisecond
	noLeaseRecheck  = 40 * time.Second
	leaseReadBudget = 5 * time.Second
	// leaseReadsAtOnce bounds the reads under way: a fresh controller may
	// wait on every node whose pod settled in the last minutes.
	leaseReadsAtOnce = 32
)

// leaseReader reads the Leases of the nodes some DaemonSet waits on, one
// goroutine each while waited on, and hands every renewal to onRenew.
type leaseReader struct {
	client  kubernetes.Interface
	onRenew func(node string, renewed time.Time)
	// counted counts each read by what it found (the leaseRenewed …
	// results of edgeota_controller_lease_reads_total).
	counted func(result string)
	logger  klog.Logger

	mu      sync.Mutex
	ctx     context.Context // nil until run
	stopped map[string]context.CancelFunc
	// clocks keep what each node's reads learnt of its clock, for the next
	// time it is waited on.
	clocks map[string]leaseClock
	// reading holds a place for each read under way (leaseReadsAtOnce).
	reading chan struct{}
	wg      sync.WaitGroup
}

func newLeaseReader(client kubernetes.Interface, onRenew func(string, time.Time), counted func(string), logger klog.Logger) *leaseReader {
	return &leaseReader{client: client, onRenew: onRenew, counted: counted, logger: logger, stopped: map[string]context.CancelFunc{}, clocks: map[string]leaseClock{},
		reading: make(chan struct{}, leaseReadsAtOnce)}
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
	r.mu.Lock()
	clock := r.clocks[node]
	r.mu.Unlock()
	clock.unchanged, clock.lastRead = 0, time.Time{} // a read now starts afresh; the offset stands
	defer func() {
		r.mu.Lock()
		r.clocks[node] = clock
		r.mu.Unlock()
	}()
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
		select {
		case r.reading <- struct{}{}:
		case <-ctx.Done():
			return
		}
		rctx, cancel := context.WithTimeout(ctx, leaseReadBudget)
		lease, err := r.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(rctx, node, metav1.GetOptions{ResourceVersion: "0"})
		cancel()
		<-r.reading
		now := time.Now()
		switch {
		case apierrors.IsNotFound(err):
			// No Lease: its Node status is the node's heartbeat, which the
			// Node informer delivers. Look again now and then.
			r.counted(leaseMissing)
			wait = noLeaseRecheck
			continue
		case err != nil:
			if ctx.Err() == nil {
				r.counted(leaseError)
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
		if clock.read(now, renewed) {
			r.counted(leaseRenewed)
			r.onRenew(node, renewed)
		} else {
			r.counted(leaseUnchanged)
		}
		wait = clock.nextRead(now, interval)
	}
}

// leaseClock times the reads of one node's Lease: it remembers the last
// renewal seen, and brackets the offset between the local clock and the
// node's (local minus node) from the renewals seen: each came after the read
// before it and by the read that saw it.
type leaseClock struct {
	last      time.Time // the renewTime last seen, node's clock
	lastRead  time.Time // the local time of the last read
	known     bool      // lo and hi bound the offset
	lo, hi    time.Duration
	unchanged int // reads in a row since the last renewal seen
}

// read takes a read at local time now that saw renewTime renewed, and
// reports whether it is a renewal not seen before.
func (c *leaseClock) read(now, renewed time.Time) bool {
	changed := !renewed.Equal(c.last)
	if changed && !c.last.IsZero() && !c.lastRead.IsZero() {
		lo, hi := c.lastRead.Sub(renewed), now.Sub(renewed)
		if !c.known {
			c.lo, c.hi, c.known = lo, hi, true
		} else {
			c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
			if c.lo > c.hi { // the node's clock jumped: start again
				c.lo, c.hi = lo, hi
			}
		}
	}
	if changed {
		c.last, c.unchanged = renewed, 0
	} else {
		c.unchanged++
	}
	c.lastRead = now
	return changed
}

// nextRead is how long to wait for the next read: until just after the next
// renewal should be visible (its renewTime, the node's clock, plus a period
// a kubelet may stretch by 4%, plus the offset: none assumed before it is
// bracketed, its upper bound once that is tight, the middle while it is
// wide), never more than a period and a half; closely, for a second, when
// that time has passed without it; then every leasePoll.
func (c *leaseClock) nextRead(now time.Time, interval time.Duration) time.Duration {
	var offset time.Duration
	switch {
	case !c.known:
	case c.hi-c.lo <= 2*leaseNearPoll:
		offset = c.hi
	default:
		offset = c.lo + (c.hi-c.lo)/2
	}
	due := c.last.Add(interval + interval/25 + leaseSlack + offset)
	switch {
	case now.Before(due):
		return min(due.Sub(now), interval+interval/2)
	case c.unchanged <= int(time.Second/leaseNearPoll):
		return leaseNearPoll
	default:
		return leasePoll
	}
}
