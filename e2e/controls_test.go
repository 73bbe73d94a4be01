//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// rolloutStatusPolicy is deploy/'s ValidatingAdmissionPolicy that lets the
// controller's identity change nothing on a DaemonSet but its rollout status.
const rolloutStatusPolicy = "edgeota-ota-controller-rollout-status-only"

// TestControllerMayOnlyWriteRolloutStatus: with deploy/ applied, the
// controller running on its service account's token writes the rollout
// status, and the same token is refused a template change, a label and any
// other annotation, by the admission policy rather than by RBAC.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestControllerMayOnlyWriteRolloutStatus(t *testing.T) {
	e := newEnv(t, 2)
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, "deploy")); err != nil {
		t.Fatalf("applying deploy/: %v", err)
	}
	token, err := e.cluster.Token(e.ctx(), systemNamespace, controllerAccount, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.writeKubeconfig(controllerAccount, "", token)
	e.startControllerWith(harness.ControllerOptions{Kubeconfig: kubeconfig, LeaseNamespace: systemNamespace})
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	e.waitRolloutStatus("the controller's rollout status, written with its own token", func(s *rollout.Status) bool {
		return s.Updated == 2 && s.Total == 2
	})

	client := clientFor(t, kubeconfig)
	refused := map[string]string{
		"template":        `{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"attacker/miner:latest"}]}}}}`,
		"label":           `{"metadata":{"labels":{"owned":"yes"}}}`,
		"annotation":      fmt.Sprintf(`{"metadata":{"annotations":{%q:"999"}}}`, maxUnavailableAnnotation),
		"status and spec": fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}},"spec":{"minReadySeconds":99}}`, rollout.RolloutStatusAnnotation),
	}
	for name, patch := range refused {
		t.Run("refused "+name, func(t *testing.T) {
			eventually(t, "policy "+rolloutStatusPolicy+" refusing the "+name+" change", func(ctx context.Context) (bool, string, error) {
				_, err := client.AppsV1().DaemonSets(e.ns).Patch(ctx, dsName, types.MergePatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
				return apierrors.IsForbidden(err) && strings.Contains(err.Error(), rolloutStatusPolicy), fmt.Sprintf("dry-run patch: %v", err), nil
			})
			if _, err := client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("patching the %s with the controller's token: got %v, want Forbidden", name, err)
			}
		})
	}
	ds, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Get(e.ctx(), dsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != newImage {
		t.Errorf("got image %s after the refused patches, want %s", got, newImage)
	}
	allowed := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}}}`, rollout.RolloutStatusAnnotation)
	if _, err := client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, []byte(allowed), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("patching the rollout status alone with the controller's token: got %v, want it allowed", err)
	}
}

// TestPrePullRequestWithoutReason: OpenYurt's yurthub asks for a pre-pull by
// writing PodImageReady=False naming the revision, with no reason; the
// controller runs the Job and reports the result.
func TestPrePullRequestWithoutReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	node := localcluster.NodeName(1)
	e.startController(e.cluster.Kubeconfig)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, node)
	pod := marked[node]
	target := podcondition.Get(&pod.Status, podcondition.NeedUpgrade).Message
	request := corev1.PodCondition{Type: podcondition.ImageReady, Status: corev1.ConditionFalse, Message: target}
	if _, err := podcondition.Set(e.ctx(), e.cluster.Client.CoreV1(), pod, request, "yurthub"); err != nil {
		t.Fatalf("writing yurthub's pre-pull request: %v", err)
	}
	eventually(t, "a pre-pull Job for "+pod.Name, func(ctx context.Context) (bool, string, error) {
		jobs, err := e.cluster.Client.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{LabelSelector: controller.PrePullLabel + "=true"})
		if err != nil {
			return false, "", err
		}
		return ownedBy(jobs.Items, pod), fmt.Sprintf("%d pre-pull jobs", len(jobs.Items)), nil
	})
	e.waitCondition(podcondition.ImageReady, corev1.ConditionTrue, node)
}

