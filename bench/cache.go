package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// cacheScenario: what the controller's caches hold per DaemonSet pod and per
// node, and what decoding a pod's watch event costs it, measured without a
// cluster in a child process of its own (this binary, cacheCommand), so that
// nothing else lives in its heap:
//   - 8,000 representative DaemonSet pods (2,000 nodes' worth at four
//     DaemonSets per node, representativePod) and 2,000 Nodes, encoded as
//     the API server streams a watch in protobuf (the controller's
//     content type), are decoded as client-go's typed clients decode them,
//     run through the informer's transform and added to a store with the
//     controller's indexes (controller.NewDaemonPodStore, NewNodeStore).
//     Heap bytes per object: the live heap after a GC, less the one before
//     (the encoded stream is allocated before and freed after), divided by
//     the count. Baselines: a corev1.Pod trimmed by controller.Transform (as
//     pre-pull pods are; the DaemonSet pods' cache before podRecord), with
//     the same indexes; a corev1.Node without its managedFields.
//   - the decisions' state of a settled fleet: the four DaemonSets'
//     decision.Rollouts over 2,000 nodes, every node settled, each over its
//     Ledger as read back from its record (settledRolloutsHeap): what the
//     controller holds per node and DaemonSet beside the caches, at rest.
//   - decoding one pod watch event, JSON against protobuf: CPU time and
//     garbage per event (testing.Benchmark).
var cacheScenario = scenario{name: "cache", clusterFree: true, run: runCache}

// cacheHeapTarget bounds the heap per cached DaemonSet pod (issue 29).
const cacheHeapTarget = 600

// Sizes of the cache scenario's fleet: 2,000 nodes, four DaemonSets each.
const (
	cachePods  = 2000 * cacheDaemonSets
	cacheNodes = 2000
)

// cacheCommand runs this binary as the cache scenario's measuring child.
const cacheCommand = "cache"

// What the cache child measures, one per run (-measure).
const (
	measurePodRecords = "pod-records"
	measurePodsOld    = "pods-trimmed"
	measureNodes      = "node-records"
	measureNodesOld   = "nodes-decoded"
	measureRollouts   = "rollouts"
	measureDecode     = "decode"
)

// heapFigure is what a heap measurement reports.
type heapFigure struct {
	Objects      int   `json:"objects"`
	BytesPerItem int64 `json:"bytesPerItem"`
}

// decodeFigure is the cost of decoding one pod watch event in one media
// type, and of transforming the pod into its record.
type decodeFigure struct {
	EventBytes     int   `json:"eventBytes"`
	NsPerEvent     int64 `json:"nsPerEvent"`
	BytesPerEvent  int64 `json:"bytesPerEvent"`
	AllocsPerEvent int64 `json:"allocsPerEvent"`
}

type decodeFigures struct {
	JSON, Protobuf, Transform decodeFigure
}

