//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
)

// The examples' DaemonSets (deploy/examples), all in namespace default.
const (
	examplesNamespace = "default"
	otaExample        = "ota-example"
	advancedExample   = "advanced-example"
)

// quickStartAddr and quickStartKubeconfig are the agent's address and the
// kubeconfig as the README spells them for `make run`; the scenario's own
// take their place.
const (
	quickStartAddr       = "127.0.0.1:10267"
	quickStartKubeconfig = ".kwok/kubeconfig"
)

// TestQuickStart runs the README's quick start, as the README writes it
// (the blocks under <!-- e2e: TestQuickStart -->, read from README.md), on
// a cluster set up as `make run` sets one up: three edge nodes,
// ota-controller, an ota-server for edge-node-1 and deploy/examples applied
// server-side by kubectl's kustomize. Each command runs in bash from the
// checkout, with the scenario's agent address and kubeconfig in place of
// make run's, and is checked for what the README says it does: the OTA
// example marked, its pod on edge-node-1 listed, pre-pulled and upgraded
// by the owner over REST, every app of the node held and released, the pods
// listed over gRPC, a node cut off and brought back; then the first rollout
// to watch, the AdvancedRollingUpdate example given a new image and followed
// by `kubectl edgeota rollout status --watch` to its end.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the README's quick start uses curl: %v", err)
	}
	if err := e.h.Tools.Check(pluginBinary, "kubectl", "grpcurl"); err != nil {
		t.Fatal(err)
	}
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.startController(e.cluster.Kubeconfig)
	a := e.startAgent(node1, e.cluster.Kubeconfig)
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, "deploy", "examples")); err != nil {
		t.Fatal(err)
	}
	for _, ds := range []string{otaExample, "auto-example", advancedExample} {
		waitExampleReady(t, e, ds, oldImage, 3)
	}

	blocks := markedBlocks(t, e.root, "README.md", "TestQuickStart")
	if len(blocks) != 2 || len(blocks[0]) != 1 || len(blocks[1]) != 1 {
		t.Fatalf("got %d marked groups of blocks in README.md, want 2 of one block each: the commands to try, the first rollout", len(blocks))
	}

	q := &quickStart{e: e, a: a, node1: node1, node2: node2}
	for _, line := range blocks[0][0].lines {
		q.run(t, line)
	}
	first := blocks[1][0].lines
	if len(first) != 2 || !strings.Contains(first[0], "set image daemonset/"+advancedExample) || !strings.Contains(first[1], "rollout status daemonset/"+advancedExample+" --watch") {
		t.Fatalf("the first rollout to watch is %q: want the image set on %s, then its rollout status followed", first, advancedExample)
	}
	q.shell(t, first[0])
	out := q.shell(t, first[1])
	if want := fmt.Sprintf("daemonset %q successfully rolled out", advancedExample); !strings.Contains(out, want) {
		t.Errorf("kubectl edgeota rollout status --watch printed:\n%s\nwant %q", out, want)
	}
	waitExampleReady(t, e, advancedExample, newImage, 3)
}

// quickStart runs the README's commands against the scenario's cluster.
type quickStart struct {
	e            *env
	a            agent
	node1, node2 string
	// pod is the OTA example's pod on node1 that the owner's commands name
	// (<pod> in the README): the one marked by the image change.
	pod *corev1.Pod
}

// run runs one command of the README's list and checks what it did. A
// command this scenario does not know fails it: a new command in the README
// needs its check here.
func (q *quickStart) run(t *testing.T, line string) {
	t.Helper()
	e := q.e
	switch {
	case strings.Contains(line, "set image daemonset/"+otaExample):
		q.shell(t, line)
		pods := waitExampleCondition(t, e, otaExample, podcondition.NeedUpgrade, corev1.ConditionTrue, 3)
		q.pod = pods[q.node1]
	case strings.HasSuffix(strings.TrimSpace(line), "/pods"):
		var list corev1.PodList
		if err := json.Unmarshal([]byte(q.shell(t, line)), &list); err != nil {
			t.Fatalf("%s: not a v1 PodList: %v", line, err)
		}
		if !podListed(list.Items, q.mustPod(t).UID, true) {
			t.Errorf("%s: pod %s is not listed with %s=True", line, q.pod.Name, podcondition.NeedUpgrade)
		}
	case strings.Contains(line, "/imagepull"):
		expectOutput(t, line, q.shell(t, line), fmt.Sprintf("Image pre-pull requested for pod %s/%s", examplesNamespace, q.mustPod(t).Name))
		waitExampleCondition(t, e, otaExample, podcondition.ImageReady, corev1.ConditionTrue, 1)
	case strings.Contains(line, "/upgrade"):
		expectOutput(t, line, q.shell(t, line), fmt.Sprintf("Start updating pod %s/%s", examplesNamespace, q.mustPod(t).Name))
		eventually(t, "the owner's upgrade of "+q.pod.Name, func(ctx context.Context) (bool, string, error) {
			p, err := examplePod(ctx, e, otaExample, q.node1)
			if err != nil || p == nil {
				return false, "no pod", err
			}
			return p.UID != q.pod.UID && imageOf(p) == newImage && podcondition.IsTrue(&p.Status, corev1.PodReady), describePod(p), nil
		})
	case strings.Contains(line, "-X POST") && strings.Contains(line, "/edgeota.io/v1/hold?"):
		out := q.shell(t, line)
		if want := regexp.MustCompile(fmt.Sprintf(`^Held 3 pods on node %s until \S+$`, q.node1)); !want.MatchString(strings.TrimSpace(out)) {
			t.Errorf("%s: answered %q, want %s", line, out, want)
		}
		q.expectHolds(t, true)
	case strings.Contains(line, "-X DELETE") && strings.Contains(line, "/edgeota.io/v1/hold"):
		expectOutput(t, line, q.shell(t, line), fmt.Sprintf("Released the holds on 3 pods on node %s", q.node1))
		q.expectHolds(t, false)
	case strings.Contains(line, "grpcurl") && strings.Contains(line, "ListPods"):
		out := q.shell(t, line)
		p, err := examplePod(e.ctx(), e, otaExample, q.node1)
		if err != nil || p == nil || !strings.Contains(out, `"name": "`+p.Name+`"`) {
			t.Errorf("%s: printed %s; want the OTA example's pod on %s (%v)", line, out, q.node1, err)
		}
	case strings.Contains(line, "label node "+q.node2+" "+localcluster.CutOffLabel+"=true"):
		q.shell(t, line)
		if err := e.cluster.WaitNodeReady(e.ctx(), q.node2, corev1.ConditionUnknown); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	case strings.Contains(line, "label node "+q.node2+" "+localcluster.CutOffLabel+"-"):
		q.shell(t, line)
		if err := e.cluster.WaitNodeReady(e.ctx(), q.node2, corev1.ConditionTrue); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	default:
		t.Fatalf("the README's quick start runs %q, which TestQuickStart does not check: add its check", line)
	}
}

