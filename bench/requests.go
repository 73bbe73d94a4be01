package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// requestsScenario: what the requests a node's turn cannot do without cost
// the process that sends them, on this machine, with nothing else to do:
//   - the write-ahead of the deletion: the create of a record ConfigMap
//     holding one entry, answered by its metadata alone (record.Store's
//     write of an entry in flight);
//   - the deletion: a DELETE of the node's pod;
//   - the proof of life, either way: by the agent's answer, the challenge
//     (a pods/status patch of the pod's annotation, as the controller
//     writes it; the answer's echo is not counted); on node Leases, a watch
//     of the node's Lease by name, from its initial events to its next
//     renewal (leases.Watcher's request).
//
// A child process of its own (this binary, requestsCommand) sends them
// through the controller's own API client (internal/kube: protobuf, the
// controller's QPS) and reads its own CPU time (getrusage), net of its
// idle rate. Nothing is cached or decided, no watch echoes anything back:
// this is a lower bound of what a controller pays per node's turn above
// the floor of receiving the rollout's pod events (rollout), whatever it
// decides. Issue 29's goal for all of that is 1 ms per node.
var requestsScenario = scenario{name: "requests", heartbeat: kubeletHeartbeat, run: runRequests}

// requestsTarget is issue 29's goal: the controller's net CPU per node and
// rollout above the floor.
const requestsTarget = time.Millisecond

// requestsCommand runs this binary as the requests scenario's measuring
// child.
const requestsCommand = "requests"

// requestsNamespace holds the scenario's pods and record ConfigMaps.
const requestsNamespace = "bench-requests"

// Its workload's shape: one record entry per node and the requests sent at
// once.
const (
	requestsEntryBytes = 120
	requestsWriters    = 50  // creates and DELETEs under way at once
	requestsFollowed   = 100 // Leases followed at once
	requestsIdleWindow = 5 * time.Second
)

// requestCosts are the child's figures: CPU time per node for each kind of
// request.
type requestCosts struct {
	Write     time.Duration `json:"write"`
	Challenge time.Duration `json:"challenge"`
	Delete    time.Duration `json:"delete"`
	Follow    time.Duration `json:"follow"`
}

// onLeases is the least a node's turn costs when its node proves itself
// alive by renewing its Lease.
func (c requestCosts) onLeases() time.Duration { return c.Write + c.Delete + c.Follow }

// byAnswer is the least a node's turn costs when its agent answers the
// challenge.
func (c requestCosts) byAnswer() time.Duration { return c.Write + c.Delete + c.Challenge }

func runRequests(ctx context.Context, s *session, _ *findings) (table, error) {
	client := s.cluster.Client
	if err := createNamespace(ctx, client, requestsNamespace); err != nil {
		return table{}, err
	}
	var runs []requestCosts
	err := func() error {
		for round := 1; round <= s.p.pairs; round++ {
			progress("requests: round %d of %d, %d nodes", round, s.p.pairs, s.p.nodes)
			if err := createPinnedPods(ctx, client, round, s.nodes()); err != nil {
				return err
			}
			out, err := s.runSelf(ctx, requestsCommand, "-kubeconfig", s.cluster.Kubeconfig, "-round", fmt.Sprint(round),
				"-nodes", fmt.Sprint(s.p.nodes), "-qps", fmt.Sprint(s.p.qps), "-burst", fmt.Sprint(s.p.burst))
			if err != nil {
				return err
			}
			var c requestCosts
			if err := json.Unmarshal(out, &c); err != nil {
				return fmt.Errorf("reading the requests figures %q: %w", out, err)
			}
			runs = append(runs, c)
		}
		return nil
	}()
	if err := errors.Join(err, deleteNamespace(ctx, client, requestsNamespace)); err != nil {
		return table{}, err
	}
	return requestsTable(s.p, runs), nil
}

// requestPodName is the name of round's pod on the i-th node.
func requestPodName(round, i int) string { return fmt.Sprintf("turn-%d-%d", round, i) }

// requestRecord is the record ConfigMap written ahead of node i's turn in
// round: one entry, as a write-ahead holds it.
func requestRecord(round, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("record-%d-%d", round, i), Namespace: requestsNamespace},
		BinaryData: map[string][]byte{"entries": bytes.Repeat([]byte{byte('a' + round%26)}, requestsEntryBytes)}}
}

