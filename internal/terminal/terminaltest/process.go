package terminaltest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Process is a command run by a test on a pseudo-terminal, as a user runs
// it, or on pipes, its output collected.
type Process struct {
	t   testing.TB
	cmd *exec.Cmd
	// tty is the pseudo-terminal's controlling side; nil on pipes.
	tty *os.File

	// out is what the command wrote: on a terminal its standard output
	// and error, as the terminal got them; on pipes, its standard output.
	out lockedBuffer
	// errOut is its standard error, on pipes.
	errOut lockedBuffer

	// exited closes once the command exited and its output was all read;
	// code is then its exit code.
	exited chan struct{}
	code   int
}

// Start starts cmd on a new pseudo-terminal cols x rows, which is its
// controlling terminal: resizing it sends SIGWINCH, typing Ctrl-C SIGINT,
// Ctrl-Z SIGTSTP. The command is killed when the test ends, if it still
// runs.
func Start(t testing.TB, cmd *exec.Cmd, cols, rows uint16) *Process {
	t.Helper()
	p := &Process{t: t, cmd: cmd, exited: make(chan struct{})}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	p.tty = tty
	p.collect(tty) // until EIO, once the command exited
	return p
}

// StartOnPipes starts cmd with its standard output and error on pipes (no
// terminal), killed when the test ends if it still runs.
func StartOnPipes(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{t: t, cmd: cmd, exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &p.errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.collect(stdout) // until EOF
	return p
}

// collect reads the output until the command exits, then its exit code.
func (p *Process) collect(output io.Reader) {
	go func() {
		defer close(p.exited)
		_, _ = io.Copy(&p.out, output)
		err := p.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			p.code = exit.ExitCode()
		case err != nil:
			p.code = -1
		}
	}()
	p.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if p.tty != nil {
			p.tty.Close()
		}
	})
}

// Output is what the command wrote so far: on a terminal, all of it.
func (p *Process) Output() string { return p.out.String() }

// Stderr is what the command wrote to its standard error, on pipes.
func (p *Process) Stderr() string { return p.errOut.String() }

// Pid is the command's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Resize resizes the terminal, which sends the command SIGWINCH.
func (p *Process) Resize(cols, rows uint16) {
	p.t.Helper()
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		p.t.Fatal(err)
	}
}

// Type types keys on the terminal: "\x03" is Ctrl-C, "\x1a" Ctrl-Z.
func (p *Process) Type(keys string) {
	p.t.Helper()
	if _, err := p.tty.Write([]byte(keys)); err != nil {
		p.t.Fatal(err)
	}
}

// WaitFor waits until cond holds on the output so far, for a minute at most.
func (p *Process) WaitFor(what string, cond func(out string) bool) {
	p.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond(p.Output()) {
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s after a minute; output:\n%q", what, p.Output())
		}
		select {
		case <-p.exited:
			if !cond(p.Output()) {
				p.t.Fatalf("exited %d before %s; output:\n%q", p.code, what, p.Output())
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Wait waits, within at most, for the command's exit, and returns its code
// and output.
func (p *Process) Wait(within time.Duration) (code int, out string) {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		p.t.Fatalf("still running after %s; output:\n%q", within, p.Output())
	}
	return p.code, p.Output()
}

// lockedBuffer is a bytes.Buffer safe to read while a command writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
