package measure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// CPUTime is the CPU time (user + system) the process pid has used so far,
// from /proc/PID/stat, at the kernel's 10 ms resolution.
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	d, err := ParseCPUTime(data)
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return d, nil
}

// ParseCPUTime reads utime + stime from the contents of a /proc/PID/stat.
func ParseCPUTime(stat []byte) (time.Duration, error) {
	// The command name, field 2, is in parentheses and may hold spaces and
	// parentheses itself; the fields after its last ')' are fixed.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("no command name in /proc stat")
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat has %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// Memory is a process's memory as /proc/PID/status reports it, in bytes.
type Memory struct {
	// RSS is the resident set size now (VmRSS).
	RSS int64
	// PeakRSS is the high-water resident set size (VmHWM): with a fresh
	// process per scenario, the scenario's peak.
	PeakRSS int64
	// AnonRSS is the anonymous part of RSS (RssAnon: heap, stacks); the rest
	// is file-backed, mostly the binary's own pages.
	AnonRSS int64
}

// ReadMemory reads the memory of process pid from /proc/PID/status.
func ReadMemory(pid int) (Memory, error) {
	return readProc(pid, "status", "memory", ParseMemory)
}

// ParseMemory reads VmRSS, VmHWM and RssAnon from a /proc/PID/status; each
// must be present.
func ParseMemory(status io.Reader) (Memory, error) {
	var m Memory
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.PeakRSS, "RssAnon": &m.AnonRSS}
	if err := parseKeyed(status, fields, " kB"); err != nil {
		return Memory{}, fmt.Errorf("/proc status: %w", err)
	}
	m.RSS, m.PeakRSS, m.AnonRSS = m.RSS<<10, m.PeakRSS<<10, m.AnonRSS<<10
	return m, nil
}

// readProc parses /proc/PID/NAME, naming what it reads in errors.
func readProc[T any](pid int, name, what string, parse func(io.Reader) (T, error)) (T, error) {
	var v T
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return v, fmt.Errorf("reading the %s of process %d: %w", what, pid, err)
	}
	defer f.Close()
	if v, err = parse(f); err != nil {
		return v, fmt.Errorf("reading the %s of process %d: %w", what, pid, err)
	}
	return v, nil
}

// parseKeyed reads "key: value" lines, storing the integer value (less unit)
// of each key of fields; each must be present.
func parseKeyed(r io.Reader, fields map[string]*int64, unit string) error {
	found := 0
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		dst := fields[key]
		if !ok || dst == nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), unit), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*dst = n
		found++
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	if found != len(fields) {
		return fmt.Errorf("found %d of the fields %v", found, slices.Sorted(maps.Keys(fields)))
	}
	return nil
}

// IO is a process's I/O so far as /proc/PID/io counts it.
type IO struct {
	// WriteCalls counts write system calls (syscw); WrittenBytes the bytes
	// they passed (wchar), cached or not.
	WriteCalls, WrittenBytes int64
	// StorageBytes is what the process caused to be sent to storage
	// (write_bytes), as the page cache writes back; 0 on file systems
	// without a backing device.
	StorageBytes int64
}

// ReadIO reads the I/O counters of process pid from /proc/PID/io, which
// only the process's owner (or root) may read.
func ReadIO(pid int) (IO, error) {
	return readProc(pid, "io", "I/O", ParseIO)
}

// ParseIO reads syscw, wchar and write_bytes from a /proc/PID/io; each must
// be present.
func ParseIO(r io.Reader) (IO, error) {
	var c IO
	if err := parseKeyed(r, map[string]*int64{"syscw": &c.WriteCalls, "wchar": &c.WrittenBytes, "write_bytes": &c.StorageBytes}, ""); err != nil {
		return IO{}, fmt.Errorf("/proc io: %w", err)
	}
	return c, nil
}

// Minus is the I/O since an earlier reading b.
func (a IO) Minus(b IO) IO {
	return IO{WriteCalls: a.WriteCalls - b.WriteCalls, WrittenBytes: a.WrittenBytes - b.WrittenBytes, StorageBytes: a.StorageBytes - b.StorageBytes}
}

// ReadEnviron reads the environment process pid started with, from
// /proc/PID/environ, which only the process's owner (or root) may read: what
// the Go runtime read its settings from (GOGC, GOMEMLIMIT).
func ReadEnviron(pid int) (map[string]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the environment of process %d: %w", pid, err)
	}
	return ParseEnviron(data), nil
}

// ParseEnviron reads a /proc/PID/environ: NAME=value entries, each ended by
// a NUL byte. An entry without '=' is ignored; a name set twice keeps its
// first value, as getenv reads it.
func ParseEnviron(data []byte) map[string]string {
	env := map[string]string{}
	for _, entry := range bytes.Split(data, []byte{0}) {
		name, value, ok := strings.Cut(string(entry), "=")
		if _, seen := env[name]; ok && !seen {
			env[name] = value
		}
	}
	return env
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages from
// /proc/loadavg, or "unknown": the report states it to date its figures.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}

// KernelRelease is the running kernel's release from
// /proc/sys/kernel/osrelease, or "unknown".
func KernelRelease() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}
