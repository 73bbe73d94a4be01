package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the controller's Prometheus figures: enough to tell a stuck
// rollout (deletions flat, queue growing) from a slow one (sync duration).
type Metrics struct {
	registerer        prometheus.Registerer
	syncDuration      *prometheus.HistogramVec
	podsDeleted       prometheus.Counter
	conditionsWritten *prometheus.CounterVec
}

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
	}
	reg.MustRegister(m.syncDuration, m.podsDeleted, m.conditionsWritten)
	return m
}

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

func (m *Metrics) conditionWritten(t corev1.PodConditionType) {
	m.conditionsWritten.WithLabelValues(string(t)).Inc()
}
