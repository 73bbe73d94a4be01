package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestSweepOrphansDeletesOnlyClustersOfDeadOwners: a cluster whose owner
// file names a process that ended is deleted (here it has no components
// left, only its files); one owned by this live process, and one without an
// owner file, stay.
func TestSweepOrphansDeletesOnlyClustersOfDeadOwners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owner files read /proc: the local cluster needs Linux")
	}
	root := t.TempDir()
	work := filepath.Join(root, ".kwok")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	me, err := processIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A PID above any the kernel hands out (pid_max is at most 2^22).
	dead := "999999999 " + lastField(me)
	write("orphan.owner", dead+"\n")
	write("orphan.kubeconfig", "x")
	write("orphan.kwok.yaml", "x")
	write("mine.owner", me+"\n")
	write("mine.kubeconfig", "x")
	write("unowned.kubeconfig", "x")

	swept, err := SweepOrphans(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(swept, []string{"orphan"}) {
		t.Errorf("swept: got %v, want [orphan]", swept)
	}
	left, _ := filepath.Glob(filepath.Join(work, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	slices.Sort(left)
	if want := []string{"mine.kubeconfig", "mine.owner", "unowned.kubeconfig"}; !slices.Equal(left, want) {
		t.Errorf("files left: got %v, want %v", left, want)
	}
}

// TestOwnerAliveTellsAReusedPID: an owner file names a process by its PID
// and its start time, so a PID the kernel gave to a later process is not
// taken for the owner.
func TestOwnerAliveTellsAReusedPID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owner files read /proc: the local cluster needs Linux")
	}
	me, err := processIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !ownerAlive(me) {
		t.Errorf("ownerAlive(%q) of this very process: got false, want true", me)
	}
	pid := me[:len(me)-len(lastField(me))-1]
	if reused := pid + " 1"; ownerAlive(reused) {
		t.Errorf("ownerAlive(%q), this PID with another start time: got true, want false", reused)
	}
	if ownerAlive("not a pid") {
		t.Error("ownerAlive of a malformed owner file: got true, want false")
	}
}

// lastField is the text after the last space.
func lastField(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ' ' {
			return s[i+1:]
		}
	}
	return s
}
