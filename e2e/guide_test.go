//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// guideExample is one example manifest of the operator's guides: the
// subtest its marker names (<!-- e2e: TestGuideExamples/NAME -->), the
// guide, how many nodes of the scenario's cluster it gets, and what is
// checked once its DaemonSet is given a new image.
type guideExample struct {
	name  string
	file  string
	nodes int
	check func(*guideRun, *testing.T)
}

// guideExamples run in this order, each on nodes of its own; the
// pre-download examples last, as they count the pre-download Jobs of the
// namespace.
var guideExamples = []guideExample{
	{"weekly-window", "docs/operator/maintenance-windows.md", 2, (*guideRun).expectWindows},
	{"vans-local-time", "docs/operator/maintenance-windows.md", 3, (*guideRun).expectWindows},
	{"vans-ota", "docs/operator/holds-and-deadlines.md", 2, (*guideRun).expectOffersWithDeadline},
	{"pre-download", "docs/operator/pre-download.md", 3, (*guideRun).expectCanaryThenPulls},
	{"afternoon-download", "docs/operator/pre-download.md", 2, (*guideRun).expectWindows},
}

// guidePullDelay is how long the scenario's nodes take to pull a new image.
const guidePullDelay = time.Second

// TestGuideExamples applies each example manifest of the operator's guides
// (maintenance windows, holds and deadlines, pre-download), read from the
// guide itself: its annotations on a DaemonSet of the scenario's, on nodes
// of its own (a node selector), its `kubectl annotate node` commands on
// those nodes (the vans' names given to them in order), and AdvancedRolling-
// Update where the example names no strategy. Then a new image, and what the
// guide says follows: windows open or closed at each node's local time as
// package window reads them now (the nodes whose window is open upgraded,
// the others shown waiting for their next opening; edges of a window are
// waited out first), OTA offers carrying the deadline and hold limit the
// annotations set, the pre-download canary upgraded before any pull and the
// others pulled one at a time. The cluster models image pulls.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestGuideExamples(t *testing.T) {
	total := 0
	for _, x := range guideExamples {
		total += x.nodes
	}
	e := newEnvWith(t, harness.ClusterOptions{Nodes: total, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: guidePullDelay, BackOff: pullBackOff}})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	next := 1
	for _, x := range guideExamples {
		var nodes []string
		for range x.nodes {
			nodes = append(nodes, localcluster.NodeName(next))
			next++
		}
		t.Run(x.name, func(t *testing.T) {
			g := newGuideRun(t, e, x, nodes)
			x.check(g, t)
		})
	}
}

// guideRun is one example applied: its DaemonSet, its nodes and their zones.
type guideRun struct {
	e           *env
	ds          string
	nodes       []string
	annotations map[string]string
	// zones are the nodes' edgeota.io/time-zone, as the example annotates
	// them; nil for the others.
	zones map[string]*time.Location
	// before are the DaemonSet's pods by node before the image changed.
	before map[string]*corev1.Pod
	// changed is when the image changed; oldHash the revision before.
	changed time.Time
	oldHash string
}

