package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/bench/measure"
	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/podcondition"
)

// watchersScenario: an agent whose node runs podsPerNode pods, one of them
// an OTA DaemonSet's, with watcherStreams WatchUpgrades streams open; the
// DaemonSet's pod is offered a new revision (PodNeedUpgrade=True, as
// ota-controller marks it) and each stream is timed until it receives the
// app's UPSERT naming that revision. It stops the shared agent first: the
// agent it measures is alone on the node.
var watchersScenario = scenario{name: "watchers", run: runWatchers}

// Its targets: every watcher within 100 ms at the p99, and the agent within
// agentRSSTarget with the streams open.
const (
	watcherStreams   = 64
	watcherP99Target = 100 * time.Millisecond
	watcherChanges   = 20
	// watcherTimeout bounds the wait for one change to reach every
	// watcher: seconds mean a watcher was dropped or the agent is stuck.
	watcherTimeout = 30 * time.Second
)

const (
	watchersNamespace = "bench-watchers"
	watchedDaemonSet  = "watched"
	// watchersManager is the field manager of the bench's condition writes.
	watchersManager = "edgeota-bench-watchers"
)

// watchersFigures are the watchers scenario's results.
type watchersFigures struct {
	latencies []time.Duration // sorted: per change and watcher, from the bench's watch event to the watcher's receipt
	rss       int64           // with the streams open, after the changes
	anon      int64           // of rss, anonymous (heap, stacks); the rest is the binary's pages
	peakRSS   int64
}

func runWatchers(ctx context.Context, s *session, _ *findings) (table, error) {
	if err := s.stopNodeAgent(); err != nil {
		return table{}, err
	}
	f, err := benchWatchers(ctx, s)
	if err != nil {
		return table{}, err
	}
	return watchersTable(f), nil
}

// receipt is a watcher's first sight of an app offered a revision.
type receipt struct {
	revision string
	at       time.Time
}

// benchWatchers deploys the watched DaemonSet on agentNode, fills the node
// to podsPerNode pods, starts an agent, opens the streams and times
// watcherChanges offers.
func benchWatchers(ctx context.Context, s *session) (watchersFigures, error) {
	var f watchersFigures
	client := s.cluster.Client
	ds := daemonSet(watchedDaemonSet, otaStrategy, map[string]string{"kubernetes.io/hostname": agentNode})
	pods, err := deploy(ctx, client, watchersNamespace, ds, []string{agentNode})
	if err != nil {
		return f, err
	}
	defer pods.close()
	if err := createNodePods(ctx, s); err != nil {
		return f, err
	}
	agent, err := s.startAgent(ctx, harness.AgentOptions{Name: "ota-server-watchers"})
	if err != nil {
		return f, err
	}
	if err := agent.waitServing(ctx, "/pods", func(b []byte) bool { return allRunning(b, podsPerNode) }); err != nil {
		return f, err
	}
	streamCtx, closeStreams := context.WithCancel(ctx)
	receipts, streams, err := openWatchers(streamCtx, agent.addr)
	if err != nil {
		closeStreams()
		streams.Wait()
		return f, err
	}
	f.latencies, err = offerRevisions(ctx, s, pods, receipts)
	if err == nil {
		var m measure.Memory
		if m, err = agent.memory(); err == nil {
			f.rss, f.anon = m.RSS, m.AnonRSS
			f.peakRSS, err = agent.peakRSS()
		}
	}
	closeStreams()
	streams.Wait()
	if err != nil {
		return f, err
	}
	progress("watchers: %d receipts, p99 %s, agent RSS %s", len(f.latencies), measure.Percentile(f.latencies, 0.99), mib(f.rss))
	return f, errors.Join(s.stopChild(agent), deleteNamespace(ctx, client, watchersNamespace), deleteNamespace(ctx, client, nodeAPINamespace))
}

