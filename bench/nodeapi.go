package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/bench/measure"
	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// nodeAPIScenario: one agent whose node runs the kubelet's default maximum
// of pods, REST GET /pods and gRPC ListPods loaded by 1, 16 and 64
// concurrent clients, against a ceiling server answering the same bytes.
var nodeAPIScenario = scenario{name: "nodeapi", run: runNodeAPI}

// Its targets, at targetClients: at least half the ceiling's REST rate, at
// most twice its p99, and the agent within 40 MiB.
const (
	targetClients     = 64
	nodeAPIRateTarget = 0.5
	nodeAPIP99Target  = 2.0
	agentRSSTarget    = 40 << 20
)

const (
	nodeAPINamespace = "bench-node"
	podsPerNode      = 110
	// maxRequestsPerClient bounds each client's loop in count, as the load
	// time bounds it in time.
	maxRequestsPerClient = 1 << 20
)

// concurrency lists the load levels.
var concurrency = []int{1, 16, 64}

// nodeAPILevel is one load level against the agent and its ceilings.
type nodeAPILevel struct {
	clients                int
	rest, restCeiling      measure.Result
	grpcAgent, grpcCeiling measure.Result
}

// nodeAPIFigures are the node API scenario's results.
type nodeAPIFigures struct {
	levels         []nodeAPILevel
	bodyBytes      int
	idleRSS        int64 // after its cache synced, before the load
	idleAnon       int64 // of which anonymous memory (heap, stacks); the rest is file-backed (the binary's pages)
	peakRSS        int64 // after the load
	ceilingPeakRSS int64
	binarySize     int64
}

func runNodeAPI(ctx context.Context, s *session, _ *findings) (table, error) {
	agent, err := s.nodeAgent(ctx)
	if err != nil {
		return table{}, err
	}
	f, err := benchNodeAPI(ctx, s, agent)
	if err != nil {
		return table{}, err
	}
	return nodeAPITable(f), nil
}

// benchNodeAPI fills the agent's node with 110 running pods, takes the
// agent's exact answers as the ceiling's, and drives both alike.
func benchNodeAPI(ctx context.Context, s *session, agent *child) (nodeAPIFigures, error) {
	var f nodeAPIFigures
	if err := createNodePods(ctx, s); err != nil {
		return f, err
	}
	var body []byte
	err := agent.waitServing(ctx, "/pods", func(b []byte) bool {
		body = b
		return allRunning(b, podsPerNode)
	})
	if err != nil {
		return f, err
	}
	f.bodyBytes = len(body)
	idle, err := agent.memory()
	if err != nil {
		return f, err
	}
	f.idleRSS, f.idleAnon = idle.RSS, idle.AnonRSS
	ceiling, err := startCeiling(ctx, s, agent, body)
	if err != nil {
		return f, err
	}
	for i, clients := range concurrency {
		level := nodeAPILevel{clients: clients}
		runs := []struct {
			dst  *measure.Result
			dial measure.Dialer
		}{
			{&level.rest, measure.HTTPGet("http://" + agent.addr + "/pods")},
			{&level.restCeiling, measure.HTTPGet("http://" + ceiling.addr + "/pods")},
			{&level.grpcAgent, grpcDialer(agent.addr)},
			{&level.grpcCeiling, grpcDialer(ceiling.addr)},
		}
		if i%2 == 1 { // alternate who goes first, so that drift does not favour one
			for l, r := 0, len(runs)-1; l < r; l, r = l+1, r-1 {
				runs[l], runs[r] = runs[r], runs[l]
			}
		}
		load := measure.Load{Clients: clients, Duration: s.p.loadTime, MaxPerClient: maxRequestsPerClient}
		for _, r := range runs {
			if *r.dst, err = measure.Drive(ctx, load, r.dial); err != nil {
				return f, err
			}
		}
		progress("node API, %d clients: REST %.0f/s (ceiling %.0f/s), gRPC %.0f/s (ceiling %.0f/s)",
			clients, level.rest.RPS, level.restCeiling.RPS, level.grpcAgent.RPS, level.grpcCeiling.RPS)
		f.levels = append(f.levels, level)
	}
	if f.peakRSS, err = agent.peakRSS(); err != nil {
		return f, err
	}
	if f.ceilingPeakRSS, err = ceiling.peakRSS(); err != nil {
		return f, err
	}
	info, err := os.Stat(s.cluster.Tools.Path("ota-server"))
	if err != nil {
		return f, fmt.Errorf("sizing the agent's binary: %w", err)
	}
	f.binarySize = info.Size()
	return f, errors.Join(s.stopChild(ceiling), deleteNamespace(ctx, s.cluster.Client, nodeAPINamespace))
}

// createNodePods creates bare pods bound to agentNode (KWOK runs them) until
// it has podsPerNode.
func createNodePods(ctx context.Context, s *session) error {
	client := s.cluster.Client
	if err := createNamespace(ctx, client, nodeAPINamespace); err != nil {
		return err
	}
	existing, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + agentNode})
	if err != nil {
		return fmt.Errorf("listing the pods of %s: %w", agentNode, err)
	}
	for i := len(existing.Items); i < podsPerNode; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", i), Labels: map[string]string{"app": "node-api"}},
			Spec: corev1.PodSpec{
				NodeName:    agentNode,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: containerName, Image: image(0)}},
			},
		}
		if _, err := client.CoreV1().Pods(nodeAPINamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
	}
	return nil
}

