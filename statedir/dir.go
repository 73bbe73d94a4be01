package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	// DirMode is the state directory's mode: only its owner may list, read or
	// write it. It holds pod specs and who asked for what.
	DirMode fs.FileMode = 0o700
	// FileMode is the mode of every file written in it.
	FileMode fs.FileMode = 0o600

	// tempPrefix starts the name of a file being written. A crash can leave
	// one behind; Open removes them.
	tempPrefix = ".tmp-"
)

// Dir is an open state directory.
type Dir struct {
	path string
	// syncFile flushes a written temporary file to the disk; tests replace it
	// to simulate a crash mid-write.
	syncFile func(*os.File) error
}

// Open returns the state directory at path, creating it (and its parents)
// with DirMode if it does not exist. It fails with an error that names the
// problem when path is not a directory, is owned by another user than the
// process's, or cannot be written; a directory the process owns with wider
// permissions is narrowed to DirMode. Temporary files left by a crash
// mid-write are removed.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("the state directory's path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	if err := os.MkdirAll(abs, DirMode); err != nil {
		return nil, fmt.Errorf("creating the state directory %s: %w", abs, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", abs, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("state directory %s is not a directory", abs)
	}
	if uid, _, ok := fileOwner(info); ok && uid != os.Geteuid() {
		return nil, fmt.Errorf("state directory %s is owned by uid %d, not by this process's uid %d: "+
			"chown it (ota-server prepare-state-dir does) or pick another --state-dir", abs, uid, os.Geteuid())
	}
	if info.Mode().Perm() != DirMode {
		if err := os.Chmod(abs, DirMode); err != nil {
			return nil, fmt.Errorf("narrowing the state directory %s to mode %v: %w", abs, DirMode, err)
		}
	}
	d := &Dir{path: abs, syncFile: (*os.File).Sync}
	if err := d.removeTemps(); err != nil {
		return nil, err
	}
	// Prove the directory writable now rather than on the first write.
	probe, err := os.CreateTemp(abs, tempPrefix+"probe-")
	if err != nil {
		return nil, fmt.Errorf("state directory %s is not writable: %w", abs, err)
	}
	_ = probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", abs, err)
	}
	return d, nil
}

// Prepare creates the state directory at path with DirMode if needed and
// hands it to uid:gid, and does nothing else. It is what a privileged init
// step runs (a hostPath is created owned by root) so that the agent, running
// as an unprivileged user on a read-only root filesystem, can then Open it.
// It needs only CAP_CHOWN: the mode is set while root still owns the
// directory, and a directory already handed over is left as it is (the
// agent narrows its mode itself). Files in it keep their owners.
func Prepare(path string, uid, gid int) error {
	if path == "" || !filepath.IsAbs(path) {
		return fmt.Errorf("the state directory's path %q must be absolute", path)
	}
	if uid < 0 || gid < 0 {
		return fmt.Errorf("uid %d and gid %d must not be negative", uid, gid)
	}
	if err := os.MkdirAll(path, DirMode); err != nil {
		return fmt.Errorf("creating the state directory %s: %w", path, err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", path, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("state directory %s is not a directory", path)
	}
	if owner, group, ok := fileOwner(info); ok && owner == uid && group == gid {
		return nil
	}
	if err := os.Chmod(path, DirMode); err != nil {
		return fmt.Errorf("setting the state directory %s to mode %v: %w", path, DirMode, err)
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		return fmt.Errorf("handing the state directory %s to %d:%d: %w", path, uid, gid, err)
	}
	return nil
}

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// WriteFile replaces the file name with data atomically: data goes to a
// temporary file in the same directory, which is flushed to the disk, renamed
// over name, and the directory flushed in turn, so that after a crash at any
// point name holds either its previous content or data. The file's mode is
// FileMode. On error the previous content is left as it was.
func (d *Dir) WriteFile(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.path, tempPrefix+name+"-")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already makes it 0600; Chmod states the promise.
	if err := tmp.Chmod(FileMode); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := d.syncFile(tmp); err != nil {
		return fmt.Errorf("flushing %s to the disk: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(d.path, name)); err != nil {
		return fmt.Errorf("replacing %s: %w", name, err)
	}
	committed = true
	return d.syncDir()
}

// ReadFile returns the content of the file name. A missing file is an error
// that satisfies errors.Is(err, fs.ErrNotExist).
func (d *Dir) ReadFile(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(d.path, name))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, nil
}

// Remove deletes the file name; a file already gone is not an error.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", name, err)
	}
	return d.syncDir()
}

// syncDir flushes the directory's entries, so that a rename or removal
// survives a power cut.
func (d *Dir) syncDir() error {
	dir, err := os.Open(d.path)
	if err != nil {
		return fmt.Errorf("flushing the state directory: %w", err)
	}
	defer func() { _ = dir.Close() }()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("flushing the state directory: %w", err)
	}
	return nil
}

// removeTemps deletes the temporary files a crash mid-write left behind.
func (d *Dir) removeTemps() error {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("reading the state directory %s: %w", d.path, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(d.path, e.Name())); err != nil {
				return fmt.Errorf("removing the leftover %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// checkName refuses anything but a plain file name of this directory: the
// names are the agent's own constants, and this keeps a mistake from writing
// elsewhere.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, os.PathSeparator) || strings.HasPrefix(name, tempPrefix) {
		return fmt.Errorf("%q is not a state file name", name)
	}
	return nil
}