func runCache(ctx context.Context, s *session, _ *findings) (table, error) {
	var f struct {
		records, old, nodes, nodesOld, rollouts heapFigure
		decode                                  decodeFigures
	}
	for _, m := range []struct {
		what string
		into any
	}{
		{measurePodRecords, &f.records}, {measurePodsOld, &f.old}, {measureNodes, &f.nodes}, {measureNodesOld, &f.nodesOld},
		{measureRollouts, &f.rollouts}, {measureDecode, &f.decode},
	} {
		progress("cache: %s", m.what)
		out, err := s.runSelf(ctx, cacheCommand, "-measure", m.what)
		if err != nil {
			return table{}, fmt.Errorf("measuring %s: %w", m.what, err)
		}
		if err := json.Unmarshal(out, m.into); err != nil {
			return table{}, fmt.Errorf("reading the %s figure %q: %w", m.what, out, err)
		}
	}
	d := f.decode
	perEvent := func(fig decodeFigure) string {
		return fmt.Sprintf("%.1f µs, %s in %d allocations", float64(fig.NsPerEvent)/1000, kib(fig.BytesPerEvent), fig.AllocsPerEvent)
	}
	return table{
		title: fmt.Sprintf("Cache: heap per cached object (%d DaemonSet pods, %d nodes), decoding a pod watch event", cachePods, cacheNodes),
		rows: []row{
			{"heap per cached DaemonSet pod (its record, key and indexes)", fmt.Sprintf("%d bytes", f.records.BytesPerItem),
				fmt.Sprintf("%d bytes (corev1.Pod trimmed)", f.old.BytesPerItem), times(measure.Ratio(f.records.BytesPerItem, f.old.BytesPerItem)),
				fmt.Sprintf("≤ %d bytes", cacheHeapTarget), verdict(f.records.BytesPerItem <= cacheHeapTarget)},
			{"heap per cached node (its record and key)", fmt.Sprintf("%d bytes", f.nodes.BytesPerItem),
				fmt.Sprintf("%d bytes (corev1.Node, managedFields dropped)", f.nodesOld.BytesPerItem), times(measure.Ratio(f.nodes.BytesPerItem, f.nodesOld.BytesPerItem)), "", ""},
			{fmt.Sprintf("heap per node and DaemonSet of a settled rollout (its decision.Rollout and Ledger; %d DaemonSets)", cacheDaemonSets),
				fmt.Sprintf("%d bytes", f.rollouts.BytesPerItem), "", "", "", ""},
			{"decoding a pod watch event (protobuf; baseline JSON): CPU, garbage", perEvent(d.Protobuf), perEvent(d.JSON),
				times(float64(d.Protobuf.NsPerEvent) / float64(d.JSON.NsPerEvent)), "", ""},
			{"the event's size", fmt.Sprintf("%d bytes", d.Protobuf.EventBytes), fmt.Sprintf("%d bytes", d.JSON.EventBytes),
				times(float64(d.Protobuf.EventBytes) / float64(d.JSON.EventBytes)), "", ""},
			{"transforming the decoded pod into its record", perEvent(d.Transform), "", "", "", ""},
		},
		notes: []string{
			fmt.Sprintf("no cluster: a child process decodes representative objects (bench/cacheobjects.go: a kubelet-run DaemonSet pod with its managedFields, "+
				"service account volume, tolerations, five conditions, a container status; a Node with 12 images) streamed as protobuf watch events, "+
				"as client-go's typed clients do; heap per object: the live heap after a GC less the one before, divided by the count (%s, the default GOGC: "+
				"the process's RSS holds about twice the live heap)", runtime.Version()),
			fmt.Sprintf("a pod record is a %d-byte struct (unsafe.Sizeof(decision.Pod)); the rest of its bytes are its identity string (name, UID, "+
				"resourceVersion), the store's key and its two index entries (by DaemonSet, by node)", unsafe.Sizeof(decision.Pod{})),
			"decoding: testing.Benchmark on this machine, shared with the cluster when other scenarios run (CPU times are noisy; the ratio and the garbage hold)",
		},
	}, nil
}

// kib formats bytes as KiB.
func kib(bytes int64) string { return fmt.Sprintf("%.1f KiB", float64(bytes)/1024) }

