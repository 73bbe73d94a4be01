package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// componentsTimeout bounds the wait for every component to listen: kwokctl
// only waits for the API server, and a component that failed to start (its
// port taken) never will.
const componentsTimeout = time.Minute

// waitComponents waits until every component's process is alive and
// listening, and fails as soon as one has exited.
func (c *Cluster) waitComponents(ctx context.Context) error {
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, componentsTimeout, true, func(context.Context) (bool, error) {
		for _, component := range Components {
			pid, err := c.pid(component)
			if err != nil {
				return false, err
			}
			if err := pidAlive(pid); err != nil {
				return false, fmt.Errorf("%s exited (see %s): %w", component, filepath.Join(c.WorkDir(), "logs", component+".log"), err)
			}
		}
		listeners, err := c.Listeners()
		if err != nil {
			return false, err
		}
		missing = slices.DeleteFunc(slices.Clone(Components), func(component string) bool { return len(listeners[component]) > 0 })
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the components of cluster %q to listen (not yet: %v): %w", c.Name, missing, err)
	}
	return nil
}

// PIDs are the components' process IDs, by name (Components): what a
// benchmark reads each one's CPU time by.
func (c *Cluster) PIDs() (map[string]int, error) {
	pids := make(map[string]int, len(Components))
	for _, component := range Components {
		pid, err := c.pid(component)
		if err != nil {
			return nil, err
		}
		pids[component] = pid
	}
	return pids, nil
}

// pid reads the component's PID file.
func (c *Cluster) pid(component string) (int, error) {
	data, err := os.ReadFile(filepath.Join(c.WorkDir(), "pids", component+".pid"))
	if err != nil {
		return 0, fmt.Errorf("reading the PID of %s: %w", component, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("reading the PID of %s: %w", component, err)
	}
	return pid, nil
}

// pidAlive fails unless the process runs (a zombie has exited).
func pidAlive(pid int) error {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return fmt.Errorf("process %d is gone: %w", pid, err)
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
		return fmt.Errorf("process %d has exited", pid)
	}
	return nil
}
