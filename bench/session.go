package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

// createTimeout bounds creating the cluster with all its nodes.
const createTimeout = 10 * time.Minute

// session is one `make bench`: the cluster and the children it started,
// removed by close however the run ends. This file is the only place that
// starts the cluster or a process; scenarios ask it for what they measure.
type session struct {
	p       params
	root    string
	logDir  string
	cluster *localcluster.Cluster
	started []*child
	logFile *os.File
	// lock keeps other benchmarks out of this checkout until close: two at
	// once on a shared machine would each measure the other, and share
	// .cache/bench.
	lock *localcluster.Lock
	// agent is the ota-server of agentNode once a scenario has asked for it.
	agent *child
}

// newSession creates a cluster of p.nodes KWOK nodes under a name of its
// own, so that a bench never shares a cluster with `make run` or the tests.
func newSession(ctx context.Context, p params) (*session, error) {
	root, err := localcluster.Root()
	if err != nil {
		return nil, err
	}
	tools := localcluster.ToolsIn(root)
	if err := tools.Check(append(localcluster.ClusterBinaries, "ota-server", "ota-controller")...); err != nil {
		return nil, err
	}
	s := &session{p: p, root: root, logDir: filepath.Join(root, ".cache", "bench")}
	if err := os.MkdirAll(filepath.Dir(s.logDir), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(s.logDir), err)
	}
	if s.lock, err = localcluster.AcquireLock(s.logDir + ".lock"); err != nil {
		var locked *localcluster.LockedError
		if errors.As(err, &locked) {
			return nil, fmt.Errorf("another `make bench` is running in this checkout (%v)", locked)
		}
		return nil, err
	}
	if err := os.RemoveAll(s.logDir); err != nil {
		return nil, fmt.Errorf("clearing %s: %w", s.logDir, err)
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", s.logDir, err)
	}
	if s.logFile, err = os.Create(filepath.Join(s.logDir, "kwokctl.log")); err != nil {
		return nil, fmt.Errorf("creating the cluster log: %w", err)
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	s.cluster, err = localcluster.Create(ctx, localcluster.Options{
		Root: root, Name: "bench-" + hex.EncodeToString(suffix), Nodes: p.nodes, Log: s.logFile,
		NodeHeartbeat: nodeHeartbeat,
	})
	if err != nil {
		_ = s.logFile.Close()
		return nil, fmt.Errorf("%w (kwokctl's output: %s)", err, s.logFile.Name())
	}
	return s, nil
}

// close stops the children, newest first, deletes the cluster and lets
// the next benchmark in.
func (s *session) close() error {
	var errs []error
	for i := len(s.started) - 1; i >= 0; i-- {
		errs = append(errs, s.started[i].Stop())
	}
	errs = append(errs, s.cluster.Delete(context.Background()), s.logFile.Close())
	s.lock.Release()
	return errors.Join(errs...)
}

// nodes names all the cluster's edge nodes.
func (s *session) nodes() []string {
	names := make([]string, s.p.nodes)
	for i := range names {
		names[i] = localcluster.NodeName(i + 1)
	}
	return names
}

// start runs argv on a free loopback port: the flag naming the address is
// added by addrArgs, which receives host and port.
func (s *session) start(name string, addrArgs func(host, port string) []string, argv ...string) (*child, error) {
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return nil, err
	}
	host, port := "127.0.0.1", ports[0]
	addr := net.JoinHostPort(host, port)
	p, err := localcluster.StartProcess(name, filepath.Join(s.logDir, name+".log"), append(argv, addrArgs(host, port)...)...)
	if err != nil {
		return nil, err
	}
	c := &child{Process: p, addr: addr}
	s.started = append(s.started, c)
	return c, nil
}

// startController runs a fresh bin/ota-controller named name (its log is
// .cache/bench/NAME.log), with extra flags after the bench's own, so that
// its CPU time and peak memory belong to one scenario, and waits until it
// has synced a DaemonSet at least once (its sync histogram has a sample).
func (s *session) startController(ctx context.Context, name string, extra ...string) (*child, error) {
	argv := append([]string{cmp.Or(s.p.controllerBin, s.cluster.Tools.Path("ota-controller")), "--kubeconfig", s.cluster.Kubeconfig, "--leader-elect=false",
		"--health-probe-bind-address", "0", fmt.Sprintf("-v=%d", s.p.verbosity),
		"--kube-api-qps", fmt.Sprint(s.p.qps), "--kube-api-burst", fmt.Sprint(s.p.burst)}, extra...)
	c, err := s.start(name, func(host, port string) []string {
		return []string{"--metrics-bind-address", net.JoinHostPort(host, port)}
	}, argv...)
	if err != nil {
		return nil, err
	}
	return c, c.waitServing(ctx, "/metrics", func(body []byte) bool {
		return strings.Contains(string(body), "edgeota_controller_sync_duration_seconds_count")
	})
}

// agentNode is the node whose agent is measured.
var agentNode = localcluster.NodeName(1)

// nodeAgent returns the agent of agentNode with a state directory in the
// bench's log dir, started by the first scenario that asks and shared by
// those after it until stopNodeAgent or the session's end.
func (s *session) nodeAgent(ctx context.Context) (*child, error) {
	if s.agent == nil {
		a, err := s.startAgent(ctx, "ota-server", "--state-dir", filepath.Join(s.logDir, "ota-server-state-nodeapi"))
		if err != nil {
			return nil, err
		}
		s.agent = a
	}
	return s.agent, nil
}

// stopNodeAgent stops the shared agent, if it runs, for a scenario that
// measures agents of its own on the same node.
func (s *session) stopNodeAgent() error {
	if s.agent == nil {
		return nil
	}
	err := s.stopChild(s.agent)
	s.agent = nil
	return err
}

// startAgent runs a fresh bin/ota-server named name (its log is
// .cache/bench/NAME.log) for agentNode with the admin kubeconfig and extra
// flags, and waits until its cache has synced. The scenario stops it
// (stopChild) when it is done with it.
func (s *session) startAgent(ctx context.Context, name string, extra ...string) (*child, error) {
	argv := append([]string{s.cluster.Tools.Path("ota-server"), "--kubeconfig", s.cluster.Kubeconfig, "--node-name", agentNode}, extra...)
	a, err := s.start(name, func(host, port string) []string {
		return []string{"--bind-address", host, "--port", port}
	}, argv...)
	if err != nil {
		return nil, err
	}
	return a, a.waitServing(ctx, "/readyz", func([]byte) bool { return true })
}

// startCeiling runs this binary as the node API's ceiling server, answering
// with the files given (see runCeiling).
func (s *session) startCeiling(ctx context.Context, jsonPath, protoPath string) (*child, error) {
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

// stopChild stops a child started by this session before the session ends.
func (s *session) stopChild(c *child) error {
	for i, started := range s.started {
		if started == c {
			s.started = append(s.started[:i], s.started[i+1:]...)
			break
		}
	}
	return c.Stop()
}
