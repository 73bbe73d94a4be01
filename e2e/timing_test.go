//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// utcWindow is a daily window in UTC from start for d, as the annotation
// spells it.
func utcWindow(start time.Time, d time.Duration) string {
	start = start.UTC()
	return fmt.Sprintf("daily %s-%s UTC", start.Format("15:04"), start.Add(d).Format("15:04"))
}

// TestWindowOpensThenRolls: a window that opens about a minute after the
// image changes: nothing is deleted before it opens (the controller waits
// for the opening, it does not poll), and the rollout runs once it does.
func TestWindowOpensThenRolls(t *testing.T) {
	t.Parallel()
	const nodes = 4
	opens := time.Now().Add(90 * time.Second).Truncate(time.Minute)
	e := brakeEnv(t, nodes, 2, 0, map[string]string{rollout.MaintenanceWindowAnnotation: utcWindow(opens, 30*time.Minute)})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	waiting := e.waitRolloutStatus("nodes waiting for the window", func(s *rollout.Status) bool {
		return s.WaitingForWindow != nil && s.WaitingForWindow.Count == nodes
	})
	if !waiting.WaitingForWindow.At.Time.Equal(opens) {
		t.Errorf("got the next opening %s, want %s", waiting.WaitingForWindow.At, opens)
	}
	consistently(t, "nothing deleted before the window opens", time.Until(opens.Add(-2*time.Second)), func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d of %d nodes on %s", n, nodes, oldImage), err
	})
	e.waitAllNodes(newImage)
	if first := e.firstDeletion(); first.Before(opens) {
		t.Errorf("got the first deletion at %s, want none before the window opened at %s", first, opens)
	}
}

// firstDeletion is when the controller deleted its first pod, by its
// events.
func (e *env) firstDeletion() time.Time {
	e.t.Helper()
	var first time.Time
	for _, ev := range e.eventsOf(rollout.ReasonDeletedPod) {
		at := ev.FirstTimestamp.Time
		if ev.EventTime.Time.After(at) {
			at = ev.EventTime.Time
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// TestWindowsInNodeTimeZones: two groups of nodes in different time zones,
// the window open for one group only: only that group is upgraded, and the
// other waits for its window.
func TestWindowsInNodeTimeZones(t *testing.T) {
	t.Parallel()
	const nodes = 6
	// Open now in UTC, for two hours: closed 14 hours ahead, in Kiribati.
	e := brakeEnv(t, nodes, 10, 0, map[string]string{rollout.MaintenanceWindowAnnotation: utcWindow(time.Now().Add(-time.Hour), 2*time.Hour)})
	here, ahead := allNodes(nodes)[:3], allNodes(nodes)[3:]
	for _, n := range here {
		e.annotateNode(n, rollout.NodeTimeZoneAnnotation, "Etc/UTC")
	}
	for _, n := range ahead {
		e.annotateNode(n, rollout.NodeTimeZoneAnnotation, "Pacific/Kiritimati")
	}
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	s := e.waitRolloutStatus("the open group updated, the other waiting", func(s *rollout.Status) bool {
		return s.Updated == len(here) && s.WaitingForWindow != nil && s.WaitingForWindow.Count == len(ahead)
	})
	t.Logf("rollout status: %+v", s)
	consistently(t, "only the group in its window is upgraded", 10*time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		var upgraded []string
		for n, p := range pods {
			if imageOf(p) == newImage {
				upgraded = append(upgraded, n)
			}
		}
		slices.Sort(upgraded)
		return slices.Equal(upgraded, here), fmt.Sprintf("upgraded: %v", upgraded), nil
	})
}

// annotateNode sets an annotation on a node.
func (e *env) annotateNode(node, key, value string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := e.cluster.Client.CoreV1().Nodes().Patch(e.ctx(), node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("annotating node %s: %v", node, err)
	}
}

// TestOTADeadlineCarriedOut: an OTA offer left untaken past
// edgeota.io/upgrade-deadline-seconds is carried out by the controller,
// within max-unavailable, each node proving alive before the next goes; the
// offer shows the deadline before it falls, and so does the owner's view
// (ListUpgrades) of a node's agent.
func TestOTADeadlineCarriedOut(t *testing.T) {
	t.Parallel()
	const nodes, budget = 4, 1
	e := newEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: fmt.Sprint(budget),
		rollout.UpgradeDeadlineAnnotation: "20"})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	node1 := allNodes(nodes)[0]
	a := e.startAgent(node1, e.cluster.Kubeconfig)
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...)
	for node, pod := range marked {
		o, err := podchannel.OfferOf(pod)
		if err != nil || o == nil || o.UpgradeDeadline == nil || o.OfferedAt == nil || !o.UpgradeDeadline.Time.Equal(o.OfferedAt.Add(20*time.Second)) {
			t.Errorf("node %s: got offer %+v (%v), want the deadline 20 s after the first offer", node, o, err)
		}
	}
	offer, _ := podchannel.OfferOf(marked[node1])
	eventually(t, "ListUpgrades on "+node1+" to show the upgrade deadline", func(ctx context.Context) (bool, string, error) {
		list, err := e.grpcClient(a).ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			return false, "", err
		}
		app := findApp(list.GetApps())
		return app.GetUpgradeDeadline() != nil && app.GetUpgradeDeadline().AsTime().Equal(offer.UpgradeDeadline.Time), app.String(), nil
	})
	if pods, err := e.podsByNode(e.ctx()); err != nil || pods[node1].UID != marked[node1].UID {
		t.Errorf("%s's pod was upgraded before ListUpgrades showed its deadline (%v)", node1, err)
	}
	s := e.waitRolloutStatus("offers outstanding, with the deadline", func(s *rollout.Status) bool {
		return s.Offered != nil && s.Offered.At != nil
	})
	consistently(t, "no upgrade before the deadline", time.Until(s.Offered.At.Add(-2*time.Second)), func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d nodes on %s", n, oldImage), err
	})
	sampler := startSampler(t, e, nodes)
	e.waitAllNodes(newImage)
	_, worst := sampler.stop()
	if worst.unavailable > budget {
		t.Errorf("%d nodes without a Ready pod at once, want at most %d: %v", worst.unavailable, budget, worst.nodes)
	}
	if got := len(e.waitEventsOf(rollout.ReasonDeletedPod, nodes)); got != nodes {
		t.Errorf("got %d deletions by the controller, want %d", got, nodes)
	}
}