// newGuideRun reads the example from its guide and applies it on nodes.
func newGuideRun(t *testing.T, e *env, x guideExample, nodes []string) *guideRun {
	t.Helper()
	groups := markedBlocks(t, e.root, x.file, "TestGuideExamples/"+x.name)
	if len(groups) != 1 || len(groups[0]) == 0 || groups[0][0].lang != "yaml" {
		t.Fatalf("%s: want one marker for %s, right above a yaml block", x.file, x.name)
	}
	var manifest appsv1.DaemonSet
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(groups[0][0].text()), 4096).Decode(&manifest); err != nil {
		t.Fatalf("%s: the %s example does not parse: %v", x.file, x.name, err)
	}
	g := &guideRun{e: e, ds: "guide-" + x.name, nodes: nodes, annotations: manifest.Annotations, zones: map[string]*time.Location{}}
	if g.annotations[rollout.StrategyAnnotation] == "" {
		g.annotations[rollout.StrategyAnnotation] = string(rollout.StrategyAdvancedRollingUpdate)
	}
	t.Logf("%s: annotations %v", x.file, g.annotations)
	for _, n := range nodes {
		if err := e.cluster.SetNodeLabel(e.ctx(), n, "guide", x.name); err != nil {
			t.Fatal(err)
		}
	}
	// The commands after the manifest: each van named gets the next node.
	vans := map[string]string{}
	for _, b := range groups[0][1:] {
		for _, line := range b.lines {
			f := strings.Fields(line)
			if len(f) != 5 || f[0] != "kubectl" || f[1] != "annotate" || f[2] != "node" {
				t.Fatalf("%s: the %s example runs %q: want kubectl annotate node NAME KEY=VALUE", x.file, x.name, line)
			}
			if _, ok := vans[f[3]]; !ok {
				if len(vans) == len(nodes) {
					t.Fatalf("%s: the %s example names more nodes than its %d", x.file, x.name, len(nodes))
				}
				vans[f[3]] = nodes[len(vans)]
			}
			key, value, _ := strings.Cut(f[4], "=")
			e.annotateNode(vans[f[3]], key, value)
			zone, err := window.NodeZone(map[string]string{key: value})
			if err != nil {
				t.Fatal(err)
			}
			g.zones[vans[f[3]]] = zone
			t.Logf("%s is %s: %s=%s", vans[f[3]], f[3], key, value)
		}
	}
	g.create(t)
	return g
}

// create creates the example's DaemonSet on its nodes and waits until each
// runs its old image, the controller's rollout status saying so.
func (g *guideRun) create(t *testing.T) {
	t.Helper()
	labels := map[string]string{"app": g.ds}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: g.ds, Namespace: g.e.ns, Annotations: g.annotations},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"guide": strings.TrimPrefix(g.ds, "guide-")},
					Containers:   []corev1.Container{{Name: "nginx", Image: oldImage}},
				},
			},
		},
	}
	if _, err := g.e.cluster.Client.AppsV1().DaemonSets(g.e.ns).Create(g.e.ctx(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, g.ds+" Ready on its nodes", func(ctx context.Context) (bool, string, error) {
		pods, err := g.pods(ctx)
		if err != nil {
			return false, "", err
		}
		ready := 0
		for _, p := range pods {
			if podcondition.IsTrue(&p.Status, corev1.PodReady) {
				ready++
			}
		}
		g.before = pods
		return ready == len(g.nodes), fmt.Sprintf("%d of %d", ready, len(g.nodes)), nil
	})
	g.oldHash = g.waitStatus(t, g.ds+"'s first revision rolled out", (*rollout.Status).Complete).Hash
}

// setImage gives the DaemonSet the new image.
func (g *guideRun) setImage(t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":%q}]}}}}`, newImage)
	g.changed = time.Now()
	if _, err := g.e.cluster.Client.AppsV1().DaemonSets(g.e.ns).Patch(g.e.ctx(), g.ds, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pods are the DaemonSet's live pods by node.
func (g *guideRun) pods(ctx context.Context) (map[string]*corev1.Pod, error) {
	list, err := g.e.cluster.Client.CoreV1().Pods(g.e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + g.ds})
	if err != nil {
		return nil, err
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = p
		}
	}
	return pods, nil
}

