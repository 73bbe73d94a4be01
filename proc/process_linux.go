package proc

import "syscall"

// groupAttr puts the child in a process group of its own, which Stop signals
// as a whole, and kills it if this process dies first (even by SIGKILL), so
// that a crashed run leaves no binaries behind.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
