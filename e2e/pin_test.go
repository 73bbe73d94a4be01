//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// Pinning's keys, spelled as users' manifests spell them.
const (
	pinAnnotation         = "edgeota.io/pin"
	preDownloadAnnotation = "edgeota.io/pre-download"
)

// digestOf is the digest a container's imageID names ("" when none).
func digestOf(imageID string) string {
	id, err := imageref.Parse(imageID)
	if err != nil {
		return ""
	}
	return id.Digest
}

// runningDigest is the digest the pod's first container runs.
func runningDigest(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return ""
	}
	return digestOf(p.Status.ContainerStatuses[0].ImageID)
}

// registryDigest is the digest the local cluster's registry serves image by
// to a node of arch after pushes pushes of its tag.
func registryDigest(image, arch string, pushes int) string {
	return digestOf(localcluster.RegistryImageID(image, arch, pushes))
}

// TestPinInPlaceRepush: in place, the tag pushed again once the canary
// pulled it reaches no later node: the canary's digest is pinned, and every
// later node is patched to repository@digest and runs it; the first wave is
// the canary alone. A node that pre-downloaded the tag before the pin, and
// got the pushed bytes, does not count that download: it pulls the
// canary's digest before its turn.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPinInPlaceRepush(t *testing.T) {
	const nodes = 4
	canary, second := localcluster.NodeName(1), localcluster.NodeName(2)
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: 4 * time.Second, Preloaded: []string{oldImage}}})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	// Two pre-downloads at a time: the canary's and the second node's start
	// together, so the second node's pull by tag begins before the canary
	// settles and its digest is pinned. One at a time, the second node's
	// Job waited for the canary's to finish, and a canary that settled
	// within that moment had the pin made first: the second node then
	// pulled the digest alone, and the scenario never set up.
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "100%",
		preDownloadAnnotation: "true", "edgeota.io/pre-download-parallelism": "2"}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })
	// The canary holds the new tag's first bytes already, so that its turn
	// comes at once and the tag is pushed again while the next node's
	// pre-download, by tag, still pulls.
	pushedFrom := registryDigest(newImage, "amd64", 0)
	e.createPinnedPod("holds-new", newImage, canary)
	eventually(t, "the canary holding "+newImage, func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, "holds-new", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return runningDigest(p) == pushedFrom, runningDigest(p), nil
	})
	pulls := e.watchPulls()

	e.setImage(newImage)
	eventually(t, "the canary running the tag's first digest", func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil || pods[canary] == nil {
			return false, "no pod", err
		}
		return runningDigest(pods[canary]) == pushedFrom, fmt.Sprintf("%s runs %s", imageOf(pods[canary]), runningDigest(pods[canary])), nil
	})
	if err := e.cluster.Repush(newImage); err != nil {
		t.Fatal(err)
	}
	pushed := registryDigest(newImage, "amd64", 1)
	done := e.waitRevisionComplete("the rollout completed", first.Hash)
	pinned := imageref.Pinned(newImage, pushedFrom)
	pin, ok := done.Pins["amd64"]
	if !ok || pin.Canary != canary || pin.Images["nginx"] != pinned {
		t.Errorf("got pins %+v, want amd64's canary %s pinned to %s", done.Pins, canary, pinned)
	}
	for node, p := range e.livePods() {
		want := pinned
		if node == canary {
			want = newImage
		}
		if imageOf(p) != want || runningDigest(p) != pushedFrom {
			t.Errorf("node %s: got %s running %s, want %s running the canary's %s (not the pushed %s)", node, imageOf(p), runningDigest(p), want, pushedFrom, pushed)
		}
	}
	if events := e.waitEventsOf(rollout.ReasonPinned, 1); len(events) != 1 || !strings.Contains(events[0].Message, pushedFrom) || !strings.Contains(events[0].Message, done.Hash) {
		t.Errorf("got %s events %v, want one naming %s", rollout.ReasonPinned, eventMessages(events), pushedFrom)
	}

	// The second node pre-downloaded the tag before the pin and got the
	// pushed bytes: that pull did not let it be patched; one of the
	// pinned digest, started since, did.
	seen := pulls.of(second)
	byTag := slices.IndexFunc(seen, func(p seenPull) bool { return p.image == newImage && p.digest == pushed })
	byDigest := slices.IndexFunc(seen, func(p seenPull) bool { return p.image == pinned && p.digest != "" })
	switch patched := pulls.patchedAt(second); {
	case byTag < 0:
		t.Fatalf("got %s's pulls %+v, want one by tag that got the pushed %s (the scenario needs it: did the canary wait?)", second, seen, pushed)
	case byDigest < byTag:
		t.Errorf("got %s's pulls %+v, want one of %s after its pull by tag", second, seen, pinned)
	case patched.IsZero() || patched.Before(seen[byDigest].doneAt):
		t.Errorf("got %s patched at %s, its pull of %s done at %s: want the patch after that pull", second, patched, pinned, seen[byDigest].doneAt)
	}
}

