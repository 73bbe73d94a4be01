package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// eventuallyApps polls ListUpgrades until ok holds of its answer.
func (f *fixture) eventuallyApps(what string, ok func([]*edgeotav1.App) bool) []*edgeotav1.App {
	f.t.Helper()
	var last []*edgeotav1.App
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := f.rpc.ListUpgrades(context.Background(), &edgeotav1.ListUpgradesRequest{})
		if err == nil {
			last = resp.GetApps()
			if ok(last) {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatalf("timed out waiting for %s; last ListUpgrades: %v", what, last)
	return nil
}

// targetImages are the images of revision testHash that the tests' offers
// carry.
var targetImages = map[string]string{"app": "nginx:1.19.5", "init": "busybox:2"}

func TestListUpgradesShowsTheTargetImages(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p", offered(testHash, targetImages, 0)))
	apps := f.eventuallyApps("the target images", func(apps []*edgeotav1.App) bool {
		return len(apps) == 1 && apps[0].GetTargetImages()["app"] == "nginx:1.19.5"
	})
	app := apps[0]
	if app.GetNamespace() != "default" || app.GetDaemonSet() != "demo" || app.GetPod() != "p" ||
		app.GetPhase() != upgradeAvailable || app.GetTargetRevision() != testHash || app.GetCurrentImages()["app"] != "nginx:1.19.4" ||
		app.GetTargetImages()["init"] != "busybox:2" {
		t.Errorf("got %v, want demo's pod p UPGRADE_AVAILABLE from nginx:1.19.4 to nginx:1.19.5 (init busybox:2)", app)
	}

	resp := f.do(http.MethodGet, "/edgeota.io/v1/upgrades", "")
	for _, want := range []string{`"daemonSet":"demo"`, `"phase":"UPGRADE_PHASE_UPGRADE_AVAILABLE"`, `"targetImages":{`, `"currentRevision":"old"`} {
		if resp.status != http.StatusOK || !strings.Contains(resp.body, want) {
			t.Errorf("GET /edgeota.io/v1/upgrades: got %d %s, want 200 with %s", resp.status, resp.body, want)
		}
	}
	if resp.header.Get("X-Edgeota-Synced-At") == "" {
		t.Errorf("GET /edgeota.io/v1/upgrades: got no X-Edgeota-Synced-At header")
	}
}

// TestTargetImagesTravelWithPodNeedUpgrade is the agent's half of the
// channel (the controller's is controller.TestOfferTravelsWithPodNeedUpgrade):
// the controller's one pods/status patch, condition and offer together, is
// all the agent needs to show the target's images. Before the patch the app
// is UP_TO_DATE with no target; after it, UPGRADE_AVAILABLE with the images,
// and the API server got that one write and no read of anything but pods.
func TestTargetImagesTravelWithPodNeedUpgrade(t *testing.T) {
	pod := dsPod("p", withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse}))
	f := newFixture(t, fixtureOptions{}, pod)
	f.eventuallyApps("the app up to date", func(apps []*edgeotav1.App) bool {
		return len(apps) == 1 && apps[0].GetPhase() == upToDate && apps[0].GetTargetRevision() == ""
	})

	offer, err := podchannel.Encode(&podchannel.Offer{Revision: testHash, Images: targetImages, ProgressDeadlineSeconds: 90})
	if err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	want := corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue, Message: testTarget}
	if _, err := podcondition.SetAnnotated(t.Context(), f.client.CoreV1(), pod, want,
		podcondition.Annotations{rollout.OfferAnnotation: &offer}, "edgeota-ota-controller"); err != nil {
		t.Fatalf("the controller's patch: %v", err)
	}
	var writes []k8stesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a)
		}
	}
	if len(writes) != 1 || writes[0].GetVerb() != "patch" || writes[0].GetSubresource() != "status" {
		t.Fatalf("got API calls %v, want one patch of pods/status", writes)
	}

	apps := f.eventuallyApps("the offer read back", func(apps []*edgeotav1.App) bool {
		return len(apps) == 1 && apps[0].GetPhase() == upgradeAvailable && len(apps[0].GetTargetImages()) > 0
	})
	if got := apps[0]; got.GetTargetRevision() != testHash || !maps.Equal(got.GetTargetImages(), targetImages) {
		t.Errorf("got target %q images %v, want %s %v", got.GetTargetRevision(), got.GetTargetImages(), testHash, targetImages)
	}
	for _, a := range f.client.Actions() {
		if r := a.GetResource().Resource; r != "pods" {
			t.Errorf("got a %s of %s, want the agent to read nothing but pods", a.GetVerb(), r)
		}
	}
}

