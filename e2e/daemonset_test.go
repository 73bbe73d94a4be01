//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// The contract with the controller: a DaemonSet opts in with these
// annotations and the OnDelete update strategy. The keys are spelled here on
// purpose rather than imported from package controller: the suite checks the
// published contract (OpenYurt's keys, as users' manifests spell them), so
// a renamed constant fails here instead of passing unnoticed.
const (
	strategyAnnotation       = "apps.openyurt.io/update-strategy"
	maxUnavailableAnnotation = "apps.openyurt.io/max-unavailable"
	oldImage                 = "nginx:1.19.4"
	newImage                 = "nginx:1.19.5"
	dsName                   = "nginx"
)

// createDaemonSet creates the test's DaemonSet (OnDelete, nginx:1.19.4) with
// the given annotations and waits until it runs a Ready pod on every node.
func (e *env) createDaemonSet(annotations map[string]string) {
	e.t.Helper()
	e.createDaemonSetWith(annotations, nil)
}

// createDaemonSetWith is createDaemonSet with the DaemonSet changed by
// change first (nil: as it is).
func (e *env) createDaemonSetWith(annotations map[string]string, change func(*appsv1.DaemonSet)) {
	e.t.Helper()
	labels := map[string]string{"app": dsName}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: dsName, Namespace: e.ns, Annotations: annotations},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: oldImage}}},
			},
		},
	}
	if change != nil {
		change(ds)
	}
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Create(e.ctx(), ds, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating DaemonSet %s: %v", dsName, err)
	}
	e.waitAllNodes(oldImage)
}

// setImage changes the DaemonSet's image, as `kubectl set image` does.
func (e *env) setImage(image string) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []map[string]string{{"name": "nginx", "image": image}}}}}})
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("setting the image of DaemonSet %s to %s: %v", dsName, image, err)
	}
}

// podsByNode returns the DaemonSet's pods that are not being deleted, by node.
func (e *env) podsByNode(ctx context.Context) (map[string]*corev1.Pod, error) {
	list, err := e.cluster.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + dsName})
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

// nodes names the cluster's edge nodes.
func (e *env) nodes(ctx context.Context) ([]string, error) {
	list, err := e.cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

// waitAllNodes waits until every node runs a Ready pod of the DaemonSet
// with the image.
func (e *env) waitAllNodes(image string) {
	e.t.Helper()
	eventually(e.t, "a Ready pod with "+image+" on every node", func(ctx context.Context) (bool, string, error) {
		nodes, err := e.nodes(ctx)
		if err != nil {
			return false, "", err
		}
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		var missing []string
		for _, n := range nodes {
			if p := pods[n]; p == nil || imageOf(p) != image || !podcondition.IsTrue(&p.Status, corev1.PodReady) {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, "not yet on " + strings.Join(missing, ", "), nil
	})
}

// waitCondition waits until the DaemonSet's pods on the nodes all have
// condition t with the status, and returns those pods.
func (e *env) waitCondition(t corev1.PodConditionType, status corev1.ConditionStatus, nodes ...string) map[string]*corev1.Pod {
	e.t.Helper()
	var pods map[string]*corev1.Pod
	eventually(e.t, fmt.Sprintf("%s=%s on %v", t, status, nodes), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = e.podsByNode(ctx); err != nil {
			return false, "", err
		}
		var state []string
		done := true
		for _, n := range nodes {
			got := "no pod"
			if p := pods[n]; p != nil {
				got = "missing"
				if c := podcondition.Get(&p.Status, t); c != nil {
					got = string(c.Status)
				}
			}
			state = append(state, n+": "+got)
			done = done && got == string(status)
		}
		return done, strings.Join(state, ", "), nil
	})
	return pods
}

// allNodes names edge-node-1..n.
func allNodes(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = localcluster.NodeName(i + 1)
	}
	return names
}

func imageOf(p *corev1.Pod) string {
	return p.Spec.Containers[0].Image
}
