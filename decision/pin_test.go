package decision

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// Digests a registry serves newImage by: the canary's, and another after
// the tag was pushed again.
const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// runs has the node's pod of the target report imageID for its app
// container, as a runtime does once it started it.
func (w *world) runs(node, imageID string) {
	w.changePod(node, newHash, func(p *Pod) { p.ImageIDs = ShareImageIDs(map[string]string{"app": imageID}) })
}

// settleInPlace has the patched node's kubelet restart its container,
// running imageID, and the node prove alive.
func (w *world) settleInPlace(node, imageID string) {
	w.t.Helper()
	w.deliverDeletions()
	w.restartInPlace(node, w.now, true)
	w.runs(node, imageID)
	w.heartbeat(node, w.now.Add(2*time.Second))
	w.advance(3 * time.Second)
}

// settleRecreated gives the node its new pod, running imageID, and has the
// node prove alive.
func (w *world) settleRecreated(node, imageID string) {
	w.t.Helper()
	w.deliverDeletions()
	w.replace(node, true)
	w.runs(node, imageID)
	w.heartbeat(node, w.now.Add(2*time.Second))
	w.advance(3 * time.Second)
}

func takenNodes(d Decision) []string {
	var nodes []string
	for _, t := range d.Take {
		nodes = append(nodes, t.Node)
	}
	return nodes
}

// TestPinFirstWaveIsTheCanary: with pinning on (the default in place), the
// first wave is the canary alone whatever the budget; once it settled its
// digest is pinned in the record, before the next wave, whose patches name
// repository@digest; the status shows the pin and its canary.
func TestPinFirstWaveIsTheCanary(t *testing.T) {
	w := inPlaceWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%"})
	w.target.Images = map[string]string{"app": newImage}
	d := w.decide()
	if got := takenNodes(d); !slices.Equal(got, []string{"node-0"}) {
		t.Fatalf("got first wave %v, want the canary node-0 alone", got)
	}
	if d.Take[0].InPlace.Images["app"] != newImage {
		t.Errorf("canary patched to %q, want the tag %q", d.Take[0].InPlace.Images["app"], newImage)
	}
	if d := w.decide(); len(d.Take) != 0 || !strings.Contains(d.Status.Reason, "canaries") {
		t.Errorf("got takes %v, reason %q while the canary is in flight; want none, and the reason saying it waits for the canaries", d.Take, d.Status.Reason)
	}
	w.settleInPlace("node-0", "docker-pullable://registry.test/app@"+digestA)
	notices := w.refresh()
	pin, ok := w.ledger.Pin("")
	if !ok || pin.Canary != "node-0" || pin.Digests["app"] != digestA {
		t.Fatalf("got pin %+v (%v), want node-0's %s", pin, ok, digestA)
	}
	if !slices.ContainsFunc(notices, func(n Notice) bool { return n.Kind == NoticePinned && n.Node == "node-0" }) {
		t.Errorf("got notices %+v, want NoticePinned for node-0", notices)
	}
	d = w.r.Decide(w.now)
	w.carryOut(d)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-1", "node-2", "node-3"}) {
		t.Fatalf("got second wave %v, want the other three", got)
	}
	for _, take := range d.Take {
		if want := "registry.test/app@" + digestA; take.InPlace.Images["app"] != want {
			t.Errorf("%s patched to %q, want %q", take.Node, take.InPlace.Images["app"], want)
		}
		if e, _ := w.ledger.Entry(take.Node); e.InPlace == nil || e.InPlace.Images["app"] != "registry.test/app@"+digestA {
			t.Errorf("%s's entry %+v, want it to record the pinned image", take.Node, e.InPlace)
		}
	}
	want := rollout.Pin{Canary: "node-0", Images: map[string]string{"app": "registry.test/app@" + digestA}}
	if got := d.Status.Pins[""]; got.Canary != want.Canary || !maps.Equal(got.Images, want.Images) {
		t.Errorf("got status pins %+v, want %+v", d.Status.Pins, want)
	}
	// A node patched to the digest settles whatever digest form its
	// runtime reports for those bytes (an index's, say).
	w.settleInPlace("node-1", "registry.test/app@"+digestB)
	w.refresh()
	if s, why := w.r.State("node-1"); s != StateSettled {
		t.Errorf("got node-1 %s (%s), want settled: it was patched to the pinned digest", s, why)
	}
}

