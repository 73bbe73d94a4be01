//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// TestOwnerSeesAFailedPull: the owner upgrades to a version whose image
// cannot be pulled (a KWOK stage keeps the new pod Pending in
// ImagePullBackOff). A pull error is transient on an edge link, so the
// upgrade fails only at the deadline (the agent's --upgrade-deadline here);
// then the watch stream (gRPC) and GET of the owner's view (REST) both say
// FAILED, with the container's own reason.
func TestOwnerSeesAFailedPull(t *testing.T) {
	t.Parallel()
	const deadline = 15 * time.Second
	e, node, a, next := newOwnerWatch(t, deadline)
	client := e.grpcClient(a)
	if app := next(); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UP_TO_DATE {
		t.Fatalf("snapshot: got %v, want %s UP_TO_DATE", app, dsName)
	}

	broken := localcluster.PullFailImages[0]
	e.setImage(broken)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)[node]
	for app := next(); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE; app = next() {
	}
	if _, err := client.Upgrade(e.ctx(), &edgeotav1.UpgradeRequest{Namespace: e.ns, Name: marked.Name}); err != nil {
		t.Fatalf("Upgrade %s: %v", marked.Name, err)
	}

	var seen []string
	start := time.Now()
	app := next()
	for ; app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED; app = next() {
		seen = append(seen, app.GetPhase().String()+"/"+app.GetReason())
	}
	if app.GetReason() != "ImagePullBackOff" || !strings.Contains(app.GetMessage(), "not available within "+deadline.String()) ||
		app.GetCurrentImages()["nginx"] != broken {
		t.Errorf("watch: got FAILED %q %q on %v, want reason ImagePullBackOff, the deadline, and the image %s", app.GetReason(), app.GetMessage(), app.GetCurrentImages(), broken)
	}
	if elapsed := time.Since(start); elapsed < deadline-2*time.Second {
		t.Errorf("FAILED after %s, want not before the %s deadline: a pull error is transient", elapsed, deadline)
	}
	t.Logf("watch: %v, then FAILED %s: %s", seen, app.GetReason(), app.GetMessage())

	// GET of the owner's view, as curl reads it.
	code, body, err := a.get(e.ctx(), "/edgeota.io/v1/upgrades")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /edgeota.io/v1/upgrades: %d %q, %v", code, body, err)
	}
	var list edgeotav1.ListUpgradesResponse
	if err := protojson.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	if got := findApp(list.GetApps()); got.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED || got.GetReason() != "ImagePullBackOff" {
		t.Errorf("GET: got %v, want FAILED with reason ImagePullBackOff", got)
	}
	if !strings.Contains(body, `"phase":"UPGRADE_PHASE_FAILED"`) {
		t.Errorf("GET: got %s, want the phase by its full name", body)
	}
}

// newOwnerWatch is the starting point of an owner who watches one node's
// upgrades over gRPC: a one-node cluster, the controller, the node's agent
// with an upgrade deadline of deadline, and an OTA DaemonSet whose pod is up
// to date. next returns the app's states on the watch, from its snapshot on;
// the watch ends with the test.
func newOwnerWatch(t *testing.T, deadline time.Duration) (e *env, node string, a agent, next func() *edgeotav1.App) {
	t.Helper()
	e = newEnv(t, 1)
	node = localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig)
	a = e.startAgent(node, e.cluster.Kubeconfig, "--upgrade-deadline", deadline.String())
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, node)
	ctx, cancel := context.WithCancel(e.ctx())
	t.Cleanup(cancel)
	stream, err := e.grpcClient(a).WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return e, node, a, appChanges(t, stream)
}

// appChanges returns a function that returns the next state of the test's
// app on a gRPC watch: from the snapshot, then from each upsert of it.
func appChanges(t *testing.T, stream grpc.ServerStreamingClient[edgeotav1.WatchUpgradesResponse]) func() *edgeotav1.App {
	return func() *edgeotav1.App {
		t.Helper()
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			switch {
			case m.GetType() == edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT && findApp(m.GetApps()) != nil:
				return findApp(m.GetApps())
			case m.GetType() == edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT && m.GetApp().GetDaemonSet() == dsName:
				return m.GetApp()
			}
		}
	}
}

