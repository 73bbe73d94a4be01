//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/internal/terminal/terminaltest"
	"github.com/edgeota/edgeota/rollout"
)

// The plugin as a process: the test binary runs itself as the plugin (see
// TestMain), against a fake cluster of its own, on a pseudo-terminal or a
// pipe. Each test sends the child the controller's next statuses; the child
// records the API requests the plugin made.
const (
	// childAnnotations, in a child's environment, makes it the plugin: the
	// JSON of its DaemonSet's annotations.
	childAnnotations = "EDGEOTA_TEST_PLUGIN_ANNOTATIONS"
	// childRequests names the file where the child writes the plugin's API
	// requests when it exits.
	childRequests = "EDGEOTA_TEST_PLUGIN_REQUESTS"
)

// step is what a test has its child do once the plugin watches: write a
// status as the controller would, or log a line as client-go would.
type step struct {
	Status *rollout.Status `json:"status,omitempty"`
	Log    string          `json:"log,omitempty"`
}

// request is an API request of the plugin's, as its child records it.
type request struct {
	At       time.Time `json:"at"`
	Verb     string    `json:"verb"`
	Resource string    `json:"resource"`
}

// child is the plugin as a process (main's process) against a fake cluster
// holding the DaemonSet with the annotations of its environment; steps come
// on file descriptor 3. It returns the exit code.
func child() int {
	var annotations map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(childAnnotations)), &annotations); err != nil {
		fmt.Fprintln(os.Stderr, "child: annotations:", err)
		return 100
	}
	client, watching := watchingCluster(newDaemonSet(annotations))
	var mu sync.Mutex
	var requests []request
	stepping := false // the steps' requests are not the plugin's
	record := func(a clienttesting.Action) {
		mu.Lock()
		defer mu.Unlock()
		if !stepping {
			requests = append(requests, request{time.Now(), a.GetVerb(), a.GetResource().Resource})
		}
	}
	setStepping := func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		stepping = on
	}
	client.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		record(a)
		return false, nil, nil
	})
	client.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		record(a)
		return false, nil, nil
	})
	go func() {
		<-watching
		steps := json.NewDecoder(os.NewFile(3, "steps"))
		for {
			var s step
			if err := steps.Decode(&s); err != nil {
				return
			}
			switch {
			case s.Status != nil:
				setStepping(true)
				if err := writeStatus(client, *s.Status); err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
				}
				setStepping(false)
			case s.Log != "":
				klog.Warning(s.Log)
			}
		}
	}()
	code := process(func(clientcmd.ClientConfig) (kubernetes.Interface, error) { return client, nil })
	mu.Lock()
	defer mu.Unlock()
	data, _ := json.Marshal(requests)
	if err := os.WriteFile(os.Getenv(childRequests), data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 100
	}
	return code
}

// running is a child running the plugin.
type running struct {
	*terminaltest.Process
	t     *testing.T
	steps *json.Encoder
	// requests names the file of the plugin's API requests.
	requests string
}

// startPlugin runs `rollout status ds/web --watch` (and extra) as a child,
// in UTC, with the environment env, against a DaemonSet with the
// annotations; on a pseudo-terminal of size cols x rows, or on pipes when
// cols is 0.
func startPlugin(t *testing.T, annotations map[string]string, env []string, cols, rows uint16, extra ...string) *running {
	t.Helper()
	encoded, err := json.Marshal(annotations)
	if err != nil {
		t.Fatal(err)
	}
	p := &running{t: t, requests: filepath.Join(t.TempDir(), "requests.json")}
	cmd := exec.Command(os.Args[0], append([]string{"rollout", "status", "ds/web", "--watch"}, extra...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC", "KUBECONFIG="+kubeconfigFile(t),
		childAnnotations+"="+string(encoded), childRequests+"="+p.requests)
	cmd.Env = append(cmd.Env, env...)
	stepsOut, stepsIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stepsIn.Close() })
	cmd.ExtraFiles = []*os.File{stepsOut}
	p.steps = json.NewEncoder(stepsIn)
	if cols > 0 {
		p.Process = terminaltest.Start(t, cmd, cols, rows)
	} else {
		p.Process = terminaltest.StartOnPipes(t, cmd)
	}
	stepsOut.Close()
	return p
}

