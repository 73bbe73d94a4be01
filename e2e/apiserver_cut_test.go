//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
)

// TestAgentCutOffFromAPIServer: with its link to the API server cut (a proxy
// between them that drops and then blackholes connections), the agent still
// lists its pods from its cache but refuses an upgrade with 503; once the
// link is back, the upgrade goes through.
func TestAgentCutOffFromAPIServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.startController(e.cluster.Kubeconfig)
	a, proxy := e.agentBehindProxy(localcluster.NodeName(1), 3*time.Second)

	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(3)...)
	pod := marked[a.node]
	eventually(t, "the agent's cache to show "+pod.Name+" marked", func(ctx context.Context) (bool, string, error) {
		return a.seesMarked(ctx, pod)
	})

	proxy.Cut()
	if ok, state, err := a.seesMarked(e.ctx(), pod); !ok || err != nil {
		t.Fatalf("cut off, GET /pods should answer from the cache with pod %s marked: %s %v", pod.Name, state, err)
	}
	code, body, err := a.post(e.ctx(), e.ns, pod.Name, "upgrade")
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("cut off, upgrade answered %d %q, %v; want 503", code, body, err)
	}
	e.expectUntouched(marked, allNodes(3)...)

	proxy.Restore()
	eventually(t, "the upgrade to go through once reconnected", func(ctx context.Context) (bool, string, error) {
		code, body, err := a.post(ctx, e.ns, pod.Name, "upgrade")
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body), nil
	})
	e.waitUpgraded(marked, a.node)
}

// seesMarked reports whether the agent's GET /pods lists the pod with
// PodNeedUpgrade=True.
func (a agent) seesMarked(ctx context.Context, pod *corev1.Pod) (bool, string, error) {
	list, err := a.listPods(ctx)
	if err != nil {
		return false, "", err
	}
	found := slices.ContainsFunc(list.Items, func(p corev1.Pod) bool {
		return p.UID == pod.UID && podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade)
	})
	return found, fmt.Sprintf("%d pods listed", len(list.Items)), nil
}
