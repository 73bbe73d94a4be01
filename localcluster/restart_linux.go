package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/health"
)

// Bounds of StopComponent and RestartAPIServer. On SIGTERM kube-apiserver
// stops serving at once but then lingers, here for over 30 s, before it
// exits; components are killed after componentStopGrace so that an API
// server outage lasts about its start (2-5 s on a loaded 2-core machine), a
// realistic blip for the clients that live through it.
const (
	componentStopGrace    = 500 * time.Millisecond
	apiServerReadyTimeout = 2 * time.Minute
)

// heartbeatPoll and heartbeatTimeout pace and bound SetHeartbeat's wait
// for every node to heartbeat again: a list of every node (or Lease) each
// second, and a few of the slowest heartbeat periods (15 s) before giving up.
const (
	heartbeatPoll    = time.Second
	heartbeatTimeout = 2 * time.Minute
)

// SetHeartbeat makes the nodes heartbeat as heartbeat says from now on, as
// Options.NodeLeases and Options.NodeHeartbeat do at creation, for a run
// whose parts need different heartbeats. KWOK reads its stages and flags
// only at start, so this rewrites the node-heartbeat stage in
// kwok-controller's configuration and restarts kwok-controller
// (StopComponent) with the heartbeat's flags; the other components, the
// nodes and the pods are untouched.
//
// Leaving Leases deletes every node Lease while kwok-controller is down: a
// stale Lease must not read as a node's last heartbeat (and a
// kwok-controller restarted with Leases, an identity of its own, would wait
// out its predecessor's Leases, 40 s, long enough for the node lifecycle
// controller to give up on every node). Taking Leases up, the nodes join
// one by one over a renewal interval (joinLeases). It returns once every
// node that is not cut off has heartbeat from the restarted
// kwok-controller, so that its first list of the nodes and pods is over
// before the caller measures anything.
func (c *Cluster) SetHeartbeat(ctx context.Context, heartbeat Heartbeat) error {
	if heartbeat == c.heartbeat {
		return nil
	}
	if err := heartbeat.Validate(); err != nil {
		return err
	}
	config := filepath.Join(c.WorkDir(), "kwok.yaml")
	data, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("reading kwok-controller's configuration: %w", err)
	}
	if data, err = withHeartbeat(data, heartbeat); err != nil {
		return fmt.Errorf("%s: %w", config, err)
	}
	start, err := c.stopComponent(ctx, "kwok-controller", func(argv []string) []string { return withKwokFlags(argv, heartbeat) })
	if err != nil {
		return err
	}
	if err := os.WriteFile(config, data, 0o640); err != nil {
		return fmt.Errorf("writing kwok-controller's configuration: %w", err)
	}
	if c.heartbeat.Leases {
		if err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the node Leases: %w", err)
		}
	}
	var joining []string
	if heartbeat.Leases {
		if joining, err = c.holdBackFromLeases(ctx); err != nil {
			return err
		}
	}
	// Heartbeat times are whole seconds: one sent by the new kwok-controller
	// reads after this.
	restarted := time.Now().Truncate(time.Second)
	if _, err := start(); err != nil {
		return err
	}
	c.heartbeat = heartbeat
	if err := c.waitComponents(ctx); err != nil {
		return err
	}
	if err := c.joinLeases(ctx, joining); err != nil {
		return err
	}
	return c.waitHeartbeats(ctx, restarted)
}

// holdBackFromLeases labels every node that is not cut off joining, so that
// a kwok-controller started with Leases takes none of them up until
// joinLeases, and returns their names.
func (c *Cluster) holdBackFromLeases(ctx context.Context) ([]string, error) {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: CutOffLabel + "!=true"})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	names := make([]string, len(nodes.Items))
	for i := range nodes.Items {
		names[i] = nodes.Items[i].Name
	}
	errs := make([]error, len(names))
	workqueue.ParallelizeUntil(ctx, joinParallelism, len(names), func(i int) { errs[i] = c.SetNodeLabel(ctx, names[i], joiningLabel, "true") })
	return names, errors.Join(errs...)
}

