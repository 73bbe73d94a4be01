//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// An offer is the controller's alone: what a node writes on its own pod's
// status (the offer's copy, a PodNeedUpgrade=True) moves nothing, and the
// partition counts an owner's upgrade for as long as it runs.

// TestForgedOrDeletedOfferKeepsItsDeadline: once offered, one node rewrites
// its pod's offer to say it was offered in 2099, and another deletes its
// copy, each with a pods/status merge patch as a node may; the controller
// writes both back from its record, and upgrades every node at its upgrade
// deadline counted from the first offer, never before.
func TestForgedOrDeletedOfferKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	const nodes = 3
	const deadline = 40 * time.Second
	e := newEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: "100%",
		rollout.UpgradeDeadlineAnnotation: fmt.Sprint(int(deadline.Seconds()))})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	marked := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...)
	offers := map[string]*podchannel.Offer{}
	for node, p := range marked {
		o, err := podchannel.OfferOf(p)
		if err != nil || o == nil || o.OfferedAt == nil || o.UpgradeDeadline == nil {
			t.Fatalf("node %s: got offer %+v (%v), want one with its first offer and deadline", node, o, err)
		}
		offers[node] = o
	}

	forged, deleted := localcluster.NodeName(1), localcluster.NodeName(2)
	lie := *offers[forged]
	lie.OfferedAt = &metav1.Time{Time: time.Date(2099, time.January, 1, 0, 0, 0, 0, time.UTC)}
	lie.UpgradeDeadline = &metav1.Time{Time: lie.OfferedAt.Add(deadline)}
	value, err := podchannel.Encode(&lie)
	if err != nil {
		t.Fatal(err)
	}
	e.mergePodStatusAnnotation(marked[forged], rollout.OfferAnnotation, &value)
	e.mergePodStatusAnnotation(marked[deleted], rollout.OfferAnnotation, nil)
	for _, node := range []string{forged, deleted} {
		pod := marked[node]
		eventually(t, "the offer on "+node+" written back from the record", func(ctx context.Context) (bool, string, error) {
			p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			o, err := podchannel.OfferOf(p)
			return err == nil && o.Equal(offers[node]), fmt.Sprintf("offer %q", p.Annotations[rollout.OfferAnnotation]), nil
		})
	}

	first := offers[forged].UpgradeDeadline.Time
	for _, o := range offers {
		first = minTime(first, o.UpgradeDeadline.Time)
	}
	consistently(t, "no upgrade before the first deadline", time.Until(first.Add(-2*time.Second)), func(ctx context.Context) (bool, string, error) {
		n, err := e.nodesRunning(ctx, oldImage)
		return n == nodes, fmt.Sprintf("%d of %d nodes on %s", n, nodes, oldImage), err
	})
	e.waitAllNodes(newImage)
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	// Timestamps are whole seconds; the controller wakes at the deadline,
	// and half a minute is room for a busy machine, not a measure of speed.
	const slack = 30 * time.Second
	for node, o := range offers {
		due, created := o.UpgradeDeadline.Time, pods[node].CreationTimestamp.Time
		if created.Before(due.Truncate(time.Second)) || created.After(due.Add(slack)) {
			t.Errorf("%s upgraded at %s, want at its deadline %s (first offered %s), within %s", node,
				created.Format(time.TimeOnly), due.Format(time.TimeOnly), o.OfferedAt.Format(time.TimeOnly), slack)
		}
	}
	if got := len(e.waitEventsOf(rollout.ReasonDeletedPod, nodes)); got != nodes {
		t.Errorf("got %d deletions by the controller, want %d", got, nodes)
	}
}

// TestUnwrittenOfferIsNoOffer: under a partition that lets node 1 alone
// through, node 3 writes PodNeedUpgrade=True naming the target on its own
// pod; the controller writes it back to False (NotOffered), never counts it
// among its offers, and never carries it out, though it carries out node
// 1's offer at its deadline.
func TestUnwrittenOfferIsNoOffer(t *testing.T) {
	t.Parallel()
	const nodes = 3
	const deadline = 10 * time.Second
	e := newEnv(t, nodes)
	node1, node2, node3 := localcluster.NodeName(1), localcluster.NodeName(2), localcluster.NodeName(3)
	e.createDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: "100%",
		rollout.UpgradeDeadlineAnnotation: fmt.Sprint(int(deadline.Seconds())), rollout.PartitionAnnotation: "2"})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	e.expectOffers(map[string]string{node1: "True", node2: podcondition.ReasonNotOffered, node3: podcondition.ReasonNotOffered})
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	target := podcondition.Get(&pods[node1].Status, podcondition.NeedUpgrade).Message
	forged := corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue, Message: target}
	forgedAt := time.Now()
	p, err := podcondition.Set(e.ctx(), e.cluster.Client.CoreV1(), pods[node3], forged, node3)
	if err != nil {
		t.Fatalf("writing %s=True on %s's pod: %v", podcondition.NeedUpgrade, node3, err)
	}
	if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("got %s %+v on %s's pod after writing True, want True", podcondition.NeedUpgrade, c, node3)
	}
	e.expectOffers(map[string]string{node2: podcondition.ReasonNotOffered, node3: podcondition.ReasonNotOffered})

	// Had the controller taken it for an offer, it would count it, and
	// carry it out at its deadline after the write.
	consistently(t, node3+" neither counted nor upgraded", time.Until(forgedAt.Add(deadline+10*time.Second)), func(ctx context.Context) (bool, string, error) {
		s, err := e.rolloutStatus(ctx)
		if err != nil || s == nil {
			return false, "no rollout status", err
		}
		if s.Offered != nil && s.Offered.Count > 1 || s.HeldBack != nodes-1 {
			return false, fmt.Sprintf("got status %+v, want at most 1 offer and %d held back", *s, nodes-1), nil
		}
		now, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		for _, n := range []string{node2, node3} {
			if p := now[n]; p == nil || p.UID != pods[n].UID {
				return false, fmt.Sprintf("the pod on %s was replaced: now %s", n, describePod(p)), nil
			}
		}
		return true, "", nil
	})
	e.waitUpgraded(pods, node1)
	e.expectOffers(map[string]string{node2: podcondition.ReasonNotOffered, node3: podcondition.ReasonNotOffered})
	if got := len(e.waitEventsOf(rollout.ReasonDeletedPod, 1)); got != 1 {
		t.Errorf("got %d deletions by the controller, want 1 (%s's, at its deadline)", got, node1)
	}
}

