// Package metricshttp serves a Prometheus registry the way both edgeota
// binaries do: in the text format, uncompressed. A compressed scrape leaves
// a gzip writer pooled in the process, about 800 KB of heap held for good
// (seen in the controller's heap profile at rest), more than the
// controller's decisions about 1,500 nodes; it saves only bandwidth inside
// the cluster or on the node. Prometheus and curl read either form.
package metricshttp

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves registry's metrics, uncompressed, counting its own errors
// in registry (promhttp_metric_handler_errors_total).
func Handler(registry *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry, DisableCompression: true})
}
