package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigHoldsEveryStage: a kwokctl --config file replaces all default
// stages, so the written file must carry the pod stages as well as the node
// ones, and keep every component on loopback.
func TestConfigHoldsEveryStage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := writeConfig(path, 0); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	config := string(data)
	for _, want := range []string{
		"kind: KwokctlConfiguration", "bindAddress: 127.0.0.1",
		"name: node-initialize", "name: node-heartbeat", "name: node-cut-off",
		"name: pod-ready", "name: pod-complete", "name: pod-delete",
		"name: pod-crashloop", "name: pod-never-ready", "name: pod-pull-fail",
		CutOffLabel,
	} {
		if !strings.Contains(config, want) {
			t.Errorf("the kwokctl configuration lacks %q", want)
		}
	}
}

// TestBadImageStagesMatchTheirLists: each bad-image stage selects exactly its
// list's images, and pod-ready leaves all of them alone, so that a test using
// CrashLoopImages gets a crash loop and not a Ready pod.
func TestBadImageStagesMatchTheirLists(t *testing.T) {
	read := func(name string) string {
		data, err := stageFiles.ReadFile("stages/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	ready := read("pod-ready.yaml")
	for file, images := range map[string][]string{
		"pod-crashloop.yaml": CrashLoopImages, "pod-never-ready.yaml": NeverReadyImages, "pod-pull-fail.yaml": PullFailImages,
	} {
		stage := read(file)
		if got, want := strings.Count(stage, "      - 'edgeota.test/"), len(images); got != want {
			t.Errorf("%s selects %d images, want %d", file, got, want)
		}
		for _, image := range images {
			quoted := "'" + image + "'"
			if !strings.Contains(stage, quoted) {
				t.Errorf("%s does not select %s", file, image)
			}
			if !strings.Contains(ready, quoted) {
				t.Errorf("pod-ready.yaml does not exclude %s", image)
			}
		}
	}
}

// TestConfigHeartbeat: a heartbeat option rewrites the node-heartbeat stage's
// delay, and only it.
func TestConfigHeartbeat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := writeConfig(path, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "durationMilliseconds: 2000\n    jitterDurationMilliseconds: 3000\n"; !strings.Contains(string(data), want) {
		t.Errorf("the configuration lacks the heartbeat delay %q", want)
	}
	if strings.Contains(string(data), heartbeatDelay) {
		t.Errorf("the configuration still holds the default heartbeat delay")
	}
}

// TestWithHeartbeatRestoresTheDefault: the runtime change
// (Cluster.SetNodeHeartbeat) turns one heartbeat's configuration into
// another's, the default included, and refuses a configuration without the
// stage.
func TestWithHeartbeatRestoresTheDefault(t *testing.T) {
	dir := t.TempDir()
	config := func(heartbeat time.Duration) []byte {
		path := filepath.Join(dir, heartbeat.String()+".yaml")
		if err := writeConfig(path, heartbeat); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	fast, slow := config(2*time.Second), config(0)
	for _, tc := range []struct {
		name string
		from []byte
		to   time.Duration
		want []byte
	}{
		{"fast to default", fast, 0, slow},
		{"default to fast", slow, 2 * time.Second, fast},
	} {
		got, err := withHeartbeat(tc.from, tc.to)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != string(tc.want) {
			t.Errorf("%s: got a configuration that differs from writeConfig's for %s", tc.name, tc.to)
		}
	}
	if _, err := withHeartbeat([]byte("kind: Stage\nmetadata:\n  name: pod-ready\n"), time.Second); err == nil {
		t.Errorf("a configuration without the node-heartbeat stage: got nil, want an error")
	}
}
