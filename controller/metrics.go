package controller

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/leases"
	"github.com/edgeota/edgeota/rollout"
)

// Metrics are the controller's Prometheus figures: enough to tell a stuck
// rollout (deletions flat, queue growing) from a slow one (sync duration),
// and to draw every rollout over time (charts/edgeota's dashboard and
// alerts, docs/operator/watching.md).
//
// Cardinality is bounded by the DaemonSets, never by the nodes: a rollout's
// series are per DaemonSet and per value of a fixed set (a state, a proof, a
// reason), and a node name or a revision hash is never a label
// (TestSeriesPerDaemonSetNotPerNode). Only the leader syncs, so only it
// exports rollout series; the queries aggregate over the replicas with
// max by (namespace, daemonset).
type Metrics struct {
	registerer        prometheus.Registerer
	leader            prometheus.Gauge
	apiRequests       *prometheus.CounterVec
	syncDuration      *prometheus.HistogramVec
	podsDeleted       prometheus.Counter
	podsPatched       prometheus.Counter
	conditionsWritten *prometheus.CounterVec
	rolloutNodes      *prometheus.GaugeVec
	rolloutDesired    *prometheus.GaugeVec
	rolloutRevision   *prometheus.GaugeVec
	rolloutHalted     *prometheus.GaugeVec
	rolloutHaltReason *prometheus.GaugeVec
	rolloutPaused     *prometheus.GaugeVec
	rolloutPulls      *prometheus.GaugeVec
	rolloutAwaiting   *prometheus.GaugeVec
	watchEvents       *prometheus.CounterVec
	recordWrites      prometheus.Counter
	recordBytes       prometheus.Counter
	recordStored      prometheus.Counter
	leaseReads        *prometheus.CounterVec
	leaseRequests     *prometheus.CounterVec
	rolloutProven     *prometheus.GaugeVec
	proofs            *prometheus.CounterVec
	proofWait         *prometheus.HistogramVec
	challenges        *prometheus.CounterVec

	// sources are what the gauges read at each scrape: the work queue and
	// the Lease watcher of the controller running now, none on a standby.
	sources struct {
		sync.Mutex
		queue  workqueue.TypedRateLimitingInterface[string]
		leases *leases.Watcher
	}
}

// Values of the state label of edgeota_controller_rollout_nodes, as the
// rollout status counts them (rollout.Status). They overlap: updated
// includes settled_unavailable and the updated nodes that went offline
// (also skipped), failed includes the failures lost from the record; held,
// waiting_for_window and offered are nodes still on the old revision.
var rolloutStates = []string{
	"updated", "in_flight", "skipped", "failed", "settled_unavailable",
	"held_back", "held", "waiting_for_window", "offered",
}

// rolloutCounts are the rollout status's counts in rolloutStates' order.
func rolloutCounts(s *rollout.Status) []int {
	count := func(t *rollout.TimedNodes) int {
		if t == nil {
			return 0
		}
		return t.Count
	}
	down := 0
	if s.SettledUnavailable != nil {
		down = s.SettledUnavailable.Count
	}
	return []int{s.Updated, s.InFlight, s.Skipped, s.Failed.Count, down,
		s.HeldBack, count(s.Held), count(s.WaitingForWindow), count(s.Offered)}
}

// Values of the state label of edgeota_controller_rollout_pulls, and their
// counts in the rollout status (all zero before the first pull).
var pullStates = []string{"in_flight", "done", "failed", "waiting", "timed_out"}

func pullCounts(p *rollout.Pulls) []int {
	if p == nil {
		p = &rollout.Pulls{}
	}
	return []int{p.InFlight, p.Done, p.Failed, p.Waiting, p.TimedOut}
}

// Values of the proof label: what proved a node alive after its pod settled.
var proofKinds = []decision.Proof{decision.ProofAnswer, decision.ProofHeartbeat}

// NewRegistry is the registry ota-controller serves at /metrics: the Go
// runtime's and the process's collectors, and the controller's Metrics. The
// binary and the tests that read which metrics it serves (the dashboard's
// and the alerts' queries, e2e/monitoring_test.go) build it here alone.
func NewRegistry() (*Registry, *Metrics) {
	r := &Registry{Registry: prometheus.NewRegistry()}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r, NewMetrics(r)
}

