// Package memlimit gives the Go runtime a soft memory limit (GOMEMLIMIT)
// under its container's, as Prometheus's --auto-gomemlimit does. At Go's
// default GOGC=100 the collector lets the heap grow to about twice what is
// live before it collects, so a controller caching a large fleet meets its
// container's memory limit, and is OOM-killed, while half of its heap is
// garbage. With a soft limit a little under the container's, the collector
// works harder as the heap nears it instead: the limit then bounds what is
// live, not twice that.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// DefaultRatio is the share of the container's limit the runtime takes as
// its soft limit: the rest is for what the runtime does not count (the
// binary's pages, C and kernel memory) and for the collector to catch up.
const DefaultRatio = 0.9

// Set gives the runtime a soft memory limit of ratio times the memory limit
// of the process's cgroup, and returns it. It returns 0, having set nothing,
// when ratio is 0, when GOMEMLIMIT is set (the operator's word wins, and the
// runtime read it at start), or when the cgroup has no memory limit; err
// says why a limit could not be read.
func Set(ratio float64) (int64, error) { return set(ratio, "/") }

// set is Set reading the cgroup files under root.
func set(ratio float64, root string) (int64, error) {
	if err := ValidateRatio(ratio); err != nil {
		return 0, err
	}
	if ratio == 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := cgroupLimit(root)
	if err != nil || limit == 0 {
		return 0, err
	}
	soft := int64(float64(limit) * ratio)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// ValidateRatio refuses a ratio that is not a share: 0 (off) to 1.
func ValidateRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return fmt.Errorf("memory limit ratio %g is not between 0 (off) and 1", ratio)
	}
	return nil
}

// cgroupLimit returns the memory limit, in bytes, of the cgroup of the
// process, 0 when it has none (or the system has no cgroups), reading the
// files under root (/ but in tests): the unified hierarchy's memory.max
// (cgroup v2) when the memory controller is there, else the v1 memory
// controller's memory.limit_in_bytes.
func cgroupLimit(root string) (int64, error) {
	groups, err := readCgroups(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // no cgroups: not Linux, so not a container's process
	}
	if err != nil {
		return 0, err
	}
	mounts, err := readMounts(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return 0, err
	}
	if group, ok := groups[""]; ok {
		for _, m := range mounts {
			if dir, ok := m.dirOf(group); ok && m.fsType == "cgroup2" {
				if limit, err := readLimit(filepath.Join(root, dir, "memory.max")); !errors.Is(err, os.ErrNotExist) {
					return limit, err
				}
			}
		}
	}
	if group, ok := groups["memory"]; ok {
		for _, m := range mounts {
			if dir, ok := m.dirOf(group); ok && m.fsType == "cgroup" && m.has("memory") {
				return readLimit(filepath.Join(root, dir, "memory.limit_in_bytes"))
			}
		}
	}
	return 0, nil
}

// readCgroups reads /proc/self/cgroup: the process's cgroup in each
// hierarchy, by controller ("" for the unified hierarchy of cgroup v2).
func readCgroups(file string) (map[string]string, error) {
	groups := map[string]string{}
	err := eachLine(file, func(line string) error {
		// hierarchy-ID:controller-list:cgroup-path
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			return fmt.Errorf("%s: malformed line %q", file, line)
		}
		if fields[1] == "" {
			groups[""] = fields[2]
			return nil
		}
		for _, c := range strings.Split(fields[1], ",") {
			groups[c] = fields[2]
		}
		return nil
	})
	return groups, err
}

// mount is a cgroup file system mounted in the process's mount namespace.
type mount struct {
	// root is the cgroup the mount shows at point: "/", or a cgroup of its
	// own where the cgroup namespace is not private.
	root, point string
	fsType      string
	options     []string
}

// dirOf returns where the mount shows the cgroup group; false when it does
// not show it (the group lies outside the mount's root).
func (m mount) dirOf(group string) (string, bool) {
	g, r := path.Clean(group), path.Clean(m.root)
	switch {
	case r == "/":
		return path.Join(m.point, g), true
	case g == r:
		return m.point, true
	case strings.HasPrefix(g, r+"/"):
		return path.Join(m.point, g[len(r):]), true
	}
	return "", false
}

// has reports whether the mount's super options name option (a v1
// hierarchy names its controllers there).
func (m mount) has(option string) bool { return slices.Contains(m.options, option) }

// readMounts reads the cgroup mounts of /proc/self/mountinfo.
func readMounts(file string) ([]mount, error) {
	var mounts []mount
	err := eachLine(file, func(line string) error {
		// id parent major:minor root point options [optional...] - type source super-options
		before, after, ok := strings.Cut(line, " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			return fmt.Errorf("%s: malformed line %q", file, line)
		}
		if tail[0] == "cgroup" || tail[0] == "cgroup2" {
			mounts = append(mounts, mount{root: fields[3], point: fields[4], fsType: tail[0], options: strings.Split(tail[2], ",")})
		}
		return nil
	})
	return mounts, err
}

// readLimit reads a cgroup's memory limit file: bytes, or "max" (v2) or a
// value past any machine's memory (v1: the largest page-aligned int64) for
// none, returned as 0.
func readLimit(file string) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(s, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s: %q is not a memory limit", file, s)
	}
	if limit >= 1<<62 {
		return 0, nil
	}
	return limit, nil
}

// eachLine calls f with each line of file.
func eachLine(file string, f func(string) error) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			if err := f(line); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
