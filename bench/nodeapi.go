package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/localcluster"
)

// The node API scenario: one agent whose node runs the kubelet's default
// maximum of pods, loaded by 1, 16 and 64 concurrent clients.
const (
	nodeAPINamespace = "bench-node"
	podsPerNode      = 110
)

// concurrency lists the load levels.
var concurrency = []int{1, 16, 64}

// agentNode is the node whose agent is measured.
var agentNode = localcluster.NodeName(1)

// nodeAPILevel is one load level against the agent and its ceilings.
type nodeAPILevel struct {
	clients                int
	rest, restCeiling      loadResult
	grpcAgent, grpcCeiling loadResult
}

// nodeAPIFigures are scenario 4's results.
type nodeAPIFigures struct {
	levels         []nodeAPILevel
	bodyBytes      int
	idleRSS        int64 // after its cache synced, before the load
	idleAnon       int64 // of which anonymous memory (heap, stacks); the rest is file-backed (the binary's pages)
	peakRSS        int64 // after the load
	ceilingPeakRSS int64
	binarySize     int64
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
	if f.idleRSS, err = agent.rss(); err != nil {
		return f, err
	}
	if f.idleAnon, err = agent.memory("RssAnon:"); err != nil {
		return f, err
	}
	ceiling, err := startCeiling(ctx, s, agent, body)
	if err != nil {
		return f, err
	}
	for i, clients := range concurrency {
		level := nodeAPILevel{clients: clients}
		runs := []struct {
			dst  *loadResult
			dial dialer
		}{
			{&level.rest, restDialer("http://" + agent.addr + "/pods")},
			{&level.restCeiling, restDialer("http://" + ceiling.addr + "/pods")},
			{&level.grpcAgent, grpcDialer(agent.addr)},
			{&level.grpcCeiling, grpcDialer(ceiling.addr)},
		}
		if i%2 == 1 { // alternate who goes first, so that drift does not favour one
			for l, r := 0, len(runs)-1; l < r; l, r = l+1, r-1 {
				runs[l], runs[r] = runs[r], runs[l]
			}
		}
		for _, r := range runs {
			if *r.dst, err = drive(ctx, clients, s.p.loadTime, r.dial); err != nil {
				return f, err
			}
		}
		progress("node API, %d clients: REST %.0f/s (ceiling %.0f/s), gRPC %.0f/s (ceiling %.0f/s)",
			clients, level.rest.rps, level.restCeiling.rps, level.grpcAgent.rps, level.grpcCeiling.rps)
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
// ListPods response, to files and starts this binary's ceiling server on them.
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
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the benchmark's binary: %w", err)
	}
	c, err := s.start("ceiling", func(host, port string) []string {
		return []string{"-addr", host + ":" + port}
	}, self, ceilingCommand, "-json", jsonPath, "-proto", protoPath)
	if err != nil {
		return nil, err
	}
	return c, c.waitServing(ctx, "/pods", func([]byte) bool { return true })
}
