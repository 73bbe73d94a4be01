package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/proc"
)

// clusterName is kwokctl's name for `make run`'s cluster; the end-to-end
// suite uses other names, so both can run at once.
const clusterName = "edgeota"

// Where `make run` keeps its state, relative to the checkout root: all in
// .kwok/, beside the clusters kwokctl keeps there.
var (
	workDir    = ".kwok"
	lockFile   = filepath.Join(workDir, "run.pid")
	logDir     = filepath.Join(workDir, "logs")
	kubeconfig = filepath.Join(workDir, "kubeconfig")
)

// errAlreadyRunning is returned when another `make run` holds the lock.
var errAlreadyRunning = errors.New("edgeota's local cluster is already running")

// agentStateDir is the agent's --state-dir, relative to the checkout: its
// stored view of the pods and its queued actions stay inside the checkout.
const agentStateDir = ".kwok/ota-server-state"

type options struct {
	examples  string
	nodes     int
	agentPort int
	// pullDelay, when positive, models image pulls, each taking this long.
	pullDelay time.Duration
}

// session is one `make run`: the harness's run, and what the guide shows.
type session struct {
	h         *harness.Harness
	out       io.Writer
	agentAddr string
	agentNode string
	nodes     int
}

// run brings everything up, waits for Ctrl-C (ctx) and tears down. Progress
// goes to out, which may be a pipe whose reader is gone by the time of the
// teardown (`make run | tee run.log`, then Ctrl-C): writes to it may fail,
// the teardown must not.
func run(ctx context.Context, out io.Writer, opts options) error {
	h, err := harness.New(harness.Options{LogDir: logDir, Lock: lockFile, Tools: []string{"grpcurl"}})
	var locked *proc.LockedError
	if errors.As(err, &locked) {
		return fmt.Errorf("%w (%v); stop it with Ctrl-C in its terminal, or use the running one", errAlreadyRunning, locked)
	}
	if err != nil {
		return err
	}
	s := &session{
		h:         h,
		out:       out,
		agentAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.agentPort)),
		agentNode: localcluster.NodeName(1),
		nodes:     opts.nodes,
	}
	upErr := s.up(ctx, opts)
	if upErr == nil {
		upErr = s.serve(ctx)
	}
	downErr := tearDown(out, h)
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
	s.step("Starting the local cluster (%d edge nodes) ...", opts.nodes)
	start := time.Now()
	clusterOpts := harness.ClusterOptions{Name: clusterName, Kubeconfig: filepath.Join(s.h.Root, kubeconfig), Nodes: opts.nodes}
	if opts.pullDelay > 0 {
		s.step("Image pulls modelled: %s for each image a node has not pulled yet.", opts.pullDelay)
		clusterOpts.ImagePulls = &localcluster.ImagePulls{Delay: opts.pullDelay}
	}
	removed, err := s.h.StartCluster(ctx, clusterOpts)
	if removed {
		s.step("Removed the cluster left by an earlier run that did not stop cleanly.")
	}
	if err != nil {
		return err
	}
	s.step("Cluster up in %s.", time.Since(start).Round(100*time.Millisecond))

	s.step("Starting ota-controller ...")
	if _, err := s.h.StartController(harness.ControllerOptions{}); err != nil {
		return err
	}
	s.step("Starting ota-server for %s on %s ...", s.agentNode, s.agentAddr)
	_, port, _ := net.SplitHostPort(s.agentAddr)
	if _, err := s.h.StartAgent(ctx, harness.AgentOptions{
		Node: s.agentNode, Name: harness.AgentBinary, Port: port, StateDir: filepath.Join(s.h.Root, agentStateDir),
	}); err != nil {
		return err
	}

	s.step("Applying %s ...", opts.examples)
	dir := opts.examples
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.h.Root, dir)
	}
	examples, err := applyExamples(ctx, s.h.Cluster, dir, s.agentNode, examplesReadyTimeout+opts.pullDelay)
	if err != nil {
		return err
	}
	printGuide(s.out, s, examples)
	return nil
}

// serve waits for Ctrl-C, or for a child to exit, which ends the session too:
// a guide whose commands no longer work is worse than none.
func (s *session) serve(ctx context.Context) error {
	processes := s.h.Processes()
	exited := make(chan *proc.Process, len(processes))
	for _, p := range processes {
		go func() {
			<-p.Done()
			exited <- p
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case p := <-exited:
		return fmt.Errorf("unexpectedly: %w", p.Exited())
	}
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

// tearDown closes the run, saying so on out.
func tearDown(out io.Writer, run io.Closer) error {
	step(out, "Tearing down ...")
	if err := run.Close(); err != nil {
		return err
	}
	step(out, "Stopped: the cluster, ota-controller and ota-server are gone.")
	return nil
}

// step reports progress on s.out.
func (s *session) step(format string, args ...any) {
	step(s.out, format, args...)
}

// step reports progress. A failed write is ignored: the output is for the
// user, and a user who closed it still wants the teardown done.
func step(out io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(out, "==> "+format+"\n", args...)
}
