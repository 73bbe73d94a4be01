//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/internal/terminal/terminaltest"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// pluginBinary is the kubectl plugin, found by kubectl on PATH by its name.
const pluginBinary = "kubectl-edgeota"

// TestKubectlPlugin drives a rollout with `kubectl edgeota`, through
// bin/kubectl as a user would: pause holds a new template back and writes
// edgeota.io/paused alone, resume lets it roll, `rollout status --watch`
// follows it to completion (exit 0), on a pipe (text blocks) and on a
// terminal (the live view: a countdown ticking while paused, a resize, the
// last frame kept), and a crash-looping version to its halt (exit 1, naming
// the failed node).
func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	const nodes, budget = 4, 1
	e := brakeEnv(t, nodes, budget, 0, nil)
	if err := e.h.Tools.Check(pluginBinary, "kubectl"); err != nil {
		t.Fatal(err)
	}
	e.startController(e.cluster.Kubeconfig, "-v=2")
	first := e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })
	ds := "daemonset/" + dsName

	t.Run("status of a settled rollout", func(t *testing.T) {
		stdout, stderr, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns)
		want := fmt.Sprintf("daemonset %q successfully rolled out: revision %d (%s) on all %d nodes\n", dsName, first.Revision, first.Hash, nodes)
		if code != 0 || stdout != want {
			t.Errorf("got exit %d, stdout %q, stderr %q, want 0, %q", code, stdout, stderr, want)
		}
	})
	t.Run("an unknown DaemonSet", func(t *testing.T) {
		_, stderr, code := e.kubectlEdgeota("rollout", "status", "ds/nope", "-n", e.ns)
		if want := fmt.Sprintf("error: daemonset \"nope\" not found in namespace %q\n", e.ns); code != 6 || stderr != want {
			t.Errorf("got exit %d, stderr %q, want 6, %q", code, stderr, want)
		}
	})

	t.Run("pause", func(t *testing.T) {
		before := e.annotations()
		stdout, stderr, code := e.kubectlEdgeota("rollout", "pause", ds, "-n", e.ns)
		if want := "daemonset.apps/" + dsName + " paused\n"; code != 0 || stdout != want {
			t.Fatalf("got exit %d, stdout %q, stderr %q, want 0, %q", code, stdout, stderr, want)
		}
		want := maps.Clone(before)
		want[rollout.PausedAnnotation] = "true"
		if got := e.annotations(); !maps.Equal(got, want) {
			t.Errorf("got annotations %v after pause, want %v: %s alone added", got, want, rollout.PausedAnnotation)
		}
	})
	e.setImage(newImage)
	paused := e.waitRolloutStatus("the new revision paused", func(s *rollout.Status) bool {
		return s.Hash != first.Hash && s.Paused && s.HeldBack == nodes
	})
	t.Run("status of a paused rollout", func(t *testing.T) {
		stdout, stderr, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns)
		want := fmt.Sprintf("Waiting for daemonset %q rollout: paused (%s); 0 of %d nodes updated\n", dsName, rollout.PausedAnnotation, nodes)
		if code != 0 || !strings.HasPrefix(stdout, want) {
			t.Errorf("got exit %d, stdout %q, stderr %q, want 0 and first %q", code, stdout, stderr, want)
		}
		if n, err := e.nodesRunning(e.ctx(), oldImage); err != nil || n != nodes {
			t.Errorf("got %d nodes on %s (%v), want all %d while paused", n, oldImage, err, nodes)
		}
	})

	// On a terminal, the plugin draws the rollout live: it follows it from
	// the pause (with a window closed, a countdown to its opening) through
	// the resume to the end, in one frame redrawn in place, fitted to the
	// terminal as it narrows and widens again; the last frame stays.
	e.annotate(rollout.MaintenanceWindowAnnotation, utcWindow(time.Now().Add(time.Hour), time.Hour))
	e.waitRolloutStatus("the nodes waiting for the window", func(s *rollout.Status) bool {
		return s.Paused && s.WaitingForWindow != nil && s.WaitingForWindow.Count == nodes
	})
	const cols, narrow, rows = 100, 60, 30
	live := e.kubectlEdgeotaOnATerminal(cols, rows, "rollout", "status", ds, "-n", e.ns, "--watch", "--timeout", "2m")
	countdown := regexp.MustCompile(`opens in ([0-9dhm]+s) \(`)
	live.WaitFor("the countdown to tick", func(out string) bool {
		seen := map[string]bool{}
		for _, m := range countdown.FindAllStringSubmatch(out, -1) {
			seen[m[1]] = true
		}
		return len(seen) >= 2 && strings.HasSuffix(out, "\x1b[J")
	})
	ticking := len(live.Output())
	live.Resize(narrow, rows)
	live.WaitFor("a redraw at the narrower width", func(out string) bool { return strings.Contains(out[ticking:], clearScreen) })
	e.annotate(rollout.MaintenanceWindowAnnotation, nil)
	e.waitRolloutStatus("no node waiting for a window", func(s *rollout.Status) bool { return s.Paused && s.WaitingForWindow == nil })
	live.WaitFor("a frame without the countdown", func(out string) bool {
		return strings.HasSuffix(out, "\x1b[J") && !strings.Contains(out[max(strings.LastIndex(out, "\r\x1b["), 0):], "opens in ")
	})
	widened := len(live.Output())
	live.Resize(cols, rows)
	live.WaitFor("a redraw at the wider width", func(out string) bool { return len(out) > widened && strings.HasSuffix(out, "\x1b[J") })

	t.Run("resume, and follow to completion", func(t *testing.T) {
		before := e.annotations()
		stdout, stderr, code := e.kubectlEdgeota("rollout", "resume", ds, "-n", e.ns)
		if want := "daemonset.apps/" + dsName + " resumed\n"; code != 0 || stdout != want {
			t.Fatalf("got exit %d, stdout %q, stderr %q, want 0, %q", code, stdout, stderr, want)
		}
		want := maps.Clone(before)
		delete(want, rollout.PausedAnnotation)
		if got := e.annotations(); !maps.Equal(got, want) {
			t.Errorf("got annotations %v after resume, want %v: %s alone removed", got, want, rollout.PausedAnnotation)
		}
		stdout, stderr, code = e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns, "--watch", "--timeout", "2m")
		t.Logf("kubectl edgeota rollout status --watch:\n%s", stdout)
		done := fmt.Sprintf("daemonset %q successfully rolled out: revision %d (%s) on all %d nodes\n", dsName, paused.Revision, paused.Hash, nodes)
		if code != 0 || !strings.HasSuffix(stdout, done) {
			t.Fatalf("got exit %d, stdout:\n%s\nstderr: %s\nwant 0, ending %q", code, stdout, stderr, done)
		}
		if n, err := e.nodesRunning(e.ctx(), newImage); err != nil || n != nodes {
			t.Errorf("got %d nodes on %s (%v) once complete, want %d", n, newImage, err, nodes)
		}
	})
	t.Run("the live view on a terminal", func(t *testing.T) {
		code, out := live.Wait(3 * time.Minute)
		// The screen as the user saw it up to offset upTo: the frames
		// before the first one drawn at the narrower width (which cleared
		// the screen) at the first width, the ones after the widening at
		// the last.
		narrowed := ticking + strings.Index(out[ticking:], clearScreen)
		screenAt := func(upTo int) *terminaltest.Screen {
			screen := terminaltest.NewScreen(cols, rows)
			from := 0
			for _, resize := range []struct{ at, cols int }{{narrowed, narrow}, {widened, cols}} {
				if upTo <= resize.at {
					break
				}
				screen.Write(out[from:resize.at])
				screen.Resize(resize.cols)
				from = resize.at
			}
			screen.Write(out[from:upTo])
			return screen
		}
		done := fmt.Sprintf("daemonset %q successfully rolled out: revision %d (%s) on all %d nodes", dsName, paused.Revision, paused.Hash, nodes)
		last := strings.LastIndex(out[:strings.Index(out, "successfully rolled out")], "\r\x1b[")
		t.Logf("kubectl edgeota rollout status --watch on a terminal %d cells wide, paused, its nodes waiting for the window:\n%s\n"+
			"then the last frame before the end:\n%s", cols, strings.Join(screenAt(ticking).Lines(), "\n"), strings.Join(screenAt(last).Lines(), "\n"))
		screen := screenAt(len(out))
		for _, p := range screen.Problems() {
			t.Errorf("the screen got %s", p)
		}
		lines := screen.Lines()
		t.Logf("the screen at the end:\n%s", strings.Join(lines, "\n"))
		if code != 0 || len(lines) < 3 || lines[0] != done || !strings.HasPrefix(lines[1], "[####") || !strings.HasSuffix(lines[1], "]  100%") {
			t.Errorf("got exit %d, the screen\n%s\nwant 0, the last frame alone: %q, then a full bar", code, strings.Join(lines, "\n"), done)
		}
		for _, line := range append(lines, screen.Scrolled()...) {
			if strings.Contains(line, "Waiting for daemonset") {
				t.Errorf("got an earlier frame's headline left on the screen: %q", line)
			}
		}
		if !screen.CursorShown() || !strings.Contains(out, "\x1b[?25l") {
			t.Errorf("got the cursor shown %v at exit, hidden while drawing %v; want both", screen.CursorShown(), strings.Contains(out, "\x1b[?25l"))
		}
		if redraws := len(regexp.MustCompile(`\r\x1b\[\d+A`).FindAllString(out, -1)); redraws < 4 {
			t.Errorf("got %d redraws in place, want 4 at least (the countdown, the window gone, widened, the resume)", redraws)
		}
	})

	t.Run("follow to a halt", func(t *testing.T) {
		e.setImage(localcluster.CrashLoopImages[0])
		stdout, stderr, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns, "-w", "--timeout", "2m")
		t.Logf("kubectl edgeota rollout status --watch:\n%s", stdout)
		halted, err := e.rolloutStatus(e.ctx())
		if err != nil || halted == nil || !halted.Halted || len(halted.Failed.Nodes) != budget {
			t.Fatalf("got rollout status %+v (%v), want halted with %d failed node", halted, err, budget)
		}
		headline := fmt.Sprintf("daemonset %q rollout halted: %s\n", dsName, halted.Reason)
		if code != 1 || !strings.Contains(stdout, headline) || !strings.Contains(stdout, halted.Failed.Nodes[0]) || stderr != "error: "+headline {
			t.Errorf("got exit %d, stdout:\n%s\nstderr: %s\nwant 1, %q naming %s", code, stdout, stderr, headline, halted.Failed.Nodes[0])
		}
		if _, _, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns); code != 1 {
			t.Errorf("got exit %d without --watch, want 1 for a halted rollout", code)
		}
	})
}

