//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/proc"
)

// controllerProcess is a bin/ota-controller that the scenario may kill:
// unlike startController's, its death is part of the plot, not a failure.
// Its metrics are served on a loopback port of its own, so that each
// replica's counters can be read apart.
type controllerProcess struct {
	*proc.Process
	metricsAddr string // host:port
	killed      bool
}

// startKillableController runs bin/ota-controller alone (no leader
// election) with the kubeconfig and extra flags; see
// startKillableControllerWith.
func (e *env) startKillableController(name, kubeconfig string, extra ...string) *controllerProcess {
	e.t.Helper()
	return e.startKillableControllerWith(harness.ControllerOptions{Name: name, Kubeconfig: kubeconfig, Flags: extra})
}

// startKillableControllerWith runs bin/ota-controller as opts say, with its
// metrics on a free loopback port, waits until it serves them, and stops it
// when the test ends unless the test killed it.
func (e *env) startKillableControllerWith(opts harness.ControllerOptions) *controllerProcess {
	e.t.Helper()
	c := &controllerProcess{metricsAddr: net.JoinHostPort("127.0.0.1", freePort(e))}
	opts.MetricsAddr = c.metricsAddr
	p, err := e.h.StartController(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	c.Process = p
	e.t.Cleanup(func() {
		if c.killed {
			return
		}
		if err := c.Exited(); err != nil {
			e.t.Errorf("during the test: %v", err)
		}
		if err := e.h.Stop(p); err != nil {
			e.t.Error(err)
		}
	})
	if err := p.WaitReady(e.t.Context(), "http://"+c.metricsAddr+"/metrics", waitTimeout); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// kill kills the controller's process group, as an OOM kill or a node crash
// would: no Lease release, no draining of in-flight work.
func (e *env) kill(c *controllerProcess) {
	e.t.Helper()
	if err := c.Kill(); err != nil {
		e.t.Fatal(err)
	}
	c.killed = true
}

// stop stops the controller as a Deployment's rolling update or a node
// drain does (SIGTERM, SIGKILL after a grace), and waits for it to exit.
func (e *env) stop(c *controllerProcess) {
	e.t.Helper()
	if err := e.h.Stop(c.Process); err != nil {
		e.t.Fatal(err)
	}
	c.killed = true
}

// expectAlive fails the test if the controller has exited.
func (e *env) expectAlive(c *controllerProcess) {
	e.t.Helper()
	if err := c.Exited(); err != nil {
		e.t.Fatal(err)
	}
}

// metric scrapes the controller's /metrics and sums the samples of the
// series name (every label set): 0 when it has none, as for a counter never
// incremented.
func (c *controllerProcess) metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	code, body, err := do(req)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", c.Name, err)
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("scraping %s: %d %s", c.Name, code, body)
	}
	var sum float64
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{")) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("scraping %s: no value in %q", c.Name, line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("scraping %s: %q: %w", c.Name, line, err)
		}
		sum += v
	}
	return sum, nil
}

// mustMetric is metric, failing the test on error.
func (e *env) mustMetric(c *controllerProcess, name string) float64 {
	e.t.Helper()
	v, err := c.metric(e.ctx(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// startedLeading reports whether the controller's log says it started
// leading as identity (its Lease holderIdentity, hostname_uuid).
func (c *controllerProcess) startedLeading(identity string) (bool, error) {
	f, err := os.Open(c.LogPath)
	if err != nil {
		return false, err
	}
	defer f.Close()
	quoted := strconv.Quote(identity)
	for s := bufio.NewScanner(f); s.Scan(); {
		if line := s.Text(); strings.Contains(line, `"Started leading"`) && strings.Contains(line, quoted) {
			return true, nil
		}
	}
	return false, nil
}
