package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesTheDirectoryAgentOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "state")
	d, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	info, err := os.Stat(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != DirMode {
		t.Errorf("got mode %v, want %v", got, DirMode)
	}
}

func TestOpenNarrowsAWiderDirectory(t *testing.T) {
	path := t.TempDir()
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err != nil {
		t.Fatalf("Open: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != DirMode {
		t.Errorf("got mode %v, want %v", got, DirMode)
	}
}

func TestOpenRefusesWhatCannotHoldState(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	otherOwner := t.TempDir()
	if err := os.Chown(otherOwner, os.Geteuid()+1, os.Getegid()); err != nil {
		t.Logf("cannot chown as uid %d (%v): the other-owner case is covered when tests run as root", os.Geteuid(), err)
		otherOwner = ""
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"empty", "", "empty"},
		{"a file", file, "not a directory"},
		{"under a file", filepath.Join(file, "state"), "creating the state directory"},
		{"another owner", otherOwner, "is owned by uid"},
	} {
		if tc.name == "another owner" && tc.path == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestOpenRemovesLeftoverTemporaryFiles(t *testing.T) {
	path := t.TempDir()
	leftover := filepath.Join(path, tempPrefix+"pods.json-123")
	if err := os.WriteFile(leftover, []byte("half a wri"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v for the leftover, want it removed", err)
	}
}

func TestWriteFileRoundTripsWithFileMode(t *testing.T) {
	d := open(t)
	for _, content := range []string{"first", "second, longer than the first"} {
		if err := d.WriteFile("f", []byte(content)); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		got, err := d.ReadFile("f")
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		if string(got) != content {
			t.Errorf("got %q, want %q", got, content)
		}
	}
	info, err := os.Stat(filepath.Join(d.Path(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != FileMode {
		t.Errorf("got mode %v, want %v", got, FileMode)
	}
}

// TestCrashMidWriteLeavesThePreviousContent simulates a crash after the new
// content is written but before it is on the disk and renamed: the file keeps
// its previous content and no temporary file is left.
func TestCrashMidWriteLeavesThePreviousContent(t *testing.T) {
	d := open(t)
	if err := d.WriteFile("f", []byte("previous")); err != nil {
		t.Fatal(err)
	}
	d.syncFile = func(*os.File) error { return errors.New("power cut") }
	if err := d.WriteFile("f", []byte("next")); err == nil || !strings.Contains(err.Error(), "power cut") {
		t.Fatalf("got %v, want the simulated failure", err)
	}
	got, err := d.ReadFile("f")
	if err != nil || string(got) != "previous" {
		t.Errorf("got %q, %v, want %q", got, err, "previous")
	}
	entries, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("got %d entries, want only f", len(entries))
	}
}

func TestReadFileOfAMissingFileIsNotExist(t *testing.T) {
	if _, err := open(t).ReadFile("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestFileNamesStayInTheDirectory(t *testing.T) {
	d := open(t)
	for _, name := range []string{"", ".", "..", "../x", "a/b", tempPrefix + "x"} {
		if err := d.WriteFile(name, nil); err == nil {
			t.Errorf("WriteFile(%q): got nil, want an error", name)
		}
		if _, err := d.ReadFile(name); err == nil {
			t.Errorf("ReadFile(%q): got nil, want an error", name)
		}
	}
}

func TestRemove(t *testing.T) {
	d := open(t)
	if err := d.WriteFile("f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time it is already gone
		if err := d.Remove("f"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if _, err := d.ReadFile("f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
}

func TestPrepareCreatesAndHandsOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if err := Prepare(path, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if _, err := Open(path); err != nil {
		t.Errorf("Open after Prepare: %v", err)
	}
	// Handing it to another user needs CAP_CHOWN: the test runs it as root.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := Prepare(other, 65532, 65532); err != nil {
			t.Fatalf("Prepare for 65532: %v", err)
		}
		info, err := os.Stat(other)
		if err != nil {
			t.Fatal(err)
		}
		uid, gid, _ := fileOwner(info)
		if uid != 65532 || gid != 65532 || info.Mode().Perm() != DirMode {
			t.Errorf("got %d:%d %v, want 65532:65532 %v", uid, gid, info.Mode().Perm(), DirMode)
		}
		if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "owned by uid 65532") {
			t.Errorf("Open as root of 65532's directory: got %v, want a refusal naming the owner", err)
		}
	}
	if err := Prepare("relative", 0, 0); err == nil {
		t.Error("Prepare of a relative path: got nil, want an error")
	}
}

func open(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}
