//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/proc"
)

// startController runs bin/ota-controller alone (no leader election) with
// the kubeconfig, stopped when the test ends. extra adds flags.
func (e *env) startController(kubeconfig string, extra ...string) {
	e.t.Helper()
	e.startControllerWith(harness.ControllerOptions{Kubeconfig: kubeconfig, Flags: extra})
}

// processLog reads the log of the process e's harness started as name.
func processLog(t *testing.T, e *env, name string) string {
	t.Helper()
	log, err := os.ReadFile(e.h.LogPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(log)
}

// startControllerWith runs bin/ota-controller as opts say, stopped when the
// test ends.
func (e *env) startControllerWith(opts harness.ControllerOptions) {
	e.t.Helper()
	p, err := e.h.StartController(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.stopAtCleanup(p)
}

// agent is a running bin/ota-server.
type agent struct {
	node string
	addr string // host:port
	// stateDir is its --state-dir, in the test's log dir unless extra flags
	// named another.
	stateDir string
}

// startAgent runs bin/ota-server for the node on a free loopback port with the
// kubeconfig and a state directory of its own in the test's log dir, waits
// until it serves a view of its pods, and stops it when the test ends. extra
// adds flags (a later flag wins, so extra can name another --state-dir).
func (e *env) startAgent(node, kubeconfig string, extra ...string) agent {
	e.t.Helper()
	stateDir := filepath.Join(e.logDir, "state-"+node)
	a, err := e.h.StartAgent(e.t.Context(), harness.AgentOptions{Node: node, Kubeconfig: kubeconfig, StateDir: stateDir, Flags: extra})
	if a != nil {
		e.stopAtCleanup(a.Process)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return agent{node: a.Node, addr: a.Addr, stateDir: stateDir}
}

// stopAtCleanup stops p when the test ends, failing the test if it had
// exited on its own meanwhile.
func (e *env) stopAtCleanup(p *proc.Process) {
	e.t.Cleanup(func() {
		if err := p.Exited(); err != nil {
			e.t.Errorf("during the test: %v", err)
		}
		if err := e.h.Stop(p); err != nil {
			e.t.Error(err)
		}
	})
}

// freePort returns a loopback port nothing listens on right now.
func freePort(e *env) string {
	e.t.Helper()
	ports, err := proc.FreePorts(1)
	if err != nil {
		e.t.Fatal(err)
	}
	return ports[0]
}

// writeKubeconfig writes a kubeconfig into the test's log dir (see
// localcluster.Cluster.WriteKubeconfig) and returns its path.
func (e *env) writeKubeconfig(name, server, token string) string {
	e.t.Helper()
	path := filepath.Join(e.logDir, name+".kubeconfig")
	if err := e.cluster.WriteKubeconfig(path, server, token); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// proxiedKubeconfig starts a proxy in front of the API server, closed when
// the test ends, and returns it with a kubeconfig that reaches the API
// server through it: one agent's link, to cut as a dead zone cuts it.
func (e *env) proxiedKubeconfig() (*harness.Proxy, string) {
	e.t.Helper()
	proxy, server := e.proxyTo()
	return proxy, e.writeKubeconfig("agent-via-proxy", server, "")
}

// agentBehindProxy runs the node's agent with its link to the API server
// through a proxy (harness.Proxy) that the test cuts and restores while its
// own client keeps the cluster, and with --apiserver-timeout apiTimeout so
// that calls over a cut link fail within it. The agent is restartable
// (startRestartableAgent), as a dead zone often outlasts a power cycle; the
// proxy is closed when the test ends, after the agent is stopped.
func (e *env) agentBehindProxy(node string, apiTimeout time.Duration) (*restartableAgent, *harness.Proxy) {
	e.t.Helper()
	proxy, kubeconfig := e.proxiedKubeconfig()
	return e.startRestartableAgent(node, kubeconfig, "--apiserver-timeout", apiTimeout.String()), proxy
}
