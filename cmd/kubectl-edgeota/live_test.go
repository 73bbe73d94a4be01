package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/internal/terminal"
	"github.com/edgeota/edgeota/rollout"
)

// update rewrites the golden frames in testdata/ from what the code draws
// now: go test ./cmd/kubectl-edgeota/ -run TestFrames -update (then read
// the diff).
var update = flag.Bool("update", false, "rewrite the golden frames in testdata/")

// frameCases are rollouts as the live view draws them, each at the widths
// that matter for it.
var frameCases = []struct {
	name        string
	annotations map[string]string
	widths      []int
}{
	{
		name: "in progress",
		annotations: merge(map[string]string{
			rollout.MaintenanceWindowAnnotation: "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00",
			rollout.MaxUnavailableAnnotation:    "2",
		}, statusOfValue(rollout.Status{Revision: 2, Hash: "h2", Updated: 4, Total: 9, InFlight: 1, Skipped: 1,
			Strategy:         rollout.StrategyAdvancedRollingUpdate,
			Proven:           &rollout.ProvenNodes{Answer: 3, Heartbeat: 1},
			WaitingForWindow: &rollout.TimedNodes{Count: 2, At: at(testNow.Add(3*time.Hour + 12*time.Minute + 5*time.Second))},
			Held:             &rollout.TimedNodes{Count: 1, At: at(testNow.Add(4*time.Hour + 42*time.Minute))}})),
		widths: []int{120, 80, 40, 12},
	},
	{
		name: "halted",
		annotations: statusOfValue(rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 6, Halted: true, Reason: "2 nodes failed (max-failed 2)",
			Failed:   rollout.FailedNodes{Count: 2, Nodes: []string{"edge-node-1", "edge-node-2"}, Reasons: map[string]string{"edge-node-1": "CrashLoopBackOff"}},
			InFlight: 1, Strategy: rollout.StrategyAdvancedRollingUpdate}),
		widths: []int{80},
	},
	{
		name: "failures below the brake, a node down, downloads",
		annotations: merge(map[string]string{rollout.MaxFailedAnnotation: "3", rollout.PreDownloadAnnotation: "true"},
			statusOfValue(rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 2000, InFlight: 200,
				Strategy:           rollout.StrategyAdvancedRollingUpdate,
				SettledUnavailable: &rollout.NodeList{Count: 1, Nodes: []string{"n1"}},
				Pulls:              &rollout.Pulls{InFlight: 2, Done: 1, Failed: 1, Waiting: 1},
				Reason:             "waiting for 1 settled node whose pod is unavailable",
				Failed:             rollout.FailedNodes{Count: 1, Nodes: []string{"n5"}, Reasons: map[string]string{"n5": "a reason\x1b[2Jwith an escape"}}})),
		widths: []int{100},
	},
	{
		name: "OTA offers, paused",
		annotations: statusOfValue(rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 6, HeldBack: 2, Paused: true, Reason: "edgeota.io/paused is true",
			Offered: &rollout.TimedNodes{Count: 3, At: at(testNow.Add(50*time.Hour + 59*time.Second))}, Strategy: rollout.StrategyOTA}),
		widths: []int{80},
	},
	{
		name:        "complete",
		annotations: statusOfValue(rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3, Proven: &rollout.ProvenNodes{Answer: 3}, Strategy: rollout.StrategyOTA}),
		widths:      []int{80},
	},
	{
		name:        "waiting for the controller",
		annotations: map[string]string{rollout.MaintenanceWindowAnnotation: "Sat 22:00-02:00"},
		widths:      []int{60},
	},
}

// statusOfValue is statusOf for a table built before any test runs.
func statusOfValue(s rollout.Status) map[string]string {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return map[string]string{rollout.RolloutStatusAnnotation: string(data)}
}