func ownedBy(jobs []batchv1.Job, pod *corev1.Pod) bool {
	for _, j := range jobs {
		for _, ref := range j.OwnerReferences {
			if ref.UID == pod.UID {
				return true
			}
		}
	}
	return false
}

// TestPartitionAndSelector: with the selector fleet=canary on nodes 1-4 and
// a partition of 2, AdvancedRollingUpdate upgrades exactly nodes 1 and 2
// (name order; 3 and 4 stay as the partition, 5 and 6 are outside). Switched
// to OTA with a newer version, exactly nodes 1 and 2 are offered it, the
// others read NotOffered; labelling node 5 into the selector widens the
// rollout to 5 nodes, so node 3 is offered too.
func TestPartitionAndSelector(t *testing.T) {
	t.Parallel()
	const nodes = 6
	e := newEnv(t, nodes)
	for i := 1; i <= 4; i++ {
		e.labelNode(localcluster.NodeName(i), "fleet", "canary")
	}
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "100%",
		rollout.RolloutNodeSelectorAnnotation: "fleet=canary", rollout.PartitionAnnotation: "2"})
	e.setImage(newImage)
	upgraded := allNodes(2)
	e.waitRolloutStatus("nodes 1 and 2 upgraded, 4 held back", func(s *rollout.Status) bool {
		return s.Updated == 2 && s.HeldBack == nodes-2
	})
	expectImages := func(want map[string]string) {
		t.Helper()
		consistently(t, "exactly the expected nodes upgraded", 5*time.Second, func(ctx context.Context) (bool, string, error) {
			pods, err := e.podsByNode(ctx)
			if err != nil {
				return false, "", err
			}
			for _, n := range allNodes(nodes) {
				if pods[n] == nil || imageOf(pods[n]) != want[n] {
					return false, fmt.Sprintf("%s runs %s, want %s", n, describePod(pods[n]), want[n]), nil
				}
			}
			return true, "", nil
		})
	}
	want := map[string]string{}
	for _, n := range allNodes(nodes) {
		want[n] = oldImage
	}
	for _, n := range upgraded {
		want[n] = newImage
	}
	expectImages(want)

	// OTA, a newer version: offers follow the same controls.
	e.annotate(strategyAnnotation, "OTA")
	e.setImage("nginx:1.19.6")
	e.expectOffers(map[string]string{
		localcluster.NodeName(1): "True", localcluster.NodeName(2): "True",
		localcluster.NodeName(3): podcondition.ReasonNotOffered, localcluster.NodeName(4): podcondition.ReasonNotOffered,
		localcluster.NodeName(5): podcondition.ReasonNotOffered, localcluster.NodeName(6): podcondition.ReasonNotOffered,
	})
	e.labelNode(localcluster.NodeName(5), "fleet", "canary")
	e.expectOffers(map[string]string{
		localcluster.NodeName(1): "True", localcluster.NodeName(2): "True", localcluster.NodeName(3): "True",
		localcluster.NodeName(4): podcondition.ReasonNotOffered, localcluster.NodeName(5): podcondition.ReasonNotOffered,
		localcluster.NodeName(6): podcondition.ReasonNotOffered,
	})
}

// labelNode sets a label on the node.
func (e *env) labelNode(node, key, value string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := e.cluster.Client.CoreV1().Nodes().Patch(e.ctx(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("labelling node %s %s=%s: %v", node, key, value, err)
	}
}

// expectOffers waits until each node's pod reads PodNeedUpgrade as wanted
// ("True", or the reason of False), then checks that it stays so.
func (e *env) expectOffers(want map[string]string) {
	e.t.Helper()
	check := func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		var state []string
		ok := true
		for node, w := range want {
			got := "no condition"
			if p := pods[node]; p != nil {
				if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c != nil {
					got = string(c.Status)
					if c.Status == corev1.ConditionFalse {
						got = c.Reason
					}
				}
			}
			state = append(state, node+": "+got)
			ok = ok && got == w
		}
		return ok, strings.Join(state, ", "), nil
	}
	eventually(e.t, "the expected offers", check)
	consistently(e.t, "the offers stay as expected", 3*time.Second, check)
}
