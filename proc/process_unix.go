//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// terminate sends SIGTERM to the process group.
func (p *Process) terminate() error {
	return p.signalGroup(syscall.SIGTERM)
}

// kill sends SIGKILL to the process group.
func (p *Process) kill() error {
	return p.signalGroup(syscall.SIGKILL)
}

func (p *Process) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