// allRunning reports whether a GET /pods body lists n pods, all Running.
func allRunning(body []byte, n int) bool {
	var list struct {
		Items []struct {
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Items) != n {
		return false
	}
	for _, p := range list.Items {
		if p.Status.Phase != string(corev1.PodRunning) {
			return false
		}
	}
	return true
}

// startCeiling writes the agent's answers, the REST body given and its gRPC
// ListPods response, to files and starts the ceiling server on them.
func startCeiling(ctx context.Context, s *session, agent *child, body []byte) (*child, error) {
	conn, err := grpc.NewClient(agent.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to the agent: %w", err)
	}
	defer conn.Close()
	resp, err := edgeotav1.NewOTAServiceClient(conn).ListPods(ctx, &edgeotav1.ListPodsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the agent's pods over gRPC: %w", err)
	}
	wire, err := proto.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encoding the ListPods response: %w", err)
	}
	jsonPath, protoPath := filepath.Join(s.logDir, "pods.json"), filepath.Join(s.logDir, "pods.pb")
	if err := errors.Join(os.WriteFile(jsonPath, body, 0o644), os.WriteFile(protoPath, wire, 0o644)); err != nil {
		return nil, fmt.Errorf("writing the ceiling's answers: %w", err)
	}
	return s.startCeiling(ctx, jsonPath, protoPath)
}

// grpcDialer calls ListPods over one grpc.ClientConn per client.
func grpcDialer(addr string) measure.Dialer {
	return func() (measure.Call, func(), error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		client := edgeotav1.NewOTAServiceClient(conn)
		return func(ctx context.Context) error {
			_, err := client.ListPods(ctx, &edgeotav1.ListPodsRequest{})
			return err
		}, func() { _ = conn.Close() }, nil
	}
}

func nodeAPITable(f nodeAPIFigures) table {
	t := table{title: fmt.Sprintf("Node API: one agent, %d pods on its node (GET /pods body %d bytes)", podsPerNode, f.bodyBytes)}
	for _, l := range f.levels {
		rateRatio := measure.Ratio(l.rest.RPS, l.restCeiling.RPS)
		p99Ratio := measure.Ratio(l.rest.P99, l.restCeiling.P99)
		rateTarget, rateMet, p99Target, p99Met := "", "", "", ""
		if l.clients == targetClients {
			rateTarget, rateMet = "≥ "+times(nodeAPIRateTarget), verdict(rateRatio >= nodeAPIRateTarget)
			p99Target, p99Met = "p99 ≤ "+times(nodeAPIP99Target), verdict(p99Ratio <= nodeAPIP99Target)
		}
		t.rows = append(t.rows,
			row{fmt.Sprintf("REST GET /pods, %d clients: requests/s", l.clients), rps(l.rest), rps(l.restCeiling), times(rateRatio), rateTarget, rateMet},
			row{fmt.Sprintf("REST GET /pods, %d clients: p50 / p99", l.clients), latency(l.rest), latency(l.restCeiling), times(p99Ratio) + " (p99)", p99Target, p99Met},
			row{fmt.Sprintf("gRPC ListPods, %d clients: requests/s", l.clients), rps(l.grpcAgent), rps(l.grpcCeiling), times(measure.Ratio(l.grpcAgent.RPS, l.grpcCeiling.RPS)), "", ""},
			row{fmt.Sprintf("gRPC ListPods, %d clients: p50 / p99", l.clients), latency(l.grpcAgent), latency(l.grpcCeiling), times(measure.Ratio(l.grpcAgent.P99, l.grpcCeiling.P99)) + " (p99)", "", ""},
		)
	}
	t.rows = append(t.rows,
		row{"agent RSS, synced, before the load", fmt.Sprintf("%s (%s anonymous)", mib(f.idleRSS), mib(f.idleAnon)), "", "", "≤ 40 MiB", verdict(f.idleRSS <= agentRSSTarget)},
		row{"agent peak RSS (VmHWM), after the load", mib(f.peakRSS), mib(f.ceilingPeakRSS) + " (ceiling)", times(measure.Ratio(f.peakRSS, f.ceilingPeakRSS)), "≤ 40 MiB", verdict(f.peakRSS <= agentRSSTarget)},
		row{"bin/ota-server size", mib(f.binarySize), "", "", "", ""},
	)
	var failures []string
	for _, l := range f.levels {
		for name, r := range map[string]measure.Result{"REST agent": l.rest, "REST ceiling": l.restCeiling, "gRPC agent": l.grpcAgent, "gRPC ceiling": l.grpcCeiling} {
			if r.Errors > 0 {
				failures = append(failures, fmt.Sprintf("%s, %d clients: %d (first: %v)", name, l.clients, r.Errors, r.FirstErr))
			}
		}
	}
	slices.Sort(failures)
	t.notes = []string{
		"baseline (ceiling): a plain net/http server in its own process answering the agent's very GET /pods bytes, and a plain gRPC server answering its very ListPods message, served on one port the way the agent serves (HTTP/1.1 and h2c).",
		"Load: Go clients in the bench process, back to back for a fixed time per level; REST: one keep-alive HTTP/1.1 connection per client; gRPC: one grpc.ClientConn per client. The load generator shares the 2 cores with the server it measures, so absolute rates mostly measure the machine.",
		"Failed requests: " + cmp.Or(strings.Join(failures, "; "), "none") + ".",
	}
	return t
}

func rps(r measure.Result) string { return fmt.Sprintf("%.0f", r.RPS) }

func latency(r measure.Result) string { return millis(r.P50) + " / " + millis(r.P99) }
