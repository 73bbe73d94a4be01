package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Tools locates the binaries the local cluster and edgeota run from: the
// cluster's own (built by `make tools`) and edgeota's (built by `make build`),
// all in the checkout's bin/.
type Tools struct {
	// Dir is the directory holding the binaries.
	Dir string
}

// ClusterBinaries are the binaries kwokctl and the printed commands need.
var ClusterBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwokctl", "kubectl"}

// ToolsIn returns the Tools of the checkout at root.
func ToolsIn(root string) Tools {
	return Tools{Dir: filepath.Join(root, "bin")}
}

// Path returns the path of the named binary.
func (t Tools) Path(name string) string {
	return filepath.Join(t.Dir, name)
}

// Check fails, naming every one that is missing and how to build it, unless
// all the named binaries exist and are executable: a missing binary must stop
// a run with an answer, not a confusing exec error halfway through.
func (t Tools) Check(names ...string) error {
	var missing []error
	for _, name := range names {
		info, err := os.Stat(t.Path(name))
		switch {
		case err != nil:
			missing = append(missing, fmt.Errorf("%s: %w", t.Path(name), err))
		case info.Mode()&0o111 == 0:
			missing = append(missing, fmt.Errorf("%s is not executable", t.Path(name)))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("binaries missing (run `make tools build`): %w", errors.Join(missing...))
	}
	return nil
}
