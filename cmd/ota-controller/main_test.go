package main

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := options{workers: 4, qps: 500, burst: 1000, leaderElect: true, leaseNamespace: "edgeota-system", recordNS: "edgeota-system",
		metricsAddress: ":8080", healthzAddress: ":8081", memoryRatio: 0.9, maxProcs: 1}
	tests := []struct {
		name    string
		change  func(*options)
		wantErr string
	}{
		{"defaults", func(*options) {}, ""},
		{"servers disabled", func(o *options) { o.metricsAddress, o.healthzAddress = "0", "0" }, ""},
		{"no leader election without namespace", func(o *options) { o.leaderElect, o.leaseNamespace = false, "" }, ""},
		{"zero workers", func(o *options) { o.workers = 0 }, "--workers"},
		{"zero qps", func(o *options) { o.qps = 0 }, "--kube-api-qps"},
		{"zero burst", func(o *options) { o.burst = 0 }, "--kube-api-burst"},
		{"lease namespace empty", func(o *options) { o.leaseNamespace = "" }, "--leader-elect-namespace"},
		{"record namespace empty", func(o *options) { o.recordNS = "" }, "--record-namespace"},
		{"record namespace not a namespace name", func(o *options) { o.recordNS = "Edge_OTA" }, `--record-namespace "Edge_OTA" is not a namespace name`},
		{"lease namespace not a namespace name", func(o *options) { o.leaseNamespace = "edgeota.system" }, "--leader-elect-namespace"},
		{"no leader election, lease namespace unused", func(o *options) { o.leaderElect, o.leaseNamespace = false, "edgeota.system" }, ""},
		{"metrics address without port", func(o *options) { o.metricsAddress = "8080" }, "--metrics-bind-address"},
		{"profiling", func(o *options) { o.profiling = true }, ""},
		{"profiling without the metrics server", func(o *options) { o.profiling, o.metricsAddress = true, "0" }, "--profiling"},
		{"no soft memory limit", func(o *options) { o.memoryRatio = 0 }, ""},
		{"memory limit ratio past the container's", func(o *options) { o.memoryRatio = 1.2 }, "--memory-limit-ratio: memory limit ratio 1.2 is not between 0 (off) and 1"},
		{"negative memory limit ratio", func(o *options) { o.memoryRatio = -0.5 }, "--memory-limit-ratio"},
		{"the Go runtime's threads", func(o *options) { o.maxProcs = 0 }, ""},
		{"negative threads", func(o *options) { o.maxProcs = -1 }, "--max-procs: -1 threads is not 0"},
		{"probe address without port", func(o *options) { o.healthzAddress = "localhost" }, "--health-probe-bind-address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			err := o.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got error %v, want one naming %s", err, tt.wantErr)
			}
		})
	}
}
