//go:build !unix

package statedir

import "os"

// fileOwner reports no owner: files have no uid and gid outside unix, so
// there is no ownership to check or hand over.
func fileOwner(os.FileInfo) (uid, gid int, ok bool) {
	return 0, 0, false
}