// TestFrames compares the live view's frames with the golden ones in
// testdata/, and checks that every line fits the terminal: one cell less
// than its width, so that no terminal wraps it.
func TestFrames(t *testing.T) {
	for _, c := range frameCases {
		for _, cols := range c.widths {
			name := strings.NewReplacer(" ", "-", ",", "").Replace(c.name) + "-" + strconv.Itoa(cols)
			t.Run(name, func(t *testing.T) {
				lines, _ := testFrame(t, c.annotations, cols, false)
				for _, line := range lines {
					if n := terminal.Cells(line); n > cols-1 {
						t.Errorf("got a line of %d cells on a terminal %d wide, want at most %d: %q", n, cols, cols-1, line)
					}
					if strings.ContainsAny(line, "\x1b\r\n\t") {
						t.Errorf("got a control character in %q, want none", line)
					}
				}
				golden(t, filepath.Join("testdata", "frames", name+".txt"), strings.Join(lines, "\n")+"\n")
			})
		}
	}
}

// testFrame is the frame of the fake cluster's DaemonSet with the
// annotations, at testNow in UTC, cols wide; ticking says whether it shows a
// countdown.
func testFrame(t *testing.T, annotations map[string]string, cols int, color bool) (lines []string, ticking bool) {
	t.Helper()
	ds := newDaemonSet(annotations)
	c := &cli{client: newCluster(ds), namespace: testNamespace, now: func() time.Time { return testNow }, zone: time.UTC}
	v, err := c.assess(t.Context(), ds)
	if err != nil {
		t.Fatal(err)
	}
	return c.frame(v, cols, color)
}

// golden compares got with the file, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("got the frame\n%s\nwant (%s)\n%s", got, path, want)
	}
}

