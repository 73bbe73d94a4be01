package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/harness"
)

// persistenceScenario: the agent with its state directory beside one
// without, on a node of podsPerNode pods, and the writes a burst of changes
// to every pod costs the state directory. It stops the shared agent first:
// two agents of one node would share the cores it measures.
var persistenceScenario = scenario{name: "persistence", run: runPersistence}

func runPersistence(ctx context.Context, s *session, _ *findings) (table, error) {
	if err := s.stopNodeAgent(); err != nil {
		return table{}, err
	}
	f, err := benchPersistence(ctx, s)
	if err != nil {
		return table{}, err
	}
	return persistenceTable(f), nil
}

// persistenceFigures are the persistence scenario's results: the agent with and without
// its state directory, on a node of podsPerNode pods, under targetClients
// clients of GET /pods; and how many writes a burst of changes to every pod
// costs the state directory.
type persistenceFigures struct {
	off, on        persistenceRun
	burstChanges   int
	burstWrites    int64
	burstDuration  time.Duration // from the first change sent to the last one stored
	storedFileSize int64
}

// persistenceRun is one agent's figures.
type persistenceRun struct {
	idleRSS, peakRSS int64
	idleAnon         int64 // of idleRSS, anonymous (heap, stacks); the rest is the binary's pages
	load             measure.Result
}

// storedViewWrites is the agent's log line for each write of its view
// (server.PodCache, at -v=2), with the running count as "writes".
const storedViewWrites = `"Stored the pod view"`

// benchPersistence fills agentNode with podsPerNode pods, measures an agent
// without a state directory and one with, then changes every pod at once
// and counts the second agent's writes until the last change is stored.
func benchPersistence(ctx context.Context, s *session) (persistenceFigures, error) {
	f := persistenceFigures{burstChanges: podsPerNode}
	if err := createNodePods(ctx, s); err != nil {
		return f, err
	}
	stateDir := filepath.Join(s.logDir, "ota-server-state")
	var err error
	if f.off, _, err = measurePersistence(ctx, s, "ota-server-no-state", ""); err != nil {
		return f, err
	}
	var agent *child
	if f.on, agent, err = measurePersistence(ctx, s, "ota-server-state", stateDir); err != nil {
		return f, err
	}
	if err := burst(ctx, s, agent, stateDir, &f); err != nil {
		return f, err
	}
	return f, errors.Join(s.stopChild(agent), deleteNamespace(ctx, s.cluster.Client, nodeAPINamespace))
}

// measurePersistence starts an agent with stateDir ("" for none), waits
// until it lists every pod running, and drives targetClients clients of
// GET /pods at it. The agent with a state directory is left running.
func measurePersistence(ctx context.Context, s *session, name, stateDir string) (persistenceRun, *child, error) {
	var r persistenceRun
	agent, err := s.startAgent(ctx, harness.AgentOptions{Name: name, StateDir: stateDir, Stateless: stateDir == "", Flags: []string{"-v=2"}})
	if err != nil {
		return r, nil, err
	}
	if err := agent.waitServing(ctx, "/pods", func(b []byte) bool { return allRunning(b, podsPerNode) }); err != nil {
		return r, nil, err
	}
	idle, err := agent.memory()
	if err != nil {
		return r, nil, err
	}
	r.idleRSS, r.idleAnon = idle.RSS, idle.AnonRSS
	load := measure.Load{Clients: targetClients, Duration: s.p.loadTime, MaxPerClient: maxRequestsPerClient}
	if r.load, err = measure.Drive(ctx, load, measure.HTTPGet("http://"+agent.addr+"/pods")); err != nil {
		return r, nil, err
	}
	if r.peakRSS, err = agent.peakRSS(); err != nil {
		return r, nil, err
	}
	progress("persistence %s: GET /pods %.0f/s with %d clients, peak RSS %s", name, r.load.RPS, targetClients, mib(r.peakRSS))
	if stateDir == "" {
		return r, nil, s.stopChild(agent)
	}
	return r, agent, nil
}

