package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it kills.
const stopGrace = 10 * time.Second

// Process is a binary run as a child process in a process group of its own,
// its output written to a log file, so that it can be stopped with
// everything it started and its log read after a failure.
type Process struct {
	// Name names the process in errors.
	Name string
	// LogPath is the file receiving its standard output and error.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts argv[0] with the remaining arguments, logging to logPath
// (created with its directory, or truncated: one run, one log).
func Start(name, logPath string, argv ...string) (*Process, error) {
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
	cmd.SysProcAttr = groupAttr()
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

// Exited says how the process exited, naming its log, or nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; see %s", p.Name, p.err, p.LogPath)
	default:
		return nil
	}
}

// Stop asks the process group to terminate (SIGTERM), and kills it if the
// process has not exited within stopGrace. It returns an error only if the
// process could not be stopped; how it exited is Err.
func (p *Process) Stop() error {
	if err := p.signal("stopping", p.terminate); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	return p.Kill()
}

// Kill kills the process group at once, as an OOM kill or a crash would (no
// chance to clean up), and returns once the process has exited.
func (p *Process) Kill() error {
	if err := p.signal("killing", p.kill); err != nil {
		return err
	}
	<-p.done
	return nil
}

// signal calls send unless the process has exited: its PID may name another
// process by then.
func (p *Process) signal(doing string, send func() error) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := send(); err != nil {
		return fmt.Errorf("%s %s: %w", doing, p.Name, err)
	}
	return nil
}
