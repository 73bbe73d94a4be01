package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/proc"
)

// The names of edgeota's binaries in bin/, built by `make build`.
const (
	ControllerBinary = "ota-controller"
	AgentBinary      = "ota-server"
)

// Options describe a run.
type Options struct {
	// LogDir is the directory of the run's logs, relative to the checkout
	// root. It is emptied first: one run, one set of logs.
	LogDir string
	// Lock, if set, is a lock file relative to the checkout root, held until
	// Close, so that the checkout runs one such run at a time. Another run
	// holding it makes New fail with a *proc.LockedError.
	Lock string
	// Tools names binaries of bin/ the run needs beyond the cluster's and
	// edgeota's own.
	Tools []string
}

// Harness is one run: the checkout's binaries, its logs, and the cluster and
// child processes it started, all torn down by Close.
type Harness struct {
	// Root is the checkout root.
	Root string
	// Tools locates the binaries in bin/.
	Tools localcluster.Tools
	// LogDir is the absolute path of the run's log directory.
	LogDir string
	// Cluster is the local cluster once StartCluster has returned.
	Cluster *localcluster.Cluster

	lock       *proc.Lock
	clusterLog *os.File
	processes  []*proc.Process
}

// New finds the checkout, checks that bin/ holds every binary the run needs
// (naming the missing ones and how to build them: a missing binary must
// stop a run with an answer, not a confusing exec error halfway through),
// takes the lock and creates the empty log directory.
func New(opts Options) (*Harness, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	h := &Harness{Root: root, Tools: localcluster.ToolsIn(root), LogDir: filepath.Join(root, opts.LogDir)}
	if err := h.Tools.Check(slices.Concat(localcluster.ClusterBinaries, []string{ControllerBinary, AgentBinary}, opts.Tools)...); err != nil {
		return nil, err
	}
	if opts.Lock != "" {
		path := filepath.Join(root, opts.Lock)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("creating the lock's directory: %w", err)
		}
		if h.lock, err = proc.AcquireLock(path); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(h.LogDir); err != nil {
		return nil, errors.Join(fmt.Errorf("clearing %s: %w", h.LogDir, err), h.Close())
	}
	if err := os.MkdirAll(h.LogDir, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("creating %s: %w", h.LogDir, err), h.Close())
	}
	return h, nil
}

// ClusterOptions describe the run's local cluster.
type ClusterOptions struct {
	// Name is kwokctl's cluster name; see UniqueClusterName.
	Name string
	// Kubeconfig is where the admin kubeconfig goes; empty means
	// localcluster's default beside the cluster.
	Kubeconfig string
	// Nodes is how many edge nodes it starts with.
	Nodes int
	// Arm64Nodes is how many of them, the last ones, are arm64 (see
	// localcluster.Options).
	Arm64Nodes int
	// NodeHeartbeat is how often the nodes report their status; zero means
	// every 10-15 s (see localcluster.Options).
	NodeHeartbeat time.Duration
	// NodeLeases makes the nodes heartbeat as kubelets do: node Leases every
	// 10 s, status every 5 minutes (see localcluster.Heartbeat).
	NodeLeases bool
	// ImagePulls, when set, models image pulls: a pod waits for its node to
	// pull its images before it starts, missing images and flaky registries
	// fail as on a kubelet (see localcluster.ImagePulls). The simulator runs
	// in this process until Close. Nil starts every pod at once.
	ImagePulls *localcluster.ImagePulls
}

// StartCluster creates the run's cluster, kwokctl's output going to
// kwokctl.log in the log directory, and sets h.Cluster. It first deletes a
// cluster of the same name left by a run that died without tearing down,
// and reports whether there was one: only a run holding a lock may use a
// fixed name, as holding it proves no live run owns that cluster.
func (h *Harness) StartCluster(ctx context.Context, opts ClusterOptions) (removedLeftover bool, err error) {
	if h.clusterLog, err = os.Create(filepath.Join(h.LogDir, "kwokctl.log")); err != nil {
		return false, fmt.Errorf("creating the cluster log: %w", err)
	}
	clusterOpts := localcluster.Options{
		Root: h.Root, Name: opts.Name, Kubeconfig: opts.Kubeconfig, Nodes: opts.Nodes, Arm64Nodes: opts.Arm64Nodes,
		NodeHeartbeat: opts.NodeHeartbeat, NodeLeases: opts.NodeLeases, ImagePulls: opts.ImagePulls, Log: h.clusterLog,
	}
	if h.lock != nil {
		if removedLeftover, err = localcluster.RemoveLeftover(ctx, clusterOpts); err != nil {
			return removedLeftover, err
		}
	}
	if h.Cluster, err = localcluster.Create(ctx, clusterOpts); err != nil {
		return removedLeftover, fmt.Errorf("%w (kwokctl's output: %s)", err, h.clusterLog.Name())
	}
	return removedLeftover, nil
}

// UniqueClusterName is prefix and a random suffix, so that runs side by side
// (two checkouts' suites, a suite beside `make run` or a bench) never share a
// cluster.
func UniqueClusterName(prefix string) string {
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return prefix + "-" + hex.EncodeToString(suffix)
}

// Start runs argv as a child of the run, logging to name.log in the log
// directory, until Stop or Close.
func (h *Harness) Start(name string, argv ...string) (*proc.Process, error) {
	p, err := proc.Start(name, h.LogPath(name), argv...)
	if err != nil {
		return nil, err
	}
	h.processes = append(h.processes, p)
	return p, nil
}

// LogPath is where the child named name logs.
func (h *Harness) LogPath(name string) string {
	return filepath.Join(h.LogDir, name+".log")
}

// Processes are the children running under the run, oldest first.
func (h *Harness) Processes() []*proc.Process {
	return slices.Clone(h.processes)
}

// Stop stops one child before the run ends.
func (h *Harness) Stop(p *proc.Process) error {
	h.processes = slices.DeleteFunc(h.processes, func(q *proc.Process) bool { return q == p })
	return p.Stop()
}

// Close stops the children, newest first, deletes the cluster, and lets the
// next run in. It carries on past failures and returns them all; a second
// Close does nothing.
func (h *Harness) Close() error {
	var errs []error
	for i := len(h.processes) - 1; i >= 0; i-- {
		errs = append(errs, h.processes[i].Stop())
	}
	h.processes = nil
	if h.Cluster != nil {
		errs = append(errs, h.Cluster.Delete(context.Background()))
		h.Cluster = nil
	}
	if h.clusterLog != nil {
		errs = append(errs, h.clusterLog.Close())
		h.clusterLog = nil
	}
	if h.lock != nil {
		h.lock.Release()
		h.lock = nil
	}
	return errors.Join(errs...)
}
