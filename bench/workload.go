package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// The opt-in contract of ota-controller.
const (
	advancedRollingUpdate = string(rollout.StrategyAdvancedRollingUpdate)
	otaStrategy           = string(rollout.StrategyOTA)
	maxUnavailable        = "10%"
	containerName         = "app"
)

// Bounds on the waits around a scenario: creating or deleting N pods takes
// seconds; minutes mean something is stuck.
const (
	settleTimeout = 5 * time.Minute
	pollInterval  = 500 * time.Millisecond
)

// settleTimeoutFor bounds a wait whose work grows with count: settleTimeout
// per `per` begun. A rollout's time grows with its nodes (ten waves, each
// through the API server: at 2,000 nodes on node Leases both controllers'
// rollouts took 3–5 minutes on 2 cores), a namespace's deletion with its
// pods (8,000 took more than 5 minutes).
func settleTimeoutFor(count, per int) time.Duration {
	return settleTimeout * time.Duration(max(1, (count+per-1)/per))
}

// image is the i-th image tag the benchmark rolls to; KWOK never pulls it.
func image(i int) string {
	return fmt.Sprintf("registry.bench.local/app:v%d", i)
}

// daemonSet is a DaemonSet of one container tolerating every taint, so that
// it lands on every KWOK node. strategy is an ota-controller strategy, or
// empty for the native RollingUpdate at maxUnavailable 10%.
func daemonSet(name, strategy string, nodeSelector map[string]string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:   []corev1.Container{{Name: containerName, Image: image(0)}},
				},
			},
		},
	}
	if strategy == "" {
		limit := intstr.FromString(maxUnavailable)
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{
			Type:          appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &limit},
		}
		return ds
	}
	ds.Annotations = map[string]string{rollout.StrategyAnnotation: strategy, rollout.MaxUnavailableAnnotation: maxUnavailable}
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	return ds
}

// deploy creates namespace ns with the DaemonSet in it, watches its pods and
// waits until each of nodes runs one Ready pod of it.
func deploy(ctx context.Context, client kubernetes.Interface, ns string, ds *appsv1.DaemonSet, nodes []string) (*view[*corev1.Pod], error) {
	if err := createNamespace(ctx, client, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating DaemonSet %s/%s: %w", ns, ds.Name, err)
	}
	pods, err := watchPods(ctx, client, ns, "app="+ds.Name)
	if err != nil {
		return nil, err
	}
	if err := waitUpToDate(ctx, pods, image(0), nodes); err != nil {
		pods.close()
		return nil, err
	}
	return pods, nil
}

// setImage changes the DaemonSet's container image, as `kubectl set image`.
func setImage(ctx context.Context, client kubernetes.Interface, ns, name, img string) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]string{{"name": containerName, "image": img}}}}}})
	if err != nil {
		return fmt.Errorf("encoding the image patch: %w", err)
	}
	if _, err := client.AppsV1().DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the image of DaemonSet %s/%s to %s: %w", ns, name, img, err)
	}
	return nil
}

// createNamespace creates ns and waits for its default service account,
// without which pods are refused.
func createNamespace(ctx context.Context, client kubernetes.Interface, ns string) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settleTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the default service account of %s: %w", ns, err)
	}
	return nil
}

// deleteNamespace deletes ns with everything in it and waits until it is
// gone, so that the next scenario starts on a quiet cluster.
func deleteNamespace(ctx context.Context, client kubernetes.Interface, ns string) error {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("listing the pods of namespace %s: %w", ns, err)
	}
	err = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeoutFor(len(pods.Items), 2000), true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to be gone: %w", ns, err)
	}
	return nil
}

// waitRolloutStatus waits until the controller's rollout status of
// DaemonSet ns/ds satisfies cond; what names the awaited state in the error.
func waitRolloutStatus(ctx context.Context, client kubernetes.Interface, ns, ds, what string, cond func(rollout.Status) bool) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settleTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().DaemonSets(ns).Get(ctx, ds, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = got.Annotations[rollout.RolloutStatusAnnotation]
		var st rollout.Status
		return json.Unmarshal([]byte(last), &st) == nil && cond(st), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s in the rollout status of DaemonSet %s/%s (last: %s): %w", what, ns, ds, last, err)
	}
	return nil
}

