//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/proc"
)

// restartableAgent is a bin/ota-server the scenario stops and starts again
// on the same port and state directory, as a vehicle's power cycles do:
// unlike startAgent's, its exits are part of the plot, not failures.
type restartableAgent struct {
	agent
	opts harness.AgentOptions
	proc *proc.Process
	runs int
}

// startRestartableAgent runs bin/ota-server for the node with the kubeconfig,
// a state directory of its own and extra flags, and waits until /readyz
// answers 200 (a view of its pods is served, stored or live).
func (e *env) startRestartableAgent(node, kubeconfig string, extra ...string) *restartableAgent {
	e.t.Helper()
	port := freePort(e)
	a := &restartableAgent{agent: agent{node: node, addr: net.JoinHostPort("127.0.0.1", port),
		stateDir: filepath.Join(e.logDir, "state-restartable-"+node)}}
	a.opts = harness.AgentOptions{Node: node, Kubeconfig: kubeconfig, Port: port, StateDir: a.stateDir, Flags: extra}
	e.t.Cleanup(func() {
		if a.proc == nil {
			return
		}
		if err := a.proc.Exited(); err != nil {
			e.t.Errorf("during the test, outside a restart: %v", err)
		}
		if err := e.h.Stop(a.proc); err != nil {
			e.t.Error(err)
		}
	})
	e.restart(a)
	return a
}

// restart stops the agent if it runs (SIGTERM: a clean power-off) and starts
// it again, waiting until /readyz answers 200.
func (e *env) restart(a *restartableAgent) {
	e.t.Helper()
	if a.proc != nil {
		if err := e.h.Stop(a.proc); err != nil {
			e.t.Fatal(err)
		}
		a.proc = nil
	}
	a.runs++
	a.opts.Name = fmt.Sprintf("ota-server-%s-run%d", a.node, a.runs)
	started, err := e.h.StartAgent(e.t.Context(), a.opts)
	if started != nil {
		a.proc = started.Process
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// getPods is GET /pods: the PodList and the freshness header.
func (a agent) getPods(ctx context.Context) (*corev1.PodList, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+"/pods", nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET /pods: %d", resp.StatusCode)
	}
	var list corev1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, "", fmt.Errorf("GET /pods: decoding a v1 PodList: %w", err)
	}
	return &list, resp.Header.Get("X-Edgeota-Synced-At"), nil
}

// get is a GET of path on the agent: status and body.
func (a agent) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	return do(req)
}

// postQueued is a POST of the action with ?queue_if_offline=true.
func (a agent) postQueued(ctx context.Context, namespace, pod, action string) (int, string, error) {
	u := fmt.Sprintf("http://%s/openyurt.io/v1/namespaces/%s/pods/%s/%s?queue_if_offline=true", a.addr, namespace, pod, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, "", err
	}
	return do(req)
}

// listActions is GET /edgeota.io/v1/actions, decoded with the contract's
// own JSON names.
func (a agent) listActions(ctx context.Context) (*listedActions, error) {
	code, body, err := a.get(ctx, "/edgeota.io/v1/actions")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /edgeota.io/v1/actions: %d %s", code, body)
	}
	var out listedActions
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		return nil, fmt.Errorf("decoding the actions: %w (%s)", err, body)
	}
	return &out, nil
}

// listedActions is ListActionsResponse's JSON.
type listedActions struct {
	Actions []struct {
		Name           string `json:"name"`
		Action         string `json:"action"`
		TargetRevision string `json:"targetRevision"`
	} `json:"actions"`
	Outcomes []struct {
		Action struct {
			Name   string `json:"name"`
			Action string `json:"action"`
		} `json:"action"`
		Result  string `json:"result"`
		Message string `json:"message"`
	} `json:"outcomes"`
}