// TestPinPerArchitecture: each architecture's first node is its canary,
// pinned to what it ran.
func TestPinPerArchitecture(t *testing.T) {
	w := inPlaceWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%"})
	for i, node := range []string{"node-0", "node-1", "node-2", "node-3"} {
		arch := []string{"amd64", "arm64"}[i/2]
		w.setNode(node, func(n *Node) { n.Labels = map[string]string{corev1.LabelArchStable: arch} })
	}
	d := w.decide()
	if got := takenNodes(d); !slices.Equal(got, []string{"node-0", "node-2"}) {
		t.Fatalf("got first wave %v, want one canary per architecture", got)
	}
	w.settleInPlace("node-0", "registry.test/app@"+digestA)
	w.refresh()
	d = w.r.Decide(w.now)
	w.carryOut(d)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("got %v once amd64 is pinned, want node-1 alone: arm64's canary has not settled", got)
	}
	if got := d.Take[0].InPlace.Images["app"]; got != "registry.test/app@"+digestA {
		t.Errorf("node-1 patched to %q, want amd64's digest", got)
	}
	w.settleInPlace("node-2", "registry.test/app@"+digestB)
	w.refresh()
	d = w.r.Decide(w.now)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-3"}) || d.Take[0].InPlace.Images["app"] != "registry.test/app@"+digestB {
		t.Fatalf("got takes %+v, want node-3 patched to arm64's digest", d.Take)
	}
	if len(d.Status.Pins) != 2 || d.Status.Pins["arm64"].Canary != "node-2" || d.Status.Pins["amd64"].Canary != "node-0" {
		t.Errorf("got status pins %+v, want amd64's by node-0 and arm64's by node-2", d.Status.Pins)
	}
}

// TestPinUnpinnable: a canary that runs an image with no registry digest
// (a bare config digest) gives no pin: the reason is recorded and shown,
// and the rollout goes on with the tag.
func TestPinUnpinnable(t *testing.T) {
	w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%"})
	w.decide()
	w.settleInPlace("node-0", digestA)
	notices := w.refresh()
	d := w.r.Decide(w.now)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("got %v, want the rest once the canary settled", got)
	}
	for _, take := range d.Take {
		if take.InPlace.Images["app"] != newImage {
			t.Errorf("%s patched to %q, want the tag", take.Node, take.InPlace.Images["app"])
		}
	}
	why := d.Status.Pins[""].Unpinnable["app"]
	if !strings.Contains(why, "config digest") {
		t.Errorf("got status pins %+v, want app unpinnable for its config digest", d.Status.Pins)
	}
	if !slices.ContainsFunc(notices, func(n Notice) bool { return n.Kind == NoticePinned && len(n.Pin.Unpinnable) == 1 }) {
		t.Errorf("got notices %+v, want one saying app is unpinnable", notices)
	}
}

// TestPinRecreatedMismatch: recreated nodes are checked as they settle: one
// whose tag now names other bytes fails, naming both digests, and counts
// toward max-failed; one that runs the canary's digest settles.
func TestPinRecreatedMismatch(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%", rollout.PinAnnotation: "true", rollout.MaxFailedAnnotation: "1"})
	d := w.decide()
	if got := takenNodes(d); !slices.Equal(got, []string{"node-0"}) || d.Take[0].InPlace != nil {
		t.Fatalf("got %+v, want node-0 deleted alone", d.Take)
	}
	w.settleRecreated("node-0", "registry.test/app@"+digestA)
	w.refresh()
	d = w.r.Decide(w.now)
	w.carryOut(d)
	if got := takenNodes(d); len(got) != 3 {
		t.Fatalf("got %v, want the three others", got)
	}
	w.settleRecreated("node-1", "docker-pullable://registry.test/app@"+digestA)
	w.settleRecreated("node-2", "registry.test/app@"+digestB)
	notices := w.refresh()
	if s, _ := w.r.State("node-1"); s != StateSettled {
		t.Errorf("got node-1 %s, want settled on the canary's digest", s)
	}
	s, why := w.r.State("node-2")
	if s != StateFailed || !strings.Contains(why, digestA) || !strings.Contains(why, digestB) || !strings.Contains(why, "node-0") {
		t.Fatalf("got node-2 %s (%s), want failed naming both digests and the canary", s, why)
	}
	if !slices.ContainsFunc(notices, func(n Notice) bool { return n.Kind == NoticeDigestMismatch && n.Node == "node-2" }) {
		t.Errorf("got notices %+v, want NoticeDigestMismatch for node-2", notices)
	}
	if d := w.r.Decide(w.now); !d.Status.Halted {
		t.Errorf("got status %+v, want halted at max-failed 1", d.Status)
	}
}