// TestFrameColors: the glyphs of the bar and of each state's line are
// painted, the text is not, and a painted line still fits.
func TestFrameColors(t *testing.T) {
	annotations := frameCases[0].annotations
	plain, _ := testFrame(t, annotations, 80, false)
	painted, _ := testFrame(t, annotations, 80, true)
	sgr := regexp.MustCompile("\x1b\\[[0-9;]*m")
	if len(plain) != len(painted) {
		t.Fatalf("got %d lines painted, %d plain, want as many", len(painted), len(plain))
	}
	for i := range plain {
		if got := sgr.ReplaceAllString(painted[i], ""); got != plain[i] {
			t.Errorf("line %d: got %q without its colors, want %q", i, got, plain[i])
		}
	}
	if want := "\x1b[32m#\x1b[0m updated    4 of 9 nodes"; !contains(painted, want) {
		t.Errorf("got\n%s\nwant a line %q", strings.Join(painted, "\n"), want)
	}
	if want := "[\x1b[32m###"; !strings.HasPrefix(painted[1], want) {
		t.Errorf("got the bar %q, want it to start %q", painted[1], want)
	}
	narrow, _ := testFrame(t, annotations, 30, true)
	for _, line := range narrow {
		if n := terminal.Cells(line); n > 29 {
			t.Errorf("got a painted line of %d cells on a terminal 30 wide: %q", n, line)
		}
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestFrameTicks: a frame with a countdown says so, and the countdown
// follows the clock to the second; one without says it does not tick.
func TestFrameTicks(t *testing.T) {
	annotations := frameCases[0].annotations
	ds := newDaemonSet(annotations)
	now := testNow
	c := &cli{client: newCluster(ds), namespace: testNamespace, now: func() time.Time { return now }, zone: time.UTC}
	v, err := c.assess(t.Context(), ds)
	if err != nil {
		t.Fatal(err)
	}
	first, ticking := c.frame(v, 120, false)
	if !ticking {
		t.Errorf("got a frame that does not tick, want one that does: it shows a countdown")
	}
	now = now.Add(time.Second)
	second, _ := c.frame(v, 120, false)
	for i, frame := range [][]string{first, second} {
		if want := []string{": opens in 3h12m05s (", ": opens in 3h12m04s ("}[i]; !strings.Contains(strings.Join(frame, "\n"), want) {
			t.Errorf("got frame %d\n%s\nwant it to count down %s", i, strings.Join(frame, "\n"), want)
		}
	}
	if _, ticking := testFrame(t, frameCases[1].annotations, 80, false); ticking {
		t.Errorf("got a halted frame that ticks, want none: it shows no countdown")
	}
}

// TestSegments: the bar's segments add up to the nodes, whatever the
// overlaps between the status's counts.
func TestSegments(t *testing.T) {
	for _, c := range []struct {
		name   string
		status rollout.Status
		want   string // glyph:nodes, in the bar's order, zero ones left out
	}{
		{"disjoint", rollout.Status{Total: 10, Updated: 4, InFlight: 2, Skipped: 1, Failed: rollout.FailedNodes{Count: 1}},
			"#4 X1 >2 -1 .2"},
		{"an updated node offline is updated", rollout.Status{Total: 4, Updated: 4, Skipped: 1}, "#4"},
		{"down nodes are among the updated", rollout.Status{Total: 5, Updated: 3, SettledUnavailable: &rollout.NodeList{Count: 1}}, "#2 !1 .2"},
		{"held offers", rollout.Status{Total: 6, Updated: 1, Held: &rollout.TimedNodes{Count: 2}, Offered: &rollout.TimedNodes{Count: 5}}, "#1 h2 o3"},
		{"paused", rollout.Status{Total: 4, Updated: 1, HeldBack: 3, Paused: true}, "#1 =3"},
		{"paused, waiting for the window", rollout.Status{Total: 4, Updated: 1, HeldBack: 3, Paused: true, WaitingForWindow: &rollout.TimedNodes{Count: 3}}, "#1 =3"},
		{"a partition, the rest waiting", rollout.Status{Total: 6, HeldBack: 2, WaitingForWindow: &rollout.TimedNodes{Count: 4}}, "=2 w4"},
		{"failures no longer nodes", rollout.Status{Total: 2, Updated: 1, Failed: rollout.FailedNodes{Count: 5, Lost: 4}}, "#1 X1"},
	} {
		var got []string
		for _, s := range segments(&c.status) {
			if s.nodes > 0 {
				got = append(got, string(s.state.glyph)+strconv.Itoa(s.nodes))
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: got %q, want %q", c.name, strings.Join(got, " "), c.want)
		}
	}
}

// TestApportion: cells in proportion, every state with a node seen.
func TestApportion(t *testing.T) {
	for _, c := range []struct {
		nodes []int
		cells int
		want  []int
	}{
		{[]int{4, 1, 4}, 60, []int{27, 7, 26}},
		{[]int{1998, 1, 1}, 60, []int{58, 1, 1}},
		{[]int{0, 3, 0}, 10, []int{0, 10, 0}},
		{[]int{1, 1, 1, 1}, 2, []int{1, 1, 0, 0}},
		{[]int{5}, 0, []int{0}},
	} {
		segs := make([]segment, len(c.nodes))
		for i, n := range c.nodes {
			segs[i] = segment{&stateRest, n}
		}
		got := apportion(segs, c.cells)
		if strings.Join(intStrings(got), ",") != strings.Join(intStrings(c.want), ",") {
			t.Errorf("apportion(%v, %d): got %v, want %v", c.nodes, c.cells, got, c.want)
		}
	}
}

func intStrings(ns []int) []string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return s
}

// TestCountdown: to the second, in every range.
func TestCountdown(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:                           "in 5s",
		12*time.Minute + 5*time.Second:            "in 12m05s",
		3*time.Hour + 2*time.Minute + time.Second: "in 3h02m01s",
		50*time.Hour + 59*time.Second:             "in 2d2h00m59s",
		-90 * time.Second:                         "1m30s ago",
		0:                                         "in 0s",
	} {
		if got := countdownTo(d); got != want {
			t.Errorf("countdownTo(%s): got %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s", 45 * time.Minute: "45m", time.Hour + 30*time.Second: "1h0m30s"} {
		if got := span(d); got != want {
			t.Errorf("span(%s): got %q, want %q", d, got, want)
		}
	}
}
