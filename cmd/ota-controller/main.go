// Command ota-controller is edgeota's cluster-side controller: it keeps the
// OTA pod conditions of opted-in DaemonSets, pre-pulls images on request and
// rolls DaemonSets past disconnected nodes. Run two replicas; a Lease elects
// the one that works.
//
// At start, before it campaigns for the Lease, each replica checks with
// dry-run creates that it may write ConfigMaps (its rollout records) in
// --record-namespace and, with leader election, Leases in
// --leader-elect-namespace. A missing namespace or a refusal makes it exit
// with one message saying what to do (the namespace to create, the flag to
// pass, or the Role to grant); any other answer, such as an API server not
// up yet, is logged and retried until it answers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	_ "time/tzdata" // nodes' maintenance windows are read in their zones; the image has no zoneinfo

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/internal/command"
	"github.com/edgeota/edgeota/internal/maxprocs"
	"github.com/edgeota/edgeota/internal/memlimit"
	"github.com/edgeota/edgeota/internal/untrusted"
	"github.com/edgeota/edgeota/leases"
)

// defaultNamespace holds the Lease and the rollout records when
// $POD_NAMESPACE is not set.
const defaultNamespace = "edgeota-system"

// The flags naming the namespaces the controller writes in, spelled once for
// their definition, their validation and the start-up checks' remedies.
const (
	recordNamespaceFlag = "record-namespace"
	leaseNamespaceFlag  = "leader-elect-namespace"
)

type options struct {
	kubeconfig     string
	workers        int
	qps            float64
	burst          int
	leaderElect    bool
	leaseNamespace string
	recordNS       string
	metricsAddress string
	healthzAddress string
	profiling      bool
	leaseWatch     leases.Mode
	memoryRatio    float64
	maxProcs       int
}

func main() {
	fs := flag.NewFlagSet("ota-controller", flag.ContinueOnError)
	opts := options{}
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = defaultNamespace
	}
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means the in-cluster configuration")
	fs.IntVar(&opts.workers, "workers", 4, "DaemonSets synced concurrently")
	fs.Float64Var(&opts.qps, "kube-api-qps", controller.DefaultKubeAPIQPS, "API requests per second; sized to mark 1,000 pods in seconds (client-go's default of 5 would take minutes)")
	fs.IntVar(&opts.burst, "kube-api-burst", controller.DefaultKubeAPIBurst, "API request burst above --kube-api-qps")
	fs.BoolVar(&opts.leaderElect, "leader-elect", true, "elect a leader through a Lease so that only one replica acts")
	fs.StringVar(&opts.leaseNamespace, leaseNamespaceFlag, namespace, "namespace of the Lease \""+leaseName+"\" (default $POD_NAMESPACE, else "+defaultNamespace+")")
	fs.StringVar(&opts.recordNS, recordNamespaceFlag, namespace, "namespace of the rollout records, the ConfigMaps in which the failure brake keeps every failed node and every node being upgraded (default $POD_NAMESPACE, else "+defaultNamespace+"); the controller needs no ConfigMap rights elsewhere")
	fs.StringVar(&opts.metricsAddress, "metrics-bind-address", ":8080", "address serving Prometheus metrics at /metrics; 0 disables")
	fs.StringVar(&opts.healthzAddress, "health-probe-bind-address", ":8081", "address serving /healthz (which fails once the leader stops renewing its Lease) and /readyz; 0 disables")
	fs.BoolVar(&opts.profiling, "profiling", false, "also serve Go's profiles at /debug/pprof/ on --metrics-bind-address (go tool pprof http://HOST:8080/debug/pprof/profile), as kube-controller-manager's --profiling does; off by default, since a profile shows what the process holds")
	fs.Float64Var(&opts.memoryRatio, "memory-limit-ratio", memlimit.DefaultRatio, "share of the container's memory limit (its cgroup's, v1 or v2) given to the Go runtime as its soft limit, GOMEMLIMIT, so that the collector works harder near the limit rather than the container being OOM-killed with half its heap garbage; 0 disables; a GOMEMLIMIT in the environment takes precedence")
	fs.IntVar(&opts.maxProcs, "max-procs", maxprocs.Default, "OS threads that run the controller's Go code at once (the Go runtime's GOMAXPROCS); 0, the default, leaves the runtime's choice (the container's CPU limit, else every core). 1 spends less CPU per rollout, in threads that would wake at each watch event to find nothing, but the controller reacts later under load (bench/README.md, \"Controller CPU per rollout\"); a GOMAXPROCS in the environment takes precedence")
	fs.Func("lease-watch", "how proof of life watches the node Leases of the nodes it waits on: "+
		"auto (the default: each one's Lease by name, and all of them in one watch while it waits on a quarter of the fleet and at least 100 nodes), "+
		"each-node (always by name), or every-lease (one watch of every Lease, always, as an informer of all the Leases would: an event per node and renewal even at rest); each sees every renewal as the API server stores it",
		func(s string) (err error) {
			opts.leaseWatch, err = leases.ParseMode(s)
			return err
		})
	command.Main(fs, func(ctx context.Context) error { return run(ctx, opts) })
}

func (o options) validate() error {
	if o.workers < 1 {
		return fmt.Errorf("--workers %d must be at least 1", o.workers)
	}
	if o.qps <= 0 {
		return fmt.Errorf("--kube-api-qps %g must be positive", o.qps)
	}
	if o.burst < 1 {
		return fmt.Errorf("--kube-api-burst %d must be at least 1", o.burst)
	}
	if err := memlimit.ValidateRatio(o.memoryRatio); err != nil {
		return fmt.Errorf("--memory-limit-ratio: %w", err)
	}
	if err := maxprocs.Validate(o.maxProcs); err != nil {
		return fmt.Errorf("--max-procs: %w", err)
	}
	if o.profiling && o.metricsAddress == "0" {
		return errors.New("--profiling needs --metrics-bind-address, which serves the profiles")
	}
	if o.recordNS == "" {
		return fmt.Errorf("--%s must not be empty: the failure brake keeps its record there", recordNamespaceFlag)
	}
	if err := validateNamespace(recordNamespaceFlag, o.recordNS); err != nil {
		return err
	}
	if o.leaderElect {
		if o.leaseNamespace == "" {
			return fmt.Errorf("--%s must not be empty when --leader-elect is set", leaseNamespaceFlag)
		}
		if err := validateNamespace(leaseNamespaceFlag, o.leaseNamespace); err != nil {
			return err
		}
	}
	for flagName, addr := range map[string]string{"--metrics-bind-address": o.metricsAddress, "--health-probe-bind-address": o.healthzAddress} {
		if addr == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q is not host:port or 0: %w", flagName, addr, err)
		}
	}
	return nil
}

// validateNamespace refuses a namespace flag's value that no namespace could
// have, which the API server would answer with a confusing 404 at start.
func validateNamespace(flagName, namespace string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("--%s %s is not a namespace name: %s", flagName, untrusted.Quote(namespace), strings.Join(errs, "; "))
	}
	return nil
}