// TestPinSettings: pinning is on by default in place, off for recreation,
// either way by the annotation; canaries are configurable.
func TestPinSettings(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		pin         bool
		canaries    int
	}{
		{map[string]string{}, false, 1},
		{map[string]string{rollout.UpdateMethodAnnotation: "InPlaceIfPossible"}, true, 1},
		{map[string]string{rollout.UpdateMethodAnnotation: "InPlaceIfPossible", rollout.PinAnnotation: "false"}, false, 1},
		{map[string]string{rollout.PinAnnotation: "true", rollout.PinCanariesAnnotation: "3"}, true, 3},
	} {
		s, err := ParseSettings(aru, tc.annotations, 0)
		if err != nil || s.Pin != tc.pin || s.PinCanaries != tc.canaries {
			t.Errorf("%v: got pin %v, canaries %d, %v; want %v, %d", tc.annotations, s.Pin, s.PinCanaries, err, tc.pin, tc.canaries)
		}
	}
	for _, bad := range []map[string]string{{rollout.PinAnnotation: "maybe"}, {rollout.PinCanariesAnnotation: "0"}, {rollout.PinCanariesAnnotation: "x"}} {
		if _, err := ParseSettings(aru, bad, 0); err == nil {
			t.Errorf("%v: got no error", bad)
		}
	}
}

// TestPinCanaries: with more canaries per architecture the first wave is
// that many; pinning off, the budget alone.
func TestPinCanaries(t *testing.T) {
	w := inPlaceWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%", rollout.PinCanariesAnnotation: "2"})
	if got := takenNodes(w.decide()); len(got) != 2 {
		t.Errorf("got first wave %v, want 2 canaries", got)
	}
	w = inPlaceWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%", rollout.PinAnnotation: "false"})
	if got := takenNodes(w.decide()); len(got) != 4 {
		t.Errorf("got first wave %v with pinning off, want all 4", got)
	}
}

// TestPinKeepsTheTagForTheSameBytes: a pod that runs the pinned digest
// already (a tag of the same bytes rolled out again over pods a former
// rollout pinned) is patched to the tag: a patch to the reference its spec
// may hold already would change nothing its kubelet acts on.
func TestPinKeepsTheTagForTheSameBytes(t *testing.T) {
	w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%"})
	w.changePod("node-2", oldHash, func(p *Pod) { p.ImageIDs = ShareImageIDs(map[string]string{"app": "registry.test/app@" + digestA}) })
	w.decide()
	w.settleInPlace("node-0", "registry.test/app@"+digestA)
	w.refresh()
	d := w.r.Decide(w.now)
	images := map[string]string{}
	for _, take := range d.Take {
		images[take.Node] = take.InPlace.Images["app"]
	}
	if want := map[string]string{"node-1": "registry.test/app@" + digestA, "node-2": newImage}; !maps.Equal(images, want) {
		t.Errorf("got patches %v, want %v", images, want)
	}
}

// TestPinChecksWhatStartedSince: a pod of the target created before the pin
// (the fleet as the controller found it) is not judged by it, whatever it
// runs, while one created since is; and a DaemonSet's first revision, its
// creation, pins nothing.
func TestPinChecksWhatStartedSince(t *testing.T) {
	w := newWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PinAnnotation: "true"})
	w.ledger.SetPin("", Pin{Canary: "node-0", At: metav1.NewTime(w.now), Digests: map[string]string{"app": digestA}})
	w.advance(time.Second)
	for _, node := range []string{"node-1", "node-2"} {
		w.replace(node, true)
		w.runs(node, "registry.test/app@"+digestB)
		if node == "node-1" {
			w.changePod(node, newHash, func(q *Pod) { q.Created = unixtime.Of(t0.Add(-time.Minute)) })
		}
		w.pods[node] = slices.DeleteFunc(w.pods[node], func(q *Pod) bool { return q.Hash == oldHash })
		w.heartbeat(node, w.now.Add(2*time.Second))
	}
	w.advance(3 * time.Second)
	w.decide()
	if s, why := w.r.State("node-1"); s != StateSettled {
		t.Errorf("got node-1 (created before the pin) %s (%s), want settled", s, why)
	}
	if s, why := w.r.State("node-2"); s != StateFailed || !strings.Contains(why, digestB) {
		t.Errorf("got node-2 (created since the pin) %s (%s), want failed naming %s", s, why, digestB)
	}

	first := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PinAnnotation: "true"})
	first.target.Number = 1
	first.decide()
	first.settleRecreated("node-0", "registry.test/app@"+digestA)
	first.refresh()
	if pin, ok := first.ledger.Pin(""); ok {
		t.Errorf("got pin %+v for a first revision, want none", pin)
	}
}