// waitHeartbeats waits until every node that is not cut off has heartbeat
// after since: renewed its Lease with Leases, written its status without.
func (c *Cluster) waitHeartbeats(ctx context.Context, since time.Time) error {
	var stale int
	err := wait.PollUntilContextTimeout(ctx, heartbeatPoll, heartbeatTimeout, false, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: CutOffLabel + "!=true"})
		if err != nil {
			return false, err
		}
		beat := func(node *corev1.Node) time.Time {
			if cond := health.NodeCondition(node, corev1.NodeReady); cond != nil {
				return cond.LastHeartbeatTime.Time
			}
			return time.Time{}
		}
		if c.heartbeat.Leases {
			leases, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			renewed := map[string]time.Time{}
			for _, l := range leases.Items {
				if l.Spec.RenewTime != nil {
					renewed[l.Name] = l.Spec.RenewTime.Time
				}
			}
			beat = func(node *corev1.Node) time.Time { return renewed[node.Name] }
		}
		stale = 0
		for i := range nodes.Items {
			if !beat(&nodes.Items[i]).After(since) {
				stale++
			}
		}
		return stale == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every node to heartbeat after kwok-controller's restart (%d not yet): %w", stale, err)
	}
	return nil
}

// RestartAPIServer stops the cluster's kube-apiserver (see StopComponent),
// keeps it down for down, and starts it again. etcd and the other components
// keep running, as in a rolling restart or upgrade of a control plane. It
// returns once the API server is ready again, with how long it did not serve.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) (time.Duration, error) {
	stopped := time.Now()
	start, err := c.StopComponent(ctx, "kube-apiserver")
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(down):
	}
	pid, err := start()
	if err != nil {
		return 0, err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, pollInterval, apiServerReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := pidAlive(pid); err != nil {
			return false, fmt.Errorf("the restarted kube-apiserver exited (see its log): %w", err)
		}
		_, last = c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the restarted kube-apiserver to be ready (last: %v): %w", last, err)
	}
	return time.Since(stopped), nil
}

// StopComponent stops one of Components (SIGTERM, SIGKILL after
// componentStopGrace) and returns a function that starts it again as kwokctl
// had: the same command line, environment and working directory, output
// appended to the same log, in a session of its own, its PID written where
// Delete looks for it. start returns the new PID; it does not wait for the
// component to serve.
func (c *Cluster) StopComponent(ctx context.Context, component string) (start func() (int, error), err error) {
	return c.stopComponent(ctx, component, nil)
}

// stopComponent is StopComponent with the command line edited for the
// restart, unless edit is nil.
func (c *Cluster) stopComponent(ctx context.Context, component string, edit func(argv []string) []string) (start func() (int, error), err error) {
	pid, err := c.pid(component)
	if err != nil {
		return nil, err
	}
	argv, env, dir, err := commandOf(pid)
	if err != nil {
		return nil, fmt.Errorf("reading how %s was started: %w", component, err)
	}
	if edit != nil {
		argv = edit(argv)
	}
	if err := stopPid(ctx, pid, componentStopGrace); err != nil {
		return nil, fmt.Errorf("stopping %s: %w", component, err)
	}
	return func() (int, error) {
		logFile, err := os.OpenFile(filepath.Join(c.WorkDir(), "logs", component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, fmt.Errorf("restarting %s: %w", component, err)
		}
		defer logFile.Close() // the child holds its own descriptor
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = env, dir
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// Like kwokctl's components it outlives this process; Delete stops it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("restarting %s: %w", component, err)
		}
		go func() { _ = cmd.Wait() }() // reap it when Delete stops it
		pidFile := filepath.Join(c.WorkDir(), "pids", component+".pid")
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return 0, fmt.Errorf("recording the PID of the restarted %s: %w", component, err)
		}
		return cmd.Process.Pid, nil
	}, nil
}

// commandOf reads a running process's command line, environment and working
// directory from /proc.
func commandOf(pid int) (argv, env []string, dir string, err error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil {
		return nil, nil, "", err
	}
	environ, err := os.ReadFile(filepath.Join(proc, "environ"))
	if err != nil {
		return nil, nil, "", err
	}
	dir, err = os.Readlink(filepath.Join(proc, "cwd"))
	if err != nil {
		return nil, nil, "", err
	}
	split := func(b []byte) []string {
		var out []string
		for _, s := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
			out = append(out, string(s))
		}
		return out
	}
	if argv = split(cmdline); len(argv) == 0 || argv[0] == "" {
		return nil, nil, "", fmt.Errorf("process %d has an empty command line", pid)
	}
	return argv, split(environ), dir, nil
}

// stopPid sends SIGTERM to a process that is not this one's child and waits
// until it has exited, killing it after grace.
func stopPid(ctx context.Context, pid int, grace time.Duration) error {
	gone := func(context.Context) (bool, error) { return pidAlive(pid) != nil, nil }
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if wait.PollUntilContextTimeout(ctx, pollInterval, grace, true, gone) == nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, pollInterval, time.Minute, true, gone)
}
