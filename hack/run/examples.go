package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// examplesReadyTimeout bounds the wait for the examples' pods: seconds with
// KWOK's delay-free stages, plus the pull delay when pulls are modelled.
const examplesReadyTimeout = 2 * time.Minute

// example is one DaemonSet of deploy/examples, as the guide shows it.
type example struct {
	namespace, name, strategy, container, image string
	// agentPod is its pod on the agent's node.
	agentPod string
}

// applyExamples applies the kustomize directory server-side, waits until
// every opted-in DaemonSet is ready on every node (at most timeout) and
// returns them.
func applyExamples(ctx context.Context, c *localcluster.Cluster, dir string, agentNode string, timeout time.Duration) ([]example, error) {
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-k", dir); err != nil {
		return nil, fmt.Errorf("applying the examples: %w", err)
	}
	var examples []example
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		examples = examples[:0]
		for _, ds := range list.Items {
			if _, ok := ds.Annotations[rollout.StrategyAnnotation]; !ok {
				continue
			}
			if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
				return false, nil
			}
			e, err := describe(ctx, c, &ds, agentNode)
			if err != nil || e.agentPod == "" {
				return false, err
			}
			examples = append(examples, e)
		}
		return len(examples) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the examples' DaemonSets (annotated %s) to be ready on every node: %w", rollout.StrategyAnnotation, err)
	}
	slices.SortFunc(examples, func(a, b example) int { return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name) })
	return examples, nil
}

func describe(ctx context.Context, c *localcluster.Cluster, ds *appsv1.DaemonSet, node string) (example, error) {
	first := ds.Spec.Template.Spec.Containers[0]
	e := example{namespace: ds.Namespace, name: ds.Name, strategy: ds.Annotations[rollout.StrategyAnnotation], container: first.Name, image: first.Image}
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return e, fmt.Errorf("DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	pods, err := c.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: selector.String(), FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return e, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			e.agentPod = p.Name
		}
	}
	return e, nil
}
