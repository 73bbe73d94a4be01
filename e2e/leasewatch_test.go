//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/leases"
)

// TestLeaseWatcherReportsEveryRenewal: on nodes that renew their Leases as
// kubelets do (every 10 s), a leases.Watcher following 3 of 5 nodes, a
// watch by name each that begins with the node's Lease (no list: the API
// server streams the initial events), reports each node's current renewal, then every
// renewal that a plain watch of all Leases sees for those nodes, over at
// least two renewal periods, each once, and nothing for the 2 nodes it does
// not follow; a node stopped is reported no more. It logs how long after the
// plain watch's event the Watcher's report came (p50, max): informative
// only, speed is measured elsewhere.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestLeaseWatcherReportsEveryRenewal(t *testing.T) {
	testLeaseWatcher(t, false)
}

// TestWideLeaseWatchReportsEveryRenewal: the same, with the 3 nodes
// followed by one watch of every Lease (WideAt 2, the fleet counted by
// ListAll as the controller does at start), which must report exactly what
// the watches by name do.
//
// It runs alone (e2e/README.md): its nodes heartbeat as kubelets, and Lease
// timing is what it proves.
func TestWideLeaseWatchReportsEveryRenewal(t *testing.T) {
	testLeaseWatcher(t, true)
}

// testLeaseWatcher is TestLeaseWatcherReportsEveryRenewal, with one watch of
// every Lease if wide.
func testLeaseWatcher(t *testing.T, wide bool) {
	const nodes = 5
	e := newKubeletEnv(t, nodes)
	names := allNodes(nodes)
	followed, unfollowed := names[:3], names[3:]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// The independent view: every Lease, one plain watch from a list.
	independent := newRenewalLog()
	client := e.cluster.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing node Leases: %v", err)
	}
	for i := range list.Items {
		independent.addLease(&list.Items[i])
	}
	plain, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watching node Leases: %v", err)
	}
	plainDone := make(chan struct{})
	go func() {
		defer close(plainDone)
		for ev := range plain.ResultChan() {
			if lease, ok := ev.Object.(*coordinationv1.Lease); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				independent.addLease(lease)
			}
		}
		if ctx.Err() == nil {
			t.Errorf("the plain watch of node Leases ended before the test did: the independent view is incomplete")
		}
	}()
	defer func() { plain.Stop(); <-plainDone }()

	// The Watcher, on a client of its own as ota-controller gives it.
	watcherClient, err := kube.NewForConfig(rest.CopyConfig(e.cluster.Config))
	if err != nil {
		t.Fatal(err)
	}
	reported := newRenewalLog()
	var countsMu sync.Mutex
	counts := map[string]int{}
	opts := leases.Options{Counted: func(what string) {
		countsMu.Lock()
		defer countsMu.Unlock()
		counts[what]++
	}}
	if wide {
		opts.WideAt = 2
	}
	w := leases.NewWatcher(watcherClient, reported.add, opts)
	if wide {
		if err := w.ListAll(ctx, func(string, time.Time) {}); err != nil {
			t.Fatalf("ListAll: %v", err)
		}
	}
	for _, n := range followed {
		w.Start(n)
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		w.Run(klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))))
	}()
	defer func() { cancel(); <-runDone }()

	// Each followed node's current renewal, then two periods and more: three
	// renewals after it, as the plain watch sees them.
	first := map[string]time.Time{}
	eventually(t, "a first report of each followed node", func(context.Context) (bool, string, error) {
		for _, n := range followed {
			if s := reported.of(n); len(s) > 0 {
				first[n] = s[0].renewed
			}
		}
		return len(first) == len(followed), fmt.Sprintf("reported: %v", slices.Sorted(maps.Keys(first))), nil
	})
	if got := w.Wide(); got != wide {
		t.Fatalf("got one watch of every Lease %t, want %t", got, wide)
	}
	eventually(t, "three renewals of each followed node after its first report", func(context.Context) (bool, string, error) {
		state := ""
		done := true
		for _, n := range followed {
			after := len(independent.since(n, first[n])) - 1
			state += fmt.Sprintf("%s: %d; ", n, after)
			done = done && after >= 3
		}
		return done, state, nil
	})

	// Every renewal the plain watch saw from a followed node's first report
	// on is reported, once, and nothing else.
	want := map[string][]sighting{}
	for _, n := range followed {
		want[n] = independent.since(n, first[n])
	}
	eventually(t, "the Watcher to report every renewal the plain watch saw", func(context.Context) (bool, string, error) {
		var missing []string
		for _, n := range followed {
			got := reported.renewTimes(n)
			for _, s := range want[n] {
				if !slices.ContainsFunc(got, s.renewed.Equal) {
					missing = append(missing, fmt.Sprintf("%s at %s", n, s.renewed.Format(time.StampMicro)))
				}
			}
		}
		return len(missing) == 0, fmt.Sprintf("not reported: %v", missing), nil
	})
	// From the plain watch's event to the Watcher's report, and from the
	// renewal itself (renewTime, the kwok controller's clock: this
	// machine's) to the Watcher's report.
	var latencies, sinceRenewal []time.Duration
	for _, n := range followed {
		got := reported.of(n)
		for i, s := range got {
			if i > 0 && !s.renewed.After(got[i-1].renewed) {
				t.Errorf("node %s: got report %d of renewTime %s after %s, want each renewal once, in order", n, i, s.renewed.Format(time.StampMicro), got[i-1].renewed.Format(time.StampMicro))
			}
			seen, ok := independent.find(n, s.renewed)
			if !ok {
				t.Errorf("node %s: got a report of renewTime %s, which the plain watch never saw", n, s.renewed.Format(time.StampMicro))
				continue
			}
			if i > 0 { // the first came from a list, not a watch event
				latencies = append(latencies, s.at.Sub(seen.at))
				sinceRenewal = append(sinceRenewal, s.at.Sub(s.renewed))
			}
		}
	}
	for _, n := range unfollowed {
		if got := reported.of(n); len(got) > 0 {
			t.Errorf("got %d reports of unfollowed node %s, want none", len(got), n)
		}
		if got := len(independent.of(n)); got < 2 {
			t.Errorf("the plain watch saw %d renewals of unfollowed node %s, want some: nothing to ignore", got, n)
		}
	}
	t.Logf("%d renewals reported by watch; from the plain watch's event to the Watcher's report: %s; from the renewal to the Watcher's report: %s",
		len(latencies), spread(latencies), spread(sinceRenewal))

	// A node stopped is reported no more: no renewal made after Stop
	// returned (the kwok controller renews on this machine's clock).
	stopped, still := followed[2], followed[:2]
	w.Stop(stopped)
	stoppedAt := time.Now()
	var renewedAfter sighting
	eventually(t, fmt.Sprintf("a renewal of stopped node %s, then a report of each node still followed", stopped), func(context.Context) (bool, string, error) {
		s := independent.since(stopped, stoppedAt)
		if len(s) == 0 {
			return false, "no renewal of " + stopped + " yet", nil
		}
		renewedAfter = s[0]
		var waiting []string
		for _, n := range still {
			if r := reported.of(n); len(r) == 0 || !r[len(r)-1].at.After(renewedAfter.at) {
				waiting = append(waiting, n)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("no report since from %v", waiting), nil
	})
	for _, r := range reported.of(stopped) {
		if r.renewed.After(stoppedAt) {
			t.Errorf("got a report of renewTime %s for node %s, stopped at %s, want none", r.renewed.Format(time.StampMicro), stopped, stoppedAt.Format(time.StampMicro))
		}
	}

	cancel()
	select {
	case <-runDone:
	case <-time.After(waitTimeout):
		t.Fatalf("Run had not returned %s after its context ended, want it to return once every watch stopped", waitTimeout)
	}
	countsMu.Lock()
	defer countsMu.Unlock()
	t.Logf("counted: %v", counts)
	if wide != w.Wide() {
		t.Errorf("got one watch of every Lease %t after a Stop, want %t", w.Wide(), wide)
	}
	watches := len(followed) // one by name each
	if wide {
		watches = 1
	}
	if counts[leases.Missing] != 0 || counts[leases.Watched] < watches {
		t.Errorf("got counts %v, want no Lease missing and at least %d watches", counts, watches)
	}
	// Kubernetes 1.36 streams a watch's initial events: a node's own watch
	// needs no list (the wide watch lists every Lease).
	if !wide && counts[leases.Listed] != 0 {
		t.Errorf("got %d lists, want none: each node's own watch begins with its Lease", counts[leases.Listed])
	}
}

// sighting is a renewTime and when this process learnt of it.
type sighting struct {
	renewed, at time.Time
}

// renewalLog keeps, by node, the renewTimes seen, in order of arrival.
type renewalLog struct {
	mu     sync.Mutex
	byNode map[string][]sighting
}

func newRenewalLog() *renewalLog { return &renewalLog{byNode: map[string][]sighting{}} }

// add records renewed for node, now: the Watcher's callback.
func (l *renewalLog) add(node string, renewed time.Time) {
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byNode[node] = append(l.byNode[node], sighting{renewed, at})
}

// addLease records the Lease's renewTime unless it is the last recorded:
// the plain watch's view, one entry per renewal.
func (l *renewalLog) addLease(lease *coordinationv1.Lease) {
	if lease.Spec.RenewTime == nil {
		return
	}
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.byNode[lease.Name]
	if len(s) > 0 && s[len(s)-1].renewed.Equal(lease.Spec.RenewTime.Time) {
		return
	}
	l.byNode[lease.Name] = append(s, sighting{lease.Spec.RenewTime.Time, at})
}

func (l *renewalLog) of(node string) []sighting {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byNode[node])
}

// since is the node's sightings of a renewTime at or after t.
func (l *renewalLog) since(node string, t time.Time) []sighting {
	var out []sighting
	for _, s := range l.of(node) {
		if !s.renewed.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

func (l *renewalLog) renewTimes(node string) []time.Time {
	var out []time.Time
	for _, s := range l.of(node) {
		out = append(out, s.renewed)
	}
	return out
}

// find is the first sighting of renewTime renewed for node.
func (l *renewalLog) find(node string, renewed time.Time) (sighting, bool) {
	for _, s := range l.of(node) {
		if s.renewed.Equal(renewed) {
			return s, true
		}
	}
	return sighting{}, false
}

// spread is the min, p50 and max of ds, sorting ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	return fmt.Sprintf("min %s, p50 %s, max %s", ds[0], ds[len(ds)/2], ds[len(ds)-1])
}