// createPinnedPods creates one pod of round on each node, bound to it.
func createPinnedPods(ctx context.Context, client kubernetes.Interface, round int, nodes []string) error {
	return inParallel(len(nodes), requestsWriters, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: requestPodName(round, i)},
			Spec: corev1.PodSpec{
				NodeName:    nodes[i],
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: containerName, Image: image(0)}},
			},
		}
		if _, err := client.CoreV1().Pods(requestsNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		return nil
	})
}

// inParallel calls f(0) … f(n-1), at most workers at once (client-go's
// workqueue.ParallelizeUntil, as forEachNode), and returns their errors
// joined.
func inParallel(n, workers int, f func(i int) error) error {
	errs := make([]error, n)
	workqueue.ParallelizeUntil(context.Background(), workers, n, func(i int) { errs[i] = f(i) })
	return errors.Join(errs...)
}

// runRequestsChild is the measuring child: it sends one round's requests for
// every node, each kind after the other, and prints their CPU time per node
// as JSON.
func runRequestsChild(args []string) error {
	fs := flag.NewFlagSet(requestsCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig")
	round := fs.Int("round", 1, "the round whose pods to delete")
	nodes := fs.Int("nodes", 0, "how many nodes, named as localcluster names them")
	qps := fs.Float64("qps", 0, "the client's QPS, as the controller's --kube-api-qps")
	burst := fs.Int("burst", 0, "the client's burst, as the controller's --kube-api-burst")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes <= 0 {
		return fmt.Errorf("-nodes %d: want at least one node", *nodes)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *kubeconfig, err)
	}
	config.QPS, config.Burst = float32(*qps), *burst
	client, err := kube.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx := context.Background()
	records := client.CoreV1().ConfigMapMetadata(requestsNamespace)
	write := func(i int) error {
		_, err := records.Create(ctx, requestRecord(*round, i), metav1.CreateOptions{})
		return err
	}
	// Warm up: the connection, TLS and the codecs' first use are a start's
	// cost, not a node's.
	if err := inParallel(requestsWriters, requestsWriters, func(i int) error { return write(*nodes + i) }); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	idle, err := idleRate()
	if err != nil {
		return err
	}
	perNode := func(workers int, f func(i int) error) (time.Duration, error) {
		before, err := ownCPU()
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if err := inParallel(*nodes, workers, f); err != nil {
			return 0, err
		}
		wall := time.Since(start)
		after, err := ownCPU()
		spent := after - before - time.Duration(idle*float64(wall))
		return max(spent, 0) / time.Duration(*nodes), err
	}
	var c requestCosts
	if c.Write, err = perNode(requestsWriters, write); err != nil {
		return fmt.Errorf("writing records: %w", err)
	}
	pods := client.CoreV1().Pods(requestsNamespace)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	uids := map[string]types.UID{}
	for _, p := range list.Items {
		uids[p.Name] = p.UID
	}
	if c.Challenge, err = perNode(requestsWriters, func(i int) error {
		name := requestPodName(*round, i)
		uid, ok := uids[name]
		if !ok {
			return fmt.Errorf("pod %s not found", name)
		}
		ref := podcondition.Ref{Namespace: requestsNamespace, Name: name, UID: uid}
		ch, err := podchannel.NewChallenge(ref.UID)
		if err != nil {
			return err
		}
		value := ch.String()
		_, err = podcondition.AnnotateRef(ctx, client.CoreV1(), ref, podcondition.Annotations{rollout.ChallengeAnnotation: &value}, requestsCommand)
		return err
	}); err != nil {
		return fmt.Errorf("challenging pods: %w", err)
	}
	if c.Delete, err = perNode(requestsWriters, func(i int) error {
		return pods.Delete(ctx, requestPodName(*round, i), metav1.DeleteOptions{})
	}); err != nil {
		return fmt.Errorf("deleting pods: %w", err)
	}
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	if c.Follow, err = perNode(requestsFollowed, func(i int) error {
		return followToRenewal(ctx, leases, localcluster.NodeName(i+1))
	}); err != nil {
		return fmt.Errorf("following Leases: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(c)
}

// followToRenewal watches the node's Lease as leases.Watcher does (by name,
// with the API server's initial events) until the first renewal after them.
func followToRenewal(ctx context.Context, leases kube.Leases, node string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := leases.Watch(ctx, metav1.ListOptions{
		FieldSelector:        "metadata.name=" + node,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
	})
	if err != nil {
		return fmt.Errorf("watching the Lease of %s: %w", node, err)
	}
	defer w.Stop()
	initial := true
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Bookmark: // the end of the initial events
			initial = false
		case watch.Modified: // a renewal, once the initial events are over
			if !initial {
				return nil
			}
		case watch.Error:
			return fmt.Errorf("watching the Lease of %s: %v", node, ev.Object)
		}
	}
	return fmt.Errorf("the watch of the Lease of %s ended before a renewal: %w", node, ctx.Err())
}

