package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// stageFiles are the kwokctl configuration (loopback binding) and the KWOK
// stages of the local cluster. A kwokctl --config file with stages replaces all
// of kwokctl's default stages, so these hold the delay-free defaults (node
// initialize and heartbeat, pod ready, complete and delete) plus node-cut-off.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// heartbeatDelay is the node-heartbeat stage's delay as written in its file.
const heartbeatDelay = "    durationMilliseconds: 10000\n    jitterDurationMilliseconds: 15000\n"

// writeConfig writes the kwokctl configuration and all stages into one
// multi-document YAML file at path, with a node heartbeat every heartbeat to
// 1.5 × heartbeat (0: the stage's own 10-15 s).
func writeConfig(path string, heartbeat time.Duration) error {
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
		if name == "stages/node-heartbeat.yaml" && heartbeat > 0 {
			if !bytes.Contains(data, []byte(heartbeatDelay)) {
				return fmt.Errorf("the embedded %s lost its delay %q", name, heartbeatDelay)
			}
			data = bytes.Replace(data, []byte(heartbeatDelay), []byte(fmt.Sprintf(
				"    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n", heartbeat.Milliseconds(), heartbeat.Milliseconds()*3/2)), 1)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the kwokctl configuration: %w", err)
	}
	return nil
}
