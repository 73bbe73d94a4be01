package localcluster

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
)

// stageFiles are the kwokctl configuration (loopback binding), kwok-controller's
// configuration and the KWOK stages of the local cluster. A kwokctl --config
// file with stages replaces all of kwokctl's default stages, so these hold the
// delay-free defaults (node initialize and heartbeat, pod ready, complete and
// delete) plus node-cut-off, pod-ready-again, the bad images' stages and the
// kubelet's part of an upgrade in place (pod-restart-in-place, or
// pod-kill-in-place then pod-start-in-place).
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// heartbeatStage opens the node-heartbeat Stage's document, in the embedded
// file and in the configuration kwokctl writes for kwok-controller alike.
const heartbeatStage = "kind: Stage\nmetadata:\n  name: node-heartbeat\n"

// delayLines matches a stage's delay.
var delayLines = regexp.MustCompile(`(?m)^    durationMilliseconds: \d+\n    jitterDurationMilliseconds: \d+\n`)

// kwokctlConfigFile is the embedded KwokctlConfiguration, which writeConfig
// completes with etcd's peer port (its options are the file's last lines)
// and kwok-controller's flags for the heartbeat.
const kwokctlConfigFile = "stages/kwok.yaml"

// writeConfig writes the kwokctl configuration and all stages into one
// multi-document YAML file at path, with the node-heartbeat stage's delay
// for heartbeat, the stages that start a pod gated on its pull when pulls
// says image pulls are modelled (withPullGate), and etcd's peer port: the
// one port kwokctl would otherwise choose itself, by a scan from 32767 down
// that clusters created side by side race for.
func writeConfig(path string, heartbeat Heartbeat, pulls bool, etcdPeerPort string) error {
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
			fmt.Fprintf(&buf, "  etcdPeerPort: %s\n", etcdPeerPort)
			buf.WriteString(heartbeat.componentsPatch())
		}
	}
	config, err := withHeartbeat(buf.Bytes(), heartbeat)
	if err != nil {
		return err
	}
	if pulls {
		if config, err = withPullGate(config); err != nil {
			return err
		}
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

// pullGatedStages are the pod stages that start a pod: each takes a Pending
// pod on, as a kubelet starts its containers once their images are there.
// With image pulls modelled (ImagePulls) each also selects PulledAnnotation,
// which the pull simulator sets once the pod's node holds its images: until
// then no stage starts the pod. The stages of running pods (pod-complete,
// pod-ready-again) and pod-delete need no gate: a pod gets there only once
// started, or deleted.
var pullGatedStages = []string{"pod-ready", "pod-crashloop", "pod-never-ready", "pod-pull-fail"}

// pullGate is the selector expression each of pullGatedStages gets, first
// among its matchExpressions.
const pullGate = "    - key: '.metadata.annotations[\"" + PulledAnnotation + "\"]'\n" +
	"      operator: 'In'\n" +
	"      values:\n" +
	"      - 'true'\n"

// inPlaceGatedStages are the pod stages that start the containers of a pod
// upgraded in place: with image pulls modelled each also selects
// PulledAnnotation naming the pod's generation, which the pull simulator
// sets once the node holds the patched images (inPlaceGate).
var inPlaceGatedStages = []string{"pod-restart-in-place", "pod-start-in-place"}

// inPlaceGate is the selector expression each of inPlaceGatedStages gets.
const inPlaceGate = "    - key: '.metadata.annotations[\"" + PulledAnnotation + "\"] == (.metadata.generation | tostring)'\n" +
	"      operator: 'In'\n" +
	"      values:\n" +
	"      - 'true'\n"

// stageNames matches a Stage's name in its document.
var stageNames = regexp.MustCompile(`(?m)^kind: Stage\nmetadata:\n  name: (\S+)\n`)

// selectorStart opens a stage's selector expressions.
const selectorStart = "  selector:\n    matchExpressions:\n"

// withPullGate returns config, YAML documents, with pullGate added to the
// selector of each of pullGatedStages and inPlaceGate to each of
// inPlaceGatedStages, which it must hold once each.
func withPullGate(config []byte) ([]byte, error) {
	docs := bytes.Split(config, []byte("\n---\n"))
	gated := map[string]int{}
	for i, doc := range docs {
		m := stageNames.FindSubmatch(doc)
		if m == nil {
			continue
		}
		name := string(m[1])
		gate := pullGate
		switch {
		case slices.Contains(pullGatedStages, name):
		case slices.Contains(inPlaceGatedStages, name):
			gate = inPlaceGate
		default:
			continue
		}
		gated[name]++
		at := bytes.Index(doc, []byte(selectorStart))
		if at < 0 {
			return nil, fmt.Errorf("stage %s has no selector expressions to gate on image pulls", name)
		}
		at += len(selectorStart)
		docs[i] = bytes.Join([][]byte{doc[:at], []byte(gate), doc[at:]}, nil)
	}
	for _, name := range slices.Concat(pullGatedStages, inPlaceGatedStages) {
		if gated[name] != 1 {
			return nil, fmt.Errorf("the configuration holds %d stages %s, want 1", gated[name], name)
		}
	}
	return bytes.Join(docs, []byte("\n---\n")), nil
}