// send has the child write the status, or log, once the plugin watches.
func (p *running) send(s step) {
	p.t.Helper()
	if err := p.steps.Encode(s); err != nil {
		p.t.Fatal(err)
	}
}

// requestsMade are the plugin's API requests, once it exited.
func (p *running) requestsMade() []request {
	p.t.Helper()
	data, err := os.ReadFile(p.requests)
	if err != nil {
		p.t.Fatal(err)
	}
	var rs []request
	if err := json.Unmarshal(data, &rs); err != nil {
		p.t.Fatal(err)
	}
	return rs
}

// statusAnnotations are the annotations of a DaemonSet with status s, and
// the others given.
func statusAnnotations(s rollout.Status, others ...map[string]string) map[string]string {
	return merge(append(others, statusOfValue(s))...)
}

// The statuses the process tests step through.
var (
	inProgress = rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 3, InFlight: 1, Strategy: rollout.StrategyOTA}
	complete   = rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3, Strategy: rollout.StrategyOTA}
	halted     = rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 3, Halted: true, Reason: "1 node failed (max-failed 1)",
		Failed: rollout.FailedNodes{Count: 1, Nodes: []string{"n3"}}, Strategy: rollout.StrategyOTA}
)

// frameOf is the live view's frame of the DaemonSet with the annotations,
// as this process renders it (at testNow: for frames without a countdown).
func frameOf(t *testing.T, annotations map[string]string, cols int) []string {
	t.Helper()
	lines, ticking := testFrame(t, annotations, cols, false)
	if ticking {
		t.Fatalf("frameOf renders frames without a countdown; got one with")
	}
	return lines
}

// TestLiveViewOnATerminal runs `rollout status --watch` on a
// pseudo-terminal: it redraws one frame in place, the cursor hidden; the
// countdown to the window ticks each second with no API request; a log line
// of client-go's goes above the frame; at the end the last frame stays, the
// only one on screen, with the cursor shown below it, and the exit code is
// the text view's.
func TestLiveViewOnATerminal(t *testing.T) {
	t.Parallel()
	opens := time.Now().Add(time.Hour).Truncate(time.Second)
	waiting := inProgress
	waiting.WaitingForWindow = &rollout.TimedNodes{Count: 1, At: at(opens)}
	window := map[string]string{rollout.MaintenanceWindowAnnotation: "daily 00:00-01:00"}
	const cols, rows = 72, 20
	p := startPlugin(t, statusAnnotations(waiting, window), []string{"TERM=xterm-256color", "NO_COLOR="}, cols, rows)

	// Between the second value of the countdown and its third, a whole
	// tick, the plugin watches already: no request is due.
	countdown := regexp.MustCompile(`opens in ([0-9dhm]+s) \(`)
	var ticked time.Time
	p.WaitFor("three values of the countdown", func(out string) bool {
		seen := map[string]bool{}
		for _, m := range countdown.FindAllStringSubmatch(out, -1) {
			seen[m[1]] = true
		}
		if len(seen) == 2 && ticked.IsZero() {
			ticked = time.Now()
		}
		return len(seen) >= 3
	})
	ticksEnd := time.Now()
	p.send(step{Log: "watch ended: EOF"})
	p.WaitFor("the log line", func(out string) bool { return strings.Contains(out, "watch ended: EOF") })
	p.send(step{Status: &complete})
	code, out := p.Wait(time.Minute)

	if code != exitcode.OK {
		t.Errorf("got exit %d, want 0 for a complete rollout", code)
	}
	for _, r := range p.requestsMade() {
		if r.At.After(ticked) && r.At.Before(ticksEnd) {
			t.Errorf("got a request %s %s while the countdown ticked, want none: the view ticks from the status it holds", r.Verb, r.Resource)
		}
	}
	for _, want := range []string{hideCursorSeq, "\x1b[32m#"} {
		if !strings.Contains(out, want) {
			t.Errorf("got no %q in the output, want the live view's escape codes", want)
		}
	}
	if n := len(regexp.MustCompile(`\r\x1b\[\d+A`).FindAllString(out, -1)); n < 3 {
		t.Errorf("got %d redraws in place (cursor moved up), want 3 at least: 2 ticks, the last frame", n)
	}
	screen := screenOf(t, out, cols, rows)
	want := append([]string{"W"}, frameOf(t, statusAnnotations(complete, window), cols)...)
	got := screen.Lines()
	if len(got) > 0 && strings.HasPrefix(got[0], "W") && strings.HasSuffix(got[0], "] watch ended: EOF") {
		got[0] = "W" // klog's header: its time and source line
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(screen.Scrolled()) > 0 {
		t.Errorf("got the screen\n%s\n(scrolled away: %q)\nwant the log line, then the last frame alone\n%s", strings.Join(got, "\n"), screen.Scrolled(), strings.Join(want, "\n"))
	}
	if !screen.CursorShown() {
		t.Errorf("got the cursor hidden at exit, want it shown")
	}
}

// TestLiveViewFollowsTheTerminal: the frame fits the terminal's new width
// once resized (SIGWINCH), without a change of the rollout; Ctrl-C leaves
// the last frame with the cursor shown and the exit code of an interrupted
// watch.
func TestLiveViewFollowsTheTerminal(t *testing.T) {
	t.Parallel()
	const cols, narrow, rows = 80, 40, 20
	annotations := statusAnnotations(inProgress)
	p := startPlugin(t, annotations, []string{"TERM=xterm", "NO_COLOR=1"}, cols, rows)
	wide := frameOf(t, annotations, cols)
	p.WaitFor("the first frame", func(out string) bool {
		return strings.Contains(out, wide[len(wide)-1]) && strings.HasSuffix(out, "\x1b[J")
	})
	drawn := len(p.Output())
	p.Resize(narrow, rows)
	p.WaitFor("a redraw", func(out string) bool { return strings.HasSuffix(out[drawn:], "\x1b[J") })
	resized := drawn + strings.Index(p.Output()[drawn:], "\x1b[H\x1b[2J")
	p.Type("\x03") // Ctrl-C
	code, out := p.Wait(time.Minute)

	if want := 1; code != want {
		t.Errorf("got exit %d after Ctrl-C, want %d as without a terminal", code, want)
	}
	if regexp.MustCompile("\x1b\\[[0-9;]*m").MatchString(out) {
		t.Errorf("got colors with NO_COLOR set, want none")
	}
	screen := terminaltest.NewScreen(cols, rows)
	screen.Write(out[:resized])
	screen.Resize(narrow)
	screen.Write(out[resized:])
	checkScreen(t, screen)
	want := append(frameOf(t, annotations, narrow), "error: interrupted: context canceled")
	if got := screen.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got the screen\n%s\nwant the frame at %d cells, then the error\n%s", strings.Join(got, "\n"), narrow, strings.Join(want, "\n"))
	}
	if !screen.CursorShown() {
		t.Errorf("got the cursor hidden at exit, want it shown")
	}
}

