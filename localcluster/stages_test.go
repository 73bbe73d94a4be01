package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigHoldsEveryStage: a kwokctl --config file replaces all default
// stages, so the written file must carry the pod stages as well as the node
// ones, and keep every component on loopback.
func TestConfigHoldsEveryStage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := writeConfig(path); err != nil {
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
		CutOffLabel,
	} {
		if !strings.Contains(config, want) {
			t.Errorf("the kwokctl configuration lacks %q", want)
		}
	}
}
