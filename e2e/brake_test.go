//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// cutOffImage is a version that cuts off every node it reaches: the test
// watches for its pods and cuts their node off (cutOffNodesRunning), as a
// broken VPN client or CNI plugin would. To the local cluster it is an image
// like any other, so its pods turn Ready at once.
const cutOffImage = "nginx:cut-off"

// brakeEnv is a cluster of the nodes with the
// AdvancedRollingUpdate DaemonSet (max-unavailable budget, minReadySeconds)
// whose first rollout has settled on every node.
func brakeEnv(t *testing.T, nodes, budget int, minReadySeconds int32, annotations map[string]string) *env {
	t.Helper()
	e := newEnv(t, nodes)
	all := map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: fmt.Sprint(budget)}
	for k, v := range annotations {
		all[k] = v
	}
	e.createDaemonSet(all)
	if minReadySeconds > 0 {
		patch := fmt.Sprintf(`{"spec":{"minReadySeconds":%d}}`, minReadySeconds)
		if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestCutOffVersionHalts: a version that cuts off every node it reaches
// stops at max-unavailable nodes with RolloutHalted, with and without
// minReadySeconds (the proof of life is the node's heartbeat, not time), and
// the next version rolls on over the healthy nodes and passes the cut-off
// ones by.
func TestCutOffVersionHalts(t *testing.T) {
	t.Parallel()
	for _, minReady := range []int32{0, 5} {
		t.Run(fmt.Sprintf("minReadySeconds=%d", minReady), func(t *testing.T) {
			const nodes, budget = 6, 2
			e := brakeEnv(t, nodes, budget, minReady, nil)
			e.startController(e.cluster.Kubeconfig, "-v=2")
			e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })

			e.cutOffNodesRunning(cutOffImage)
			e.setImage(cutOffImage)
			halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
			if halted.Failed.Count != budget || len(halted.Failed.Nodes) != budget {
				t.Errorf("got failed %+v, want %d nodes", halted.Failed, budget)
			}
			e.expectStaysHalted(halted.Failed.Nodes, 10*time.Second)
			events := e.eventsOf(rollout.ReasonRolloutHalted)
			if len(events) != 1 {
				t.Fatalf("got %d %s events, want 1", len(events), rollout.ReasonRolloutHalted)
			}
			for _, n := range halted.Failed.Nodes {
				if !strings.Contains(events[0].Message, n) {
					t.Errorf("got %s event %q, want it to name %s", rollout.ReasonRolloutHalted, events[0].Message, n)
				}
			}
			if minReady > 0 {
				return
			}

			// A fixed version rolls over every healthy node; the cut-off
			// ones are NotReady and skipped.
			e.setImage(newImage)
			settled := e.waitRolloutStatus("the fixed version settled on the healthy nodes", func(s *rollout.Status) bool {
				return s.Hash != halted.Hash && s.Updated == nodes-budget && s.Skipped == budget && s.InFlight == 0
			})
			if settled.Halted || settled.Failed.Count != 0 {
				t.Errorf("got %+v, want a fresh record for the new revision", settled)
			}
			pods, err := e.podsByNode(e.ctx())
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range allNodes(nodes) {
				want := newImage
				if slices.Contains(halted.Failed.Nodes, n) {
					want = cutOffImage
				}
				if got := imageOf(pods[n]); got != want {
					t.Errorf("node %s runs %s, want %s", n, got, want)
				}
			}
		})
	}
}

// TestHaltSurvivesControllerRestart: a controller killed while the rollout
// is halted is replaced by one that, reading the caches and the rollout
// status alone, still deletes nothing and says nothing new.
func TestHaltSurvivesControllerRestart(t *testing.T) {
	t.Parallel()
	const nodes, budget = 6, 2
	e := brakeEnv(t, nodes, budget, 0, nil)
	first := e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-1", Verbosity: 2})
	e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })
	e.cutOffNodesRunning(cutOffImage)
	e.setImage(cutOffImage)
	halted := e.waitRolloutStatus("the rollout halted", func(s *rollout.Status) bool { return s.Halted })
	// The Warning goes out after the status, through the event
	// broadcaster: killed before it is sent, the first controller would
	// leave none, and the count below would prove nothing.
	eventually(t, "the first controller's "+rollout.ReasonRolloutHalted+" event", func(context.Context) (bool, string, error) {
		got := len(e.eventsOf(rollout.ReasonRolloutHalted))
		return got == 1, fmt.Sprintf("%d events", got), nil
	})

	e.kill(first)
	e.startKillableControllerWith(harness.ControllerOptions{Name: "ota-controller-2", Verbosity: 2})
	e.expectStaysHalted(halted.Failed.Nodes, 10*time.Second)
	if got := len(e.waitEventsOf(rollout.ReasonRolloutHalted, 1)); got != 1 {
		t.Errorf("got %d %s events after the restart, want still 1", got, rollout.ReasonRolloutHalted)
	}
}

