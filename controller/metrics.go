package controller

import (
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/leases"
	"github.com/edgeota/edgeota/rollout"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the controller's Prometheus figures: enough to tell a stuck
// rollout (deletions flat, queue growing) from a slow one (sync duration).
type Metrics struct {
	registerer        prometheus.Registerer
	syncDuration      *prometheus.HistogramVec
	podsDeleted       prometheus.Counter
	conditionsWritten *prometheus.CounterVec
	rolloutNodes      *prometheus.GaugeVec
	rolloutHalted     *prometheus.GaugeVec
	rolloutPulls      *prometheus.GaugeVec
	watchEvents       *prometheus.CounterVec
	recordWrites      prometheus.Counter
	recordBytes       prometheus.Counter
	recordStored      prometheus.Counter
	leaseReads        *prometheus.CounterVec
	leaseRequests     *prometheus.CounterVec
	rolloutProven     *prometheus.GaugeVec
	proofs            *prometheus.CounterVec
	proofWait         *prometheus.HistogramVec
	challenges        prometheus.Counter
}

// Values of the state label of edgeota_controller_rollout_nodes, and of
// edgeota_controller_rollout_pulls.
var (
	rolloutStates = []string{"updated", "in_flight", "skipped", "failed", "settled_unavailable"}
	pullStates    = []string{"in_flight", "done", "failed", "waiting"}
)

// Values of the proof label: what proved a node alive after its pod settled.
var proofKinds = []decision.Proof{decision.ProofAnswer, decision.ProofHeartbeat}

// NewMetrics registers the controller's metrics on reg; use a registry of the
// binary's own so that tests can create as many controllers as they like.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		registerer: reg,
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgeota_controller_sync_duration_seconds",
			Help:    "Time to sync one DaemonSet, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result"}),
		podsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_pods_deleted_total",
			Help: "Out-of-date pods deleted by AdvancedRollingUpdate.",
		}),
		conditionsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeota_controller_conditions_written_total",
			Help: "Pod conditions written, by condition type.",
		}, []string{"type"}),
		rolloutNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_nodes",
			Help: "Nodes of an AdvancedRollingUpdate DaemonSet by rollout state: updated (settled on the target revision), in_flight, skipped (NotReady, not in flight), failed.",
		}, []string{"namespace", "daemonset", "state"}),
		rolloutPulls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_pulls",
			Help: "Pre-downloads of a DaemonSet's target images (edgeota.io/pre-download) by state: in_flight, done (pulled, waiting for the node's turn), failed (for good; no pod lost), waiting (nodes the budget would take now but for their download).",
		}, []string{"namespace", "daemonset", "state"}),
		rolloutHalted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeota_controller_rollout_halted",
			Help: "1 while the DaemonSet's rollout is halted by max-failed, else 0.",
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
			Help: "Nodes this controller saw proved alive after their new pod settled, by proof: answer (the node agent's answer), heartbeat (Lease renewal or Node status).",
		}, []string{"proof"}),
		proofWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgeota_controller_proof_wait_seconds",
			Help:    "Time from the controller first judging a node's new pod settled (the node waiting for its proof of life, holding the budget) to the proof, by proof, on the controller's clock; 0 when the proof was there at once. What proof of life adds to each wave.",
			Buckets: prometheus.ExponentialBuckets(0.025, 2, 12),
		}, []string{"proof"}),
		challenges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeota_controller_challenges_written_total",
			Help: "Proof-of-life challenges written on settled pods (one pods/status write each): with the agents' answers, what proof of life by answer costs the API server.",
		}),
	}
	for _, p := range proofKinds {
		m.proofs.WithLabelValues(string(p))
	}
	reg.MustRegister(m.syncDuration, m.podsDeleted, m.conditionsWritten, m.rolloutNodes, m.rolloutHalted, m.rolloutPulls, m.watchEvents, m.recordWrites,
		m.recordBytes, m.recordStored, m.leaseReads, m.leaseRequests, m.rolloutProven, m.proofs, m.proofWait, m.challenges)
	return m
}

// proven counts a node proved alive by proof, after waiting wait (known
// only when waited: see decision.NoticeProven).
func (m *Metrics) proven(proof decision.Proof, wait time.Duration, waited bool) {
	m.proofs.WithLabelValues(string(proof)).Inc()
	if waited {
		m.proofWait.WithLabelValues(string(proof)).Observe(wait.Seconds())
	}
}

func (m *Metrics) challengeWritten() { m.challenges.Inc() }

// watchQueue exports the work queue's depth.
func (m *Metrics) watchQueue(q workqueue.TypedRateLimitingInterface[string]) {
	m.registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edgeota_controller_queue_depth",
		Help: "DaemonSets waiting to be synced.",
	}, func() float64 { return float64(q.Len()) }))
}

func (m *Metrics) observeSync(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.syncDuration.WithLabelValues(result).Observe(d.Seconds())
}

func (m *Metrics) podDeleted() { m.podsDeleted.Inc() }

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
	m.registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edgeota_controller_lease_watches",
		Help: "Node Leases followed now (one watch each, or one of every Lease while a quarter of the fleet is): the nodes a rollout waits on for proof of life.",
	}, func() float64 { return float64(w.Followed()) }))
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

// rollout exports where the DaemonSet's rollout stands.
func (m *Metrics) rollout(ds *appsv1.DaemonSet, s *rollout.Status) {
	down := 0
	if s.SettledUnavailable != nil {
		down = s.SettledUnavailable.Count
	}
	for i, v := range []int{s.Updated, s.InFlight, s.Skipped, s.Failed.Count, down} {
		m.rolloutNodes.WithLabelValues(ds.Namespace, ds.Name, rolloutStates[i]).Set(float64(v))
	}
	if p := s.Pulls; p != nil {
		for i, v := range []int{p.InFlight, p.Done, p.Failed, p.Waiting} {
			m.rolloutPulls.WithLabelValues(ds.Namespace, ds.Name, pullStates[i]).Set(float64(v))
		}
	}
	var proven rollout.ProvenNodes
	if s.Proven != nil {
		proven = *s.Proven
	}
	m.rolloutProven.WithLabelValues(ds.Namespace, ds.Name, string(decision.ProofAnswer)).Set(float64(proven.Answer))
	m.rolloutProven.WithLabelValues(ds.Namespace, ds.Name, string(decision.ProofHeartbeat)).Set(float64(proven.Heartbeat))
	halted := 0.0
	if s.Halted {
		halted = 1
	}
	m.rolloutHalted.WithLabelValues(ds.Namespace, ds.Name).Set(halted)
}

// forgetRollout drops a deleted DaemonSet's series.
func (m *Metrics) forgetRollout(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "daemonset": name}
	m.rolloutNodes.DeletePartialMatch(labels)
	m.rolloutHalted.DeletePartialMatch(labels)
	m.rolloutPulls.DeletePartialMatch(labels)
	m.rolloutProven.DeletePartialMatch(labels)
}
