//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// thirdImage is a third version, after oldImage and newImage.
const thirdImage = "nginx:1.19.6"

// A rollback, or a roll forward to an earlier revision, is a new target:
// `kubectl rollout undo` keeps the ControllerRevision (its creation time
// too) and gives it a new number, and the deadlines and limits of the
// rollout count from the controller's first sight of it.

// TestRedoneOfferGetsAFreshDeadline: an OTA revision offered with a 60 s
// upgrade deadline is undone 5 s later and redone 70 s after its first
// offer (each with `kubectl rollout undo`): offered afresh, it is carried
// out 60 s after it came back, not at once.
func TestRedoneOfferGetsAFreshDeadline(t *testing.T) {
	t.Parallel()
	const nodes = 2
	const deadline = 60 * time.Second
	e := newEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: "100%",
		rollout.UpgradeDeadlineAnnotation: fmt.Sprint(int(deadline.Seconds()))})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	first := earliestOffer(t, e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...))
	untouched := func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d of %d nodes on %s", n, nodes, oldImage), err
	}
	consistently(t, "nothing deleted before the undo", time.Until(first.Add(5*time.Second)), untouched)

	e.rolloutUndo()
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, allNodes(nodes)...)
	consistently(t, "nothing deleted nor offered while undone", time.Until(first.Add(70*time.Second)), func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		for node, p := range pods {
			if imageOf(p) != oldImage || podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade) {
				return false, fmt.Sprintf("%s runs %s, %s %v", node, imageOf(p), podcondition.NeedUpgrade, podcondition.Get(&p.Status, podcondition.NeedUpgrade)), nil
			}
		}
		return len(pods) == nodes, fmt.Sprintf("%d pods", len(pods)), nil
	})

	redone := time.Now()
	e.rolloutUndo()
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...)
	offered := earliestOffer(t, marked)
	if offered.Before(redone.Truncate(time.Second)) {
		t.Fatalf("got the redone revision first offered at %s, want a fresh offer, at or after the redo at %s (first offer %s)",
			offered.Format(time.TimeOnly), redone.Format(time.TimeOnly), first.Format(time.TimeOnly))
	}
	due := offered.Add(deadline)
	consistently(t, "nothing deleted before the fresh deadline", time.Until(due.Add(-2*time.Second)), untouched)
	e.waitAllNodes(newImage)
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for node, p := range pods {
		if p.CreationTimestamp.Before(&metav1.Time{Time: due.Truncate(time.Second)}) {
			t.Errorf("%s upgraded at %s, want at its fresh deadline %s or later", node, p.CreationTimestamp.Format(time.TimeOnly), due.Format(time.TimeOnly))
		}
	}
}

// TestUndoGetsAFreshHoldLimit: an AdvancedRollingUpdate with
// edgeota.io/max-hold-seconds 60 rolls out revision 2, then revision 3; an
// owner holds node 1 for two hours, and `kubectl rollout undo
// --to-revision=2` comes more than a minute after revision 2 was created.
// The other node is rolled back at once; node 1 is not within 40 s of the
// undo (its limit counts 60 s from it, not from revision 2's creation), and
// is once its limit passed, with a HoldEnded event.
func TestUndoGetsAFreshHoldLimit(t *testing.T) {
	t.Parallel()
	const nodes = 2
	const maxHold = 60 * time.Second
	e := newEnv(t, nodes)
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		rollout.MaxHoldAnnotation: fmt.Sprint(int(maxHold.Seconds()))})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	revision2 := e.targetRevisionCreated()
	e.setImage(thirdImage)
	e.waitRolloutStatus("revision 3 settled everywhere", func(s *rollout.Status) bool {
		return s.Revision == 3 && s.Updated == nodes && s.InFlight == 0
	})
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	held := pods[node1]
	value, err := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(time.Now().Add(2 * time.Hour)), Reason: "driving", At: metav1.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := podcondition.Annotate(e.ctx(), e.cluster.Client.CoreV1(), held, podcondition.Annotations{rollout.HoldAnnotation: &value}, node1); err != nil {
		t.Fatalf("holding %s: %v", held.Name, err)
	}
	keepsHeld := func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, held.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, held.Name + " deleted", nil
		case err != nil:
			return false, "", err
		}
		return p.DeletionTimestamp == nil, fmt.Sprintf("%s deleted at %s", p.Name, p.DeletionTimestamp), nil
	}
	consistently(t, "revision 2 older than the hold limit", time.Until(revision2.Add(maxHold+5*time.Second)), keepsHeld)

	undone := time.Now()
	if _, err := e.cluster.Kubectl(e.ctx(), "rollout", "undo", "daemonset/"+dsName, "-n", e.ns, "--to-revision=2"); err != nil {
		t.Fatal(err)
	}
	consistently(t, node1+" held for 40 s after the undo", time.Until(undone.Add(40*time.Second)), keepsHeld)
	e.waitUpgraded(pods, node2)
	s := e.waitRolloutStatus(node1+" held, "+node2+" rolled back", func(s *rollout.Status) bool {
		return s.Revision == 4 && s.Held != nil && s.Held.Count == 1 && s.Updated == nodes-1
	})
	t.Logf("revision 2 created at %s, undone at %s; the hold ends at %s", revision2.Format(time.TimeOnly), undone.Format(time.TimeOnly), s.Held.At.Format(time.TimeOnly))
	e.waitUpgraded(pods, node1)
	pods, err = e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if limit := undone.Add(maxHold); pods[node1].CreationTimestamp.Before(&metav1.Time{Time: limit.Truncate(time.Second)}) {
		t.Errorf("%s rolled back at %s, want at the hold's limit %s (60 s after the undo) or later",
			node1, pods[node1].CreationTimestamp.Format(time.TimeOnly), limit.Format(time.TimeOnly))
	}
	var ended []string
	for _, ev := range e.eventsOf(rollout.ReasonHoldEnded) {
		ended = append(ended, ev.Message)
	}
	if !strings.Contains(strings.Join(ended, "\n"), "reached its limit") {
		t.Errorf("got HoldEnded events %q, want one saying the hold reached its limit", ended)
	}
}

// rolloutUndo runs `kubectl rollout undo` on the DaemonSet: its template
// back to the previous revision's.
func (e *env) rolloutUndo() {
	e.t.Helper()
	if _, err := e.cluster.Kubectl(e.ctx(), "rollout", "undo", "daemonset/"+dsName, "-n", e.ns); err != nil {
		e.t.Fatal(err)
	}
}

// earliestOffer is the first offer among the pods' offers.
func earliestOffer(t *testing.T, pods map[string]*corev1.Pod) time.Time {
	t.Helper()
	var first time.Time
	for node, p := range pods {
		o, err := podchannel.OfferOf(p)
		if err != nil || o == nil || o.OfferedAt == nil {
			t.Fatalf("node %s: got offer %+v (%v), want one with its first offer", node, o, err)
		}
		if first.IsZero() || o.OfferedAt.Time.Before(first) {
			first = o.OfferedAt.Time
		}
	}
	return first
}