// untilOffered reads the owner's watch (appChanges) until it shows the app
// offered image, and returns that change.
func untilOffered(next func() *edgeotav1.App, image string) *edgeotav1.App {
	for {
		if app := next(); app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE && app.GetTargetImages()["nginx"] == image {
			return app
		}
	}
}

// TestOwnerSeesAMissingReplacement: the owner upgrades while the node is
// tainted so that the DaemonSet cannot place the replacement there (a taint
// its pods do not tolerate). The watch says at once that the replacement is
// pending, naming the old pod, and FAILED at the deadline instead of
// UPGRADING until then; once the taint goes, the replacement comes, runs, and
// the app is UPGRADED.
func TestOwnerSeesAMissingReplacement(t *testing.T) {
	t.Parallel()
	const deadline = 10 * time.Second
	e, node, a, next := newOwnerWatch(t, deadline)
	client := e.grpcClient(a)

	e.setImage(newImage)
	old := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)[node]
	for app := next(); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE; app = next() {
	}
	e.hold(node, true)
	if _, err := client.Upgrade(e.ctx(), &edgeotav1.UpgradeRequest{Namespace: e.ns, Name: old.Name}); err != nil {
		t.Fatalf("Upgrade %s: %v", old.Name, err)
	}

	start := time.Now()
	app := next()
	// Changes of the offer sent before the upgrade (its target images
	// resolved, say) may still be on their way: UPGRADE_AVAILABLE, then
	// only UPGRADING.
	for app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE {
		app = next()
	}
	for ; app.GetReason() != "ReplacementPending"; app = next() {
		if app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING {
			t.Fatalf("got %v, want UPGRADING until the replacement is pending", app)
		}
	}
	if app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING || !strings.Contains(app.GetMessage(), "pod "+old.Name) {
		t.Errorf("got %v, want UPGRADING naming %s", app, old.Name)
	}
	for app = next(); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED; app = next() {
	}
	if app.GetReason() != health.ReasonProgressDeadlineExceeded || !strings.Contains(app.GetMessage(), "no replacement appeared on this node") {
		t.Errorf("got %v, want FAILED: no replacement by the deadline", app)
	}
	if elapsed := time.Since(start); elapsed < deadline-2*time.Second {
		t.Errorf("FAILED after %s, want not before the %s deadline", elapsed, deadline)
	}
	if pods, err := e.podsByNode(e.ctx()); err != nil || pods[node] != nil {
		t.Fatalf("got pods %v, %v; want none on %s while it is tainted", pods, err, node)
	}

	e.hold(node, false)
	for app = next(); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED; app = next() {
	}
	if app.GetCurrentImages()["nginx"] != newImage {
		t.Errorf("got %v, want UPGRADED on %s", app, newImage)
	}
}

// holdTaint keeps a DaemonSet's new pods off a node: its pods do not
// tolerate it, and NoSchedule leaves the pods already there alone.
var holdTaint = corev1.Taint{Key: "edgeota.test/hold", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// hold adds holdTaint to the node's taints, or removes it. The node's
// heartbeats change its resourceVersion all the time, so a conflict is
// retried on a fresh read.
func (e *env) hold(node string, on bool) {
	e.t.Helper()
	nodes := e.cluster.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(e.ctx(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n = n.DeepCopy()
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == holdTaint.Key })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, holdTaint)
		}
		_, err = nodes.Update(e.ctx(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("tainting %s (%t): %v", node, on, err)
	}
}

// restWatch is GET /edgeota.io/v1/watch/upgrades read line by line, each
// line a {"result": ...} object, decoded onto a channel until the stream
// ends (its error then on errs).
type restWatch struct {
	events chan *edgeotav1.WatchUpgradesResponse
	errs   chan error
}

