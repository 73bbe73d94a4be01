//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// nodeUser is the user an agent acting as its node is to the API server.
func nodeUser(node string) string { return "system:node:" + node }

// applyDeploy applies a directory of deploy/ (kubectl apply -k), as a user
// installs edgeota without Helm.
func (e *env) applyDeploy(dir string) {
	e.t.Helper()
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, dir)); err != nil {
		e.t.Fatalf("applying %s: %v", dir, err)
	}
}

// agentKubeconfig writes a kubeconfig holding the token the kubelet would
// mount in deploy/'s agent pod on node (a token of service account ota-server
// bound to that pod), reaching the API server at server ("" for directly).
func (e *env) agentKubeconfig(node, server string) string {
	e.t.Helper()
	token, err := e.cluster.Token(e.ctx(), systemNamespace, agentAccount, e.agentPodOn(node))
	if err != nil {
		e.t.Fatal(err)
	}
	name := "agent-token-" + node
	if server != "" {
		name += "-via-proxy"
	}
	return e.writeKubeconfig(name, server, token)
}

// proxyTo starts a proxy in front of the API server (see harness.Proxy),
// closed when the test ends, and returns it with its https:// address.
func (e *env) proxyTo() (*harness.Proxy, string) {
	e.t.Helper()
	apiserver, err := url.Parse(e.cluster.Config.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	proxy, err := harness.StartProxy(apiserver.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = proxy.Close() })
	return proxy, "https://" + proxy.Addr()
}

// clientAs is a client with the kubeconfig's credentials that impersonates
// user ("" for none), as the agent's requests do in node mode.
func clientAs(t *testing.T, kubeconfig, user string) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	config.Impersonate.UserName = user
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// expectNodeScoped checks, with the agent token of kubeconfig acting as node,
// that the API server itself lets it at its node's pods and nothing else:
// 403 for the cluster-wide pod list, another node's field selector, a GET of
// another node's pod, ControllerRevisions, Secrets, ConfigMaps, a delete or a
// status patch of another node's pod, and acting as another node; nor may
// it use the node's other rights (its Node, the ConfigMaps its pods use, a
// GET of its pods: verbs the agent does not use); and the same token without
// impersonation may not even list its node's pods.
func (e *env) expectNodeScoped(kubeconfig, node, otherNode string) {
	e.t.Helper()
	ctx := e.ctx()
	asNode := clientAs(e.t, kubeconfig, nodeUser(node))
	own := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	if _, err := asNode.CoreV1().Pods(e.ns).List(ctx, own); err != nil {
		e.t.Fatalf("as %s, listing its own pods: %v, want allowed", node, err)
	}
	other := e.podOn(otherNode)
	revisions, err := e.cluster.Client.AppsV1().ControllerRevisions(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(revisions.Items) == 0 {
		e.t.Fatalf("listing ControllerRevisions as admin: %d, %v; want some", len(revisions.Items), err)
	}
	unrelated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated-" + node, Namespace: e.ns}, Data: map[string]string{"k": "v"}}
	if _, err := e.cluster.Client.CoreV1().ConfigMaps(e.ns).Create(ctx, unrelated, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	statusPatch := []byte(fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":%q,"status":"False","reason":"PullImageRequested"}]}}`,
		other.UID, podcondition.ImageReady))
	refusals := []struct {
		what string
		call func(kubernetes.Interface) error
	}{
		{"list every pod", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list another node's pods", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + otherNode})
			return err
		}},
		{"get another node's pod", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(e.ns).Get(ctx, other.Name, metav1.GetOptions{})
			return err
		}},
		{"get a ControllerRevision", func(c kubernetes.Interface) error {
			_, err := c.AppsV1().ControllerRevisions(e.ns).Get(ctx, revisions.Items[0].Name, metav1.GetOptions{})
			return err
		}},
		{"list ControllerRevisions", func(c kubernetes.Interface) error {
			_, err := c.AppsV1().ControllerRevisions(e.ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list Secrets", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Secrets(systemNamespace).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list ConfigMaps", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get a ConfigMap no pod of the node uses", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().ConfigMaps(e.ns).Get(ctx, unrelated.Name, metav1.GetOptions{})
			return err
		}},
		// A node may read these; the agent's service account may act as it
		// for the agent's own verbs only.
		{"get a ConfigMap its node's pods use", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().ConfigMaps(e.ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		}},
		{"get its Node", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			return err
		}},
		{"get one of its node's pods", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(e.ns).Get(ctx, e.podOn(node).Name, metav1.GetOptions{})
			return err
		}},
		{"delete another node's pod", func(c kubernetes.Interface) error {
			return c.CoreV1().Pods(e.ns).Delete(ctx, other.Name, metav1.DeleteOptions{})
		}},
		{"patch the status of another node's pod", func(c kubernetes.Interface) error {
			_, err := c.CoreV1().Pods(e.ns).Patch(ctx, other.Name, types.StrategicMergePatchType, statusPatch, metav1.PatchOptions{}, "status")
			return err
		}},
	}
	for _, r := range refusals {
		if err := r.call(asNode); !apierrors.IsForbidden(err) {
			e.t.Errorf("as %s with its agent's token, %s: got %v, want 403 from the API server", node, r.what, err)
		}
	}
	if _, err := clientAs(e.t, kubeconfig, nodeUser(otherNode)).CoreV1().Pods(e.ns).List(ctx,
		metav1.ListOptions{FieldSelector: "spec.nodeName=" + otherNode}); !apierrors.IsForbidden(err) {
		e.t.Errorf("%s's agent token acting as %s: got %v, want 403", node, otherNode, err)
	}
	if _, err := clientAs(e.t, kubeconfig, "").CoreV1().Pods(e.ns).List(ctx, own); !apierrors.IsForbidden(err) {
		e.t.Errorf("%s's agent token without impersonation, listing its node's pods: got %v, want 403", node, err)
	}
	if p := e.podOn(otherNode); p.UID != other.UID || podcondition.Get(&p.Status, podcondition.ImageReady) != nil {
		e.t.Errorf("%s's pod changed: %s %v", otherNode, p.Name, p.Status.Conditions)
	}
}

