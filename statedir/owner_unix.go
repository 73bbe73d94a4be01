//go:build unix

package statedir

import (
	"os"
	"syscall"
)

// fileOwner returns the file's owning user and group.
func fileOwner(info os.FileInfo) (uid, gid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
