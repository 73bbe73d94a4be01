package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/statedir"
)

func openStateDir(t *testing.T) *statedir.Dir {
	t.Helper()
	dir, err := statedir.Open(t.TempDir())
	if err != nil {
		t.Fatalf("statedir.Open: %v", err)
	}
	return dir
}

// storedData reads the stored view, or fails the test.
func storedData(t *testing.T, dir *statedir.Dir) podViewData {
	t.Helper()
	var data podViewData
	if err := dir.ReadJSON(podViewFile, podViewKind, podViewVersion, &data); err != nil {
		t.Fatalf("reading the stored view: %v", err)
	}
	return data
}

// TestStoredViewRoundTrips: what an agent stored is what the next one serves
// before its cache syncs — the same PodList, with the stored time of last
// contact in the freshness header and /readyz saying so.
func TestStoredViewRoundTrips(t *testing.T) {
	dir := openStateDir(t)
	first := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"), dsPod("q", withoutCondition("PodNeedUpgrade")))
	live, err := first.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	liveAt := first.syncedAt()
	if err := first.stop(); err != nil {
		t.Fatalf("stopping the first agent: %v", err)
	}
	data := storedData(t, dir)
	if len(data.Pods) != 2 || !data.LastContact.Equal(first.svc.lastContact()) {
		t.Fatalf("got %d stored pods, contact %s; want 2 and %s", len(data.Pods), data.LastContact, first.svc.lastContact())
	}

	second := newFixture(t, fixtureOptions{stateDir: dir, unsynced: true})
	stored, err := second.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods from the stored view: %v", err)
	}
	if !proto.Equal(stored, live) {
		t.Errorf("got stored\n%v\nwant what the first agent served\n%v", stored, live)
	}
	if got := second.syncedAt(); !got.Equal(liveAt) {
		t.Errorf("got freshness %s, want the stored %s", got, liveAt)
	}
	ready := second.do(http.MethodGet, "/readyz", "")
	if ready.status != http.StatusOK || !strings.Contains(ready.body, "stored view") || !strings.Contains(ready.body, liveAt.UTC().Format(time.RFC3339)) {
		t.Errorf("got /readyz %d %q, want 200 naming the stored view and its time", ready.status, ready.body)
	}
}

// TestLiveViewReplacesTheStoredOne: once the cache syncs, the live view is
// served, pods deleted meanwhile gone.
func TestLiveViewReplacesTheStoredOne(t *testing.T) {
	dir := openStateDir(t)
	first := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"), dsPod("gone"))
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"))
	list, err := second.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Metadata.Name != "p" {
		t.Errorf("got %v, want only pod p", list.Items)
	}
	if ready := second.do(http.MethodGet, "/readyz", ""); !strings.Contains(ready.body, "live view") {
		t.Errorf("got /readyz %q, want it to name the live view", ready.body)
	}
}

// TestBadStoredViewIsIgnored: every kind of file the agent cannot use is
// logged and ignored; the agent then answers 503 until the API server
// answers, never garbage.
func TestBadStoredViewIsIgnored(t *testing.T) {
	good := func(t *testing.T) []byte {
		dir := openStateDir(t)
		if err := dir.WriteJSON(podViewFile, podViewKind, podViewVersion, podViewData{
			LastContact: time.Now(), Pods: []corev1.Pod{storedPod(dsPod("p"))},
		}); err != nil {
			t.Fatal(err)
		}
		data, err := dir.ReadFile(podViewFile)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}(t)
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir *statedir.Dir)
		wantLog string
	}{
		{"missing", func(*testing.T, *statedir.Dir) {}, "No stored pod view"},
		{"empty", write(nil), "Ignoring the stored pod view"},
		{"truncated", write(good[:len(good)-7]), "Ignoring the stored pod view"},
		{"random bytes", write([]byte{0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, '{', '"'}), "Ignoring the stored pod view"},
		{"another version", write([]byte(`{"kind":"PodView","version":2,"data":{"lastContact":"2026-01-01T00:00:00Z","pods":[]}}`)), "Ignoring the stored pod view"},
		{"no time of last contact", write([]byte(`{"kind":"PodView","version":1,"data":{"pods":[]}}`)), "no time of last contact"},
		{"not readable", func(t *testing.T, dir *statedir.Dir) {
			// A directory in the file's place cannot be read, even by root.
			if err := os.Mkdir(filepath.Join(dir.Path(), podViewFile), 0o700); err != nil {
				t.Fatal(err)
			}
		}, "Ignoring the stored pod view"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := openStateDir(t)
			tc.prepare(t, dir)
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			if v := loadView(klog.NewContext(context.Background(), logger), dir, testNode); v != nil {
				t.Fatalf("got a stored view of %d pods, want none", len(v.list.Items))
			}
			if !logged(logger, tc.wantLog) {
				t.Errorf("got no log line containing %q", tc.wantLog)
			}
			f := newFixture(t, fixtureOptions{stateDir: dir, unsynced: true})
			if resp := f.do(http.MethodGet, "/pods", ""); resp.status != http.StatusServiceUnavailable {
				t.Errorf("GET /pods: got %d %q, want 503", resp.status, resp.body)
			}
			if resp := f.do(http.MethodGet, "/readyz", ""); resp.status != http.StatusServiceUnavailable {
				t.Errorf("GET /readyz: got %d %q, want 503", resp.status, resp.body)
			}
		})
	}
}

