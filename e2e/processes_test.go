//go:build e2e

package e2e

import (
	"net"
	"os"
	"path/filepath"

	"github.com/edgeota/edgeota/localcluster"
)

// startController runs bin/ota-controller with the kubeconfig, stopped when
// the test ends. extra adds flags.
func (e *env) startController(kubeconfig string, extra ...string) {
	e.t.Helper()
	args := append([]string{e.cluster.Tools.Path("ota-controller"),
		"--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, extra...)
	e.start("ota-controller", args...)
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
	port := freePort(e)
	a := agent{node: node, addr: net.JoinHostPort("127.0.0.1", port), stateDir: filepath.Join(e.logDir, "state-"+node)}
	args := append([]string{e.cluster.Tools.Path("ota-server"),
		"--kubeconfig", kubeconfig, "--node-name", node, "--port", port, "--state-dir", a.stateDir}, extra...)
	p := e.start("ota-server-"+node, args...)
	if err := p.WaitReady(e.t.Context(), "http://"+a.addr+"/readyz", waitTimeout); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// start runs a binary logging to the test's log dir and stops it at cleanup,
// failing the test if it had exited on its own meanwhile.
func (e *env) start(name string, argv ...string) *localcluster.Process {
	e.t.Helper()
	p, err := localcluster.StartProcess(name, filepath.Join(e.logDir, name+".log"), argv...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		select {
		case <-p.Done():
			e.t.Errorf("%s exited during the test: %v; see %s", name, p.Err(), p.LogPath)
		default:
		}
		if err := p.Stop(); err != nil {
			e.t.Error(err)
		}
	})
	return p
}

// freePort returns a loopback port nothing listens on right now.
func freePort(e *env) string {
	e.t.Helper()
	ports, err := localcluster.FreePorts(1)
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