// gracePeriod is the DaemonSet's terminationGracePeriodSeconds in
// TestOwnerUpgradeUsesThePartition.
const gracePeriod = 30 * time.Second

// ownerFinalizer keeps a pod terminating until the test removes it: KWOK's
// pod stages delete a terminating pod at once, whatever its grace period.
const ownerFinalizer = "edgeota.test/terminating"

// TestOwnerUpgradeUsesThePartition: under a partition that lets exactly
// node 1 through, its owner upgrades the offered pod, which takes its whole
// grace period of 30 s to terminate; all the while, and once the new pod
// runs, no other node is offered the revision: the owner's upgrade in
// flight is the partition's one node.
func TestOwnerUpgradeUsesThePartition(t *testing.T) {
	t.Parallel()
	const nodes = 3
	e := newEnv(t, nodes)
	node1, node2, node3 := localcluster.NodeName(1), localcluster.NodeName(2), localcluster.NodeName(3)
	e.createDaemonSetWith(map[string]string{strategyAnnotation: "OTA", rollout.PartitionAnnotation: fmt.Sprint(nodes - 1)}, func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(gracePeriod.Seconds()))
	})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(newImage)
	heldBack := map[string]string{node2: podcondition.ReasonNotOffered, node3: podcondition.ReasonNotOffered}
	e.expectOffers(map[string]string{node1: "True", node2: heldBack[node2], node3: heldBack[node3]})
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		t.Fatal(err)
	}

	// The owner's upgrade: the pod deleted, terminating for its grace
	// period (the finalizer stands for the kubelet's wait, which KWOK does
	// not make).
	offered := pods[node1]
	e.setFinalizers(offered, ownerFinalizer)
	t.Cleanup(func() { e.setFinalizers(offered) })
	if err := e.cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx(), offered.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the offered pod %s: %v", offered.Name, err)
	}
	deleted := time.Now()
	eventually(t, offered.Name+" terminating", func(ctx context.Context) (bool, string, error) {
		p, err := e.cluster.Client.CoreV1().Pods(e.ns).Get(ctx, offered.Name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil, fmt.Sprintf("deletionTimestamp %v", p.GetDeletionTimestamp()), err
	})
	noOtherOffer := func(ctx context.Context) (bool, string, error) {
		now, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		var state []string
		ok := true
		for node, want := range heldBack {
			got := "no pod"
			if p := now[node]; p != nil {
				got = "no condition"
				if c := podcondition.Get(&p.Status, podcondition.NeedUpgrade); c != nil {
					got = string(c.Status)
					if c.Status == corev1.ConditionFalse {
						got = c.Reason
					}
				}
			}
			state = append(state, node+": "+got)
			ok = ok && got == want
		}
		s, err := e.rolloutStatus(ctx)
		if err != nil || s == nil {
			return false, "no rollout status", err
		}
		state = append(state, fmt.Sprintf("status %+v", *s))
		return ok && s.HeldBack == len(heldBack), strings.Join(state, ", "), nil
	}
	consistently(t, "no other node offered while "+offered.Name+" terminates", time.Until(deleted.Add(gracePeriod)), noOtherOffer)

	e.setFinalizers(offered)
	e.waitUpgraded(pods, node1)
	consistently(t, "no other node offered once "+node1+" upgraded", 5*time.Second, noOtherOffer)
}

// setFinalizers sets the pod's finalizers (none: removes them).
func (e *env) setFinalizers(pod *corev1.Pod, finalizers ...string) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "finalizers": finalizers}})
	_, err := e.cluster.Client.CoreV1().Pods(e.ns).Patch(context.Background(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && (len(finalizers) > 0 || !apierrors.IsNotFound(err)) {
		e.t.Errorf("setting the finalizers of pod %s to %v: %v", pod.Name, finalizers, err)
	}
}

// mergePodStatusAnnotation sets an annotation of the pod (nil: removes it)
// with a JSON merge patch of its status, as a node may write its own pods.
func (e *env) mergePodStatusAnnotation(pod *corev1.Pod, key string, value *string) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "annotations": map[string]*string{key: value}}})
	if _, err := e.cluster.Client.CoreV1().Pods(e.ns).Patch(e.ctx(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		e.t.Fatalf("patching annotation %s of pod %s: %v", key, pod.Name, err)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
