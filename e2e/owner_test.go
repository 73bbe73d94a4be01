//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// newOwnerEnv is the owner's starting point: a one-node cluster with
// ota-controller, the node's agent (reading a new target within 100 ms) and
// an OTA DaemonSet whose pod is up to date (PodNeedUpgrade=False), with
// nothing offered yet.
func newOwnerEnv(t *testing.T) (*env, agent) {
	e := newEnv(t, 1)
	node := localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig)
	a := e.startAgent(node, e.cluster.Kubeconfig)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, node)
	return e, a
}

// TestOwnerView is the owner's view end to end on one node: a watcher sees
// the new version offered, with its images, as soon as the DaemonSet
// changes; `otactl upgrade --wait` follows the app to UPGRADED across the
// replacement of its pod; and on a version that crash-loops it fails naming
// CrashLoopBackOff while ListUpgrades says FAILED.
func TestOwnerView(t *testing.T) {
	t.Parallel()
	e, a := newOwnerEnv(t)
	node := a.node
	client := e.grpcClient(a)

	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	stream, err := client.WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if app := findApp(snap.GetApps()); snap.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT ||
		app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UP_TO_DATE || app.GetCurrentImages()["nginx"] != oldImage {
		t.Fatalf("got %v, want a snapshot with %s UP_TO_DATE on %s", snap, dsName, oldImage)
	}

	t.Run("watcher sees the new version offered", func(t *testing.T) {
		start := time.Now()
		e.setImage(newImage)
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			app := m.GetApp()
			if m.GetType() == edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT && app.GetDaemonSet() == dsName &&
				app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE && app.GetTargetImages()["nginx"] == newImage {
				t.Logf("UPGRADE_AVAILABLE with target %s seen %s after the image changed", newImage, time.Since(start).Round(time.Millisecond))
				return
			}
		}
	})

	t.Run("otactl upgrade --wait", func(t *testing.T) {
		out, code := e.otactl(a, "upgrade", e.ns+"/"+dsName, "--wait", "--timeout", "2m")
		if code != 0 || !strings.Contains(out, "UPGRADED") {
			t.Fatalf("got exit %d:\n%s\nwant 0 and UPGRADED", code, out)
		}
		pods, err := e.podsByNode(e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		if got := imageOf(pods[node]); got != newImage {
			t.Errorf("the pod on %s runs %s, want %s", node, got, newImage)
		}
		list, err := client.ListUpgrades(e.ctx(), &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if app := findApp(list.GetApps()); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED ||
			app.GetCurrentImages()["nginx"] != newImage || app.GetPod() != pods[node].Name {
			t.Errorf("ListUpgrades: got %v, want UPGRADED on %s with pod %s", app, newImage, pods[node].Name)
		}
	})

	t.Run("a crash-looping version fails", func(t *testing.T) {
		broken := localcluster.CrashLoopImages[0]
		e.setImage(broken)
		eventually(t, "the crash-looping version offered", func(ctx context.Context) (bool, string, error) {
			list, err := client.ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
			if err != nil {
				return false, "", err
			}
			app := findApp(list.GetApps())
			return app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE, app.String(), nil
		})
		out, code := e.otactl(a, "upgrade", e.ns+"/"+dsName, "--wait", "--timeout", "2m")
		if code != 1 || !strings.Contains(out, "CrashLoopBackOff") {
			t.Fatalf("got exit %d:\n%s\nwant 1 naming CrashLoopBackOff", code, out)
		}
		list, err := client.ListUpgrades(e.ctx(), &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if app := findApp(list.GetApps()); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED || app.GetReason() != "CrashLoopBackOff" {
			t.Errorf("ListUpgrades: got %v, want FAILED with reason CrashLoopBackOff", app)
		}
	})

	t.Run("otactl refuses an unknown app", func(t *testing.T) {
		out, code := e.otactl(a, "pull", e.ns+"/nope")
		if code != 6 || !strings.Contains(out, "no app") {
			t.Errorf("got exit %d:\n%s\nwant 6 and no app", code, out)
		}
	})
}

// findApp returns the test DaemonSet's app, or nil.
func findApp(apps []*edgeotav1.App) *edgeotav1.App {
	for _, a := range apps {
		if a.GetDaemonSet() == dsName {
			return a
		}
	}
	return nil
}

// otactl runs bin/otactl against the agent and returns its combined output
// and exit code.
func (e *env) otactl(a agent, args ...string) (string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.cluster.Tools.Path("otactl"), append([]string{"--server", a.addr}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	e.t.Fatal(fmt.Errorf("running otactl: %w", err))
	return "", -1
}

// TestTypeScriptSDK drives the agent with the TypeScript client generated
// from proto/ (sdk/ts, installed by `make sdk-ts`), run by Node.js: it lists
// the apps, watches until the new version is offered, and upgrades.
func TestTypeScriptSDK(t *testing.T) {
	t.Parallel()
	e, a := newOwnerEnv(t)
	app := e.ns + "/" + dsName

	if out := e.node("list", a.addr); !strings.Contains(out, `"daemonSet":"nginx"`) || !strings.Contains(out, "UPGRADE_PHASE_UP_TO_DATE") {
		t.Fatalf("list: got %s, want nginx UPGRADE_PHASE_UP_TO_DATE", out)
	}

	// The watch starts before the change and ends when it sees it.
	watch := exec.CommandContext(e.ctx(), "node", filepath.Join(e.root, "sdk", "ts", "example.js"), "watch", a.addr, app, "UPGRADE_AVAILABLE", newImage)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	watch.Stderr = &stderr
	if err := watch.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.Contains(lines.Text(), "UPGRADE_EVENT_TYPE_SNAPSHOT") {
		t.Fatalf("watch: got %q (%s), want the snapshot first", lines.Text(), stderr.String())
	}
	e.setImage(newImage)
	var last string
	for lines.Scan() {
		last = lines.Text()
	}
	if err := watch.Wait(); err != nil || !strings.Contains(last, "UPGRADE_PHASE_UPGRADE_AVAILABLE") || !strings.Contains(last, newImage) {
		t.Fatalf("watch: ended with %v (%s), last %s; want UPGRADE_AVAILABLE with %s", err, stderr.String(), last, newImage)
	}

	if out := e.node("upgrade", a.addr, app); !strings.Contains(out, "Start updating pod") {
		t.Fatalf("upgrade: got %s, want Start updating pod", out)
	}
	if out := e.node("watch", a.addr, app, "UPGRADED", newImage); !strings.Contains(out, newImage) {
		t.Errorf("watch until UPGRADED: got %s, want %s", out, newImage)
	}
}

// node runs sdk/ts/example.js with the arguments and returns its output,
// failing the test if it fails.
func (e *env) node(args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(e.root, "sdk", "ts", "example.js")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("node example.js %s: %v: %s (run `make sdk-ts` first)", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