// Registry is a prometheus.Registry that remembers what was registered on
// it, so that the names of its metrics can be read even for a labelled
// metric that has no series yet (Gather shows only those that have).
type Registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// Register registers c and remembers it.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers cs, panicking as prometheus.Registry's does when one
// cannot be.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// descName reads a descriptor's metric name from its String form, the one
// place client_golang shows it.
var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// MetricNames returns the name of every metric registered, sorted: a
// histogram's as registered, without its _bucket, _sum and _count series.
func (r *Registry) MetricNames() ([]string, error) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range cs {
		descs := make(chan *prometheus.Desc)
		go func() {
			c.Describe(descs)
			close(descs)
		}()
		for d := range descs {
			m := descName.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("reading a metric's name from %s", d)
			}
			seen[m[1]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// NewMetrics registers the controller's metrics on reg; use a registry of the
// binary's own so that tests can create as many controllers as they like.
// Every metric is registered here, before any leader election, so that a
// standby serves the same names as the leader: its leader gauge at 0, its
// queue and Lease gauges at 0, and no rollout series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		registerer: reg,
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeota_controller_leader",
			Help: "1 while this replica holds the leader Lease and acts (always with --leader-elect=false), 0 on a standby.",
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_api_requests_total",
			Help: "Requests to the API server, by HTTP method and status code (\"<error>\" when no response came): client-go's own count of every request the controller's clients made, the leader election's included.",
		}, []string{"method", "code"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgeota_controller_sync_duration_seconds",
			Help:    "Time to sync one DaemonSet, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result"}),
		podsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_pods_deleted_total",
			Help: "Out-of-date pods deleted by AdvancedRollingUpdate.",
		}),
		podsPatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_pods_patched_total",
			Help: "Out-of-date pods whose images the controller patched in place (edgeota.io/update-method InPlaceIfPossible), both strategies.",
		}),
		conditionsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_conditions_written_total",
			Help: "Pod conditions written, by condition type.",
		}, []string{"type"}),
		rolloutNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_nodes",
			Help: "Nodes of an edgeota DaemonSet by rollout state, as its rollout status counts them: updated (settled on the target revision; settled_unavailable and updated nodes gone offline included), in_flight, skipped (NotReady, not in flight), failed, settled_unavailable (settled, pod unavailable while Ready), held_back (kept on the old revision by the node selector, the partition or a pause), held (by their owner), waiting_for_window (their maintenance window is closed), offered (OTA offers not taken yet).",
		}, []string{"namespace", "daemonset", "state"}),
		rolloutDesired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_desired_nodes",
			Help: "Nodes running an edgeota DaemonSet: the rollout status's total.",
		}, []string{"namespace", "daemonset"}),
		rolloutRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_target_revision",
			Help: "The number of the ControllerRevision an edgeota DaemonSet rolls out (kubectl rollout history's REVISION): a new value is a new rollout.",
		}, []string{"namespace", "daemonset"}),
		rolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_halted",
			Help: "1 while the DaemonSet's rollout is halted by max-failed, else 0.",
		}, []string{"namespace", "daemonset"}),
		rolloutHaltReason: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_halt_reason",
			Help: "1 for the reason the DaemonSet's rollout is halted, 0 for the others (all 0 unless halted): nodes_failed (upgraded nodes failed), pulls_failed (only pre-downloads failed, no pod lost), record_lost (only failures lost from the rollout record).",
		}, []string{"namespace", "daemonset", "reason"}),
		rolloutPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_paused",
			Help: "1 while the DaemonSet's rollout is paused (edgeota.io/paused), else 0.",
		}, []string{"namespace", "daemonset"}),
		rolloutPulls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_pulls",
			Help: "Pre-downloads of a DaemonSet's target images (edgeota.io/pre-download) by state: in_flight, done (pulled, waiting for the node's turn), failed (for good; no pod lost), waiting (nodes the budget would take now but for their download), timed_out (pulls that outlasted edgeota.io/pre-download-timeout-seconds).",
		}, []string{"namespace", "daemonset", "state"}),
		rolloutAwaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_awaiting_proof_nodes",
			Help: "Nodes whose new pod settled and whose rollout waits for their proof of life (a heartbeat, or their agent's answer to the challenge written on the pod): each holds the budget until proven.",
		}, []string{"namespace", "daemonset"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_watch_events_total",
			Help: "Watch events the controller's informers handed it (adds, updates, deletes), by resource: what watching the cluster costs it, at rest as in a rollout.",
		}, []string{"resource"}),
		recordWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_record_writes_total",
			Help: "Writes of rollout records (one ConfigMap created): every node's stage (offered, in flight, settled, failed).",
		}),
		recordBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_record_bytes_written_total",
			Help: "Bytes of the data of the rollout record ConfigMaps written (keys and values, the entries compressed): the record's own share of edgeota_controller_record_stored_bytes_total.",
		}),
		recordStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_record_stored_bytes_total",
			Help: "Bytes etcd stores for the rollout record ConfigMaps written: each object as the API server serialises it, its metadata and managedFields included. What the records cost etcd's history until compaction.",
		}),
		leaseReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_lease_reads_total",
			Help: "What the watches of node Leases (the proof of life of the nodes a rollout waits on) saw: renewed (a renewal not seen before), missing (no Lease: the Node status serves), error.",
		}, []string{"result"}),
		leaseRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_lease_requests_total",
			Help: "Requests for node Leases, by verb: list (one when a node starts being followed, one after a watch ends, and one per page of the list of every Lease at start), watch. What proof of life costs the API server.",
		}, []string{"verb"}),
		rolloutProven: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_proven_nodes",
			Help: "Updated nodes of a DaemonSet by what proved them alive after their new pod settled: answer (the node agent's answer to the controller's challenge), heartbeat (the node's Lease renewal or Node status). As the rollout status counts them.",
		}, []string{"namespace", "daemonset", "proof"}),
		proofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_proofs_total",
			Help: "Nodes this controller saw proved alive after their new pod settled, by DaemonSet and proof: answer (the node agent's answer to its challenge), heartbeat (Lease renewal or Node status: with agent proof on, a challenge left unanswered).",
		}, []string{"namespace", "daemonset", "proof"}),
		proofWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgeota_controller_proof_wait_seconds",
			Help:    "Time from the controller first judging a node's new pod settled (the node waiting for its proof of life, holding the budget) to the proof, by DaemonSet and proof, on the controller's clock; 0 when the proof was there at once. What proof of life adds to each wave.",
			Buckets: prometheus.ExponentialBuckets(0.025, 2, 12),
		}, []string{"namespace", "daemonset", "proof"}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_challenges_written_total",
			Help: "Proof-of-life challenges written on settled pods (one pods/status write each), by DaemonSet: with the agents' answers, what proof of life by answer costs the API server.",
		}, []string{"namespace", "daemonset"}),
	}
	reg.MustRegister(m.leader, m.apiRequests, m.syncDuration, m.podsDeleted, m.podsPatched, m.conditionsWritten,
		m.rolloutNodes, m.rolloutDesired, m.rolloutRevision, m.rolloutHalted, m.rolloutHaltReason, m.rolloutPaused,
		m.rolloutPulls, m.rolloutAwaiting, m.watchEvents, m.recordWrites, m.recordBytes, m.recordStored, m.leaseReads, m.leaseRequests,
		m.rolloutProven, m.proofs, m.proofWait, m.challenges,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeota_controller_queue_depth",
			Help: "DaemonSets waiting to be synced (0 on a standby).",
		}, func() float64 {
			m.sources.Lock()
			defer m.sources.Unlock()
			if m.sources.queue == nil {
				return 0
			}
			return float64(m.sources.queue.Len())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeota_controller_lease_watches",
			Help: "Node Leases followed now (one watch each, or one of every Lease while a quarter of the fleet is): the nodes a rollout waits on for proof of life.",
		}, func() float64 {
			m.sources.Lock()
			defer m.sources.Unlock()
			if m.sources.leases == nil {
				return 0
			}
			return float64(m.sources.leases.Followed())
		}))
	return m
}