// openWatchers opens watcherStreams WatchUpgrades streams, each on its own
// connection as separate owners' clients would, waits for each one's
// snapshot, and sends on the channel, per stream, every new target revision
// of the watched app with the time it arrived. The streams end with ctx.
func openWatchers(ctx context.Context, addr string) (<-chan receipt, *sync.WaitGroup, error) {
	receipts := make(chan receipt, watcherStreams*(watcherChanges+1))
	var wg sync.WaitGroup
	snapshots := make(chan error, watcherStreams)
	for range watcherStreams {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, &wg, fmt.Errorf("connecting to the agent: %w", err)
		}
		wg.Go(func() {
			defer conn.Close()
			stream, err := edgeotav1.NewOTAServiceClient(conn).WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
			if err == nil {
				_, err = stream.Recv() // the snapshot
			}
			snapshots <- err
			if err != nil {
				return
			}
			last := ""
			for {
				resp, err := stream.Recv()
				if err != nil {
					return // ctx ended, or the agent dropped the stream: the change's wait times out
				}
				app := resp.GetApp()
				if resp.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT || app.GetDaemonSet() != watchedDaemonSet || app.GetTargetRevision() == last {
					continue
				}
				last = app.GetTargetRevision()
				receipts <- receipt{revision: last, at: time.Now()}
			}
		})
	}
	for range watcherStreams {
		if err := <-snapshots; err != nil {
			return nil, &wg, fmt.Errorf("opening a WatchUpgrades stream: %w", err)
		}
	}
	return receipts, &wg, nil
}

// offerRevisions offers the watched pod watcherChanges revisions, one at a
// time, and times each from the bench's own watch event of the change (the
// agent's cache is fed by the same API server watch) to each watcher's
// receipt.
func offerRevisions(ctx context.Context, s *session, pods *view[*corev1.Pod], receipts <-chan receipt) ([]time.Duration, error) {
	var latencies []time.Duration
	for i := 1; i <= watcherChanges; i++ {
		hash := fmt.Sprintf("bench%d", i)
		var pod *corev1.Pod
		for _, p := range pods.snapshot() { // the DaemonSet's one pod, on agentNode
			pod = p
		}
		if pod == nil {
			return nil, fmt.Errorf("no pod of DaemonSet %s/%s", watchersNamespace, watchedDaemonSet)
		}
		want := corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue,
			Reason: "BenchOffer", Message: podcondition.RevisionMessage(hash)}
		var seen time.Time
		if _, err := podcondition.Set(ctx, s.cluster.Client.CoreV1(), pod, want, watchersManager); err != nil {
			return nil, fmt.Errorf("offering revision %s: %w", hash, err)
		}
		err := pods.until(ctx, watcherTimeout, "the bench's watch to see revision "+hash, func(now time.Time, items map[string]*corev1.Pod) bool {
			p, ok := items[watchersNamespace+"/"+pod.Name]
			if !ok {
				return false
			}
			if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c != nil && c.Message == want.Message {
				seen = now
				return true
			}
			return false
		})
		if err != nil {
			return nil, err
		}
		timeout := time.After(watcherTimeout)
		for got := 0; got < watcherStreams; {
			select {
			case r := <-receipts:
				if r.revision == hash {
					latencies = append(latencies, r.at.Sub(seen))
					got++
				}
			case <-timeout:
				return nil, fmt.Errorf("revision %s reached %d of %d watchers within %s", hash, got, watcherStreams, watcherTimeout)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return measure.Sorted(latencies), nil
}

func watchersTable(f watchersFigures) table {
	p50, p99 := measure.Percentile(f.latencies, 0.5), measure.Percentile(f.latencies, 0.99)
	return table{
		title: fmt.Sprintf("Owner's view: %d WatchUpgrades streams, %d pods on the agent's node", watcherStreams, podsPerNode),
		rows: []row{
			{fmt.Sprintf("change seen → every watcher has it, p50 / p99 (%d changes × %d watchers)", watcherChanges, watcherStreams),
				millis(p50) + " / " + millis(p99), "", "", "p99 ≤ " + millis(watcherP99Target), verdict(len(f.latencies) > 0 && p99 <= watcherP99Target)},
			{fmt.Sprintf("agent RSS with %d watchers (of which anonymous)", watcherStreams), fmt.Sprintf("%s (%s)", mib(f.rss), mib(f.anon)), "", "", "≤ 40 MiB", verdict(f.rss <= agentRSSTarget)},
			{"agent peak RSS (VmHWM)", mib(f.peakRSS), "", "", "", ""},
		},
		notes: []string{
			"change: PodNeedUpgrade=True naming a new revision written on the DaemonSet's pod (podcondition.Set, as ota-controller offers an OTA upgrade); " +
				"timed from the bench's own pod watch event of it (the agent's cache is fed by the same API server) to each stream's first UPSERT naming the revision; a receipt may precede the bench's event by its own delivery time",
			"each watcher on its own gRPC connection; the agent alone on its node (the node API's agent stopped), with its state directory",
		},
	}
}