// readRolloutStatus reads the controller's rollout status of DaemonSet
// ns/ds, the zero status when it has none yet.
func readRolloutStatus(ctx context.Context, client kubernetes.Interface, ns, ds string) (rollout.Status, error) {
	var st rollout.Status
	got, err := client.AppsV1().DaemonSets(ns).Get(ctx, ds, metav1.GetOptions{})
	if err != nil {
		return st, err
	}
	value, ok := got.Annotations[rollout.RolloutStatusAnnotation]
	if !ok {
		return st, nil
	}
	if err := json.Unmarshal([]byte(value), &st); err != nil {
		return st, fmt.Errorf("the rollout status of DaemonSet %s/%s: %w", ns, ds, err)
	}
	return st, nil
}

// podsByNode groups the live (not terminating) pods by node.
func podsByNode(pods map[string]*corev1.Pod) map[string][]*corev1.Pod {
	var g podGrouper
	return g.group(pods)
}

// podGrouper groups pods by node as podsByNode does, in the map and the
// per-node slices of its previous grouping: a wait groups the pods at every
// event, and at 2,000 nodes the bench took a seventh of the machine's CPU
// during a rollout (5915aba's CPU by process), out of what the cluster
// under measurement had; regrouping in place cut it by about a sixth. A node whose pods are all gone keeps
// an empty slice, which every reader takes as no pods.
type podGrouper struct {
	byNode map[string][]*corev1.Pod
}

// group groups pods; the map it returns is the grouper's, valid until the
// next call.
func (g *podGrouper) group(pods map[string]*corev1.Pod) map[string][]*corev1.Pod {
	if g.byNode == nil {
		g.byNode = make(map[string][]*corev1.Pod, len(pods))
	}
	for node, live := range g.byNode {
		clear(live[:cap(live)]) // no pod kept alive by an old grouping
		g.byNode[node] = live[:0]
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			g.byNode[p.Spec.NodeName] = append(g.byNode[p.Spec.NodeName], p)
		}
	}
	return g.byNode
}

// upToDate reports whether a node's live pods are exactly one Ready pod
// running img, or img pinned: the node is done.
func upToDate(live []*corev1.Pod, img string) bool {
	if len(live) != 1 {
		return false
	}
	spec := live[0].Spec.Containers[0].Image
	return isImage(spec, img) && isReady(live[0]) && runs(live[0], spec)
}

// isImage reports whether a pod's image is img, or img pinned (pinnedTo).
func isImage(image, img string) bool {
	return image == img || image == pinnedTo(img)
}

// pinnedTo is img as ota-controller patches a pod in place once its
// architecture's canary ran it (issue 44's pinning, on wherever in place
// is): its repository at the digest the local cluster's registry serves
// img by. Worked out once per image (pinned): the watches ask at every pod
// event, the polls for every node.
func pinnedTo(img string) string {
	if p, ok := pinned.Load(img); ok {
		return p.(string)
	}
	p := img
	if id, err := imageref.Parse(localcluster.ImageID(img)); err == nil {
		p = imageref.Pinned(img, id.Digest)
	}
	pinned.Store(img, p)
	return p
}

// pinned memoizes pinnedTo: image → its pinned form.
var pinned sync.Map

// runs reports whether the pod's kubelet runs img: it observed the pod's
// spec (observedGeneration caught up) and reports its container running
// that image, Ready. A pod upgraded in place has its spec's image before
// its kubelet restarted the container (and stays Ready all along when the
// restart takes one sync); a new pod has both at once.
func runs(p *corev1.Pod, img string) bool {
	if p.Status.ObservedGeneration < p.Generation || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	c := p.Status.ContainerStatuses[0]
	return c.Image == img && c.Ready && c.State.Running != nil
}

// allUpToDate reports whether every one of nodes is up to date with img.
func allUpToDate(byNode map[string][]*corev1.Pod, nodes []string, img string) bool {
	for _, n := range nodes {
		if !upToDate(byNode[n], img) {
			return false
		}
	}
	return true
}

// unavailable counts the nodes without a Ready live pod.
func unavailable(byNode map[string][]*corev1.Pod, nodes []string) int {
	n := 0
	for _, node := range nodes {
		available := false
		for _, p := range byNode[node] {
			available = available || isReady(p)
		}
		if !available {
			n++
		}
	}
	return n
}

func isReady(p *corev1.Pod) bool {
	return podcondition.IsTrue(&p.Status, corev1.PodReady)
}