// SetLeader sets edgeota_controller_leader: whether this replica acts.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// APIRequests is the hook client-go's tools/metrics calls with each
// request's result (clientmetrics.RegisterOpts.RequestResult): the binary
// installs it, once per process, before making its clients.
func (m *Metrics) APIRequests() clientmetrics.ResultMetric { return apiRequestResult{m.apiRequests} }

type apiRequestResult struct{ requests *prometheus.CounterVec }

// Increment counts a request by method and code. The host is left out: the
// controller talks to one API server.
func (r apiRequestResult) Increment(_ context.Context, code, method, _ string) {
	r.requests.WithLabelValues(method, code).Inc()
}

// proven counts a node of the DaemonSet proved alive by proof, after waiting
// wait (known only when waited: see decision.NoticeProven).
func (m *Metrics) proven(ds *appsv1.DaemonSet, proof decision.Proof, wait time.Duration, waited bool) {
	m.proofs.WithLabelValues(ds.Namespace, ds.Name, string(proof)).Inc()
	if waited {
		m.proofWait.WithLabelValues(ds.Namespace, ds.Name, string(proof)).Observe(wait.Seconds())
	}
}

// challengeWritten counts a challenge written on a pod of the DaemonSet key.
func (m *Metrics) challengeWritten(key string) {
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		m.challenges.WithLabelValues(namespace, name).Inc()
	}
}

// watchQueue exports the work queue's depth.
func (m *Metrics) watchQueue(q workqueue.TypedRateLimitingInterface[string]) {
	m.sources.Lock()
	defer m.sources.Unlock()
	m.sources.queue = q
}

