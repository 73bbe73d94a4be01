//go:build unix && !linux

package proc

import "syscall"

// groupAttr puts the child in a process group of its own, which Stop signals
// as a whole. Only Linux can also tie the child's life to this process's.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