// TestOwnersViewKeepsTheChannelAcrossARestart: the pod cache and the stored
// view keep the channel's annotations (the controller's offer, the owner's
// hold), so that an agent restarted in a dead zone shows the target's images
// from the stored view alone.
func TestOwnersViewKeepsTheChannelAcrossARestart(t *testing.T) {
	dir := openStateDir(t)
	hold, err := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(time.Now().Add(time.Hour)), Reason: "driving", At: metav1.Now()})
	if err != nil {
		t.Fatal(err)
	}
	first := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p", offered(testHash, targetImages, 0), withAnnotation(rollout.HoldAnnotation, hold)))
	cached, err := first.svc.lister.Pods("default").Get("p")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	stored := storedData(t, dir)
	for _, p := range []*corev1.Pod{cached, &stored.Pods[0]} {
		if _, err := podchannel.OfferOf(p); err != nil || p.Annotations[rollout.OfferAnnotation] == "" || p.Annotations[rollout.HoldAnnotation] != hold {
			t.Errorf("got annotations %v, want the offer and the hold kept", p.Annotations)
		}
	}

	second := newFixture(t, fixtureOptions{stateDir: dir, unsynced: true})
	resp, err := second.rpc.ListUpgrades(context.Background(), &edgeotav1.ListUpgradesRequest{})
	if err != nil {
		t.Fatalf("ListUpgrades from the stored view: %v", err)
	}
	if apps := resp.GetApps(); len(apps) != 1 || apps[0].GetPhase() != upgradeAvailable || !maps.Equal(apps[0].GetTargetImages(), targetImages) {
		t.Errorf("got %v from the stored view, want UPGRADE_AVAILABLE with %v", apps, targetImages)
	}
}

// watchStream opens a gRPC watch on its own connection.
func (f *fixture) watchStream(ctx context.Context) grpc.ServerStreamingClient[edgeotav1.WatchUpgradesResponse] {
	f.t.Helper()
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	stream, err := edgeotav1.NewOTAServiceClient(conn).WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		f.t.Fatal(err)
	}
	return stream
}

// next receives the next message that is not a heartbeat.
func next(t *testing.T, stream grpc.ServerStreamingClient[edgeotav1.WatchUpgradesResponse]) *edgeotav1.WatchUpgradesResponse {
	t.Helper()
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_HEARTBEAT {
			return m
		}
	}
}

func ownedByDaemonSet(name string) podOption {
	return func(p *corev1.Pod) {
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = name, types.UID(name+"-uid")
	}
}

func TestWatchUpgradesStreamsEachChange(t *testing.T) {
	other := dsPod("o", ownedByDaemonSet("other"), withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse}))
	f := newFixture(t, fixtureOptions{}, dsPod("p"), other)
	stream := f.watchStream(t.Context())
	snap := next(t, stream)
	if snap.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT || len(snap.GetApps()) != 2 ||
		snap.GetApps()[0].GetDaemonSet() != "demo" || snap.GetApps()[1].GetDaemonSet() != "other" || snap.GetSyncedAt() == nil {
		t.Fatalf("got %v, want a snapshot of demo and other, sorted, with synced_at", snap)
	}

	pod := dsPod("p", withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, testTarget)))
	if _, err := f.client.CoreV1().Pods("default").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, stream); m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT ||
		m.GetApp().GetDaemonSet() != "demo" || m.GetApp().GetPhase() != phasePullRequested {
		t.Fatalf("got %v, want an upsert of demo in PULL_REQUESTED", m)
	}

	if err := f.client.CoreV1().Pods("default").Delete(t.Context(), "o", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, stream); m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_DELETE || m.GetApp().GetDaemonSet() != "other" {
		t.Fatalf("got %v, want other deleted", m)
	}
}

func TestWatchUpgradesHeartbeats(t *testing.T) {
	f := newFixture(t, fixtureOptions{upgrades: UpgradeOptions{Heartbeat: 50 * time.Millisecond}}, dsPod("p"))
	stream := f.watchStream(t.Context())
	next(t, stream)
	for range 2 {
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_HEARTBEAT || m.GetSyncedAt() == nil || len(m.GetApps()) != 0 {
			t.Fatalf("got %v, want a heartbeat with synced_at only", m)
		}
	}
}

func TestWatcherLimit(t *testing.T) {
	f := newFixture(t, fixtureOptions{upgrades: UpgradeOptions{MaxWatchers: 1}}, dsPod("p"))
	first := f.watchStream(t.Context())
	next(t, first)
	_, err := f.watchStream(t.Context()).Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second gRPC watch: got %v, want ResourceExhausted", err)
	}
	if resp := f.do(http.MethodGet, watchUpgradesPath, "application/json"); resp.status != http.StatusTooManyRequests ||
		!strings.Contains(resp.body, "too many watches") {
		t.Errorf("second REST watch: got %d %q, want 429", resp.status, resp.body)
	}
}