// seenPull is a pre-download Job's pull as the test saw it: the image its
// Job named, the digest its pod got (once it started), and when.
type seenPull struct {
	image, digest string
	doneAt        time.Time
}

// pullWatch records, through a watch of the namespace's pods, each node's
// pre-download Job pods and when its DaemonSet pod was first patched.
type pullWatch struct {
	mu      sync.Mutex
	pulls   map[string]map[types.UID]seenPull
	order   map[string][]types.UID
	patched map[string]time.Time
}

// watchPulls starts a pullWatch until the test ends.
func (e *env) watchPulls() *pullWatch {
	e.t.Helper()
	w, err := e.cluster.Client.CoreV1().Pods(e.ns).Watch(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	pw := &pullWatch{pulls: map[string]map[types.UID]seenPull{}, order: map[string][]types.UID{}, patched: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pw.see(p, time.Now())
			}
		}
	}()
	return pw
}

func (pw *pullWatch) see(p *corev1.Pod, now time.Time) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	node := p.Spec.NodeName
	switch {
	case p.Labels["edgeota.io/prepull"] == "true":
		for i, c := range p.Spec.Containers {
			if c.Name != "nginx" {
				continue
			}
			if pw.pulls[node] == nil {
				pw.pulls[node] = map[types.UID]seenPull{}
			}
			sp, known := pw.pulls[node][p.UID]
			if !known {
				pw.order[node] = append(pw.order[node], p.UID)
				sp.image = c.Image
			}
			if sp.digest == "" && i < len(p.Status.ContainerStatuses) {
				if st := p.Status.ContainerStatuses[i]; st.State.Running != nil || st.State.Terminated != nil {
					sp.digest, sp.doneAt = digestOf(st.ImageID), now
				}
			}
			pw.pulls[node][p.UID] = sp
		}
	case p.Labels["app"] == dsName && imageOf(p) != oldImage:
		if _, ok := pw.patched[node]; !ok {
			pw.patched[node] = now
		}
	}
}

// of returns the node's pulls, in the order their pods appeared.
func (pw *pullWatch) of(node string) []seenPull {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	var out []seenPull
	for _, uid := range pw.order[node] {
		out = append(out, pw.pulls[node][uid])
	}
	return out
}

// patchedAt is when the test first saw the node's DaemonSet pod name
// another image than the old one (zero: never).
func (pw *pullWatch) patchedAt(node string) time.Time {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.patched[node]
}

// TestPinRecreateRepushHalts: recreated, the tag pushed again once the
// canary pulled it gives the later nodes other bytes: each fails as it
// settles, naming both digests, and the rollout halts at max-failed.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPinRecreateRepushHalts(t *testing.T) {
	const nodes = 4
	canary := localcluster.NodeName(1)
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: 4 * time.Second, Preloaded: []string{oldImage}}})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		pinAnnotation: "true", "edgeota.io/max-failed": "1"})
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })

	e.setImage(newImage)
	pushedFrom := registryDigest(newImage, "amd64", 0)
	eventually(t, "the canary running the tag's first digest", func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil || pods[canary] == nil {
			return false, "no pod", err
		}
		return imageOf(pods[canary]) == newImage && runningDigest(pods[canary]) == pushedFrom, runningDigest(pods[canary]), nil
	})
	if err := e.cluster.Repush(newImage); err != nil {
		t.Fatal(err)
	}
	pushed := registryDigest(newImage, "amd64", 1)
	halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Hash != first.Hash && s.Halted })
	second := localcluster.NodeName(2)
	if !slices.Equal(halted.Failed.Nodes, []string{second}) {
		t.Errorf("got failed %+v, want %s alone (max-failed 1)", halted.Failed, second)
	}
	why := halted.Failed.Reasons[second]
	if !strings.Contains(why, pushed) || !strings.Contains(why, pushedFrom) || !strings.Contains(why, canary) {
		t.Errorf("node %s failed for %q, want both digests (%s, %s) and the canary named", second, why, pushed, pushedFrom)
	}
	if pin := halted.Pins["amd64"]; pin.Canary != canary || pin.Images["nginx"] != imageref.Pinned(newImage, pushedFrom) {
		t.Errorf("got pins %+v, want the canary's", halted.Pins)
	}
	eventually(t, "a "+rollout.ReasonDigestMismatch+" event naming both digests", func(context.Context) (bool, string, error) {
		events := e.eventsOf(rollout.ReasonDigestMismatch)
		return len(events) == 1 && strings.Contains(events[0].Message, pushed) && strings.Contains(events[0].Message, pushedFrom), fmt.Sprint(eventMessages(events)), nil
	})
	// The canary and the failed node moved; nothing else does.
	e.expectStaysHalted([]string{canary, second}, 3*time.Second)
	for _, node := range []string{localcluster.NodeName(3), localcluster.NodeName(4)} {
		if p := e.livePods()[node]; p == nil || imageOf(p) != oldImage {
			t.Errorf("node %s: got %v, want its old pod untouched once halted", node, p)
		}
	}
}