// TestKubectlPluginHeldAndWaiting: `kubectl edgeota rollout status` tells a
// rollout waiting for its window and one held by an owner, with when each
// ends; it exits 0 printed once, and 3 when --watch times out.
func TestKubectlPluginHeldAndWaiting(t *testing.T) {
	t.Parallel()
	const nodes = 3
	e := brakeEnv(t, nodes, 3, 0, map[string]string{rollout.MaintenanceWindowAnnotation: utcWindow(time.Now().Add(3*time.Hour), time.Hour)})
	if err := e.h.Tools.Check(pluginBinary, "kubectl"); err != nil {
		t.Fatal(err)
	}
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	e.waitRolloutStatus("nodes waiting for the window", func(s *rollout.Status) bool {
		return s.WaitingForWindow != nil && s.WaitingForWindow.Count == nodes
	})
	ds := "daemonset/" + dsName
	stdout, stderr, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns)
	if code != 0 || !strings.Contains(stdout, "window") || !strings.Contains(stdout, fmt.Sprint(nodes)) {
		t.Errorf("waiting: got exit %d, stdout %q, stderr %q, want 0 and the nodes waiting for their window", code, stdout, stderr)
	}
	if _, _, code := e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns, "--watch", "--timeout", "3s"); code != 3 {
		t.Errorf("waiting, --watch --timeout 3s: got exit %d, want 3", code)
	}

	// The window opens (always), and an owner holds one node for an hour.
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	held := pods[allNodes(nodes)[0]]
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	value, _ := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(until), Reason: "driving", At: metav1.Now()})
	if _, err := podcondition.Annotate(e.ctx(), e.cluster.Client.CoreV1(), held, podcondition.Annotations{rollout.HoldAnnotation: &value}, "e2e"); err != nil {
		t.Fatal(err)
	}
	// The window opens only once the controller shows the hold: a hold
	// written in the same instant as the window opens may reach the
	// controller's cache after the DaemonSet's change, and its pod be
	// deleted (the deletion's precondition is the pod's UID, as the native
	// controller's).
	e.waitRolloutStatus("the hold seen while the window is closed", func(s *rollout.Status) bool {
		return s.Held != nil && s.Held.Count == 1
	})
	e.annotate(rollout.MaintenanceWindowAnnotation, "daily 00:00-24:00")
	e.waitRolloutStatus("one node held, the others updated", func(s *rollout.Status) bool {
		return s.Held != nil && s.Held.Count == 1 && s.Updated == nodes-1
	})
	stdout, stderr, code = e.kubectlEdgeota("rollout", "status", ds, "-n", e.ns)
	if code != 0 || !strings.Contains(stdout, "held") {
		t.Errorf("held: got exit %d, stdout %q, stderr %q, want 0 and the held node", code, stdout, stderr)
	}
	// Its owner sees the limit that will end the hold, on the pod.
	eventually(t, "the hold limit on the held pod", func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, held.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		o, err := podchannel.OfferOf(p)
		return err == nil && o != nil && o.HoldLimit != nil, fmt.Sprintf("offer %+v (%v)", o, err), nil
	})
}