// TestSlowWatcherIsDropped: a watcher that stops reading is cut off once its
// backlog is full; the other watchers get every change, and publishing never
// waits for anyone.
func TestSlowWatcherIsDropped(t *testing.T) {
	f := newFixture(t, fixtureOptions{upgrades: UpgradeOptions{Heartbeat: time.Hour}}, dsPod("p"))
	v := f.svc.upgrades
	slow := f.watchStream(t.Context())
	next(t, slow)
	fast := f.watchStream(t.Context())
	next(t, fast)

	const changes = 2000
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for got.Load() < changes {
			m, err := fast.Recv()
			if err != nil {
				return
			}
			if m.GetType() == edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT {
				got.Add(1)
			}
		}
	}()
	big := strings.Repeat("x", 1024)
	start := time.Now()
	for i := range changes {
		app := &edgeotav1.App{Namespace: "default", DaemonSet: "demo", Message: fmt.Sprint(i, big)}
		v.mu.Lock()
		v.publishLocked(map[appKey]*edgeotav1.App{{"default", "demo"}: app})
		v.mu.Unlock()
		// A reader that keeps up: never more than half its backlog behind.
		for int64(i+1)-got.Load() > int64(v.backlog/2) {
			select {
			case <-done:
				t.Fatalf("the fast watcher ended after %d changes", got.Load())
			case <-time.After(time.Millisecond):
			}
		}
	}
	publishing := time.Since(start) // includes waiting for the fast reader
	<-done
	if n := got.Load(); n != changes {
		t.Errorf("the fast watcher got %d changes, want %d", n, changes)
	}
	var err error
	for err == nil {
		_, err = slow.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("the slow watcher ended with %v, want ResourceExhausted", err)
	}
	t.Logf("published %d changes in %s", changes, publishing)
}

// TestStalledWatcherIsCutOff: a send that does not return within the stall
// bound fails through the stream's write deadline, and the watcher is
// dropped.
func TestStalledWatcherIsCutOff(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	v := f.svc.upgrades
	v.stall = 50 * time.Millisecond
	var mu sync.Mutex
	var deadline time.Time
	setDeadline := func(d time.Time) error { mu.Lock(); defer mu.Unlock(); deadline = d; return nil }
	// The transport: a write blocks until its deadline, as a peer that does
	// not read makes it.
	send := func(*edgeotav1.WatchUpgradesResponse) error {
		mu.Lock()
		d := deadline
		mu.Unlock()
		time.Sleep(time.Until(d))
		return errors.New("i/o timeout")
	}
	start := time.Now()
	if err := v.stream(t.Context(), send, setDeadline); err == nil {
		t.Fatal("got nil, want the send's error")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s, want about the 50ms stall bound", took)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if n := len(v.watchers); n != 0 {
		t.Errorf("got %d watchers left, want 0", n)
	}
}

