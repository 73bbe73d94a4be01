package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it kills.
const stopGrace = 10 * time.Second

// Process is one of edgeota's binaries run as a child process in a process
// group of its own, its output written to a log file, so that it can be
// stopped with everything it started and its log read after a failure.
type Process struct {
	// Name names the process in errors.
	Name string
	// LogPath is the file receiving its standard output and error.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts argv[0] with the remaining arguments, logging to
// logPath (created with its directory, or truncated: one run, one log).
func StartProcess(name, logPath string, argv ...string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID, which is also its process group ID.
func (p *Process) Pid() int {
	return p.cmd.Process.Pid
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} {
	return p.done
}

// Err is how the process exited; valid once Done is closed.
func (p *Process) Err() error {
	return p.err
}

// Stop sends SIGTERM to the process group, and SIGKILL if it has not exited
// within stopGrace. It returns an error only if the process could not be
// stopped; how it exited is Err.
func (p *Process) Stop() error {
	pgid := -p.cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s: %w", p.Name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", p.Name, err)
	}
	<-p.done
	return nil
}
