package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/localcluster"
)

// cutoffNamespace holds scenario 2's DaemonSet.
const cutoffNamespace = "bench-cutoff"

// labelParallelism bounds the node label patches in flight: cutting 100
// nodes off one at a time, as localcluster.CutOff does, would take minutes.
const labelParallelism = 16

// cutoffFigures are scenario 2's results.
type cutoffFigures struct {
	cut       int
	readyDone rollout         // image change until every Ready node is done
	deleted   []time.Duration // per returning node: Ready until its old pod is deleted
	replaced  []time.Duration // per returning node: Ready until its new pod is Ready
	peakRSS   int64
}

// benchCutOff cuts 20% of the nodes off, rolls the AdvancedRollingUpdate
// DaemonSet over the Ready 80%, then reconnects the rest and times each one's
// upgrade from the moment it is Ready again.
func benchCutOff(ctx context.Context, s *session) (cutoffFigures, error) {
	var f cutoffFigures
	client := s.cluster.Client
	all := s.nodes()
	f.cut = len(all) / 5
	ready, cut := all[:len(all)-f.cut], all[len(all)-f.cut:]
	pods, err := deploy(ctx, client, cutoffNamespace, daemonSet("ota", advancedRollingUpdate, nil), all)
	if err != nil {
		return f, err
	}
	defer pods.close()
	nodes, err := watchNodes(ctx, client)
	if err != nil {
		return f, err
	}
	defer nodes.close()
	ctrl, err := s.startController(ctx, "ota-controller-cutoff")
	if err != nil {
		return f, err
	}
	if err := setCutOff(ctx, s, cut, true); err != nil {
		return f, err
	}
	if _, err := waitReady(ctx, nodes, cut, corev1.ConditionUnknown); err != nil {
		return f, err
	}
	if f.readyDone, f.readyDone.cpu, err = measureCPU(ctrl, func() (rollout, error) {
		return rollOut(ctx, s, pods, cutoffNamespace, "ota", image(1), ready)
	}); err != nil {
		return f, err
	}
	progress("cut-off: %d Ready nodes done in %s", len(ready), f.readyDone.wall)
	if err := reconnect(ctx, s, &f, pods, nodes, cut); err != nil {
		return f, err
	}
	if f.peakRSS, err = ctrl.peakRSS(); err != nil {
		return f, err
	}
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, cutoffNamespace))
}

// reconnect brings the cut nodes back at once and records, per node, the
// time from its Ready=True (as the node watch sees it) to its old pod's
// deletion (the first event showing it terminating or gone) and to its new
// pod being Ready.
func reconnect(ctx context.Context, s *session, f *cutoffFigures, pods *view[*corev1.Pod], nodes *view[*corev1.Node], cut []string) error {
	if err := setCutOff(ctx, s, cut, false); err != nil {
		return err
	}
	var readyAt map[string]time.Time
	var readyErr error
	var wg sync.WaitGroup
	wg.Go(func() { readyAt, readyErr = waitReady(ctx, nodes, cut, corev1.ConditionTrue) })
	deletedAt, doneAt := map[string]time.Time{}, map[string]time.Time{}
	img := image(1)
	err := pods.until(ctx, settleTimeout, "the reconnected nodes to be up to date", func(now time.Time, items map[string]*corev1.Pod) bool {
		byNode := podsByNode(items)
		for _, n := range cut {
			if _, seen := deletedAt[n]; !seen && !runsOther(byNode[n], img) {
				deletedAt[n] = now
			}
			if _, seen := doneAt[n]; !seen && upToDate(byNode[n], img) {
				doneAt[n] = now
			}
		}
		return len(doneAt) == len(cut)
	})
	wg.Wait()
	if err = errors.Join(err, readyErr); err != nil {
		return err
	}
	for _, n := range cut {
		f.deleted = append(f.deleted, deletedAt[n].Sub(readyAt[n]))
		f.replaced = append(f.replaced, doneAt[n].Sub(readyAt[n]))
	}
	return nil
}

// runsOther reports whether a live pod runs an image other than img.
func runsOther(live []*corev1.Pod, img string) bool {
	for _, p := range live {
		if p.Spec.Containers[0].Image != img {
			return true
		}
	}
	return false
}

// waitReady waits until each of names reports Ready with status want and
// returns when the watch first saw each one so.
func waitReady(ctx context.Context, nodes *view[*corev1.Node], names []string, want corev1.ConditionStatus) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	err := nodes.until(ctx, settleTimeout, fmt.Sprintf("%d nodes to be Ready=%s", len(names), want), func(now time.Time, items map[string]*corev1.Node) bool {
		for _, name := range names {
			if _, ok := seen[name]; !ok && items[name] != nil && readyStatus(items[name]) == want {
				seen[name] = now
			}
		}
		return len(seen) == len(names)
	})
	return seen, err
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := health.NodeCondition(n, corev1.NodeReady); c != nil {
		return c.Status
	}
	return ""
}

// setCutOff sets or removes localcluster.CutOffLabel on the nodes, many at a
// time, without waiting for the nodes to react.
func setCutOff(ctx context.Context, s *session, names []string, off bool) error {
	var value any // nil removes the label
	if off {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{localcluster.CutOffLabel: value}}})
	if err != nil {
		return fmt.Errorf("encoding the cut-off label patch: %w", err)
	}
	errs := make([]error, len(names))
	workqueue.ParallelizeUntil(ctx, labelParallelism, len(names), func(i int) {
		_, errs[i] = s.cluster.Client.CoreV1().Nodes().Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{})
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("labelling nodes %s=%v: %w", localcluster.CutOffLabel, value, err)
	}
	return nil
}