func TestWatchUpgradesOverREST(t *testing.T) {
	f := newFixture(t, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	if resp := f.do(http.MethodGet, watchUpgradesPath, ""); resp.status != http.StatusUnauthorized {
		t.Errorf("without a token: got %d %q, want 401", resp.status, resp.body)
	}
	if resp := f.do(http.MethodPost, watchUpgradesPath, "", "Authorization", "Bearer upgrader-token"); resp.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d %q, want 405", resp.status, resp.body)
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.base+watchUpgradesPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer viewer-token")
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != mimeJSON || resp.Header.Get("X-Edgeota-Synced-At") == "" {
		t.Fatalf("got %d %q synced-at %q, want 200 JSON with X-Edgeota-Synced-At", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Edgeota-Synced-At"))
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatalf("no first line: %v", lines.Err())
	}
	var first struct {
		Result struct {
			Type string `json:"type"`
			Apps []struct {
				DaemonSet string `json:"daemonSet"`
				Phase     string `json:"phase"`
			} `json:"apps"`
			SyncedAt string `json:"syncedAt"`
		} `json:"result"`
	}
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil {
		t.Fatalf("first line %q: %v", lines.Text(), err)
	}
	if r := first.Result; r.Type != "UPGRADE_EVENT_TYPE_SNAPSHOT" || len(r.Apps) != 1 || r.Apps[0].DaemonSet != "demo" ||
		r.Apps[0].Phase != "UPGRADE_PHASE_UPGRADE_AVAILABLE" || r.SyncedAt == "" {
		t.Errorf("got %s, want the snapshot of demo in UPGRADE_PHASE_UPGRADE_AVAILABLE", lines.Text())
	}

	// It outlives the server's write timeout and ends cleanly at shutdown.
	if err := f.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	for lines.Scan() {
		if !strings.Contains(lines.Text(), "HEARTBEAT") {
			t.Errorf("got %q after the snapshot, want nothing but heartbeats", lines.Text())
		}
	}
}

// TestWatchOutlivesTheServerTimeouts: with the server's read and write
// timeouts at 300ms, watches over both protocols keep receiving heartbeats
// well past them.
func TestWatchOutlivesTheServerTimeouts(t *testing.T) {
	t.Parallel()
	short := defaultLimits
	short.read, short.write = 300*time.Millisecond, 300*time.Millisecond
	f := newFixture(t, fixtureOptions{limits: &short, upgrades: UpgradeOptions{Heartbeat: 100 * time.Millisecond}}, dsPod("p"))
	until := time.Now().Add(time.Second)

	stream := f.watchStream(t.Context())
	for time.Now().Before(until) {
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("gRPC watch ended after the write timeout: %v", err)
		}
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.base+watchUpgradesPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	until = time.Now().Add(time.Second)
	for time.Now().Before(until) {
		if !lines.Scan() {
			t.Fatalf("REST watch ended after the write timeout: %v", lines.Err())
		}
	}
}

// TestWatchCallersLeavingMidHeartbeat: gRPC callers that leave while their
// watch sends heartbeats back to back end their watches cleanly; no send
// touches the HTTP/2 stream after its handler returned (run with -race: a
// late write deadline raced with the stream's teardown and panicked).
func TestWatchCallersLeavingMidHeartbeat(t *testing.T) {
	f := newFixture(t, fixtureOptions{upgrades: UpgradeOptions{Heartbeat: time.Millisecond}}, dsPod("p"))
	for range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		stream := f.watchStream(ctx)
		for range 3 {
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("got %v, want the snapshot and heartbeats", err)
			}
		}
		cancel()
	}
	// The agent still serves watches.
	if snap := next(t, f.watchStream(t.Context())); len(snap.GetApps()) != 1 {
		t.Errorf("got %v after the callers left, want the snapshot of one app", snap)
	}
}

// TestStreamDeadlineEndsWithItsHandler: a watch's write deadline reaches
// its stream until the handler ends it, and nothing after.
func TestStreamDeadlineEndsWithItsHandler(t *testing.T) {
	var writes []time.Time
	d := &streamDeadline{write: func(at time.Time) error { writes = append(writes, at); return nil }}
	at := time.Now()
	if err := d.set(at); err != nil || len(writes) != 1 {
		t.Fatalf("got %v and %d writes, want the deadline written", err, len(writes))
	}
	d.end()
	if err := d.set(at); !errors.Is(err, errStreamEnded) || len(writes) != 1 {
		t.Errorf("got %v and %d writes after the handler ended, want %v and none more", err, len(writes), errStreamEnded)
	}
}

// TestWatchShowsAMissingReplacement: the app's pod, offered a new version,
// vanishes and no replacement comes: the watch says at once that the
// replacement is pending, then FAILED at the deadline, and the app stays in
// the view instead of leaving it.
func TestWatchShowsAMissingReplacement(t *testing.T) {
	f := newFixture(t, fixtureOptions{upgrades: UpgradeOptions{Deadline: 300 * time.Millisecond}}, dsPod("p"))
	stream := f.watchStream(t.Context())
	if snap := next(t, stream); len(snap.GetApps()) != 1 || snap.GetApps()[0].GetPhase() != upgradeAvailable {
		t.Fatalf("got %v, want demo UPGRADE_AVAILABLE", snap)
	}
	if err := f.client.CoreV1().Pods("default").Delete(t.Context(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m := next(t, stream)
	if app := m.GetApp(); m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT || app.GetPhase() != upgrading ||
		app.GetReason() != ReasonReplacementPending || app.GetMessage() != "pod p is gone; its replacement is not on this node yet" {
		t.Fatalf("got %v, want an upsert of demo UPGRADING, replacement pending", m)
	}
	m = next(t, stream)
	if app := m.GetApp(); m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT || app.GetPhase() != failed ||
		app.GetReason() != health.ReasonProgressDeadlineExceeded || !strings.Contains(app.GetMessage(), "no replacement appeared on this node") {
		t.Fatalf("got %v, want an upsert of demo FAILED, no replacement", m)
	}
	if apps := f.eventuallyApps("demo listed", func(a []*edgeotav1.App) bool { return len(a) == 1 }); apps[0].GetPhase() != failed {
		t.Errorf("ListUpgrades: got %v, want demo FAILED", apps)
	}
}
