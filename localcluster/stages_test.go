package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestConfigHoldsEveryStage: a kwokctl --config file replaces all default
// stages, so the written file must carry the pod stages as well as the node
// ones, and keep every component on loopback.
func TestConfigHoldsEveryStage(t *testing.T) {
	raw := readConfig(t, Heartbeat{})
	config := string(raw)
	// etcd's peer port, written into the options (not a document of its
	// own, nor a key kwokctl would ignore).
	options, _, _ := unstructured.NestedMap(configDocs(t, raw)["KwokctlConfiguration/"], "options")
	if got := options["etcdPeerPort"]; got != float64(23456) {
		t.Errorf("options.etcdPeerPort: got %v, want 23456", got)
	}
	for _, want := range []string{
		"kind: KwokctlConfiguration", "bindAddress: 127.0.0.1",
		"kind: KwokConfiguration", "nodeLeaseParallelism: 16",
		"name: node-initialize", "name: node-heartbeat", "name: node-cut-off",
		"name: pod-ready", "name: pod-complete", "name: pod-delete", "name: pod-ready-again",
		"name: pod-crashloop", "name: pod-never-ready", "name: pod-pull-fail",
		"name: pod-restart-in-place", "name: pod-kill-in-place", "name: pod-start-in-place",
		CutOffLabel, RestartAnnotation,
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
	// The kubelet's part of an upgrade in place restarts a patched
	// container into each bad image's failure, by the same lists.
	for _, file := range []string{"pod-restart-in-place.yaml", "pod-start-in-place.yaml"} {
		stage := read(file)
		for _, images := range [][]string{CrashLoopImages, NeverReadyImages, PullFailImages} {
			for _, image := range images {
				if !strings.Contains(stage, `"`+image+`"`) {
					t.Errorf("%s does not name %s", file, image)
				}
			}
		}
	}
}

// readConfig is writeConfig's file for heartbeat, without image pulls.
func readConfig(t *testing.T, heartbeat Heartbeat) []byte {
	t.Helper()
	return readConfigWith(t, heartbeat, false)
}

// readConfigWith is writeConfig's file for heartbeat and pulls.
func readConfigWith(t *testing.T, heartbeat Heartbeat, pulls bool) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := writeConfig(path, heartbeat, pulls, "23456"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// configDocs decodes a configuration's YAML documents by kind and name
// ("Stage/node-heartbeat", "KwokctlConfiguration/").
func configDocs(t *testing.T, config []byte) map[string]map[string]any {
	t.Helper()
	docs := map[string]map[string]any{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(config), 4096)
	for {
		var doc map[string]any
		err := decoder.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("decoding the configuration: %v", err)
		}
		if doc == nil {
			continue
		}
		name, _, _ := unstructured.NestedString(doc, "metadata", "name")
		docs[fmt.Sprint(doc["kind"])+"/"+name] = doc
	}
}

// stageDelay is a stage's delay in milliseconds, least and most.
func stageDelay(t *testing.T, docs map[string]map[string]any, stage string) (minimum, maximum int64) {
	t.Helper()
	millis := func(field string) int64 {
		v, _, _ := unstructured.NestedFieldNoCopy(docs["Stage/"+stage], "spec", "delay", field)
		n, _ := v.(float64) // JSON's numbers
		return int64(n)
	}
	return millis("durationMilliseconds"), millis("jitterDurationMilliseconds")
}

// kwokControllerFlags are the kwok-controller flags the kwokctl
// configuration patches in, as name=value, with "!" after the value for those
// that override kwokctl's own.
func kwokControllerFlags(t *testing.T, docs map[string]map[string]any) []string {
	t.Helper()
	patches, _, _ := unstructured.NestedSlice(docs["KwokctlConfiguration/"], "componentsPatches")
	var flags []string
	for _, p := range patches {
		patch := p.(map[string]any)
		if patch["name"] != "kwok-controller" {
			t.Errorf("a components patch for %v, want kwok-controller's only", patch["name"])
			continue
		}
		args, _, _ := unstructured.NestedSlice(patch, "extraArgs")
		for _, a := range args {
			arg := a.(map[string]any)
			flag := fmt.Sprintf("%v=%v", arg["key"], arg["value"])
			if arg["override"] == true {
				flag += "!"
			}
			flags = append(flags, flag)
		}
	}
	return flags
}

// TestEmbeddedHeartbeatIsTheDefault: the node-heartbeat stage's file holds
// the default interval's delay, so that the default configuration is the
// file as it is.
func TestEmbeddedHeartbeatIsTheDefault(t *testing.T) {
	data, err := stageFiles.ReadFile("stages/node-heartbeat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readConfig(t, Heartbeat{}), data) {
		t.Errorf("the default configuration changed the node-heartbeat stage's file")
	}
	docs := configDocs(t, readConfig(t, Heartbeat{}))
	if lo, hi := stageDelay(t, docs, "node-heartbeat"); lo != 10000 || hi != 15000 {
		t.Errorf("default node-heartbeat delay: got %d-%d ms, want 10000-15000", lo, hi)
	}
}

// TestConfigHeartbeat: each heartbeat sets the node-heartbeat stage's delay
// and kwok-controller's flags, and nothing else.
func TestConfigHeartbeat(t *testing.T) {
	statusFlags := []string{"node-lease-duration-seconds=0!", "manage-all-nodes=true!"}
	for _, tc := range []struct {
		heartbeat Heartbeat
		lo, hi    int64
		flags     []string
		period    time.Duration
	}{
		{Heartbeat{}, 10000, 15000, statusFlags, 15 * time.Second},
		{Heartbeat{Interval: 2 * time.Second}, 2000, 3000, statusFlags, 3 * time.Second},
		{Heartbeat{Leases: true}, 300000, 310000, []string{
			"node-lease-duration-seconds=40!", "manage-all-nodes=false!", "manage-nodes-with-label-selector=" + CutOffLabel + "!=true," + joiningLabel + "!=true",
		}, 10400 * time.Millisecond},
	} {
		docs := configDocs(t, readConfig(t, tc.heartbeat))
		if lo, hi := stageDelay(t, docs, "node-heartbeat"); lo != tc.lo || hi != tc.hi {
			t.Errorf("%+v: node-heartbeat delay %d-%d ms, want %d-%d", tc.heartbeat, lo, hi, tc.lo, tc.hi)
		}
		if got := kwokControllerFlags(t, docs); !slices.Equal(got, tc.flags) {
			t.Errorf("%+v: kwok-controller flags %q, want %q", tc.heartbeat, got, tc.flags)
		}
		if got := tc.heartbeat.Period(); got != tc.period {
			t.Errorf("%+v: period %s, want %s", tc.heartbeat, got, tc.period)
		}
		// Every other stage keeps the delay of its file (none but the
		// heartbeat's has one).
		for key := range docs {
			if name, ok := strings.CutPrefix(key, "Stage/"); ok && name != "node-heartbeat" {
				if lo, hi := stageDelay(t, docs, name); lo != 0 || hi != 0 {
					t.Errorf("%+v: stage %s got a delay %d-%d ms", tc.heartbeat, name, lo, hi)
				}
			}
		}
	}
}

// TestHeartbeatValidate: a status interval with Leases, or a negative one,
// is refused.
func TestHeartbeatValidate(t *testing.T) {
	for _, h := range []Heartbeat{{}, {Interval: time.Second}, {Leases: true}} {
		if err := h.Validate(); err != nil {
			t.Errorf("%+v: %v", h, err)
		}
	}
	for _, h := range []Heartbeat{{Leases: true, Interval: time.Second}, {Interval: -time.Second}} {
		if err := h.Validate(); err == nil {
			t.Errorf("%+v: got nil, want an error", h)
		}
	}
}

// TestWithHeartbeatRestoresTheDefault: the runtime change
// (Cluster.SetHeartbeat) turns one heartbeat's kwok-controller configuration
// into another's, the default included, and refuses a configuration without
// the stage.
func TestWithHeartbeatRestoresTheDefault(t *testing.T) {
	// kwokctl saves the stages, not its own configuration's patches, for
	// kwok-controller: compare the stages.
	stages := func(config []byte) []byte {
		docs := bytes.Split(config, []byte("\n---\n"))
		return bytes.Join(slices.DeleteFunc(docs, func(doc []byte) bool { return !bytes.Contains(doc, []byte("kind: Stage\n")) }), []byte("\n---\n"))
	}
	fast, slow, leases := Heartbeat{Interval: 2 * time.Second}, Heartbeat{}, Heartbeat{Leases: true}
	for _, tc := range []struct{ from, to Heartbeat }{
		{fast, slow}, {slow, fast}, {slow, leases}, {leases, fast},
	} {
		got, err := withHeartbeat(stages(readConfig(t, tc.from)), tc.to)
		if err != nil {
			t.Fatalf("%+v to %+v: %v", tc.from, tc.to, err)
		}
		if want := stages(readConfig(t, tc.to)); !bytes.Equal(got, want) {
			t.Errorf("%+v to %+v: got stages that differ from writeConfig's", tc.from, tc.to)
		}
	}
	if _, err := withHeartbeat([]byte("kind: Stage\nmetadata:\n  name: pod-ready\n"), leases); err == nil {
		t.Errorf("a configuration without the node-heartbeat stage: got nil, want an error")
	}
}

// TestWithKwokFlags: a restart in the other mode replaces kwok-controller's
// flags for the heartbeat, kwokctl's own and the previous mode's, and keeps
// every other argument.
func TestWithKwokFlags(t *testing.T) {
	kwokctl := []string{"/bin/kwok", "--manage-all-nodes=true", "--kubeconfig=/k", "--node-lease-duration-seconds=40",
		"--node-lease-duration-seconds=0", "--manage-all-nodes=true", "--config=/c"}
	leases := withKwokFlags(kwokctl, Heartbeat{Leases: true})
	want := []string{"/bin/kwok", "--kubeconfig=/k", "--config=/c",
		"--node-lease-duration-seconds=40", "--manage-all-nodes=false", "--manage-nodes-with-label-selector=" + CutOffLabel + "!=true," + joiningLabel + "!=true"}
	if !slices.Equal(leases, want) {
		t.Errorf("to Leases: got %q, want %q", leases, want)
	}
	status := withKwokFlags(leases, Heartbeat{Interval: time.Second})
	want = []string{"/bin/kwok", "--kubeconfig=/k", "--config=/c", "--node-lease-duration-seconds=0", "--manage-all-nodes=true"}
	if !slices.Equal(status, want) {
		t.Errorf("back to status heartbeats: got %q, want %q", status, want)
	}
}

// TestPullGateOnTheStagesThatStartPods: with image pulls modelled, every pod
// stage that takes a Pending pod on selects PulledAnnotation, and no other
// stage does; the gate is all that changes, and without pulls the
// configuration is what it was.
func TestPullGateOnTheStagesThatStartPods(t *testing.T) {
	for _, heartbeat := range []Heartbeat{{}, {Leases: true}} {
		plain, gated := readConfigWith(t, heartbeat, false), readConfigWith(t, heartbeat, true)
		if bytes.Contains(plain, []byte(PulledAnnotation)) {
			t.Errorf("%+v: the configuration without image pulls names %s", heartbeat, PulledAnnotation)
		}
		if got := bytes.ReplaceAll(bytes.ReplaceAll(gated, []byte(pullGate), nil), []byte(inPlaceGate), nil); !bytes.Equal(got, plain) {
			t.Errorf("%+v: the configuration with image pulls differs by more than the gate", heartbeat)
		}
		var names, inPlace []string
		for key, doc := range configDocs(t, gated) {
			name, ok := strings.CutPrefix(key, "Stage/")
			if !ok {
				continue
			}
			if kind, _, _ := unstructured.NestedString(doc, "spec", "resourceRef", "kind"); kind != "Pod" {
				continue
			}
			exprs, _, _ := unstructured.NestedSlice(doc, "spec", "selector", "matchExpressions")
			startsPods, hasGate := false, false
			for _, e := range exprs {
				expr := e.(map[string]any)
				values := fmt.Sprint(expr["values"])
				switch expr["key"] {
				case ".status.phase":
					startsPods = expr["operator"] == "In" && values == "[Pending]"
				case `.metadata.annotations["` + PulledAnnotation + `"]`:
					hasGate = expr["operator"] == "In" && values == "[true]"
				}
			}
			if startsPods != hasGate {
				t.Errorf("%+v: stage %s: takes Pending pods on: %t, gated on their pull: %t; want both or neither", heartbeat, name, startsPods, hasGate)
			}
			if hasGate {
				names = append(names, name)
			}
			for _, e := range exprs {
				if expr := e.(map[string]any); strings.Contains(fmt.Sprint(expr["key"]), "(.metadata.generation | tostring)") {
					inPlace = append(inPlace, name)
				}
			}
		}
		slices.Sort(names)
		if want := slices.Sorted(slices.Values(pullGatedStages)); !slices.Equal(names, want) {
			t.Errorf("%+v: got gated stages %q, want %q", heartbeat, names, want)
		}
		slices.Sort(inPlace)
		if want := slices.Sorted(slices.Values(inPlaceGatedStages)); !slices.Equal(inPlace, want) {
			t.Errorf("%+v: got stages gated on the pull of a patched pod %q, want %q", heartbeat, inPlace, want)
		}
	}
	if _, err := withPullGate([]byte("kind: Stage\nmetadata:\n  name: pod-ready\n")); err == nil {
		t.Errorf("a configuration without the stages to gate: got nil, want an error")
	}
}