// TestLiveViewSuspended: Ctrl-Z shows the cursor before the plugin stops;
// continued, it hides it again and draws a new frame below what the
// terminal showed meanwhile.
func TestLiveViewSuspended(t *testing.T) {
	t.Parallel()
	const cols, rows = 80, 30
	annotations := statusAnnotations(inProgress)
	p := startPlugin(t, annotations, []string{"TERM=xterm", "NO_COLOR=1"}, cols, rows)
	frame := frameOf(t, annotations, cols)
	p.WaitFor("the first frame", func(out string) bool {
		return strings.Contains(out, frame[len(frame)-1]) && strings.HasSuffix(out, "\x1b[J")
	})
	p.Type("\x1a") // Ctrl-Z
	p.WaitFor("the cursor shown", func(out string) bool { return strings.Contains(out, showCursorSeq) })
	deadline := time.Now().Add(time.Minute)
	for state(t, p.Pid()) != "T" {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin did not stop after Ctrl-Z; state %s", state(t, p.Pid()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := len(p.Output())
	if err := syscall.Kill(p.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.WaitFor("a new frame", func(out string) bool { return strings.Contains(out[stopped:], frame[len(frame)-1]) })
	if !strings.Contains(p.Output()[stopped:], hideCursorSeq) {
		t.Errorf("got no cursor hidden again once continued: %q", p.Output()[stopped:])
	}
	p.send(step{Status: &complete})
	if code, _ := p.Wait(time.Minute); code != exitcode.OK {
		t.Errorf("got exit %d, want 0", code)
	}
	screen := screenOf(t, p.Output(), cols, rows)
	// No shell wrote below the frame while it was stopped: the new frame
	// starts on the line of the ^Z the terminal echoed, below the first.
	got := strings.Join(screen.Lines(), "\n")
	if want := strings.Join(append(frame, frameOf(t, statusAnnotations(complete), cols)...), "\n"); got != want {
		t.Errorf("got the screen\n%s\nwant the frame before Ctrl-Z, then the last one below it\n%s", got, want)
	}
	if !screen.CursorShown() {
		t.Errorf("got the cursor hidden at exit, want it shown")
	}
}

// TestMain runs the plugin as a process (see child) when the test binary is
// started as one, and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(childAnnotations) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// state is the process's state letter (R, S, T, ...).
func state(t *testing.T, pid int) string {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return fields[0]
}

// TestWatchWithoutATerminal: on a pipe, and on a terminal with TERM=dumb,
// --watch prints the text blocks as it always did, with no escape code, and
// ends with the same exit codes.
func TestWatchWithoutATerminal(t *testing.T) {
	t.Parallel()
	const inProgressLines = "Waiting for daemonset \"web\" rollout to finish: 1 of 3 nodes updated\n" +
		"  revision   2 (h2), OTA\n" +
		"  updated    1 of 3 nodes\n" +
		"  in flight  1\n"
	for _, c := range []struct {
		name      string
		then      *rollout.Status
		extra     []string
		code      int
		stdout    string
		stderr    string
		dumb      bool
		waitFirst bool
	}{
		{name: "complete, on a pipe", then: &complete, code: exitcode.OK,
			stdout: inProgressLines + "daemonset \"web\" successfully rolled out: revision 2 (h2) on all 3 nodes\n"},
		{name: "halted, on a pipe", then: &halted, code: exitcode.Failed,
			stdout: inProgressLines + "daemonset \"web\" rollout halted: 1 node failed (max-failed 1)\n" +
				"  revision   2 (h2), OTA\n  updated    1 of 3 nodes\n  failed     1 node: n3\n",
			stderr: "error: daemonset \"web\" rollout halted: 1 node failed (max-failed 1)\n"},
		{name: "timeout, on a pipe", extra: []string{"--timeout", "500ms"}, code: exitcode.Timeout, stdout: inProgressLines,
			stderr: "error: timed out after 500ms; Waiting for daemonset \"web\" rollout to finish: 1 of 3 nodes updated\n"},
		{name: "complete, TERM=dumb on a terminal", then: &complete, code: exitcode.OK, dumb: true,
			stdout: inProgressLines + "daemonset \"web\" successfully rolled out: revision 2 (h2) on all 3 nodes\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := []string{"TERM=xterm"}
			var cols uint16
			if c.dumb {
				env, cols = []string{"TERM=dumb"}, 80
			}
			p := startPlugin(t, statusAnnotations(inProgress), env, cols, 24, c.extra...)
			if c.then != nil {
				p.WaitFor("the first block", func(out string) bool { return strings.Contains(out, "in flight  1") })
				p.send(step{Status: c.then})
			}
			code, out := p.Wait(time.Minute)
			stderr := p.Stderr()
			if c.dumb { // one stream, lines ended by the terminal's \r\n
				out = strings.ReplaceAll(out, "\r\n", "\n")
				out, stderr = strings.TrimSuffix(out, c.stderr), c.stderr
			}
			if code != c.code || out != c.stdout || stderr != c.stderr {
				t.Errorf("got exit %d, stdout:\n%q\nstderr: %q\nwant exit %d, stdout:\n%q\nstderr: %q", code, out, stderr, c.code, c.stdout, c.stderr)
			}
			if strings.Contains(out, "\x1b") {
				t.Errorf("got an escape code in %q, want none", out)
			}
		})
	}
}

// Escape sequences the tests look for.
const (
	hideCursorSeq = "\x1b[?25l"
	showCursorSeq = "\x1b[?25h"
)

// screenOf draws the output on a screen cols x rows, failing the test for
// what a live view must never do.
func screenOf(t *testing.T, out string, cols, rows int) *terminaltest.Screen {
	t.Helper()
	s := terminaltest.NewScreen(cols, rows)
	s.Write(out)
	checkScreen(t, s)
	return s
}

func checkScreen(t *testing.T, s *terminaltest.Screen) {
	t.Helper()
	for _, p := range s.Problems() {
		t.Errorf("the screen got %s", p)
	}
}
