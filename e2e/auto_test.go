//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgeota/edgeota/localcluster"
)

// settle is how long a scenario watches for something that must not happen.
const settle = 5 * time.Second

// TestAutoWalkThrough: a DaemonSet annotated `auto` is upgraded on connected
// nodes only; cut-off nodes keep their pods until they are back, then are
// upgraded too.
func TestAutoWalkThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	node1, node2, node3 := localcluster.NodeName(1), localcluster.NodeName(2), localcluster.NodeName(3)
	e.startController(e.cluster.Kubeconfig)
	e.createDaemonSet(map[string]string{strategyAnnotation: "auto"})
	before, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range []string{node2, node3} {
		if err := e.cluster.CutOff(e.ctx(), n); err != nil {
			t.Fatal(err)
		}
	}
	e.setImage(newImage)
	e.waitUpgraded(before, node1)
	consistently(t, "the cut-off nodes keep their pods", settle, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range []string{node2, node3} {
			if p := pods[n]; p == nil || p.UID != before[n].UID || imageOf(p) != oldImage {
				return false, fmt.Sprintf("the pod on cut-off %s changed: was %s, now %s", n, before[n].Name, describePod(p)), nil
			}
		}
		return true, "", nil
	})

	for _, n := range []string{node2, node3} {
		if err := e.cluster.Reconnect(e.ctx(), n); err != nil {
			t.Fatal(err)
		}
	}
	e.waitUpgraded(before, node2)
	e.waitUpgraded(before, node3)
}
