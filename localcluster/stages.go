package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"regexp"
)

// stageFiles are the kwokctl configuration (loopback binding), kwok-controller's
// configuration and the KWOK stages of the local cluster. A kwokctl --config
// file with stages replaces all of kwokctl's default stages, so these hold the
// delay-free defaults (node initialize and heartbeat, pod ready, complete and
// delete) plus node-cut-off, pod-ready-again and the bad images' stages.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// heartbeatStage opens the node-heartbeat Stage's document, in the embedded
// file and in the configuration kwokctl writes for kwok-controller alike.
const heartbeatStage = "kind: Stage\nmetadata:\n  name: node-heartbeat\n"

// delayLines matches a stage's delay.
var delayLines = regexp.MustCompile(`(?m)^    durationMilliseconds: \d+\n    jitterDurationMilliseconds: \d+\n`)

// kwokctlConfigFile is the embedded KwokctlConfiguration, which writeConfig
// completes with kwok-controller's flags for the heartbeat.
const kwokctlConfigFile = "stages/kwok.yaml"

// writeConfig writes the kwokctl configuration and all stages into one
// multi-document YAML file at path, with the node-heartbeat stage's delay
// for heartbeat.
func writeConfig(path string, heartbeat Heartbeat) error {
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
		if name == kwokctlConfigFile {
			buf.WriteString(heartbeat.componentsPatch())
		}
	}
	config, err := withHeartbeat(buf.Bytes(), heartbeat)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, config, 0o644); err != nil {
		return fmt.Errorf("writing the kwokctl configuration: %w", err)
	}
	return nil
}

// withHeartbeat returns config, YAML documents holding the node-heartbeat
// Stage once, with that stage's delay set for heartbeat's status writes (see
// Heartbeat.statusDelay). The other documents are left as they are.
func withHeartbeat(config []byte, heartbeat Heartbeat) ([]byte, error) {
	minimum, maximum := heartbeat.statusDelay()
	delay := fmt.Sprintf("    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n", minimum.Milliseconds(), maximum.Milliseconds())
	docs := bytes.Split(config, []byte("\n---\n"))
	found := 0
	for i, doc := range docs {
		if !bytes.Contains(doc, []byte(heartbeatStage)) {
			continue
		}
		found++
		at := delayLines.FindIndex(doc)
		if at == nil {
			return nil, fmt.Errorf("the node-heartbeat stage has no delay to set")
		}
		docs[i] = bytes.Join([][]byte{doc[:at[0]], []byte(delay), doc[at[1]:]}, nil)
	}
	if found != 1 {
		return nil, fmt.Errorf("the configuration holds %d node-heartbeat stages, want 1", found)
	}
	return bytes.Join(docs, []byte("\n---\n")), nil
}
