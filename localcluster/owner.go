package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A cluster's components are not its creator's children: kwokctl starts
// them in sessions of their own, so a creator that dies without deleting its
// cluster (a test binary's -timeout panic, a kill) leaves it running, five
// processes and a port each. So every cluster has an owner file naming the
// process that created it (its PID and start time, which a reused PID does
// not share), and SweepOrphans deletes the clusters whose owner is gone.

// ownerSuffix names a cluster's owner file, beside its kubeconfig in the
// work dir.
const ownerSuffix = ".owner"

// ownerPath is the cluster's owner file.
func (c *Cluster) ownerPath() string {
	return filepath.Join(c.workDir, c.Name+ownerSuffix)
}

// writeOwner records this process as the cluster's owner, before anything
// of the cluster is started.
func (c *Cluster) writeOwner() error {
	me, err := processIdentity(os.Getpid())
	if err != nil {
		return fmt.Errorf("reading this process's start time for the owner file of cluster %q: %w", c.Name, err)
	}
	if err := os.WriteFile(c.ownerPath(), []byte(me+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the owner file of cluster %q: %w", c.Name, err)
	}
	live.add(c)
	return nil
}

// processIdentity is a process's PID and start time (in clock ticks since
// boot, /proc/PID/stat's 22nd field), which together name one process.
func processIdentity(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start at field 3.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	const startTime = 22 - 3
	if len(fields) <= startTime {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	return strconv.Itoa(pid) + " " + fields[startTime], nil
}

// ownerAlive reports whether the process an owner file names still runs.
func ownerAlive(owner string) bool {
	pid, err := strconv.Atoi(strings.Fields(owner + " x")[0])
	if err != nil {
		return false
	}
	now, err := processIdentity(pid)
	return err == nil && now == strings.TrimSpace(owner)
}

// SweepOrphans deletes the clusters in root's work dir whose owner process
// is gone, and returns their names: what a test run that died left running.
// Clusters of live processes (another suite, `make run`, a bench) and
// clusters without an owner file are left alone.
func SweepOrphans(ctx context.Context, root string) ([]string, error) {
	workDir := filepath.Join(root, ".kwok")
	files, err := filepath.Glob(filepath.Join(workDir, "*"+ownerSuffix))
	if err != nil {
		return nil, err
	}
	var swept []string
	var errs []error
	for _, file := range files {
		owner, err := os.ReadFile(file)
		if err != nil || ownerAlive(string(owner)) {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ownerSuffix)
		c := newCluster(Options{Root: root, Name: name})
		if err := c.Delete(ctx); err != nil {
			errs = append(errs, fmt.Errorf("deleting the orphaned cluster %q: %w", name, err))
			continue
		}
		swept = append(swept, name)
	}
	return swept, errors.Join(errs...)
}

// DeleteOwned deletes every cluster this process created and has not
// deleted: a suite's last word, for clusters whose test did not get to
// delete its own.
func DeleteOwned(ctx context.Context) error {
	var errs []error
	for _, c := range live.all() {
		errs = append(errs, c.Delete(ctx))
	}
	return errors.Join(errs...)
}

// live are the clusters this process created and has not deleted.
var live liveClusters

type liveClusters struct {
	mu       sync.Mutex
	clusters map[string]*Cluster
}

func (l *liveClusters) add(c *Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clusters == nil {
		l.clusters = map[string]*Cluster{}
	}
	l.clusters[c.Name] = c
}

func (l *liveClusters) remove(c *Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clusters, c.Name)
}

func (l *liveClusters) all() []*Cluster {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*Cluster, 0, len(l.clusters))
	for _, c := range l.clusters {
		out = append(out, c)
	}
	return out
}