// burst labels every pod of agentNode at once and waits until the agent's
// stored view has them all, then reads from the agent's log how many writes
// that cost.
func burst(ctx context.Context, s *session, agent *child, stateDir string, f *persistenceFigures) error {
	before, err := viewWrites(agent.LogPath)
	if err != nil {
		return err
	}
	pods, err := s.cluster.Client.CoreV1().Pods(nodeAPINamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	start := time.Now()
	for _, p := range pods.Items {
		patch := []byte(`{"metadata":{"labels":{"edgeota-bench-burst":"1"}}}`)
		if _, err := s.cluster.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("changing pod %s: %w", p.Name, err)
		}
	}
	stored := filepath.Join(stateDir, "pods.json")
	deadline := time.Now().Add(readyTimeout)
	for {
		data, err := os.ReadFile(stored)
		if err == nil && strings.Count(string(data), `"edgeota-bench-burst":"1"`) == len(pods.Items) {
			f.burstDuration, f.storedFileSize = time.Since(start), int64(len(data))
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not store the burst's last state within %s", readyTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	after, err := viewWrites(agent.LogPath)
	if err != nil {
		return err
	}
	f.burstChanges, f.burstWrites = len(pods.Items), after-before
	progress("persistence: %d pod changes stored in %d writes (%s)", f.burstChanges, f.burstWrites, f.burstDuration.Round(time.Millisecond))
	return nil
}

// viewWrites is the running count of the last storedViewWrites line in the
// agent's log, 0 before the first.
func viewWrites(logPath string) (int64, error) {
	file, err := os.Open(logPath)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	var n int64
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.Contains(line, storedViewWrites) {
			continue
		}
		_, count, ok := strings.Cut(line, "writes=")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(strings.Fields(count)[0], 10, 64); err == nil {
			n = v
		}
	}
	return n, scanner.Err()
}

func persistenceTable(f persistenceFigures) table {
	r := measure.Ratio(f.on.load.RPS, f.off.load.RPS)
	return table{
		title: fmt.Sprintf("Persistence: the agent with and without --state-dir, %d pods, %d clients of GET /pods", podsPerNode, targetClients),
		rows: []row{
			{"GET /pods, req/s (with vs without)", rps(f.on.load), rps(f.off.load), times(r), "within noise", ""},
			{"GET /pods, p99", millis(f.on.load.P99), millis(f.off.load.P99), times(measure.Ratio(f.on.load.P99, f.off.load.P99)), "", ""},
			{"agent RSS idle (of which anonymous)", fmt.Sprintf("%s (%s)", mib(f.on.idleRSS), mib(f.on.idleAnon)), fmt.Sprintf("%s (%s)", mib(f.off.idleRSS), mib(f.off.idleAnon)),
				times(measure.Ratio(f.on.idleRSS, f.off.idleRSS)), "within noise", ""},
			{"agent peak RSS under load", mib(f.on.peakRSS), mib(f.off.peakRSS), times(measure.Ratio(f.on.peakRSS, f.off.peakRSS)), "≤ 40 MiB", verdict(f.on.peakRSS <= agentRSSTarget)},
			{fmt.Sprintf("writes of the stored view for a burst of %d pod changes", f.burstChanges), fmt.Sprint(f.burstWrites), "", "",
				"bounded (one per second at most)", verdict(f.burstWrites <= int64(f.burstDuration/time.Second)+2)},
		},
		notes: []string{
			"edgeota: ota-server --state-dir DIR; baseline: ota-server --state-dir \"\"; one run each, the node API's shared agent stopped",
			fmt.Sprintf("burst: every pod labelled as fast as the API server takes it; stored in %s; the stored view is %.1f KiB",
				f.burstDuration.Round(time.Millisecond), float64(f.storedFileSize)/1024),
		},
	}
}