// shell runs a command line of the README in bash from the checkout, the
// scenario's agent and kubeconfig in place of make run's, and <pod> the OTA
// example's marked pod; it fails the test unless the command succeeds, and
// returns its output.
func (q *quickStart) shell(t *testing.T, line string) string {
	t.Helper()
	cmdline := strings.NewReplacer(quickStartAddr, q.a.addr, quickStartKubeconfig, q.e.cluster.Kubeconfig).Replace(line)
	if strings.Contains(cmdline, "<pod>") {
		cmdline = strings.ReplaceAll(cmdline, "<pod>", q.mustPod(t).Name)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", cmdline)
	cmd.Dir = q.e.root
	out, err := cmd.CombinedOutput()
	logged := string(out)
	if len(logged) > 2000 {
		logged = logged[:2000] + "…"
	}
	t.Logf("$ %s\n%s", line, logged)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	return string(out)
}

func (q *quickStart) mustPod(t *testing.T) *corev1.Pod {
	t.Helper()
	if q.pod == nil {
		t.Fatalf("the README's quick start names <pod> before changing %s's image", otaExample)
	}
	return q.pod
}

// expectHolds checks that every DaemonSet pod on node1 carries the owner's
// hold, or that none does.
func (q *quickStart) expectHolds(t *testing.T, held bool) {
	t.Helper()
	pods, err := q.e.cluster.Client.CoreV1().Pods(examplesNamespace).List(q.e.ctx(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + q.node1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		h, err := podchannel.HoldOf(&p)
		if err != nil || (h != nil) != held {
			t.Errorf("pod %s on %s: got hold %+v (%v), want held %v", p.Name, q.node1, h, err, held)
		}
	}
}

func expectOutput(t *testing.T, line, got, want string) {
	t.Helper()
	if strings.TrimSpace(got) != want {
		t.Errorf("%s: answered %q, want %q", line, got, want)
	}
}

// podListed reports whether the pod with uid is in pods, with
// PodNeedUpgrade as marked says.
func podListed(pods []corev1.Pod, uid types.UID, marked bool) bool {
	for _, p := range pods {
		if p.UID == uid && podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade) == marked {
			return true
		}
	}
	return false
}

// examplePods are the live pods of an example DaemonSet by node.
func examplePods(ctx context.Context, e *env, ds string) (map[string]*corev1.Pod, error) {
	list, err := e.cluster.Client.CoreV1().Pods(examplesNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ds})
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

// examplePod is an example DaemonSet's live pod on the node, or nil.
func examplePod(ctx context.Context, e *env, ds, node string) (*corev1.Pod, error) {
	pods, err := examplePods(ctx, e, ds)
	return pods[node], err
}

// waitExampleReady waits until the example DaemonSet runs a Ready pod with
// the image on each of its nodes (n of them).
func waitExampleReady(t *testing.T, e *env, ds, image string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s on %d nodes, Ready, with %s", ds, n, image), func(ctx context.Context) (bool, string, error) {
		pods, err := examplePods(ctx, e, ds)
		if err != nil {
			return false, "", err
		}
		ready := 0
		for _, p := range pods {
			if imageOf(p) == image && podcondition.IsTrue(&p.Status, corev1.PodReady) {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d", ready, n), nil
	})
}

// waitExampleCondition waits until n pods of the example DaemonSet carry the
// condition with the status, and returns its pods by node.
func waitExampleCondition(t *testing.T, e *env, ds string, c corev1.PodConditionType, status corev1.ConditionStatus, n int) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	eventually(t, fmt.Sprintf("%d pods of %s with %s=%s", n, ds, c, status), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = examplePods(ctx, e, ds); err != nil {
			return false, "", err
		}
		got := 0
		for _, p := range pods {
			if cond := podcondition.Get(&p.Status, c); cond != nil && cond.Status == status {
				got++
			}
		}
		return got == n, fmt.Sprintf("%d of %d", got, n), nil
	})
	return pods
}