// TestPinTagPullCountsForThePinsBytes: with pre-download, a pull made by
// tag before the pin existed waits for the pin; once pinned, it counts if
// the tag resolved to the pin's digest, and is stale if it resolved to
// other bytes (the tag pushed again): that node is not taken, and pulls
// again; a pull by digest since counts.
func TestPinTagPullCountsForThePinsBytes(t *testing.T) {
	w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%",
		rollout.PreDownloadAnnotation: "true", rollout.PreDownloadParallelismAnnotation: "3", rollout.PreDownloadCanaryAnnotation: "1"})
	d := w.decide()
	if got := takenNodes(d); !slices.Equal(got, []string{"node-0"}) {
		t.Fatalf("got first wave %v, want the canary node-0 alone", got)
	}
	byTag := func(digest string) Pull {
		return Pull{State: PullDone, Since: w.now, ByController: true, Job: true, ByTag: map[string]string{"app": digest}}
	}
	w.setPull("node-1", byTag(digestB)) // resolved after the tag was pushed again
	w.setPull("node-2", byTag(digestA))
	w.decide()
	for _, node := range []string{"node-1", "node-2"} {
		if got := w.r.TagPull(node); got != TagPullAwaitsPin {
			t.Errorf("before the pin: got %s's pull %d, want TagPullAwaitsPin (%d)", node, got, TagPullAwaitsPin)
		}
	}

	w.settleInPlace("node-0", "registry.test/app@"+digestA)
	w.refresh()
	d = w.r.Decide(w.now)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-2"}) {
		t.Errorf("got second wave %v, want node-2 alone: node-1's pull brought other bytes than the pin's", got)
	}
	if got := w.r.TagPull("node-1"); got != TagPullStale {
		t.Errorf("got node-1's pull %d, want TagPullStale (%d)", got, TagPullStale)
	}
	if got := w.r.TagPull("node-2"); got != TagPullCounts {
		t.Errorf("got node-2's pull %d, want TagPullCounts (%d)", got, TagPullCounts)
	}
	if got := pulled(d); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("got pulls %v, want node-1 pulling again", got)
	}
	w.carryOut(d)

	w.setPull("node-1", Pull{State: PullDone, ByController: true, Job: true}) // by digest
	w.refresh()
	d = w.r.Decide(w.now)
	if got := takenNodes(d); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("got %v taken, want node-1 once it pulled the pin's digest", got)
	}
}

// TestPinCanaryTakenOnItsTagPull: with every node gated by its
// pre-download, the canary's pull by tag, made before any pin, counts: the
// pin needs the canary.
func TestPinCanaryTakenOnItsTagPull(t *testing.T) {
	w := inPlaceWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "100%", rollout.PreDownloadAnnotation: "true"})
	d := w.decide()
	if len(d.Take) != 0 || !slices.Contains(pulled(d), "node-0") {
		t.Fatalf("got takes %v and pulls %v, want node-0 pulling first", takenNodes(d), pulled(d))
	}
	w.setPull("node-0", Pull{State: PullDone, Since: w.now, ByController: true, Job: true, ByTag: map[string]string{"app": digestA}})
	d = w.decide()
	if got := takenNodes(d); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("got %v taken, want the canary node-0 on its pull by tag", got)
	}
	if got := w.r.TagPull("node-0"); got != TagPullAwaitsPin {
		t.Errorf("got the canary's pull %d, want TagPullAwaitsPin (%d): not written before the pin", got, TagPullAwaitsPin)
	}
}
