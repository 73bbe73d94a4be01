//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// rolloutStatusPolicy is deploy/'s ValidatingAdmissionPolicy that lets the
// controller's identity change nothing on a DaemonSet but its rollout status.
const rolloutStatusPolicy = "edgeota-ota-controller-rollout-status-only"

// TestControllerMayOnlyWriteRolloutStatus: with deploy/ applied, the
// controller running on its service account's token writes the rollout
// status, and the same token is refused a template change, a label and any
// other annotation, by the admission policy rather than by RBAC.
func TestControllerMayOnlyWriteRolloutStatus(t *testing.T) {
	e := newEnvWith(t, localcluster.Options{Nodes: 2, NodeHeartbeat: brakeHeartbeat})
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, "deploy")); err != nil {
		t.Fatalf("applying deploy/: %v", err)
	}
	token, err := e.cluster.Token(e.ctx(), systemNamespace, controllerAccount, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.writeKubeconfig(controllerAccount, "", token)
	e.startController(kubeconfig, "--leader-elect=true", "--leader-elect-namespace", systemNamespace)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"})
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	e.waitRolloutStatus("the controller's rollout status, written with its own token", func(s *controller.RolloutStatus) bool {
		return s.Updated == 2 && s.Total == 2
	})

	client := clientFor(t, kubeconfig)
	refused := map[string]string{
		"template":        `{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"attacker/miner:latest"}]}}}}`,
		"label":           `{"metadata":{"labels":{"owned":"yes"}}}`,
		"annotation":      fmt.Sprintf(`{"metadata":{"annotations":{%q:"999"}}}`, maxUnavailableAnnotation),
		"status and spec": fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}},"spec":{"minReadySeconds":99}}`, controller.RolloutStatusAnnotation),
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
	allowed := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}}}`, controller.RolloutStatusAnnotation)
	if _, err := client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.MergePatchType, []byte(allowed), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("patching the rollout status alone with the controller's token: got %v, want it allowed", err)
	}
}

// TestPrePullRequestWithoutReason: OpenYurt's yurthub asks for a pre-pull by
// writing PodImageReady=False naming the revision, with no reason; the
// controller runs the Job and reports the result.
func TestPrePullRequestWithoutReason(t *testing.T) {
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