func (m *Metrics) observeSync(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.syncDuration.WithLabelValues(result).Observe(d.Seconds())
}

func (m *Metrics) podDeleted() { m.podsDeleted.Inc() }

func (m *Metrics) podPatched() { m.podsPatched.Inc() }

func (m *Metrics) recordWritten(data, stored int) {
	m.recordWrites.Inc()
	m.recordBytes.Add(float64(data))
	m.recordStored.Add(float64(stored))
}

// leaseCounted counts what the Lease watches saw (leases.Renewed,
// leases.Missing, leases.Failed) and the requests they made (leases.Listed,
// leases.Watched).
func (m *Metrics) leaseCounted(what string) {
	switch what {
	case leases.Listed, leases.Watched:
		m.leaseRequests.WithLabelValues(what).Inc()
	default:
		m.leaseReads.WithLabelValues(what).Inc()
	}
}

// watchLeases exports how many node Leases are followed: one watch each, or
// one for all while many are.
func (m *Metrics) watchLeases(w *leases.Watcher) {
	m.sources.Lock()
	defer m.sources.Unlock()
	m.sources.leases = w
}

// countingHandler counts the events of one resource's informer in
// edgeota_controller_watch_events_total, then hands them on.
func (m *Metrics) countingHandler(resource string, h cache.ResourceEventHandler) cache.ResourceEventHandler {
	c := m.watchEvents.WithLabelValues(resource)
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.Inc(); h.OnAdd(obj, false) },
		UpdateFunc: func(old, obj any) { c.Inc(); h.OnUpdate(old, obj) },
		DeleteFunc: func(obj any) { c.Inc(); h.OnDelete(obj) },
	}
}

func (m *Metrics) conditionWritten(t corev1.PodConditionType) {
	m.conditionsWritten.WithLabelValues(string(t)).Inc()
}

// rollout exports where the DaemonSet's rollout stands, every state and
// reason of it, zeros included: a query for a state the rollout is not in
// finds a 0, not nothing, and an alert's arithmetic never misses a term.
func (m *Metrics) rollout(ds *appsv1.DaemonSet, s *rollout.Status) {
	ns, name := ds.Namespace, ds.Name
	for i, v := range rolloutCounts(s) {
		m.rolloutNodes.WithLabelValues(ns, name, rolloutStates[i]).Set(float64(v))
	}
	for i, v := range pullCounts(s.Pulls) {
		m.rolloutPulls.WithLabelValues(ns, name, pullStates[i]).Set(float64(v))
	}
	var proven rollout.ProvenNodes
	if s.Proven != nil {
		proven = *s.Proven
	}
	m.rolloutProven.WithLabelValues(ns, name, string(decision.ProofAnswer)).Set(float64(proven.Answer))
	m.rolloutProven.WithLabelValues(ns, name, string(decision.ProofHeartbeat)).Set(float64(proven.Heartbeat))
	for _, p := range proofKinds {
		// Counted from zero, so that rate() sees the first proof.
		m.proofs.WithLabelValues(ns, name, string(p))
		m.proofWait.WithLabelValues(ns, name, string(p))
	}
	m.challenges.WithLabelValues(ns, name)
	m.rolloutDesired.WithLabelValues(ns, name).Set(float64(s.Total))
	m.rolloutRevision.WithLabelValues(ns, name).Set(float64(s.Revision))
	m.rolloutHalted.WithLabelValues(ns, name).Set(oneIf(s.Halted))
	reason := s.HaltReason()
	for _, r := range rollout.HaltReasons {
		m.rolloutHaltReason.WithLabelValues(ns, name, string(r)).Set(oneIf(r == reason))
	}
	m.rolloutPaused.WithLabelValues(ns, name).Set(oneIf(s.Paused))
}

// awaitingProof exports how many of the DaemonSet's nodes wait for their
// proof of life.
func (m *Metrics) awaitingProof(ds *appsv1.DaemonSet, nodes int) {
	m.rolloutAwaiting.WithLabelValues(ds.Namespace, ds.Name).Set(float64(nodes))
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// forgetRollout drops the series of a DaemonSet deleted or no longer
// edgeota's.
func (m *Metrics) forgetRollout(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "daemonset": name}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.rolloutNodes, m.rolloutDesired, m.rolloutRevision, m.rolloutHalted, m.rolloutHaltReason, m.rolloutPaused,
		m.rolloutPulls, m.rolloutAwaiting, m.rolloutProven, m.proofs, m.proofWait, m.challenges} {
		v.DeletePartialMatch(labels)
	}
}