// ownCPU is this process's CPU time, user and system.
// (getrusage: microseconds, where /proc's figure has the kernel's 10 ms).
func ownCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("reading this process's CPU time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// idleRate is this process's CPU time per second of wall time while it has
// nothing to do (its runtime and the client's connection).
func idleRate() (float64, error) {
	before, err := ownCPU()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	time.Sleep(requestsIdleWindow)
	wall := time.Since(start)
	after, err := ownCPU()
	return float64(after-before) / float64(wall), err
}

func requestsTable(p params, runs []requestCosts) table {
	median := func(f func(requestCosts) time.Duration) time.Duration {
		xs := make([]time.Duration, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return measure.Median(xs)
	}
	perNode := func(f func(requestCosts) time.Duration) string { return millis(median(f)) }
	onLeases, byAnswer := median(requestCosts.onLeases), median(requestCosts.byAnswer)
	return table{
		title: fmt.Sprintf("Requests: what a node's turn cannot do without, per node (%d nodes, median of %d rounds)", p.nodes, len(runs)),
		rows: []row{
			{"the record's entry written ahead of the deletion: the create of a record ConfigMap, answered by its metadata",
				perNode(func(c requestCosts) time.Duration { return c.Write }), "", "", "", ""},
			{"the deletion: a DELETE of the node's pod", perNode(func(c requestCosts) time.Duration { return c.Delete }), "", "", "", ""},
			{"the proof of life by an agent's answer: the challenge, a pods/status PATCH (the answer's echo not counted)",
				perNode(func(c requestCosts) time.Duration { return c.Challenge }), "", "", "", ""},
			{"the proof of life on node Leases: a watch of the node's Lease, its initial events to its next renewal",
				perNode(func(c requestCosts) time.Duration { return c.Follow }), "", "", "", ""},
			{"the least a node's turn costs above the floor, on node Leases: the write-ahead, the DELETE, the Lease watch (issue 29's goal for all of it)",
				millis(onLeases), "", "", "≤ " + millis(requestsTarget), verdict(onLeases <= requestsTarget)},
			{"… with the agents' answers: the write-ahead, the DELETE, the challenge",
				millis(byAnswer), "", "", "≤ " + millis(requestsTarget), verdict(byAnswer <= requestsTarget)},
		},
		notes: []string{
			fmt.Sprintf("a child process (bench %s) sends them through the controller's own API client (internal/kube: protobuf, --kube-api-qps %g, "+
				"--kube-api-burst %d), each kind for every node before the next kind, %d creates or DELETEs and %d Lease watches at once; "+
				"its CPU time (getrusage) net of its idle rate, per node; nothing is cached, decided or echoed back to it",
				requestsCommand, p.qps, p.burst, requestsWriters, requestsFollowed),
			fmt.Sprintf("the records: a ConfigMap of one %d-byte entry per node, as record.Store writes a node's entry ahead (each ConfigMap is written once; "+
				"the background merges that later replace and delete them are not counted); "+
				"the pods: one per node, bound to it, a fresh set each round; nodes heartbeat: node Leases every 10 s, as kubelets",
				requestsEntryBytes),
			"a lower bound: the controller pays these and, besides, its syncs, its events, the echoes of its writes in its watches and the collector's work on them (rollout's net CPU)",
		},
	}
}