// waitStatus waits until the DaemonSet's rollout status satisfies cond, once
// it is about another revision than the one before the image changed.
func (g *guideRun) waitStatus(t *testing.T, what string, cond func(*rollout.Status) bool) rollout.Status {
	t.Helper()
	var got rollout.Status
	eventually(t, what, func(ctx context.Context) (bool, string, error) {
		ds, err := g.e.cluster.Client.AppsV1().DaemonSets(g.e.ns).Get(ctx, g.ds, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		value, ok := ds.Annotations[rollout.RolloutStatusAnnotation]
		if !ok {
			return false, "no rollout status", nil
		}
		var s rollout.Status
		if err := json.Unmarshal([]byte(value), &s); err != nil {
			return false, "", err
		}
		got = s
		return s.Hash != "" && s.Hash != g.oldHash && ds.Status.ObservedGeneration == ds.Generation && cond(&s), value, nil
	})
	return got
}

// expectUntouched checks, for a while, that the nodes keep their pods of
// before the image changed.
func (g *guideRun) expectUntouched(t *testing.T, nodes []string) {
	t.Helper()
	consistently(t, fmt.Sprintf("%v keep their pods", nodes), settle, func(ctx context.Context) (bool, string, error) {
		pods, err := g.pods(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range nodes {
			if p := pods[n]; p == nil || p.UID != g.before[n].UID {
				return false, fmt.Sprintf("the pod on %s was %s, now %s", n, g.before[n].Name, describePod(p)), nil
			}
		}
		return true, "", nil
	})
}

// windowEdgeMargin is how near a window's opening or closing may be when a
// windowed example starts: nearer, the scenario waits it out, so that what
// it expects of each node does not change while it runs.
const windowEdgeMargin = 3 * time.Minute

// expectWindows: with the image changed, the nodes whose window (read as
// package window reads it, in the node's zone) is open now are upgraded; the
// others wait, counted in the rollout status with the next opening, their
// pods untouched; with pre-download on, their images pulled meanwhile.
func (g *guideRun) expectWindows(t *testing.T) {
	t.Helper()
	schedule, err := window.Parse(g.annotations[rollout.MaintenanceWindowAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, n := range g.nodes {
		if _, change := schedule.At(now, g.zones[n]); !change.IsZero() && change.Sub(now) < windowEdgeMargin {
			t.Logf("%s's window changes at %s: waiting that out", n, change)
			time.Sleep(time.Until(change) + 5*time.Second)
			now = time.Now()
		}
	}
	var open, closed []string
	var opening time.Time
	for _, n := range g.nodes {
		isOpen, change := schedule.At(now, g.zones[n])
		if isOpen {
			open = append(open, n)
			continue
		}
		closed = append(closed, n)
		if opening.IsZero() || change.Before(opening) {
			opening = change
		}
	}
	t.Logf("at %s the window %q is open on %v, closed on %v (next opening %s)", now.UTC().Format(time.RFC3339), schedule, open, closed, opening)
	preDownload := g.annotations[rollout.PreDownloadAnnotation] == "true"

	g.setImage(t)
	if len(closed) == 0 {
		g.waitStatus(t, "every node updated, its window open", (*rollout.Status).Complete)
		return
	}
	s := g.waitStatus(t, fmt.Sprintf("%d nodes updated, %d waiting for their window", len(open), len(closed)), func(s *rollout.Status) bool {
		pulled := !preDownload || s.Pulls != nil && s.Pulls.Done == len(closed) && s.Pulls.InFlight == 0
		return s.Updated == len(open) && s.WaitingForWindow != nil && s.WaitingForWindow.Count == len(closed) && pulled
	})
	if at := s.WaitingForWindow.At; at == nil || !at.Time.Equal(opening) {
		t.Errorf("got the next opening %v, want %s", at, opening)
	}
	g.expectUntouched(t, closed)
	if preDownload {
		pods, err := g.pods(g.e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range closed {
			if !podcondition.IsTrue(&pods[n].Status, podcondition.ImageReady) {
				t.Errorf("the pod on %s, waiting for its window, has no %s=True: its images were not pulled", n, podcondition.ImageReady)
			}
		}
	}
}

// expectOffersWithDeadline: an OTA DaemonSet offers the new version to every
// node, window or not, each offer carrying its upgrade deadline (the first
// offer plus edgeota.io/upgrade-deadline-seconds) and hold limit (the new
// target plus edgeota.io/max-hold-seconds); nothing is upgraded before the
// deadline, and the rollout status counts the offers with the first one.
func (g *guideRun) expectOffersWithDeadline(t *testing.T) {
	t.Helper()
	deadline := g.seconds(t, rollout.UpgradeDeadlineAnnotation)
	maxHold := g.seconds(t, rollout.MaxHoldAnnotation)
	g.setImage(t)
	var first time.Time
	eventually(t, "every node offered the new version, with its deadline and hold limit", func(ctx context.Context) (bool, string, error) {
		pods, err := g.pods(ctx)
		if err != nil {
			return false, "", err
		}
		first = time.Time{}
		for _, n := range g.nodes {
			p := pods[n]
			if p == nil || !podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade) {
				return false, "not offered on " + n, nil
			}
			o, err := podchannel.OfferOf(p)
			if err != nil || o == nil || o.OfferedAt == nil || o.UpgradeDeadline == nil || o.HoldLimit == nil {
				return false, fmt.Sprintf("offer on %s: %+v (%v)", n, o, err), nil
			}
			if !o.UpgradeDeadline.Time.Equal(o.OfferedAt.Add(deadline)) {
				t.Errorf("%s: got the upgrade deadline %s, want the first offer %s plus %s", n, o.UpgradeDeadline, o.OfferedAt, deadline)
			}
			if lo, hi := g.changed.Add(maxHold-5*time.Second), time.Now().Add(maxHold+5*time.Second); o.HoldLimit.Time.Before(lo) || o.HoldLimit.Time.After(hi) {
				t.Errorf("%s: got the hold limit %s, want %s after the new target (%s)", n, o.HoldLimit, maxHold, g.changed)
			}
			if first.IsZero() || o.UpgradeDeadline.Time.Before(first) {
				first = o.UpgradeDeadline.Time
			}
		}
		return true, "", nil
	})
	s := g.waitStatus(t, "every offer counted, with the first deadline", func(s *rollout.Status) bool {
		return s.Offered != nil && s.Offered.Count == len(g.nodes)
	})
	if at := s.Offered.At; at == nil || !at.Time.Equal(first) {
		t.Errorf("got the first deadline %v in the rollout status, want %s", at, first)
	}
	g.expectUntouched(t, g.nodes)
}

// expectCanaryThenPulls: with pre-download and a canary of one, the first
// node is upgraded with no pull of its own; then the others pull, no more at
// once than the parallelism, and the rollout completes.
func (g *guideRun) expectCanaryThenPulls(t *testing.T) {
	t.Helper()
	canary := g.annotations[rollout.PreDownloadCanaryAnnotation]
	scaled, err := rollout.ParseScaled(g.annotations[rollout.PreDownloadParallelismAnnotation])
	if err != nil || canary != "1" {
		t.Fatalf("the pre-download example: canary %q, parallelism %v: want a canary of 1 and a parallelism", canary, err)
	}
	parallelism := scaled.Of(len(g.nodes))
	log := g.e.recordPreDownload()
	g.setImage(t)
	g.waitStatus(t, "the rollout complete", (*rollout.Status).Complete)
	var pulled []string
	for _, n := range g.nodes {
		if len(log.jobsOn(n)) > 0 {
			pulled = append(pulled, n)
		}
	}
	if len(pulled) != len(g.nodes)-1 {
		t.Errorf("got pre-download Jobs on %v, want on every node but the canary's (%d of %d)", pulled, len(g.nodes)-1, len(g.nodes))
	}
	if most := log.maxJobs(); most > parallelism {
		t.Errorf("got %d pre-download Jobs at once, want at most %d (%s)", most, parallelism, g.annotations[rollout.PreDownloadParallelismAnnotation])
	}
}

// seconds reads an annotation of the example as a number of seconds.
func (g *guideRun) seconds(t *testing.T, key string) time.Duration {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(g.annotations[key], &n); err != nil {
		t.Fatalf("%s %q: %v", key, g.annotations[key], err)
	}
	return time.Duration(n) * time.Second
}