// readyz is the agent's /readyz body, failing the test unless it is 200.
func (e *env) readyz(a agent) string {
	e.t.Helper()
	code, body, err := a.get(e.ctx(), "/readyz")
	if err != nil || code != http.StatusOK {
		e.t.Fatalf("GET /readyz: %d %q, %v; want 200", code, body, err)
	}
	return body
}

// TestAgentActsAsItsNode runs the agent as deploy/ does, with the token the
// kubelet would mount and NodeRestriction on: acting as its node, it does
// its whole job (list and watch, the owner's view with the target's images,
// imagepull, upgrade, the contract's answers for another node's pod and for a
// pod gone, queued actions after a dead zone), while the same token is
// refused everything beyond its node's pods by the API server itself.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestAgentActsAsItsNode(t *testing.T) {
	const nextImage = "nginx:1.19.6"
	e := newEnv(t, 2)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.applyDeploy("deploy")
	e.startController(e.cluster.Kubeconfig)
	proxy, server := e.proxyTo()
	a := e.startRestartableAgent(node1, e.agentKubeconfig(node1, server), "--identity", "node", "--apiserver-timeout", "2s")
	eventually(t, "the agent acting as its node", func(ctx context.Context) (bool, string, error) {
		_, body, err := a.get(ctx, "/readyz")
		return strings.Contains(body, "acting as "+nodeUser(node1)+" (--identity=node"), body, err
	})
	if code, body, err := a.get(e.ctx(), "/metrics"); err != nil || !strings.Contains(body, `edgeota_agent_identity{mode="node"} 1`) {
		t.Errorf("GET /metrics: %d %q, %v; want mode node", code, body, err)
	}

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	watch, err := e.grpcClient(a.agent).WatchUpgrades(e.ctx(), &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := appChanges(t, watch)
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node1, node2)
	// The owner's view, from the watch of the node's pods: the target's
	// images come with the controller's offer.
	untilOffered(next, newImage)
	list, err := a.listPods(e.ctx())
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("GET /pods: %v, %v", list, err)
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != node1 {
			t.Errorf("GET /pods lists %s/%s of %s", p.Namespace, p.Name, p.Spec.NodeName)
		}
	}

	// Another node's pod: the contract's 403, which the agent tells from a
	// missing pod without reading it.
	if code, body, err := a.post(e.ctx(), e.ns, marked[node2].Name, "upgrade"); err != nil || code != http.StatusForbidden || !strings.Contains(body, "runs on another node") {
		t.Errorf("upgrade of %s's pod: got %d %q, %v; want 403 saying it runs on another node", node2, code, body, err)
	}
	expectPost(t, a.agent, e.ns, marked[node1].Name, "imagepull")
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node1)
	expectPost(t, a.agent, e.ns, marked[node1].Name, "upgrade")
	e.waitUpgraded(marked, node1)
	e.expectUntouched(marked, node2)
	// The pod is gone: 404, not the 403 a node's GET of it would get.
	if code, body, err := a.post(e.ctx(), e.ns, marked[node1].Name, "upgrade"); err != nil || code != http.StatusNotFound {
		t.Errorf("upgrade of the pod just replaced: got %d %q, %v; want 404", code, body, err)
	}

	// A dead zone: the upgrade is queued, and carried out as the node once
	// the API server is reachable.
	e.setImage(nextImage)
	offered := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node1)[node1]
	// The owner acts on what the agent shows: its watch of the node's pods
	// may deliver the offer a moment after the API server has it, and a
	// cut before that leaves the agent refusing an upgrade it was never
	// offered.
	untilOffered(next, nextImage)
	proxy.Cut()
	if code, body, err := a.postQueued(e.ctx(), e.ns, offered.Name, "upgrade"); err != nil || code != http.StatusAccepted {
		t.Fatalf("queued upgrade in the dead zone: got %d %q, %v; want 202", code, body, err)
	}
	proxy.Restore()
	eventually(t, "the queued upgrade done", func(ctx context.Context) (bool, string, error) {
		got, err := a.listActions(ctx)
		if err != nil {
			return false, "", err
		}
		for _, o := range got.Outcomes {
			if o.Action.Name == offered.Name && o.Result == "ACTION_RESULT_DONE" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%+v", got), nil
	})
	eventually(t, node1+" running "+nextImage, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil || pods[node1] == nil {
			return false, "no pod", err
		}
		return imageOf(pods[node1]) == nextImage && pods[node1].UID != offered.UID, describePod(pods[node1]), nil
	})

	e.expectNodeScoped(e.agentKubeconfig(node1, ""), node1, node2)
}

