package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/metricshttp"
)

// drainTimeout bounds how long shutdown waits for in-flight scrapes and probes.
const drainTimeout = 5 * time.Second

type servers []*http.Server

// startServers listens on the metrics and probe addresses (those not "0") and
// serves in the background; the metrics address serves the profiles too with
// --profiling. /healthz fails when the leader stops renewing its
// Lease, so the kubelet restarts a wedged leader; /readyz says the process
// serves.
func startServers(ctx context.Context, o options, registry *prometheus.Registry, leaderHealthy func(*http.Request) error) (servers, error) {
	metrics := metricsMux(o, registry)

	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := leaderHealthy(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

	var started servers
	for _, s := range []struct {
		addr    string
		handler http.Handler
	}{{o.metricsAddress, metrics}, {o.healthzAddress, probes}} {
		if s.addr == "0" {
			continue
		}
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			started.shutdown(klog.FromContext(ctx))
			return nil, fmt.Errorf("listening on %s: %w", s.addr, err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.FromContext(ctx).Error(err, "Serving failed", "address", l.Addr().String())
			}
		}()
		klog.FromContext(ctx).Info("Serving", "address", l.Addr().String())
		started = append(started, srv)
	}
	return started, nil
}

// metricsMux serves the registry at /metrics and, with --profiling, the
// profiles.
func metricsMux(o options, registry *prometheus.Registry) *http.ServeMux {
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", metricshttp.Handler(registry))
	if o.profiling {
		metrics.HandleFunc("/debug/pprof/", pprof.Index)
		metrics.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		metrics.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metrics.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metrics.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return metrics
}

func (s servers) shutdown(logger klog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, srv := range s {
		if err := srv.Shutdown(ctx); err != nil {
			logger.Error(err, "Shutting down server")
		}
	}
}
