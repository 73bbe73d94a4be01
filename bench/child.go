package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edgeota/edgeota/proc"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// readyTimeout bounds the wait for a child to answer on its port.
const readyTimeout = time.Minute

// child is one of the binaries under measurement, run as a child process
// listening on a loopback port, with its CPU time and peak memory read from
// /proc so that every scenario's figures are its own.
type child struct {
	*proc.Process
	addr string // host:port it serves on
}

// cpu is the CPU time (user + system) the process has used so far.
func (c *child) cpu() (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Pid()))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of %s: %w", c.Name, err)
	}
	// The command name, field 2, may hold spaces; count fields after its ')'.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("reading the CPU time of %s: short /proc stat", c.Name)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading the CPU time of %s: %w", c.Name, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// peakRSS is the process's high-water resident set size (VmHWM), in bytes.
func (c *child) peakRSS() (int64, error) {
	return c.memory("VmHWM:")
}

// rss is the process's resident set size now (VmRSS), in bytes.
func (c *child) rss() (int64, error) {
	return c.memory("VmRSS:")
}

// memory reads a kB field of /proc/PID/status, in bytes.
func (c *child) memory(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of %s: %w", c.Name, err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading the memory of %s: %w", c.Name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("reading the memory of %s: no %s in /proc status: %w", c.Name, field, scanner.Err())
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

// waitServing waits until the child answers path with 200 and a body ready
// accepts, failing at once if the child exits.
func (c *child) waitServing(ctx context.Context, path string, ready func([]byte) bool) error {
	return c.WaitServing(ctx, "http://"+c.addr+path, readyTimeout, ready)
}
