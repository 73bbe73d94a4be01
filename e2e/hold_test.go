//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// holdURL is the REST path of a pod's hold on the agent, with a query.
func (a agent) holdURL(namespace, pod, query string) string {
	return fmt.Sprintf("http://%s/edgeota.io/v1/namespaces/%s/pods/%s/hold%s", a.addr, namespace, pod, query)
}

// call sends one REST request to the agent, as curl does (no body, curl's
// Accept), and returns the status and body.
func (a agent) call(ctx context.Context, method, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "*/*")
	return do(req)
}

// podHold is the hold the pod carries, as the API server has it: nil when
// none, or when the pod is gone.
func (e *env) podHold(ctx context.Context, name string) (*podchannel.Hold, error) {
	p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return podchannel.HoldOf(p)
}

// restApps is GET /edgeota.io/v1/upgrades, decoded with the contract's JSON
// names.
func (a agent) restApps(ctx context.Context) ([]restApp, error) {
	code, body, err := a.get(ctx, "/edgeota.io/v1/upgrades")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /edgeota.io/v1/upgrades: %d %s", code, body)
	}
	var out struct {
		Apps []restApp `json:"apps"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		return nil, fmt.Errorf("decoding the apps: %w (%s)", err, body)
	}
	return out.Apps, nil
}

// restApp is the part of App's JSON the hold scenarios read.
type restApp struct {
	DaemonSet string `json:"daemonSet"`
	Pod       string `json:"pod"`
	Hold      *struct {
		Until  time.Time `json:"until"`
		Reason string    `json:"reason"`
	} `json:"hold"`
	HoldLimit       *time.Time `json:"holdLimit"`
	UpgradeDeadline *time.Time `json:"upgradeDeadline"`
}

// TestHoldPassesTheNodeByUntilReleased: an owner holds one node through REST
// and another through gRPC; an AdvancedRollingUpdate passes both by while
// the rest rolls, and the owner's view shows each hold with the limit the
// controller set; released, each node is upgraded in its turn.
func TestHoldPassesTheNodeByUntilReleased(t *testing.T) {
	t.Parallel()
	const nodes = 3
	e := brakeEnv(t, nodes, 1, 0, nil)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	a1, a2 := e.startAgent(node1, e.cluster.Kubeconfig), e.startAgent(node2, e.cluster.Kubeconfig)
	old, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}

	code, body, err := a1.call(e.ctx(), http.MethodPost, a1.holdURL(e.ns, old[node1].Name, "?duration=1h&reason=driving"))
	if want := fmt.Sprintf("Held pod %s/%s until ", e.ns, old[node1].Name); err != nil || code != http.StatusOK || !strings.HasPrefix(body, want) {
		t.Fatalf("REST hold of %s: got %d %q, %v; want 200 %q...", node1, code, body, err, want)
	}
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	held, err := e.grpcClient(a2).Hold(e.ctx(), &edgeotav1.HoldRequest{Namespace: e.ns, Name: old[node2].Name,
		Until: timestamppb.New(until), Reason: "charging at a customer's"})
	if err != nil || !held.GetUntil().AsTime().Equal(until) {
		t.Fatalf("gRPC hold of %s: got %v, %v; want held until %s", node2, held, err, until)
	}

	e.setImage(newImage)
	e.waitRolloutStatus("two nodes held, the third updated", func(s *rollout.Status) bool {
		return s.Held != nil && s.Held.Count == 2 && s.Updated == nodes-2
	})
	e.expectUntouched(old, node1, node2)
	eventually(t, "the owner's view of "+node1+": the hold and its limit", func(ctx context.Context) (bool, string, error) {
		apps, err := a1.restApps(ctx)
		if err != nil || len(apps) != 1 {
			return false, fmt.Sprintf("%+v", apps), err
		}
		app := apps[0]
		return app.Hold != nil && app.Hold.Reason == "driving" && app.HoldLimit != nil, fmt.Sprintf("%+v", app), nil
	})

	code, body, err = a1.call(e.ctx(), http.MethodDelete, a1.holdURL(e.ns, old[node1].Name, ""))
	if want := fmt.Sprintf("Released the hold on pod %s/%s\n", e.ns, old[node1].Name); err != nil || code != http.StatusOK || body != want {
		t.Fatalf("REST release of %s: got %d %q, %v; want 200 %q", node1, code, body, err, want)
	}
	e.waitUpgraded(old, node1)
	e.expectUntouched(old, node2)
	if _, err := e.grpcClient(a2).ReleaseHold(e.ctx(), &edgeotav1.ReleaseHoldRequest{Namespace: e.ns, Name: old[node2].Name}); err != nil {
		t.Fatalf("gRPC release of %s: %v", node2, err)
	}
	e.waitAllNodes(newImage)
}

// TestHoldPastItsLimitIsUpgraded: a hold of two hours, asked with otactl,
// ends at the DaemonSet's edgeota.io/max-hold-seconds (60 s after the target
// ControllerRevision's creation): the node is passed by until then, shown
// its limit, and upgraded after it, with a HoldEnded event saying the hold
// reached its limit.
func TestHoldPastItsLimitIsUpgraded(t *testing.T) {
	t.Parallel()
	const nodes, maxHold = 2, 60 * time.Second
	e := brakeEnv(t, nodes, 1, 0, map[string]string{rollout.MaxHoldAnnotation: fmt.Sprint(int(maxHold.Seconds()))})
	node1 := localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	a := e.startAgent(node1, e.cluster.Kubeconfig)
	old, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	out, code := e.otactl(a, "hold", e.ns+"/"+dsName, "--for", "2h", "--reason", "driving")
	if want := fmt.Sprintf("Held pod %s/%s until ", e.ns, old[node1].Name); code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("otactl hold: got exit %d %q, want 0 and %q...", code, out, want)
	}

	e.setImage(newImage)
	e.waitRolloutStatus("the held node passed by, the other updated", func(s *rollout.Status) bool {
		return s.Held != nil && s.Held.Count == 1 && s.Updated == nodes-1
	})
	created := e.targetRevisionCreated()
	limit := created.Add(maxHold)
	var listed string
	eventually(t, "otactl list to show the hold and its limit", func(context.Context) (bool, string, error) {
		listed, code = e.otactl(a, "list")
		return code == 0 && strings.Contains(listed, "(driving)") && strings.Contains(listed, limit.Local().Format("2006-01-02 15:04 MST")), listed, nil
	})
	// The limit came before the node's upgrade: the hold was honoured until
	// then, not ended early.
	e.waitAllNodes(newImage)
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if p := pods[node1]; p.CreationTimestamp.Time.Before(limit.Truncate(time.Second)) {
		t.Errorf("%s's new pod was created at %s, before the hold's limit %s", node1, p.CreationTimestamp, limit)
	}
	var ended []string
	for _, ev := range e.eventsOf(rollout.ReasonHoldEnded) {
		ended = append(ended, ev.Message)
	}
	if !strings.Contains(strings.Join(ended, "\n"), "reached its limit") {
		t.Errorf("got HoldEnded events %q, want one saying the hold reached its limit", ended)
	}
}

// targetRevisionCreated is when the DaemonSet's newest ControllerRevision
// was created: where edgeota.io/max-hold-seconds counts from.
func (e *env) targetRevisionCreated() time.Time {
	e.t.Helper()
	list, err := e.cluster.Client.AppsV1().ControllerRevisions(e.ns).List(e.ctx(), metav1.ListOptions{LabelSelector: "app=" + dsName})
	if err != nil || len(list.Items) == 0 {
		e.t.Fatalf("listing the DaemonSet's ControllerRevisions: %v (%d)", err, len(list.Items))
	}
	newest := list.Items[0]
	for _, r := range list.Items {
		if r.Revision > newest.Revision {
			newest = r
		}
	}
	return newest.CreationTimestamp.Time
}

// TestHoldQueuedInADeadZone: an agent acting as its node (deploy/'s token,
// NodeRestriction on) holds and releases live; cut off from the API server,
// a hold asked with queue_if_offline is answered 202, survives a restart
// and reaches the pod once the link is back, and the rollout then passes the
// node by; a queued hold that ends in the dead zone is dropped, its outcome
// expired.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestHoldQueuedInADeadZone(t *testing.T) {
	e := newEnv(t, 1)
	node := localcluster.NodeName(1)
	e.applyDeploy("deploy")
	e.startController(e.cluster.Kubeconfig)
	proxy, server := e.proxyTo()
	a := e.startRestartableAgent(node, e.agentKubeconfig(node, server), "--identity", "node", "--apiserver-timeout", "2s")
	eventually(t, "the agent acting as its node", func(ctx context.Context) (bool, string, error) {
		_, body, err := a.get(ctx, "/readyz")
		return strings.Contains(body, "acting as "+nodeUser(node)+" (--identity=node"), body, err
	})
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	old := e.waitAgentSees(a.agent, node)

	// Live, as the node: NodeRestriction lets it write and remove the
	// annotation on its own pod's status.
	if code, body, err := a.call(e.ctx(), http.MethodPost, a.holdURL(e.ns, old.Name, "?duration=1h&reason=parked")); err != nil || code != http.StatusOK {
		t.Fatalf("live hold: got %d %q, %v; want 200", code, body, err)
	}
	if h, err := e.podHold(e.ctx(), old.Name); err != nil || h == nil || h.Reason != "parked" {
		t.Fatalf("after the live hold: got %+v, %v; want the pod held", h, err)
	}
	if code, body, err := a.call(e.ctx(), http.MethodDelete, a.holdURL(e.ns, old.Name, "")); err != nil || code != http.StatusOK {
		t.Fatalf("live release: got %d %q, %v; want 200", code, body, err)
	}
	if h, err := e.podHold(e.ctx(), old.Name); err != nil || h != nil {
		t.Fatalf("after the live release: got %+v, %v; want no hold", h, err)
	}

	proxy.Cut()
	code, body, err := a.call(e.ctx(), http.MethodPost, a.holdURL(e.ns, old.Name, "?duration=3s&queue_if_offline=true"))
	if err != nil || code != http.StatusAccepted {
		t.Fatalf("cut off, a short queued hold: got %d %q, %v; want 202", code, body, err)
	}
	eventually(t, "the short hold to expire in the dead zone", func(ctx context.Context) (bool, string, error) {
		got, err := a.listActions(ctx)
		if err != nil {
			return false, "", err
		}
		for _, o := range got.Outcomes {
			if o.Action.Action == "hold" {
				return o.Result == edgeotav1.ActionResult_ACTION_RESULT_EXPIRED.String() && strings.Contains(o.Message, "not written"), o.Result + ": " + o.Message, nil
			}
		}
		return false, fmt.Sprintf("%+v", got), nil
	})
	code, body, err = a.call(e.ctx(), http.MethodPost, a.holdURL(e.ns, old.Name, "?duration=1h&reason=driving&queue_if_offline=true"))
	if want := fmt.Sprintf("Hold of pod %s/%s until ", e.ns, old.Name); err != nil || code != http.StatusAccepted ||
		!strings.HasPrefix(body, want) || !strings.HasSuffix(body, " queued until the API server is reachable\n") {
		t.Fatalf("cut off, a queued hold: got %d %q, %v; want 202 %q... queued", code, body, err, want)
	}
	e.restart(a)
	if got, err := a.listActions(e.ctx()); err != nil || len(got.Actions) != 1 || got.Actions[0].Action != "hold" || got.Actions[0].Name != old.Name {
		t.Fatalf("after a restart in the dead zone: got %+v, %v; want the hold still queued", got, err)
	}
	if h, err := e.podHold(e.ctx(), old.Name); err != nil || h != nil {
		t.Fatalf("while cut off: got %+v, %v; want no hold on the pod yet", h, err)
	}

	proxy.Restore()
	eventually(t, "the queued hold on the pod", func(ctx context.Context) (bool, string, error) {
		h, err := e.podHold(ctx, old.Name)
		return h != nil && h.Reason == "driving" && h.Until.After(time.Now().Add(50*time.Minute)), fmt.Sprintf("%+v", h), err
	})
	eventually(t, "the queued hold's outcome: done", func(ctx context.Context) (bool, string, error) {
		got, err := a.listActions(ctx)
		if err != nil {
			return false, "", err
		}
		done := len(got.Outcomes) == 2 && got.Outcomes[0].Result == edgeotav1.ActionResult_ACTION_RESULT_DONE.String()
		return done && len(got.Actions) == 0, fmt.Sprintf("%+v", got), nil
	})
	e.setImage(newImage)
	e.waitRolloutStatus("the node held", func(s *rollout.Status) bool { return s.Held != nil && s.Held.Count == 1 })
	e.expectUntouched(map[string]*corev1.Pod{node: old}, node)
}

// waitAgentSees waits until the agent's view lists the node's pod of the
// DaemonSet, and returns that pod.
func (e *env) waitAgentSees(a agent, node string) *corev1.Pod {
	e.t.Helper()
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	pod := pods[node]
	eventually(e.t, "the agent to list "+pod.Name, func(ctx context.Context) (bool, string, error) {
		list, err := a.listPods(ctx)
		if err != nil {
			return false, "", err
		}
		return strings.Contains(strings.Join(podsNamed(list), " "), pod.Name), fmt.Sprint(podsNamed(list)), nil
	})
	return pod
}
