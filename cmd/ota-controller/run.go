package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/controller"
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
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	// Proof-of-life reads of node Leases get a client, and a rate limiter,
	// of their own: they never wait behind a wave's deletions.
	leaseClient, err := kubernetes.NewForConfig(rest.CopyConfig(config))
	if err != nil {
		return fmt.Errorf("creating the API client for node Leases: %w", err)
	}

	// Events are logged at -v=3, as kube-controller-manager's controllers
	// log theirs: each is in the API already, and a 2,000-node rollout
	// records one per node.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: controller.Component})

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := controller.NewMetrics(registry)
	leaderHealth := leaderelection.NewLeaderHealthzAdaptor(renewDeadline)
	servers, err := startServers(ctx, o, registry, leaderHealth)
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
		inf := controller.NewInformers(client, o.recordNS)
		c, err := controller.NewController(ctx, client, inf, recorder, metrics, controller.WithLeaseClient(leaseClient), controller.WithLeaseMode(o.leaseWatch))
		if err != nil {
			return err
		}
		inf.Start(ctx.Done())
		defer inf.Shutdown()
		return c.Run(ctx, o.workers)
	}
	if !o.leaderElect {
		return work(ctx)
	}
	return leaderElect(ctx, o, client, leaderHealth, work)
}

// leaderElect runs work while this replica holds the Lease and returns when
// ctx ends (releasing the Lease) or leadership is lost, which is an error: the
// process exits and restarts as a standby rather than act on a stale view.
func leaderElect(ctx context.Context, o options, client kubernetes.Interface, health *leaderelection.HealthzAdaptor,
	work func(context.Context) error) error {
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the hostname for the leader identity: %w", err)
	}
	identity := hostname + "_" + uuid.NewString()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaseNamespace, Name: leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	logger := klog.FromContext(ctx)
	var started atomic.Bool
	done := make(chan error, 1)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health,
		Name:            leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				logger.Info("Started leading", "identity", identity)
				done <- work(ctx)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "identity", identity)
			},
			OnNewLeader: func(leader string) {
				if leader != identity {
					logger.Info("Following the leader", "leader", leader)
				}
			},
		},
	})
	if !started.Load() {
		return nil // stopped while standing by
	}
	// RunOrDie has cancelled work's context; wait for it to wind down.
	if err := <-done; err != nil {
		return err
	}
	if ctx.Err() == nil {
		return fmt.Errorf("lost the leadership of Lease %s/%s", o.leaseNamespace, leaseName)
	}
	return nil
}