// TestNeverReadyVersionsHoldTheBudget: three successive versions that never
// become Ready, each applied once the previous one took its nodes, never
// leave more than max-unavailable nodes without an available pod: replacing
// a pod that is down anyway frees no budget.
func TestNeverReadyVersionsHoldTheBudget(t *testing.T) {
	t.Parallel()
	const nodes, budget = 8, 2
	e := brakeEnv(t, nodes, budget, 0, nil)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.waitRolloutStatus("the first rollout settled", func(s *rollout.Status) bool { return s.Updated == nodes })

	s := startSampler(t, e, nodes)
	for _, image := range localcluster.NeverReadyImages {
		e.setImage(image)
		eventually(t, fmt.Sprintf("%d nodes running %s", budget, image), func(ctx context.Context) (bool, string, error) {
			n, err := e.nodesRunning(ctx, image)
			return n == budget, fmt.Sprintf("%d", n), err
		})
	}
	consistently(t, "no further node is taken", 10*time.Second, func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes-budget, fmt.Sprintf("%d nodes still on %s", n, oldImage), err
	})
	samples, worst := s.stop()
	t.Logf("%d samples; at worst %d of %d nodes without a Ready pod (budget %d)", samples, worst.unavailable, nodes, budget)
	if worst.unavailable > budget {
		t.Errorf("%d nodes without a Ready pod at %s (budget %d): %v", worst.unavailable, worst.at.Format(time.StampMilli), budget, worst.nodes)
	}
}

// TestPauseHolds: edgeota.io/paused deletes nothing, and its removal lets
// the rollout finish.
func TestPauseHolds(t *testing.T) {
	t.Parallel()
	const nodes = 4
	e := brakeEnv(t, nodes, 2, 0, map[string]string{rollout.PausedAnnotation: "true"})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	e.waitRolloutStatus("the rollout paused", func(s *rollout.Status) bool { return s.Paused && s.HeldBack == nodes })
	consistently(t, "nothing is deleted while paused", 8*time.Second, func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d nodes on %s", n, oldImage), err
	})
	e.annotate(rollout.PausedAnnotation, nil)
	e.waitAllNodes(newImage)
	if got := len(e.waitEventsOf(rollout.ReasonRolloutPaused, 1)); got != 1 {
		t.Errorf("got %d %s events, want 1", got, rollout.ReasonRolloutPaused)
	}
}

// cutOffNodesRunning cuts off, from now until the test ends, every node on
// which a pod of the DaemonSet with the image shows up, as soon as the watch
// sees it bound: the version breaks its node's link.
func (e *env) cutOffNodesRunning(image string) {
	e.t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	cut := map[string]bool{}
	handle := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || imageOf(p) != image || cut[p.Spec.NodeName] {
			return
		}
		cut[p.Spec.NodeName] = true
		if err := e.cluster.BeginCutOff(context.Background(), p.Spec.NodeName); err != nil {
			e.t.Errorf("cutting off node %s: %v", p.Spec.NodeName, err)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		e.t.Fatal(err)
	}
	stop := make(chan struct{})
	e.t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
}

// expectStaysHalted checks for d that the failed nodes, and only they, run
// a pod other than the original image, and that the status stays halted.
func (e *env) expectStaysHalted(failed []string, d time.Duration) {
	e.t.Helper()
	consistently(e.t, "the rollout stays halted at the failed nodes", d, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		var moved []string
		for node, p := range pods {
			if imageOf(p) != oldImage {
				moved = append(moved, node)
			}
		}
		slices.Sort(moved)
		s, err := e.rolloutStatus(ctx)
		if err != nil {
			return false, "", err
		}
		return slices.Equal(moved, failed) && s != nil && s.Halted, fmt.Sprintf("upgraded %v, status %+v", moved, s), nil
	})
}

// rolloutStatus reads the controller's rollout status of the DaemonSet; nil
// before it wrote one.
func (e *env) rolloutStatus(ctx context.Context) (*rollout.Status, error) {
	ds, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Get(ctx, dsName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	value, ok := ds.Annotations[rollout.RolloutStatusAnnotation]
	if !ok {
		return nil, nil
	}
	var s rollout.Status
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return nil, fmt.Errorf("annotation %s %q: %w", rollout.RolloutStatusAnnotation, value, err)
	}
	return &s, nil
}

// waitRolloutStatus waits until the rollout status satisfies cond, and
// returns it.
func (e *env) waitRolloutStatus(what string, cond func(*rollout.Status) bool) rollout.Status {
	e.t.Helper()
	var got rollout.Status
	eventually(e.t, what, func(ctx context.Context) (bool, string, error) {
		s, err := e.rolloutStatus(ctx)
		if err != nil || s == nil {
			return false, "no rollout status yet", err
		}
		got = *s
		return cond(s), fmt.Sprintf("%+v", *s), nil
	})
	return got
}

// eventsOf lists the DaemonSet's events with the reason.
func (e *env) eventsOf(reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.cluster.Client.CoreV1().Events(e.ns).List(e.ctx(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=DaemonSet,involvedObject.name=" + dsName + ",reason=" + reason,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// waitEventsOf waits until the DaemonSet has at least n events of reason,
// and returns them all: the controller's recorder sends an event in the
// background after the change it tells of, so the change (a status, a pod
// replaced) can be seen first. The caller checks the exact count.
func (e *env) waitEventsOf(reason string, n int) []corev1.Event {
	e.t.Helper()
	var events []corev1.Event
	eventually(e.t, fmt.Sprintf("%d %s events", n, reason), func(ctx context.Context) (bool, string, error) {
		events = e.eventsOf(reason)
		return len(events) >= n, fmt.Sprintf("%d events", len(events)), nil
	})
	return events
}

// nodesRunning counts the nodes whose live pod of the DaemonSet has the image.
func (e *env) nodesRunning(ctx context.Context, image string) (int, error) {
	pods, err := e.podsByNode(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if imageOf(p) == image {
			n++
		}
	}
	return n, nil
}

// annotate sets an annotation of the DaemonSet, or removes it when value is
// nil.
func (e *env) annotate(key string, value any) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("annotating DaemonSet %s with %s=%v: %v", dsName, key, value, err)
	}
}
