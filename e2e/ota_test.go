//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// TestOTAWalkThrough is the OTA model end to end: the controller marks pods
// when the image changes but deletes none; each node's owner pre-pulls and
// upgrades its own pod through the node agent, over REST (node 2) and gRPC
// (node 3), while the other nodes keep the old version.
func TestOTAWalkThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	node1, node2, node3 := localcluster.NodeName(1), localcluster.NodeName(2), localcluster.NodeName(3)
	admin := e.cluster.Kubeconfig
	e.startController(admin)
	rest := e.startAgent(node2, admin)
	grpcAgent := e.startAgent(node3, admin)

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	before := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, allNodes(3)...)

	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(3)...)
	for node, p := range marked {
		if p.UID != before[node].UID || imageOf(p) != oldImage {
			t.Fatalf("the controller replaced the pod on %s (OTA must leave upgrades to the node): %s %s -> %s %s",
				node, before[node].Name, imageOf(before[node]), p.Name, imageOf(p))
		}
	}

	t.Run("REST", func(t *testing.T) {
		pod := marked[node2]
		// The agent serves its own watch of its node's pods, which sees
		// the mark a moment after the test's read of the API server did.
		eventually(t, fmt.Sprintf("GET /pods on %s to list pod %s with %s=True", node2, pod.Name, podcondition.NeedUpgrade),
			func(ctx context.Context) (bool, string, error) { return rest.seesMarked(ctx, pod) })
		if code, body, err := rest.post(e.ctx(), e.ns, marked[node1].Name, "upgrade"); err != nil || code != http.StatusForbidden {
			t.Fatalf("upgrading node 1's pod through node 2's agent: got %d %q, %v; want 403", code, body, err)
		}
		expectPost(t, rest, e.ns, pod.Name, "imagepull")
		e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node2)
		if body := strings.TrimSpace(expectPost(t, rest, e.ns, pod.Name, "upgrade")); body != fmt.Sprintf("Start updating pod %s/%s", e.ns, pod.Name) {
			t.Errorf("upgrade answered %q", body)
		}
		e.waitUpgraded(marked, node2)
		e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, node2)
		e.expectUntouched(marked, node1, node3)
	})

	t.Run("gRPC", func(t *testing.T) {
		client := e.grpcClient(grpcAgent)
		pod := marked[node3]
		list, err := client.ListPods(e.ctx(), &edgeotav1.ListPodsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list.GetItems(), func(p *edgeotav1.Pod) bool { return p.GetMetadata().GetUid() == string(pod.UID) }) {
			t.Fatalf("ListPods on %s lacks pod %s: %v", node3, pod.Name, list)
		}
		ref := &edgeotav1.ImagePullRequest{Namespace: e.ns, Name: pod.Name}
		if _, err := client.ImagePull(e.ctx(), ref); err != nil {
			t.Fatalf("ImagePull: %v", err)
		}
		e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node3)
		resp, err := client.Upgrade(e.ctx(), &edgeotav1.UpgradeRequest{Namespace: e.ns, Name: pod.Name})
		if err != nil {
			t.Fatalf("Upgrade: %v", err)
		}
		if want := fmt.Sprintf("Start updating pod %s/%s", e.ns, pod.Name); resp.GetMessage() != want {
			t.Errorf("Upgrade answered %q, want %q", resp.GetMessage(), want)
		}
		e.waitUpgraded(marked, node3)
		e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, node3)
		e.expectUntouched(marked, node1)
	})
}

// expectPost calls the agent's REST action and fails unless it answers 200;
// it returns the body.
func expectPost(t *testing.T, a agent, namespace, pod, action string) string {
	t.Helper()
	code, body, err := a.post(t.Context(), namespace, pod, action)
	if err != nil || code != http.StatusOK {
		t.Fatalf("POST %s of pod %s on %s: got %d %q, %v; want 200", action, pod, a.node, code, body, err)
	}
	return body
}

// waitUpgraded waits until the pod on the node is a new one, Ready, with the
// new image.
func (e *env) waitUpgraded(old map[string]*corev1.Pod, node string) {
	e.t.Helper()
	eventually(e.t, "the pod on "+node+" replaced by a Ready one with "+newImage, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		p := pods[node]
		if p == nil {
			return false, "no pod", nil
		}
		done := p.UID != old[node].UID && imageOf(p) == newImage && podcondition.IsTrue(&p.Status, corev1.PodReady)
		return done, fmt.Sprintf("pod %s image %s conditions %v", p.Name, imageOf(p), p.Status.Conditions), nil
	})
}

// expectUntouched fails unless the pods on the nodes are still the ones in
// old, with the old image.
func (e *env) expectUntouched(old map[string]*corev1.Pod, nodes ...string) {
	e.t.Helper()
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range nodes {
		if p := pods[n]; p == nil || p.UID != old[n].UID || imageOf(p) != oldImage {
			e.t.Errorf("the pod on %s changed: was %s %s, now %v", n, old[n].Name, oldImage, describePod(p))
		}
	}
}

func describePod(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	return p.Name + " " + imageOf(p)
}