// runCacheChild measures one thing (-measure) and prints its figure as
// JSON on standard output.
func runCacheChild(args []string) error {
	fs := flag.NewFlagSet(cacheCommand, flag.ContinueOnError)
	what := fs.String("measure", "", "what to measure: "+measurePodRecords+", "+measurePodsOld+", "+measureNodes+", "+measureNodesOld+", "+
		measureRollouts+" or "+measureDecode)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var figure any
	var err error
	switch *what {
	case measurePodRecords:
		figure, err = heapPerObject(cachePods, representativePod, controller.NewDaemonPodStore())
	case measurePodsOld:
		figure, err = heapPerObject(cachePods, representativePod, trimmedPodStore())
	case measureNodes:
		figure, err = heapPerObject(cacheNodes, representativeNode, controller.NewNodeStore())
	case measureNodesOld:
		figure, err = heapPerObject(cacheNodes, representativeNode, decodedNodeStore())
	case measureRollouts:
		figure, err = settledRolloutsHeap()
	case measureDecode:
		figure, err = decodeCost()
	default:
		return fmt.Errorf("-measure %q: want one of %s, %s, %s, %s, %s, %s", *what, measurePodRecords, measurePodsOld, measureNodes, measureNodesOld,
			measureRollouts, measureDecode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(figure)
}

// heapPerObject decodes n objects (make(i)) from a protobuf watch stream into
// the store and returns the live heap they add, per object.
func heapPerObject[T kruntime.Object](n int, build func(int) T, store controller.Store) (heapFigure, error) {
	objs := objects(n, build)
	stream, err := encodeEvents(mediaProtobuf, objs)
	if err != nil {
		return heapFigure{}, err
	}
	objs = nil
	dec, err := eventDecoder(mediaProtobuf, stream)
	if err != nil {
		return heapFigure{}, err
	}
	before := liveHeap()
	for range n {
		_, obj, err := dec.Decode()
		if err != nil {
			return heapFigure{}, fmt.Errorf("decoding: %w", err)
		}
		if err := store.Add(obj); err != nil {
			return heapFigure{}, err
		}
	}
	after := liveHeap()
	runtime.KeepAlive(stream)
	if got := len(store.Indexer.ListKeys()); got != n {
		return heapFigure{}, fmt.Errorf("got %d objects stored, want %d", got, n)
	}
	return heapFigure{Objects: n, BytesPerItem: int64(after-before) / int64(n)}, nil
}

// settledRolloutsHeap builds the Rollouts of cacheDaemonSets DaemonSets on
// cacheNodes Ready nodes, each node running its settled pod of the target
// and recorded settled, as a controller restarted on a settled fleet holds
// them, and returns the live heap the Rollouts and their Ledgers add, per
// node and DaemonSet. The facts they are built from are allocated before
// and kept alive after, so that only what the decisions keep is counted.
func settledRolloutsHeap() (heapFigure, error) {
	cfg, err := decision.ParseSettings(rollout.StrategyAdvancedRollingUpdate, map[string]string{rollout.MaxUnavailableAnnotation: "10%"}, 0)
	if err != nil {
		return heapFigure{}, err
	}
	now := fleetStart.Add(48 * time.Hour)
	settledAt := metav1.NewTime(now.Add(-time.Hour))
	started := unixtime.Of(now.Add(-2 * time.Hour)) // every pod Ready since
	names := make([]string, cacheNodes)
	for i := range names {
		names[i] = fmt.Sprintf("edge-node-%d", i)
	}
	type daemonSet struct {
		target  decision.Target
		facts   map[string]decision.NodeFacts
		entries map[string]decision.Entry
	}
	sets := make([]daemonSet, cacheDaemonSets)
	for d := range sets {
		ds := daemonSet{target: decision.Target{Hash: fmt.Sprintf("6d5f8b9c%02d", d), Number: 3},
			facts: make(map[string]decision.NodeFacts, cacheNodes), entries: make(map[string]decision.Entry, cacheNodes)}
		for i, name := range names {
			pod := &decision.Pod{Namespace: "edge", Name: fmt.Sprintf("app-%d-%s", d, name), UID: types.UID(fmt.Sprintf("uid-%d-%d", d, i)),
				Node: name, Hash: ds.target.Hash, Created: started, Bound: true,
				Health: health.Pod{Ready: true, ContainersReady: true, ReadySince: started, ContainersReadySince: started}}
			ds.facts[name] = decision.NodeFacts{Node: decision.Node{Name: name, Exists: true, Ready: true, ReadyStatus: "True",
				Heartbeat: now, Labels: map[string]string{corev1.LabelHostname: name}}, Pods: []*decision.Pod{pod}}
			ds.entries[name] = decision.Entry{Stage: decision.StageSettled, At: &settledAt, Proof: decision.ProofHeartbeat}
		}
		sets[d] = ds
	}
	before := liveHeap()
	rollouts := make([]*decision.Rollout, len(sets))
	for d, ds := range sets {
		ledger := decision.NewLedger(ds.entries, decision.Meta{TargetSince: settledAt})
		rollouts[d] = decision.New(cfg, ds.target, ledger, false)
		rollouts[d].Build(now, names, func(node string) decision.NodeFacts { return ds.facts[node] })
	}
	after := liveHeap()
	runtime.KeepAlive(sets)
	for d, r := range rollouts {
		if got := r.Count(decision.StateSettled); got != cacheNodes {
			return heapFigure{}, fmt.Errorf("DaemonSet %d: got %d nodes settled, want %d", d, got, cacheNodes)
		}
	}
	n := cacheNodes * cacheDaemonSets
	return heapFigure{Objects: n, BytesPerItem: int64(after-before) / int64(n)}, nil
}

// objects builds n objects.
func objects[T kruntime.Object](n int, build func(int) T) []kruntime.Object {
	objs := make([]kruntime.Object, n)
	for i := range n {
		objs[i] = build(i)
	}
	return objs
}

// liveHeap is the live heap after two collections (the second frees what
// the first's finalizers and weak pointers released).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// trimmedPodStore is the baseline of the pod records: DaemonSet pods cached
// as corev1.Pods trimmed by controller.Transform, indexed by DaemonSet and
// node as the records are.
func trimmedPodStore() controller.Store {
	return controller.Store{
		Indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{
			"owner": func(obj any) ([]string, error) {
				if ref := metav1.GetControllerOfNoCopy(obj.(*corev1.Pod)); ref != nil {
					return []string{string(ref.UID)}, nil
				}
				return nil, nil
			},
			"node": func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil },
		}),
		Transform: controller.Transform,
	}
}