// podsNamed lists the names of a PodList's pods.
func podsNamed(list *corev1.PodList) []string {
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// TestAgentThroughADeadZone drives the offline-first agent through a dead
// zone cut the way a real one is (a proxy between it and the API server that
// stops forwarding, so the cluster changes while the agent cannot see it):
// restarted while cut off, it serves its stored pods with the stored
// freshness stamp; a plain upgrade is 503; a queued one is 202, survives
// another restart, and runs on reconnection; a pod deleted meanwhile
// disappears; a queued upgrade whose target moved meanwhile is not run and
// says why.
func TestAgentThroughADeadZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	node := localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig)
	a, proxy := e.agentBehindProxy(node, 2*time.Second)

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	bystander := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: e.ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: oldImage}}},
	}
	if _, err := e.cluster.Client.CoreV1().Pods(e.ns).Create(e.ctx(), bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)
	pod := marked[node]
	eventually(t, "the agent to show "+pod.Name+" marked and the bystander", func(ctx context.Context) (bool, string, error) {
		list, _, err := a.getPods(ctx)
		if err != nil {
			return false, "", err
		}
		ok, state, _ := a.seesMarked(ctx, pod)
		return ok && slices.Contains(podsNamed(list), bystander.Name), state, nil
	})

	proxy.Cut()
	_, stamp, err := a.getPods(e.ctx())
	if err != nil || stamp == "" {
		t.Fatalf("cut off, GET /pods: %v, freshness %q", err, stamp)
	}
	e.restart(a)
	list, got, err := a.getPods(e.ctx())
	if err != nil {
		t.Fatalf("restarted while cut off, GET /pods: %v", err)
	}
	if got != stamp || !slices.Contains(podsNamed(list), pod.Name) || !slices.Contains(podsNamed(list), bystander.Name) {
		t.Fatalf("restarted while cut off: got pods %v stamped %q, want %s and %s stamped with the stored %q",
			podsNamed(list), got, pod.Name, bystander.Name, stamp)
	}
	if code, body, err := a.get(e.ctx(), "/readyz"); err != nil || code != http.StatusOK || !strings.Contains(body, "stored view") {
		t.Errorf("/readyz: got %d %q, %v; want 200 naming the stored view", code, body, err)
	}
	if code, body, err := a.post(e.ctx(), e.ns, pod.Name, "upgrade"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("cut off, plain upgrade: got %d %q, %v; want 503", code, body, err)
	}
	code, body, err := a.postQueued(e.ctx(), e.ns, pod.Name, "upgrade")
	if want := fmt.Sprintf("Upgrade of pod %s/%s queued until the API server is reachable\n", e.ns, pod.Name); err != nil ||
		code != http.StatusAccepted || body != want {
		t.Fatalf("cut off, queued upgrade: got %d %q, %v; want 202 %q", code, body, err, want)
	}
	if err := e.cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx(), bystander.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.restart(a)
	queued, err := a.listActions(e.ctx())
	if err != nil || len(queued.Actions) != 1 || queued.Actions[0].Name != pod.Name || queued.Actions[0].Action != "upgrade" {
		t.Fatalf("after another restart: got %+v, %v; want the upgrade of %s still queued", queued, err, pod.Name)
	}
	e.expectUntouched(marked, node)

	proxy.Restore()
	e.waitUpgraded(marked, node)
	eventually(t, "the queued upgrade's outcome: done", func(ctx context.Context) (bool, string, error) {
		got, err := a.listActions(ctx)
		if err != nil {
			return false, "", err
		}
		done := len(got.Outcomes) == 1 && got.Outcomes[0].Result == edgeotav1.ActionResult_ACTION_RESULT_DONE.String()
		return done && len(got.Actions) == 0, fmt.Sprintf("%+v", got), nil
	})
	eventually(t, "the bystander deleted while cut off to disappear from GET /pods", func(ctx context.Context) (bool, string, error) {
		list, _, err := a.getPods(ctx)
		if err != nil {
			return false, "", err
		}
		return !slices.Contains(podsNamed(list), bystander.Name), fmt.Sprintf("%v", podsNamed(list)), nil
	})

	// A second round: the owner queues the upgrade to one revision, and the
	// DaemonSet moves on to another while the node is cut off.
	const nextImage, laterImage = "nginx:1.19.6", "nginx:1.19.7"
	e.setImage(nextImage)
	second := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)[node]
	eventually(t, "the agent to show "+second.Name+" marked", func(ctx context.Context) (bool, string, error) {
		return a.seesMarked(ctx, second)
	})
	proxy.Cut()
	if code, body, err := a.postQueued(e.ctx(), e.ns, second.Name, "upgrade"); err != nil || code != http.StatusAccepted {
		t.Fatalf("cut off, queued upgrade of %s: got %d %q, %v; want 202", second.Name, code, body, err)
	}
	agreed, _ := podcondition.Revision(podcondition.Get(&second.Status, podcondition.NeedUpgrade).Message)
	e.setImage(laterImage)
	eventually(t, "the controller to mark "+second.Name+" for the later revision", func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, second.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := podcondition.Get(&p.Status, podcondition.NeedUpgrade)
		if c == nil {
			return false, "no condition", nil
		}
		rev, _ := podcondition.Revision(c.Message)
		return c.Status == corev1.ConditionTrue && rev != agreed, c.Message, nil
	})
	proxy.Restore()
	eventually(t, "the queued upgrade refused because its target moved", func(ctx context.Context) (bool, string, error) {
		got, err := a.listActions(ctx)
		if err != nil {
			return false, "", err
		}
		for _, o := range got.Outcomes {
			if o.Action.Name == second.Name {
				return o.Result == edgeotav1.ActionResult_ACTION_RESULT_REFUSED.String() &&
					strings.Contains(o.Message, "moved from "+agreed), o.Result + ": " + o.Message, nil
			}
		}
		return false, fmt.Sprintf("%+v", got), nil
	})
	if p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(e.ctx(), second.Name, metav1.GetOptions{}); err != nil || p.UID != second.UID || p.DeletionTimestamp != nil {
		t.Errorf("pod %s: got %v, %v; want it untouched", second.Name, p, err)
	}
}

// TestCorruptStateFileDoesNotStopTheAgent: garbage in both state files is
// logged and ignored; the agent starts and serves from the API server.
func TestCorruptStateFileDoesNotStopTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	node := localcluster.NodeName(1)
	stateDir := filepath.Join(e.logDir, "state-corrupt")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pods.json", "actions.json"} {
		if err := os.WriteFile(filepath.Join(stateDir, name), []byte("\x00\x9f{\"kind\":\"PodView\",\"vers"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	a := e.startAgent(node, e.cluster.Kubeconfig, "--state-dir", stateDir)
	list, err := a.listPods(e.ctx())
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("GET /pods: got %v, %v; want the DaemonSet's pod from the API server", list, err)
	}
	log, err := os.ReadFile(filepath.Join(e.logDir, "ota-server-"+node+".log"))
	if err != nil || !strings.Contains(string(log), "Ignoring the stored pod view") || !strings.Contains(string(log), "Ignoring the stored action queue") {
		t.Errorf("the agent's log does not say it ignored both files (%v)", err)
	}
	eventually(t, "the agent to store a good view over the corrupt one", func(ctx context.Context) (bool, string, error) {
		data, err := os.ReadFile(filepath.Join(stateDir, "pods.json"))
		return err == nil && strings.Contains(string(data), `"kind":"PodView"`) && strings.Contains(string(data), `"version":1`), string(data), nil
	})
}
