package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/proc"
)

// readyTimeout bounds the wait for a child to answer on its port.
const readyTimeout = time.Minute

// child is one of the binaries under measurement, run as a child process
// listening on a loopback port, with its CPU time and memory read from /proc
// so that every scenario's figures are its own.
type child struct {
	*proc.Process
	addr string // host:port it serves on
}

// cpu is the CPU time (user + system) the process has used so far.
func (c *child) cpu() (time.Duration, error) {
	d, err := measure.CPUTime(c.Pid())
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.Name, err)
	}
	return d, nil
}

// memory is the process's memory now, and its peak so far.
func (c *child) memory() (measure.Memory, error) {
	m, err := measure.ReadMemory(c.Pid())
	if err != nil {
		return m, fmt.Errorf("%s: %w", c.Name, err)
	}
	return m, nil
}

// peakRSS is the process's high-water resident set size (VmHWM), in bytes.
func (c *child) peakRSS() (int64, error) {
	m, err := c.memory()
	return m.PeakRSS, err
}

// get fetches path from the child and returns the body of a 200 answer.
func (c *child) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// metrics scrapes the child's /metrics.
func (c *child) metrics(ctx context.Context) (measure.Metrics, error) {
	body, err := c.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", c.Name, err)
	}
	return measure.ParseMetrics(body)
}

// waitServing waits until the child answers path with 200 and a body ready
// accepts, failing at once if the child exits.
func (c *child) waitServing(ctx context.Context, path string, ready func([]byte) bool) error {
	return c.WaitServing(ctx, "http://"+c.addr+path, readyTimeout, ready)
}
