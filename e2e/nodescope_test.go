//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// nodeScopePolicy is deploy/serviceaccount/'s ValidatingAdmissionPolicy (and
// binding) that confines the agent's service account's writes to the pods of
// its token's node.
const nodeScopePolicy = "edgeota-ota-server-node-scope"

// TestAgentNodeScopeEnforcedByAPIServer: on clusters before 1.36 the agent
// acts as its service account (deploy/serviceaccount/). An agent told it
// serves node 2
// (--node-name misconfigured, or the binary compromised) but holding the
// token the kubelet would mount on node 1 passes its own node check for node
// 2's pod, so only the API server stands between it and that pod: both
// upgrade and imagepull answer 403 with the API server's reason, naming the
// ValidatingAdmissionPolicy, and the pod is untouched. The same binary with
// the same token on its true node upgrades that node's pod.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestAgentNodeScopeEnforcedByAPIServer(t *testing.T) {
	e := newEnv(t, 2)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, "deploy", "serviceaccount")); err != nil {
		t.Fatalf("applying deploy/serviceaccount/: %v", err)
	}
	e.startController(e.cluster.Kubeconfig)

	token, err := e.cluster.Token(e.ctx(), systemNamespace, agentAccount, e.agentPodOn(node1))
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.writeKubeconfig("agent-bound-to-"+node1, "", token)
	impostor := e.startAgent(node2, kubeconfig)
	own := e.startAgent(node1, kubeconfig)

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node1, node2)
	e.waitPolicyEnforced(kubeconfig, marked[node2])

	victim := marked[node2]
	for _, action := range []string{"upgrade", "imagepull"} {
		code, body, err := impostor.post(e.ctx(), e.ns, victim.Name, action)
		if err != nil || code != http.StatusForbidden || !strings.Contains(body, "ValidatingAdmissionPolicy") || !strings.Contains(body, nodeScopePolicy) {
			t.Errorf("POST %s of %s's pod %s through an agent holding %s's token: got %d %q, %v; want 403 naming ValidatingAdmissionPolicy %s",
				action, node2, victim.Name, node1, code, body, err, nodeScopePolicy)
		}
	}
	e.expectUntouched(marked, node2)
	if pod := e.podOn(node2); podcondition.Get(&pod.Status, podcondition.ImageReady) != nil {
		t.Errorf("pod %s on %s got %s written through the impostor: %v", pod.Name, node2, podcondition.ImageReady, pod.Status.Conditions)
	}

	expectPost(t, own, e.ns, marked[node1].Name, "imagepull")
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node1)
	expectPost(t, own, e.ns, marked[node1].Name, "upgrade")
	e.waitUpgraded(marked, node1)
	e.expectUntouched(marked, node2)
}

// waitPolicyEnforced waits until the API server has loaded the node-scope
// policy, probing with a dry-run delete of another node's pod (admission runs,
// nothing is deleted): a policy not yet in force would let the impostor's
// upgrade through and prove nothing.
func (e *env) waitPolicyEnforced(kubeconfig string, otherNodesPod *corev1.Pod) {
	e.t.Helper()
	client := clientFor(e.t, kubeconfig)
	eventually(e.t, "policy "+nodeScopePolicy+" in force", func(ctx context.Context) (bool, string, error) {
		err := client.CoreV1().Pods(otherNodesPod.Namespace).Delete(ctx, otherNodesPod.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), nodeScopePolicy), fmt.Sprintf("dry-run delete: %v", err), nil
	})
}

// podOn returns the DaemonSet's live pod on the node, failing if there is none.
func (e *env) podOn(node string) *corev1.Pod {
	e.t.Helper()
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	if pods[node] == nil {
		e.t.Fatalf("no pod of %s on %s", dsName, node)
	}
	return pods[node]
}
