package proc

import (
	"errors"
	"os"
	"syscall"
)

// groupAttr starts the child in a process group of its own, so that a
// console's Ctrl-C does not reach it before this process decides to stop it.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// terminate kills the process: Windows has no SIGTERM to send.
func (p *Process) terminate() error {
	return p.kill()
}

// kill kills the process.
func (p *Process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
