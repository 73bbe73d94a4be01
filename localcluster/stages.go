package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
)

// stageFiles are the kwokctl configuration (loopback binding) and the KWOK
// stages of the local cluster. A kwokctl --config file with stages replaces all
// of kwokctl's default stages, so these hold the delay-free defaults (node
// initialize and heartbeat, pod ready, complete and delete) plus node-cut-off.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// writeConfig writes the kwokctl configuration and all stages into one
// multi-document YAML file at path.
func writeConfig(path string) error {
	names, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return fmt.Errorf("listing the embedded stages: %w", err)
	}
	var buf bytes.Buffer
	for _, name := range names {
		data, err := stageFiles.ReadFile(name)
		if err != nil {
			return fmt.Errorf("reading the embedded %s: %w", name, err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the kwokctl configuration: %w", err)
	}
	return nil
}
