package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeota/edgeota/apiidentity"
	"github.com/edgeota/edgeota/internal/metricshttp"
)

// metricsPath serves the agent's metrics, to viewers once authentication is
// on (see restAccess).
const metricsPath = "/metrics"

// identityMetric is edgeota_agent_identity: which identity the agent acts as
// toward the API server, so that a fleet's dashboards show any agent not
// scoped to its node.
type identityMetric struct{ vec *prometheus.GaugeVec }

// unsettledMode is the metric's mode until the API server first answers.
const unsettledMode = "unsettled"

func newIdentityMetric() *identityMetric {
	m := &identityMetric{vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "edgeota_agent_identity",
		Help: "The identity the node agent acts as toward the API server: 1 for the mode in force (node: impersonating its node; " +
			"serviceaccount: its own credentials, reads not node-scoped), " + unsettledMode + " until the API server first answers.",
	}, []string{"mode"})}
	m.set(unsettledMode)
	return m
}

// set makes mode the one in force.
func (m *identityMetric) set(mode apiidentity.Mode) {
	for _, known := range []apiidentity.Mode{unsettledMode, apiidentity.Node, apiidentity.ServiceAccount} {
		value := 0.0
		if known == mode {
			value = 1
		}
		m.vec.WithLabelValues(string(known)).Set(value)
	}
}

// metricsHandler serves the agent's metrics in Prometheus' text format: the
// identity's (if any) and the others given.
func metricsHandler(identity *APIIdentity, others ...prometheus.Collector) http.Handler {
	registry := prometheus.NewRegistry()
	if identity != nil {
		registry.MustRegister(identity.modes.vec)
	}
	registry.MustRegister(others...)
	return metricshttp.Handler(registry)
}