func (a agent) watchREST(ctx context.Context) (*restWatch, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+"/edgeota.io/v1/watch/upgrades", nil)
	if err != nil {
		return nil, err
	}
	// No client timeout: the stream is meant to stay open; ctx ends it.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /edgeota.io/v1/watch/upgrades: %s", resp.Status)
	}
	w := &restWatch{events: make(chan *edgeotav1.WatchUpgradesResponse, 64), errs: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for lines.Scan() {
			var line struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(lines.Bytes(), &line); err != nil || line.Error != nil {
				w.errs <- fmt.Errorf("watch line %q: %v", lines.Text(), err)
				return
			}
			m := &edgeotav1.WatchUpgradesResponse{}
			if err := protojson.Unmarshal(line.Result, m); err != nil {
				w.errs <- fmt.Errorf("watch result %q: %w", line.Result, err)
				return
			}
			select {
			case w.events <- m:
			case <-ctx.Done():
				return
			}
		}
		w.errs <- fmt.Errorf("watch ended: %v", lines.Err())
	}()
	return w, nil
}

// next returns the next message within d, failing the test on an error, the
// end of the stream or silence.
func (w *restWatch) next(t *testing.T, d time.Duration) *edgeotav1.WatchUpgradesResponse {
	t.Helper()
	select {
	case m := <-w.events:
		return m
	case err := <-w.errs:
		t.Fatal(err)
	case <-time.After(d):
		t.Fatalf("the watch said nothing for %s", d)
	}
	return nil
}

// TestWatchOutlivesADeadZone: a REST watch held open while the agent's link
// to the API server is black-holed (a proxy that stops forwarding) stays
// open, keeps its heartbeats with the last contact's time, and tells the
// owner what the agent learns once the link returns: the version offered
// while it was cut off.
func TestWatchOutlivesADeadZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	node := localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig)
	proxy, kubeconfig := e.proxiedKubeconfig()
	a := e.startAgent(node, kubeconfig, "--apiserver-timeout", "2s")
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, node)
	eventually(t, "the agent to show the app UP_TO_DATE", func(ctx context.Context) (bool, string, error) {
		list, err := e.grpcClient(a).ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			return false, "", err
		}
		app := findApp(list.GetApps())
		return app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UP_TO_DATE, app.String(), nil
	})

	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	w, err := a.watchREST(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const silence = 30 * time.Second // longer than the agent's 10 s heartbeat
	if snap := w.next(t, silence); snap.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT || findApp(snap.GetApps()) == nil {
		t.Fatalf("got %v, want a snapshot with %s", snap, dsName)
	}

	proxy.Cut()
	e.setImage(newImage)
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)
	// Cut off, the watch stays open: two heartbeats, each carrying the time
	// of the last contact, which no longer moves; and no news of the offer.
	var stamp time.Time
	for beats := 0; beats < 2; {
		m := w.next(t, silence)
		switch m.GetType() {
		case edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_HEARTBEAT:
			if at := m.GetSyncedAt().AsTime(); beats > 0 && !at.Equal(stamp) {
				t.Errorf("cut off: heartbeat synced at %s, want the last contact %s still", at, stamp)
			} else {
				stamp = at
			}
			beats++
		default:
			if app := m.GetApp(); app.GetDaemonSet() == dsName && app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE {
				t.Fatalf("cut off: got %v, want no news from a cut link", m)
			}
		}
	}

	proxy.Restore()
	for {
		m := w.next(t, 2*silence)
		app := m.GetApp()
		if m.GetType() == edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT && app.GetDaemonSet() == dsName &&
			app.GetPhase() == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE && app.GetTargetImages()["nginx"] == newImage {
			if !m.GetSyncedAt().AsTime().After(stamp) {
				t.Errorf("after the link returned: synced at %s, want after the cut's %s", m.GetSyncedAt().AsTime(), stamp)
			}
			return
		}
	}
}
