//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// deploy/'s identities.
const (
	systemNamespace   = harness.SystemNamespace
	controllerAccount = "ota-controller"
	agentAccount      = "ota-server"
)

// access is one question to the authorizer: may the identity do verb on
// resource (group/resource[/subresource]) in namespace?
type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return fmt.Sprintf("%s %s in %q", a.verb, r, a.namespace)
}

// TestDeployRBAC: deploy/ applies server-side; ota-controller and ota-server
// do their whole job with the tokens of the service accounts it creates (not
// the admin's), the agent acting as its node; those tokens are refused what
// the roles do not grant: the agent's service account may impersonate its
// node and nothing else, so its token touches no pod without acting as the
// node (see TestAgentActsAsItsNode for what the node may do).
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestDeployRBAC(t *testing.T) {
	e := newEnv(t, 3)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.applyDeploy("deploy")

	controllerToken, err := e.cluster.Token(e.ctx(), systemNamespace, controllerAccount, nil)
	if err != nil {
		t.Fatal(err)
	}
	controllerKubeconfig := e.writeKubeconfig(controllerAccount, "", controllerToken)
	e.startControllerWith(harness.ControllerOptions{Kubeconfig: controllerKubeconfig, LeaseNamespace: systemNamespace})

	// The agent's token is bound to deploy/'s agent pod on node 2, as the
	// kubelet would mount it.
	agentKubeconfig := e.agentKubeconfig(node2, "")
	a := e.startAgent(node2, agentKubeconfig, "--identity", "node")

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(3)...)
	expectPost(t, a, e.ns, marked[node2].Name, "imagepull")
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node2)
	expectPost(t, a, e.ns, marked[node2].Name, "upgrade")
	e.waitUpgraded(marked, node2)

	t.Run("controller refused beyond its role", func(t *testing.T) {
		expectAccess(t, clientFor(t, controllerKubeconfig), true,
			access{verb: "delete", resource: "pods", namespace: e.ns},
			access{verb: "patch", resource: "pods", subresource: "status", namespace: e.ns},
			access{verb: "create", group: "batch", resource: "jobs", namespace: e.ns},
			// The rollout status; daemonset-status-policy.yaml narrows it.
			access{verb: "patch", group: "apps", resource: "daemonsets", namespace: e.ns},
			// Proof of life: the Leases of the nodes it waits on, a watch
			// by name each.
			access{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"},
			access{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"},
			// Why a pre-download Job made no pod.
			access{verb: "list", resource: "events", namespace: e.ns},
			// The rollout records, in its own namespace.
			access{verb: "create", resource: "configmaps", namespace: systemNamespace},
			access{verb: "patch", resource: "configmaps", namespace: systemNamespace},
		)
		expectAccess(t, clientFor(t, controllerKubeconfig), false,
			access{verb: "get", resource: "secrets", namespace: "kube-system"},
			access{verb: "create", resource: "pods", namespace: e.ns},
			access{verb: "update", group: "apps", resource: "daemonsets", namespace: e.ns},
			access{verb: "patch", resource: "nodes"},
			access{verb: "create", resource: "pods", subresource: "exec", namespace: e.ns},
			access{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
			// It writes no Lease but its own, and reads no ConfigMap but
			// its records.
			access{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"},
			access{verb: "list", resource: "configmaps", namespace: e.ns},
			access{verb: "get", resource: "configmaps", namespace: "kube-system"},
		)
	})
	t.Run("agent refused beyond impersonating its node", func(t *testing.T) {
		agentClient := clientFor(t, agentKubeconfig)
		expectAccess(t, agentClient, true,
			access{verb: "impersonate:associated-node", group: "authentication.k8s.io", resource: "nodes"},
			access{verb: "impersonate-on:associated-node:list", resource: "pods", namespace: e.ns},
			access{verb: "impersonate-on:associated-node:delete", resource: "pods", namespace: e.ns},
			access{verb: "impersonate-on:associated-node:patch", resource: "pods", subresource: "status", namespace: e.ns},
		)
		expectAccess(t, agentClient, false,
			access{verb: "get", resource: "pods", namespace: e.ns},
			access{verb: "list", resource: "pods", namespace: e.ns},
			access{verb: "delete", resource: "pods", namespace: e.ns},
			access{verb: "patch", resource: "pods", subresource: "status", namespace: e.ns},
			access{verb: "get", group: "apps", resource: "controllerrevisions", namespace: e.ns},
			access{verb: "impersonate", resource: "users"},
			access{verb: "impersonate:arbitrary-node", group: "authentication.k8s.io", resource: "nodes"},
			access{verb: "impersonate-on:associated-node:get", resource: "secrets", namespace: e.ns},
			access{verb: "create", resource: "pods", namespace: e.ns},
			access{verb: "get", resource: "secrets", namespace: e.ns},
			access{verb: "delete", resource: "nodes"},
			access{verb: "update", group: "apps", resource: "daemonsets", namespace: e.ns},
			access{verb: "create", group: "batch", resource: "jobs", namespace: e.ns},
		)
	})
	t.Run("agent token cannot touch another node's pod", func(t *testing.T) {
		other := marked[node1]
		for _, user := range []string{"", nodeUser(node2)} {
			err := clientAs(t, agentKubeconfig, user).CoreV1().Pods(e.ns).Delete(e.ctx(), other.Name, metav1.DeleteOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("deleting %s's pod %s with %s's agent token (impersonating %q): got %v, want 403", node1, other.Name, node2, user, err)
			}
		}
		e.expectUntouched(marked, node1)
	})
}

// agentPodOn returns deploy/'s agent pod on the node, once it exists.
func (e *env) agentPodOn(node string) *corev1.Pod {
	e.t.Helper()
	var pod *corev1.Pod
	eventually(e.t, "deploy/'s ota-server pod on "+node, func(ctx context.Context) (bool, string, error) {
		list, err := e.cluster.Client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, "", err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.ServiceAccountName == agentAccount && p.DeletionTimestamp == nil {
				pod = p
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d pods in %s on %s", len(list.Items), systemNamespace, node), nil
	})
	return pod
}

// clientFor is a client using the kubeconfig (a service account's token).
func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// expectAccess asks the API server, as the client's identity, about each
// access (kubectl auth can-i), failing the test on any answer but want.
func expectAccess(t *testing.T, client kubernetes.Interface, want bool, accesses ...access) {
	t.Helper()
	for _, a := range accesses {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
			},
		}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("can-i %s: %v", a, err)
		}
		if got.Status.Allowed != want {
			t.Errorf("can-i %s: allowed=%t, want %t", a, got.Status.Allowed, want)
		}
	}
}
