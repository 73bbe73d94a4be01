package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeRoot writes files (path relative to the root: content) under a
// temporary root, as a machine's /proc and /sys show them.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		file := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Mount lines as /proc/self/mountinfo shows them.
const (
	unifiedMount  = "30 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
	hybridMounts  = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	dockerV1Mount = "612 600 0:31 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
)

func TestReadsTheContainersLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"cgroup v2, a private cgroup namespace (a Kubernetes container)", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      unifiedMount,
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 268435456},
		{"cgroup v2, no limit", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"proc/self/mountinfo":      unifiedMount,
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"cgroup v2, the host's namespace: the process's own cgroup", map[string]string{
			"proc/self/cgroup":    "0::/kubepods.slice/pod1/ctr\n",
			"proc/self/mountinfo": unifiedMount,
			"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.max": "536870912\n",
		}, 536870912},
		{"cgroup v2, the root cgroup: no memory.max, no limit", map[string]string{
			"proc/self/cgroup":    "0::/\n",
			"proc/self/mountinfo": unifiedMount,
		}, 0},
		{"hybrid: the memory controller on v1", map[string]string{
			"proc/self/cgroup":    "4:memory:/process_api/be32\n0::/\n",
			"proc/self/mountinfo": hybridMounts,
			"sys/fs/cgroup/memory/process_api/be32/memory.limit_in_bytes": "1073741824\n",
		}, 1073741824},
		{"cgroup v1, no limit (the largest page-aligned int64)", map[string]string{
			"proc/self/cgroup":    "4:memory:/process_api/be32\n0::/\n",
			"proc/self/mountinfo": hybridMounts,
			"sys/fs/cgroup/memory/process_api/be32/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"cgroup v1, the container's cgroup mounted as the hierarchy's root", map[string]string{
			"proc/self/cgroup":                           "9:memory,hugetlb:/docker/abc\n",
			"proc/self/mountinfo":                        dockerV1Mount,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "134217728\n",
		}, 134217728},
		{"no cgroups at all (not Linux): no limit", map[string]string{}, 0},
		{"a cgroup outside the mount's root: not seen, no limit", map[string]string{
			"proc/self/cgroup":                           "9:memory:/other\n",
			"proc/self/mountinfo":                        dockerV1Mount,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "134217728\n",
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroupLimit(fakeRoot(t, tc.files))
			if err != nil {
				t.Fatalf("cgroupLimit: %v", err)
			}
			if got != tc.want {
				t.Errorf("got limit %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRefusesWhatIsNotALimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"a limit that is not a number", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": unifiedMount, "sys/fs/cgroup/memory.max": "lots\n",
		}, `"lots" is not a memory limit`},
		{"a negative limit", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": unifiedMount, "sys/fs/cgroup/memory.max": "-1\n",
		}, `"-1" is not a memory limit`},
		{"a malformed cgroup line", map[string]string{
			"proc/self/cgroup": "garbage\n", "proc/self/mountinfo": unifiedMount,
		}, `malformed line "garbage"`},
		{"a malformed mount line", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": "30 22 0:27\n",
		}, `malformed line "30 22 0:27"`},
		{"a cgroup but no mount table", map[string]string{"proc/self/cgroup": "0::/\n"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroupLimit(fakeRoot(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %d, %v; want an error saying %s", got, err, tc.want)
			}
		})
	}
}

func TestSetsTheRatioOfTheLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": unifiedMount, "sys/fs/cgroup/memory.max": "268435456\n",
	})
	got, err := set(DefaultRatio, root)
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	const want = 241591910 // 0.9 × 256 MiB, rounded down
	if got != want {
		t.Errorf("got soft limit %d, want %d", got, want)
	}
	if now := debug.SetMemoryLimit(-1); now != want {
		t.Errorf("got the runtime's limit %d, want %d", now, want)
	}
}

func TestLeavesTheLimitAlone(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": unifiedMount, "sys/fs/cgroup/memory.max": "268435456\n",
	})
	before := debug.SetMemoryLimit(-1)
	for _, tc := range []struct {
		name, env string
		ratio     float64
	}{
		{"ratio 0: off", "", 0},
		{"GOMEMLIMIT set: the operator's", "100MiB", DefaultRatio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			got, err := set(tc.ratio, root)
			if got != 0 || err != nil {
				t.Errorf("got %d, %v; want 0, nil", got, err)
			}
			if now := debug.SetMemoryLimit(-1); now != before {
				t.Errorf("got the runtime's limit %d, want it unchanged at %d", now, before)
			}
		})
	}
}

func TestRefusesARatioThatIsNotAShare(t *testing.T) {
	for _, ratio := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		if _, err := set(ratio, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not between 0 (off) and 1") {
			t.Errorf("ratio %g: got %v, want it refused", ratio, err)
		}
	}
	for _, ratio := range []float64{0, 0.5, 1} {
		if err := ValidateRatio(ratio); err != nil {
			t.Errorf("ratio %g: got %v, want it accepted", ratio, err)
		}
	}
}