// write returns a preparation that puts content in the view's file.
func write(content []byte) func(*testing.T, *statedir.Dir) {
	return func(t *testing.T, dir *statedir.Dir) {
		if err := dir.WriteFile(podViewFile, content); err != nil {
			t.Fatal(err)
		}
	}
}

// logged reports whether a ktesting logger that buffers kept an entry whose
// message contains s.
func logged(logger klog.Logger, s string) bool {
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

// TestStoredViewServesOnlyThisNodesValidPods: a stored file naming pods of
// another node, or invalid names, never shows them.
func TestStoredViewServesOnlyThisNodesValidPods(t *testing.T) {
	dir := openStateDir(t)
	other := dsPod("elsewhere")
	other.Spec.NodeName = "edge-2"
	bad := dsPod("Not_Valid")
	if err := dir.WriteJSON(podViewFile, podViewKind, podViewVersion, podViewData{
		LastContact: time.Now(), Pods: []corev1.Pod{storedPod(dsPod("p")), storedPod(other), storedPod(bad)},
	}); err != nil {
		t.Fatal(err)
	}
	v := loadView(context.Background(), dir, testNode)
	if v == nil || len(v.list.Items) != 1 || v.list.Items[0].Metadata.Name != "p" {
		t.Fatalf("got %v, want only pod p", v)
	}
}

// TestStoredPodKeepsWhatListPodsShows: the disk keeps nothing of a pod that
// ListPods does not show, and the stored pod converts to the same answer.
func TestStoredPodKeepsWhatListPodsShows(t *testing.T) {
	pod := dsPod("p")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}}
	pod.Spec.Containers[0].Command = []string{"/bin/secret"}
	stored := storedPod(pod)
	if c := stored.Spec.Containers[0]; len(c.Env) != 0 || len(c.Command) != 0 {
		t.Errorf("got stored container %+v, want only its name and image", c)
	}
	if !proto.Equal(podToProto(&stored), podToProto(pod)) {
		t.Errorf("got %v, want %v", podToProto(&stored), podToProto(pod))
	}
}

// TestBurstOfPodChangesCostsFewWrites: 110 pod events in a burst are stored
// in a number of writes bounded by the burst's length over the write
// interval, not one per event; the last state is on disk.
func TestBurstOfPodChangesCostsFewWrites(t *testing.T) {
	t.Parallel()
	dir := openStateDir(t)
	watcher := watch.NewFakeWithChanSize(200, false)
	f := newFixture(t, fixtureOptions{stateDir: dir, watcher: watcher}, dsPod("p"))
	eventually(t, "the first write", func() bool { return f.pods.store.writes.Load() >= 1 })
	before := f.pods.store.writes.Load()
	start := time.Now()
	for i := range 110 {
		pod := dsPod("p")
		pod.ResourceVersion = strconv.Itoa(100 + i)
		watcher.Modify(pod)
	}
	burst := time.Since(start)
	eventually(t, "the burst's last state on disk", func() bool {
		var data podViewData
		err := dir.ReadJSON(podViewFile, podViewKind, podViewVersion, &data)
		return err == nil && len(data.Pods) == 1 && data.Pods[0].ResourceVersion == "209"
	})
	writes := f.pods.store.writes.Load() - before
	// One write per interval the burst spans, one for its tail, and one the
	// contact time may have asked for.
	if limit := int64(burst/podViewWriteInterval) + 3; writes > limit {
		t.Errorf("got %d writes for 110 events in %s, want at most %d", writes, burst, limit)
	}
	t.Logf("110 pod events in %s cost %d writes", burst, writes)
}

func TestAPIServerClockFollowsTheDateHeader(t *testing.T) {
	var c *APIServerClock
	if got := c.Now(); time.Since(got) > time.Minute {
		t.Errorf("nil clock: got %s, want the node's time", got)
	}
	c = &APIServerClock{}
	c.observe("not a date")
	if got := c.Now(); time.Since(got) > time.Minute {
		t.Errorf("before any Date: got %s, want the node's time", got)
	}
	server := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c.observe(server.Format(http.TimeFormat))
	if got := c.Now(); got.Before(server) || got.Sub(server) > time.Minute {
		t.Errorf("got %s, want the API server's %s advanced by the time since", got, server)
	}
}