// TestPinPerArchitecture: a mixed amd64/arm64 fleet whose tag names other
// bytes on each architecture, a budget of every node: the first wave is
// each architecture's canary alone (the only nodes patched to the tag),
// each is pinned to what its canary ran, every node runs its
// architecture's digest, and the rollout completes.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestPinPerArchitecture(t *testing.T) {
	const nodes, arm = 4, 2
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, Arm64Nodes: arm, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: time.Second, Preloaded: []string{oldImage}}})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "100%"}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })

	archOf := map[string]string{}
	for i := 1; i <= nodes; i++ {
		archOf[localcluster.NodeName(i)] = "amd64"
		if i > nodes-arm {
			archOf[localcluster.NodeName(i)] = "arm64"
		}
	}
	e.setImage(newImage)
	canaries := map[string]string{"amd64": localcluster.NodeName(1), "arm64": localcluster.NodeName(nodes - arm + 1)}
	done := e.waitRevisionComplete("the rollout completed", first.Hash)
	for arch, canary := range canaries {
		want := imageref.Pinned(newImage, registryDigest(newImage, arch, 0))
		if pin := done.Pins[arch]; pin.Canary != canary || pin.Images["nginx"] != want {
			t.Errorf("got %s's pin %+v, want %s's %s", arch, pin, canary, want)
		}
	}
	if registryDigest(newImage, "amd64", 0) == registryDigest(newImage, "arm64", 0) {
		t.Fatal("the local cluster serves one digest for both architectures: nothing to tell apart")
	}
	// The first wave: the nodes patched to the tag are those taken before
	// their architecture's pin, and a patch is what it writes for good.
	var tagged []string
	for node, p := range e.livePods() {
		if imageOf(p) == newImage {
			tagged = append(tagged, node)
		}
	}
	if slices.Sort(tagged); !slices.Equal(tagged, slices.Sorted(maps.Values(canaries))) {
		t.Errorf("got %v patched to the tag (before their pin), want the canaries %v alone", tagged, slices.Sorted(maps.Values(canaries)))
	}
	for node, p := range e.livePods() {
		arch := archOf[node]
		if want := registryDigest(newImage, arch, 0); runningDigest(p) != want {
			t.Errorf("node %s (%s): runs %s (%s), want %s", node, arch, runningDigest(p), imageOf(p), want)
		}
	}
}

// TestPinUnpinnable: a canary whose runtime reports a bare config digest
// (an image imported onto the node, as by ctr import or kind load) gives
// no pin: the rollout goes on with the tag, the reason in the rollout
// status and a Warning event.
func TestPinUnpinnable(t *testing.T) {
	t.Parallel()
	const nodes = 3
	imported := localcluster.ImportedPrefix + ":v2"
	e := newEnv(t, nodes)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "100%"}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })

	e.setImage(imported)
	done := e.waitRevisionComplete("the rollout completed", first.Hash)
	pin := done.Pins["amd64"]
	if why := pin.Unpinnable["nginx"]; pin.Canary != localcluster.NodeName(1) || len(pin.Images) != 0 || !strings.Contains(why, "config digest") {
		t.Errorf("got pins %+v, want the canary's container unpinnable for its config digest", done.Pins)
	}
	for node, p := range e.livePods() {
		if imageOf(p) != imported {
			t.Errorf("node %s: got %s, want the tag %s", node, imageOf(p), imported)
		}
	}
	if events := e.waitEventsOf(rollout.ReasonUnpinnable, 1); len(events) != 1 || !strings.Contains(events[0].Message, "config digest") {
		t.Errorf("got %s events %v, want one saying why", rollout.ReasonUnpinnable, eventMessages(events))
	}
}