// TestAgentIdentityIsCheckedAtStart: acting as its node, an agent whose
// token names another node exits saying so, and so does one whose token may
// not impersonate; one started in a dead zone serves its stored view (gRPC
// health SERVING) and settles when the API server answers; --identity=auto
// with credentials that name no node falls back to them and warns.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestAgentIdentityIsCheckedAtStart(t *testing.T) {
	e := newEnv(t, 2)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.applyDeploy("deploy")
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	agentBin := e.h.Tools.Path(harness.AgentBinary)
	exits := func(name, kubeconfig, want string) {
		t.Helper()
		// Its exit is the point: started outside stopAtCleanup's check.
		p, err := e.h.Start(name, agentBin, "--kubeconfig", kubeconfig, "--node-name", node1, "--identity", "node",
			"--bind-address", "127.0.0.1", "--port", freePort(e), "--state-dir", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.h.Stop(p) })
		select {
		case <-p.Done():
		case <-time.After(waitTimeout):
			t.Fatalf("%s still runs after %s, want it to exit", name, waitTimeout)
		}
		if log := processLog(t, e, name); p.Err() == nil || !strings.Contains(log, want) {
			t.Errorf("%s: exit %v, log:\n%s\nwant a failure saying %q", name, p.Err(), log, want)
		}
	}
	exits("ota-server-other-nodes-token", e.agentKubeconfig(node2, ""),
		fmt.Sprintf(`the agent's token is bound to a pod on node \"%s\", not on --node-name \"%s\"`, node2, node1))

	// The test DaemonSet's pods run as the namespace's default service
	// account, which may impersonate nothing.
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	token, err := e.cluster.Token(e.ctx(), e.ns, "default", pods[node1])
	if err != nil {
		t.Fatal(err)
	}
	exits("ota-server-no-impersonation", e.writeKubeconfig("default-sa-"+node1, "", token),
		"refused to let the agent act as node")

	auto := e.startAgent(node1, e.cluster.Kubeconfig, "--identity", "auto")
	if body := e.readyz(auto); !strings.Contains(body, "--identity=auto fell back: reads are not node-scoped") {
		t.Errorf("auto with the admin's credentials: /readyz %q, want the fall back said", body)
	}
	if log, err := os.ReadFile(e.h.LogPath(harness.AgentBinary + "-" + node1)); err != nil ||
		strings.Count(string(log), "WARNING: --identity=auto") != 1 {
		t.Errorf("auto: want one warning in the log, got:\n%s (%v)", log, err)
	}

	// A restart in a dead zone: the stored view is served before the
	// identity is settled, and the identity settles once the API server
	// answers.
	proxy, server := e.proxyTo()
	a := e.startRestartableAgent(node1, e.agentKubeconfig(node1, server), "--identity", "node", "--apiserver-timeout", "2s")
	eventually(t, "the first run acting as its node", func(ctx context.Context) (bool, string, error) {
		_, body, err := a.get(ctx, "/readyz")
		return strings.Contains(body, "live view") && strings.Contains(body, "acting as "+nodeUser(node1)), body, err
	})
	proxy.Cut()
	e.restart(a)
	if body := e.readyz(a.agent); !strings.Contains(body, "stored view") || !strings.Contains(body, "identity not settled yet") {
		t.Errorf("restarted in a dead zone: /readyz %q, want the stored view, the identity not settled", body)
	}
	conn := e.grpcConn(a.agent)
	if resp, err := healthpb.NewHealthClient(conn).Check(e.ctx(), &healthpb.HealthCheckRequest{Service: "edgeota.v1.OTAService"}); err != nil ||
		resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health in the dead zone: %v, %v; want SERVING on the stored view", resp, err)
	}
	if list, err := a.listPods(e.ctx()); err != nil || len(list.Items) == 0 {
		t.Errorf("GET /pods in the dead zone: %v, %v; want the stored pods", list, err)
	}
	proxy.Restore()
	eventually(t, "the identity settled once the API server answers", func(ctx context.Context) (bool, string, error) {
		_, body, err := a.get(ctx, "/readyz")
		return strings.Contains(body, "live view") && strings.Contains(body, "acting as "+nodeUser(node1)), body, err
	})
}