// kubectlEdgeota runs `kubectl edgeota ARGS` with bin/kubectl, which finds
// the plugin on PATH, and $KUBECONFIG naming the scenario's cluster; it
// returns the plugin's output and exit code.
func (e *env) kubectlEdgeota(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.h.Tools.Path("kubectl"), append([]string{"edgeota"}, args...)...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+e.cluster.Kubeconfig,
		"PATH="+filepath.Dir(e.h.Tools.Path(pluginBinary))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	}
	e.t.Fatalf("running kubectl edgeota %s: %v", strings.Join(args, " "), err)
	return "", "", -1
}

// kubectlEdgeotaOnATerminal starts `kubectl edgeota ARGS` as kubectlEdgeota
// runs it, on a pseudo-terminal cols x rows (TERM=xterm, no colors), which
// is its controlling terminal: resizing it sends SIGWINCH.
func (e *env) kubectlEdgeotaOnATerminal(cols, rows uint16, args ...string) *terminaltest.Process {
	e.t.Helper()
	cmd := exec.Command(e.h.Tools.Path("kubectl"), append([]string{"edgeota"}, args...)...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+e.cluster.Kubeconfig, "TERM=xterm", "NO_COLOR=1",
		"PATH="+filepath.Dir(e.h.Tools.Path(pluginBinary))+string(os.PathListSeparator)+os.Getenv("PATH"))
	return terminaltest.Start(e.t, cmd, cols, rows)
}

// clearScreen is what the live view writes when the terminal narrowed under
// its frame: the cursor home, the screen erased.
const clearScreen = "\x1b[H\x1b[2J"

// annotations are the DaemonSet's annotations but the controller's rollout
// status, which it rewrites as the rollout goes.
func (e *env) annotations() map[string]string {
	e.t.Helper()
	ds, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Get(e.ctx(), dsName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	all := maps.Clone(ds.Annotations)
	delete(all, rollout.RolloutStatusAnnotation)
	return all
}
