package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"regexp"
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

// heartbeatStage opens the node-heartbeat Stage's document, in the embedded
// file and in the configuration kwokctl writes for kwok-controller alike.
const heartbeatStage = "kind: Stage\nmetadata:\n  name: node-heartbeat\n"

// delayLines matches a stage's delay.
var delayLines = regexp.MustCompile(`(?m)^    durationMilliseconds: \d+\n    jitterDurationMilliseconds: \d+\n`)

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
		buf.WriteString("---\n")
		buf.Write(data)
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
// Stage once, with that stage's delay set for a heartbeat every heartbeat to
// 1.5 × heartbeat (0: the stage's own 10-15 s, heartbeatDelay). The other
// documents are left as they are.
func withHeartbeat(config []byte, heartbeat time.Duration) ([]byte, error) {
	delay := heartbeatDelay
	if heartbeat > 0 {
		delay = fmt.Sprintf("    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n", heartbeat.Milliseconds(), heartbeat.Milliseconds()*3/2)
	}
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
