package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

// clusterName is kwokctl's name for `make run`'s cluster; the end-to-end
// suite uses other names, so both can run at once.
const clusterName = "edgeota"

// agentStateDir is the agent's --state-dir, relative to the checkout: its
// stored view of the pods and its queued actions stay inside the checkout.
const agentStateDir = ".kwok/ota-server-state"

// agentReadyTimeout bounds the wait for the agent's first cache sync.
const agentReadyTimeout = time.Minute

type options struct {
	examples  string
	nodes     int
	agentPort int
}

// session is one `make run`: what it started, to be stopped in reverse.
type session struct {
	root       string
	workDir    string
	cluster    *localcluster.Cluster
	processes  []*localcluster.Process
	agentAddr  string
	agentNode  string
	nodes      int
	clusterLog *os.File
}

func run(ctx context.Context, opts options) error {
	root, err := localcluster.Root()
	if err != nil {
		return err
	}
	s := &session{
		root:      root,
		workDir:   filepath.Join(root, ".kwok"),
		agentAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.agentPort)),
		agentNode: localcluster.NodeName(1),
		nodes:     opts.nodes,
	}
	tools := localcluster.ToolsIn(root)
	if err := tools.Check(append(localcluster.ClusterBinaries, "grpcurl", "ota-server", "ota-controller")...); err != nil {
		return err
	}
	if err := os.MkdirAll(s.workDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", s.workDir, err)
	}
	l, err := acquireLock(filepath.Join(s.workDir, "run.pid"))
	if err != nil {
		return err
	}
	defer l.Release()

	upErr := s.up(ctx, opts)
	if upErr == nil {
		upErr = s.serve(ctx)
	}
	fmt.Println("\nTearing down ...")
	downErr := s.down()
	if downErr == nil {
		fmt.Println("Stopped: the cluster, ota-controller and ota-server are gone.")
	}
	if errors.Is(upErr, context.Canceled) {
		upErr = nil // Ctrl-C
	}
	return errors.Join(upErr, downErr)
}

// up starts everything and prints the guide.
func (s *session) up(ctx context.Context, opts options) error {
	if err := portFree(s.agentAddr); err != nil {
		return err
	}
	logs := filepath.Join(s.workDir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", logs, err)
	}
	clusterLog, err := os.Create(filepath.Join(logs, "kwokctl.log"))
	if err != nil {
		return fmt.Errorf("creating the cluster log: %w", err)
	}
	s.clusterLog = clusterLog
	if err := s.removeLeftovers(ctx); err != nil {
		return err
	}

	step("Starting the local cluster (%d edge nodes) ...", opts.nodes)
	start := time.Now()
	s.cluster, err = localcluster.Create(ctx, s.clusterOptions())
	if err != nil {
		return fmt.Errorf("%w (kwokctl's output: %s)", err, clusterLog.Name())
	}
	step("Cluster up in %s.", time.Since(start).Round(100*time.Millisecond))

	tools := s.cluster.Tools
	step("Starting ota-controller ...")
	if err := s.start("ota-controller", filepath.Join(logs, "ota-controller.log"), tools.Path("ota-controller"),
		"--kubeconfig", s.cluster.Kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"); err != nil {
		return err
	}
	step("Starting ota-server for %s on %s ...", s.agentNode, s.agentAddr)
	host, port, _ := net.SplitHostPort(s.agentAddr)
	if err := s.start("ota-server", filepath.Join(logs, "ota-server.log"), tools.Path("ota-server"),
		"--kubeconfig", s.cluster.Kubeconfig, "--node-name", s.agentNode, "--bind-address", host, "--port", port,
		"--state-dir", filepath.Join(s.root, agentStateDir)); err != nil {
		return err
	}
	if err := s.processes[len(s.processes)-1].WaitReady(ctx, "http://"+s.agentAddr+"/readyz", agentReadyTimeout); err != nil {
		return err
	}

	step("Applying %s ...", opts.examples)
	dir := opts.examples
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.root, dir)
	}
	examples, err := applyExamples(ctx, s.cluster, dir, s.agentNode)
	if err != nil {
		return err
	}
	printGuide(os.Stdout, s, examples)
	return nil
}

// removeLeftovers deletes a cluster left by a run that died without tearing
// down (killed, machine crash): holding the lock proves no run owns it.
func (s *session) removeLeftovers(ctx context.Context) error {
	removed, err := localcluster.RemoveLeftover(ctx, s.clusterOptions())
	if removed {
		step("Removed the cluster left by an earlier run that did not stop cleanly.")
	}
	return err
}

func (s *session) clusterOptions() localcluster.Options {
	return localcluster.Options{
		Root: s.root, Name: clusterName, Kubeconfig: filepath.Join(s.workDir, "kubeconfig"),
		Nodes: s.nodes, Log: s.clusterLog,
	}
}

func (s *session) start(name, logPath string, argv ...string) error {
	p, err := localcluster.StartProcess(name, logPath, argv...)
	if err != nil {
		return err
	}
	s.processes = append(s.processes, p)
	return nil
}

// serve waits for Ctrl-C, or for a child to exit, which ends the session too:
// a guide whose commands no longer work is worse than none.
func (s *session) serve(ctx context.Context) error {
	exited := make(chan *localcluster.Process, len(s.processes))
	for _, p := range s.processes {
		go func() {
			<-p.Done()
			exited <- p
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case p := <-exited:
		return fmt.Errorf("%s exited unexpectedly (%v); its log: %s", p.Name, p.Err(), p.LogPath)
	}
}

// down stops the processes, newest first, then deletes the cluster.
func (s *session) down() error {
	var errs []error
	for i := len(s.processes) - 1; i >= 0; i-- {
		errs = append(errs, s.processes[i].Stop())
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.Delete(context.Background()))
	}
	if s.clusterLog != nil {
		errs = append(errs, s.clusterLog.Close())
	}
	return errors.Join(errs...)
}

// portFree fails, saying what to do, if something already listens on addr:
// another agent answering there would make the guide's commands lie.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the node agent's address %s is taken by another process (see `ss -ltnp`); stop it, or run bin/edgeota-run -agent-port N: %w", addr, err)
	}
	return l.Close()
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}
