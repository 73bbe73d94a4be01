package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/internal/leaderelection"
	"github.com/edgeota/edgeota/internal/maxprocs"
	"github.com/edgeota/edgeota/internal/memlimit"
)

// Leader election timings: client-go's customary values, which let a standby
// take over about 15 s after the leader stops renewing.
const (
	leaseName     = "ota-controller"
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	switch limit, err := memlimit.Set(o.memoryRatio); {
	case err != nil:
		logger.Error(err, "Reading the container's memory limit; the Go runtime keeps no soft limit")
	case limit > 0:
		logger.Info("Gave the Go runtime a soft memory limit under the container's", "bytes", limit, "ratio", o.memoryRatio)
	}
	if n := maxprocs.Set(o.maxProcs); n > 0 {
		logger.V(2).Info("Runs Go code on a fixed number of threads", "maxProcs", n)
	}
	// Every metric is registered now, before the election, so that a
	// standby serves them too (its leader gauge at 0); client-go counts the
	// requests of every client made after this in them.
	registry, metrics := controller.NewRegistry()
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: metrics.APIRequests()})
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the API server configuration: %w", err)
	}
	config.QPS, config.Burst = float32(o.qps), o.burst
	// Protobuf decodes several times cheaper than JSON: the informers decode
	// thousands of pod events per 500-node rollout.
	config.ContentType = runtime.ContentTypeProtobuf
	config.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	config.UserAgent = "ota-controller"
	client, err := kube.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	// Proof-of-life reads of node Leases get a client, and a rate limiter,
	// of their own: they never wait behind a wave's deletions.
	leaseClient, err := kube.NewForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("creating the API client for node Leases: %w", err)
	}

	// Events are logged at -v=3, as kube-controller-manager's controllers
	// log theirs: each is in the API already, and a 2,000-node rollout
	// records one per node.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(kube.EventSink{Client: client})
	defer broadcaster.Shutdown()
	scheme, err := kube.Scheme()
	if err != nil {
		return err
	}
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: controller.Component})

	var elector *leaderelection.Elector
	if o.leaderElect {
		if elector, err = newElector(ctx, o, client); err != nil {
			return err
		}
	}
	servers, err := startServers(ctx, o, registry.Registry, leaderelection.Healthz(elector, renewDeadline))
	if err != nil {
		return err
	}
	defer servers.shutdown(logger)

	// After /healthz and /readyz serve, so that the kubelet does not restart
	// a replica waiting for its API server; before campaigning, so that a
	// replica that could not act exits instead of standing by.
	if err := defaultChecker.run(ctx, client, startupChecks(o, client)); err != nil {
		if ctx.Err() != nil {
			logger.Info("Stopped before the start-up checks passed", "err", err)
			return nil
		}
		return err
	}

	work := func(ctx context.Context) error {
		metrics.SetLeader(true)
		defer metrics.SetLeader(false)
		inf := controller.NewInformers(client, o.recordNS)
		c, err := controller.NewController(ctx, client, inf, recorder, metrics, controller.WithLeaseClient(leaseClient), controller.WithLeaseMode(o.leaseWatch))
		if err != nil {
			return err
		}
		ctx, stop := context.WithCancel(ctx)
		inf.Start(ctx)
		defer inf.Shutdown() // second: the informers return
		defer stop()         // first, even if Run returned on its own
		return c.Run(ctx, o.workers)
	}
	if elector == nil {
		return work(ctx)
	}
	// Leadership lost is an error: the process exits and restarts as a
	// standby rather than act on a stale view.
	return elector.Run(ctx, work)
}

// newElector is this replica's candidacy for the Lease, under an identity
// unique to the process (the hostname, which is the pod's name, and a UUID).
func newElector(ctx context.Context, o options, client kube.Interface) (*leaderelection.Elector, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading the hostname for the leader identity: %w", err)
	}
	identity := hostname + "_" + uuid.NewString()
	logger := klog.FromContext(ctx)
	e, err := leaderelection.New(leaderelection.Config{
		Leases: client.CoordinationV1().Leases(o.leaseNamespace), Name: leaseName, Identity: identity,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		OnNewLeader: func(leader string) {
			if leader != identity {
				logger.Info("Following the leader", "leader", leader)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("electing a leader through Lease %s/%s: %w", o.leaseNamespace, leaseName, err)
	}
	return e, nil
}