// decodedNodeStore is the baseline of the node records: Nodes as decoded,
// without their managedFields.
func decodedNodeStore() controller.Store {
	return controller.Store{
		Indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{}),
		Transform: func(obj any) (any, error) {
			obj.(metav1.Object).SetManagedFields(nil)
			return obj, nil
		},
	}
}

// decodeCost times decoding a pod watch event in JSON and in protobuf, and
// transforming the decoded pod into its record.
func decodeCost() (decodeFigures, error) {
	const streamEvents = 1000
	objs := objects(streamEvents, representativePod)
	var out decodeFigures
	for _, m := range []struct {
		mediaType string
		into      *decodeFigure
	}{{mediaJSON, &out.JSON}, {mediaProtobuf, &out.Protobuf}} {
		stream, err := encodeEvents(m.mediaType, objs)
		if err != nil {
			return out, err
		}
		var failed error
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			dec, err := eventDecoder(m.mediaType, stream)
			if err != nil {
				failed = err
				return
			}
			left := streamEvents
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					dec, _ = eventDecoder(m.mediaType, stream)
					left = streamEvents
					b.StartTimer()
				}
				if _, _, err := dec.Decode(); err != nil {
					failed = err
					return
				}
				left--
			}
		})
		if failed != nil {
			return out, failed
		}
		*m.into = decodeFigure{EventBytes: len(stream) / streamEvents, NsPerEvent: r.NsPerOp(), BytesPerEvent: r.AllocedBytesPerOp(), AllocsPerEvent: r.AllocsPerOp()}
	}
	pods := make([]*corev1.Pod, streamEvents)
	stream, _ := encodeEvents(mediaProtobuf, objs)
	dec, err := eventDecoder(mediaProtobuf, stream)
	if err != nil {
		return out, err
	}
	for i := range pods {
		_, obj, err := dec.Decode()
		if err != nil {
			return out, err
		}
		pods[i] = obj.(*corev1.Pod)
	}
	i := 0
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = controller.TransformDaemonPod(pods[i%len(pods)])
			i++
		}
	})
	out.Transform = decodeFigure{NsPerEvent: r.NsPerOp(), BytesPerEvent: r.AllocedBytesPerOp(), AllocsPerEvent: r.AllocsPerOp()}
	return out, nil
}
