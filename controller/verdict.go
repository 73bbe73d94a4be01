package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// nodeState is where one node stands in the rollout of the target revision.
type nodeState int

const (
	// nodeOld: Ready, running an available old pod; deleted within budget.
	nodeOld nodeState = iota
	// nodeOldDown: Ready, running an old pod that is not available. Its node
	// counts against the budget; replacing the pod frees none.
	nodeOldDown
	// nodeInFlight: being upgraded, from the old pod's deletion until the new
	// pod settled and the node sent a heartbeat since.
	nodeInFlight
	// nodeSettled: runs the target revision, proven alive.
	nodeSettled
	// nodeFailed: failed for the target revision (see judgeNode); it stands.
	nodeFailed
	// nodeSkipped: NotReady and not in flight (untouched, or offline after
	// settling); upgraded when it returns.
	nodeSkipped
	// nodeGone: not a node of the DaemonSet (no pod, nothing in flight);
	// never kept in a view.
	nodeGone

	numNodeStates = int(nodeGone)
)

// nodeVerdict is judgeNode's answer.
type nodeVerdict struct {
	state nodeState
	// why a node failed.
	why string
	// at is when the verdict changes by the clock alone; zero when only an
	// event can change it.
	at time.Time
	// awaitsHeartbeat: the new pod settled, the node has not proven since
	// that it still reaches the API server; a heartbeat sent after
	// proofAfter will.
	awaitsHeartbeat bool
	proofAfter      time.Time
	// deleting: this process deleted the node's old pod, which the cache
	// still shows running.
	deleting bool
	// What the clock holds a candidate by (see timing.go): its owner's
	// hold stands (until holdEnd), its node's window is closed (until
	// opens), its node names an invalid zone, or, for OTA, its offer's
	// deadline has not passed (only then may the controller upgrade it).
	held, windowClosed, zoneInvalid, notDue bool
	holdEnd, opens                          time.Time
}

// takeable reports whether the rollout may replace the node's old pod now,
// as far as the clock is concerned.
func (v nodeVerdict) takeable() bool {
	return !v.held && !v.windowClosed && !v.zoneInvalid && !v.notDue
}

// nodePods is what a rolling update needs of one node's pods: its one live
// up-to-date and one live out-of-date pod, and the newest terminating one.
// The up-to-date pod may not be bound yet: the DaemonSet controller creates
// each pod with a required node affinity naming its node, and the scheduler
// binds it.
type nodePods struct {
	newPod, oldPod *corev1.Pod
	terminating    *corev1.Pod
	several        bool // more than one live pod of a kind
	unbound        bool // newPod is not bound yet
}

// groupPods sorts one node's pods of the DaemonSet. Where a node has more
// than one pod of a kind, the newest (then the last by name) stands for it,
// whatever order the cache lists them in.
func groupPods(ds *appsv1.DaemonSet, target string, pods []*corev1.Pod) nodePods {
	var np nodePods
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			if np.terminating == nil || pod.DeletionTimestamp.After(np.terminating.DeletionTimestamp.Time) {
				np.terminating = pod
			}
			continue
		}
		if !upToDate(ds, target, pod) {
			np.several = np.several || np.oldPod != nil
			np.oldPod = pod
			continue
		}
		unbound := pod.Spec.NodeName == ""
		switch {
		case np.newPod == nil:
			np.newPod, np.unbound = pod, unbound
		case np.unbound && !unbound:
			np.newPod, np.unbound = pod, false // a bound one tells more
		case !unbound:
			np.several = true
			np.newPod = pod
		}
	}
	return np
}

// nodeOfPod is the node a DaemonSet pod runs on, or, while unbound, the node
// its required node affinity names (matchFields metadata.name, as the
// DaemonSet controller writes it); "" when neither.
func nodeOfPod(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// judgeNode applies the failure brake's rule to one node of the DaemonSet.
// It reads only the caches, the rollout record and the deletions this
// process issued, so a restarted controller judges every node exactly as its
// predecessor did, and it records in in.record what the judgement
// establishes (a failure, an in-flight entry started or ended):
//   - a node running a new pod is in flight until health.Judge says the pod
//     settled AND the node sent a heartbeat after it settled (a node the new
//     version cut off from the API server never does); it fails when it
//     leaves Ready, or when health.Judge fails the pod (crash loop at once,
//     not available by the deadline after the pod's creation);
//   - a node whose replacement exists but is not bound is in flight from
//     the replacement's creation, and fails at the deadline, naming the
//     scheduler's reason;
//   - a node without a live pod is in flight only if its record entry says
//     this controller deleted its old pod (or, for OTA, saw an offered one
//     terminate): it fails at the deadline from that deletion, "no
//     replacement created"; one the current template no longer selects
//     (node selector, affinity) is no node of the DaemonSet any more;
//   - a NotReady node is never failed for lacking a pod of the revision: in
//     flight it keeps its budget until it is Ready past the deadline;
//     otherwise it is skipped.
func (c *Controller) judgeNode(name string, np nodePods, in *judgeInput) nodeVerdict {
	node, err := c.nodeLister.Get(name)
	if err != nil {
		node = nil
	}
	ready := node != nil && health.NodeReady(node)
	entry, hasEntry := in.record.entry(name)
	if hasEntry && entry.failed() {
		// Failed for this revision, now or before: it stands, and holds
		// the budget, even if the node recovered; its pod is left alone.
		return nodeVerdict{state: nodeFailed, why: entry.Reason}
	}
	d, issued := in.deleting[name]
	deleting := issued && np.oldPod != nil && np.oldPod.UID == d.pod
	if issued && !deleting {
		delete(in.deleting, name) // the cache shows the deletion
	}
	fail := func(why string) nodeVerdict {
		in.record.setUrgent(name, recordEntry{State: entryFailed, Reason: why, At: &metav1.Time{Time: in.now}})
		return nodeVerdict{state: nodeFailed, why: why}
	}
	deadline := in.cfg.deadline

	switch {
	case np.newPod != nil && !np.unbound:
		// A new pod runs here: in flight, settled or failed. Its creation
		// starts the clock; the in-flight entry has done its work.
		if hasEntry {
			in.record.clear(name)
		}
		v := health.Judge(np.newPod, np.newPod.CreationTimestamp.Time, in.ds.Spec.MinReadySeconds, deadline, in.now)
		var settled time.Time
		if v.State == health.Settled && np.oldPod == nil && !np.several {
			if settled = settledAt(np.newPod, in.ds.Spec.MinReadySeconds); ProvesAlive(lastHeartbeat(node, c.heartbeats.seen(name)), settled) {
				if !ready {
					return nodeVerdict{state: nodeSkipped} // offline after proving itself: not the version's fault
				}
				return nodeVerdict{state: nodeSettled}
			}
		}
		if !ready {
			return fail(fmt.Sprintf("NotReady after the upgrade (Ready=%s)", readyStatus(node)))
		}
		if v.State == health.Failed {
			return fail(fmt.Sprintf("%s: %s", v.Reason, v.Message))
		}
		verdict := nodeVerdict{state: nodeInFlight, awaitsHeartbeat: v.State == health.Settled, proofAfter: settled}
		if v.Recheck > 0 {
			verdict.at = in.now.Add(v.Recheck)
		}
		return verdict

	case np.newPod != nil:
		// The replacement exists but is not bound: in flight from its
		// creation, failed at the deadline if the scheduler never places it.
		if hasEntry {
			in.record.clear(name)
		}
		return podlessVerdict(np.newPod.CreationTimestamp.Time, deadline, ready, in.now, unscheduledWhy(np.newPod), fail)

	case deleting:
		// Deleted by this process, still running in a lagging cache: in
		// flight, and not to be deleted again.
		return nodeVerdict{state: nodeInFlight, deleting: true}

	case np.oldPod != nil:
		// An old pod runs here: a candidate if Ready and available.
		if !ready {
			return nodeVerdict{state: nodeSkipped}
		}
		v := nodeVerdict{state: nodeOld}
		if ok, wait := health.PodAvailable(np.oldPod, in.ds.Spec.MinReadySeconds, in.now); !ok {
			v.state = nodeOldDown
			if wait > 0 {
				v.at = in.now.Add(wait)
			}
		}
		c.clockHolds(&v, node, np.oldPod, in)
		return v

	case np.terminating != nil:
		// Only a terminating pod: its replacement is on the way, or never
		// comes. For OTA, an offered pod terminating is its owner's
		// upgrade: in flight from now on, recorded so that a restarted
		// controller knows.
		if !hasEntry && in.strategy == rollout.StrategyOTA && offeredTarget(np.terminating, in.target.hash) {
			since, _ := sinceOf(recordEntry{}, np.terminating)
			entry = recordEntry{State: entryInFlight, Pod: np.terminating.UID, Since: &metav1.Time{Time: since}}
			in.record.setUrgent(name, entry)
			hasEntry = true
		}
		if !hasEntry {
			if !ready {
				// Untouched by this rollout, on a node that cannot confirm
				// the termination: skipped.
				return nodeVerdict{state: nodeSkipped}
			}
			return nodeVerdict{state: nodeInFlight}
		}
		since, _ := sinceOf(entry, np.terminating)
		return podlessVerdict(since, deadline, ready, in.now, "no replacement created", fail)

	case hasEntry:
		// No pod at all, and this controller took the node's old pod away
		// (or is about to: an entry written ahead, whose pod is gone).
		if node == nil {
			in.record.clear(name) // the node left the cluster
			return nodeVerdict{state: nodeGone}
		}
		if !templateSelects(in.ds, node) {
			// The DaemonSet no longer runs here: neither in flight nor
			// failed.
			in.record.clear(name)
			return nodeVerdict{state: nodeGone}
		}
		since, known := sinceOf(entry, nil)
		if !known {
			// No controller saw the termination: the clock starts now,
			// recorded so that it does not start again.
			since = in.now.Truncate(time.Second)
			entry.Since = &metav1.Time{Time: since}
			in.record.set(name, entry)
		}
		return podlessVerdict(since, deadline, ready, in.now, "no replacement created"+untoleratedTaint(in.ds, node), fail)

	default:
		return nodeVerdict{state: nodeGone}
	}
}

// podlessVerdict judges a node in flight without a running pod of the
// revision since since: failed once the deadline passed while it is Ready,
// in flight until then, and in flight as long as it is NotReady (no pod of
// the revision ran there, so its going offline proves nothing).
func podlessVerdict(since time.Time, deadline time.Duration, ready bool, now time.Time, why string, fail func(string) nodeVerdict) nodeVerdict {
	if !ready {
		return nodeVerdict{state: nodeInFlight}
	}
	end := since.Add(deadline)
	if !now.Before(end) {
		return fail(fmt.Sprintf("%s within %s", why, deadline))
	}
	return nodeVerdict{state: nodeInFlight, at: end}
}

// unscheduledWhy says why a replacement is not bound: the scheduler's
// PodScheduled=False reason and message, as `kubectl describe` shows them.
func unscheduledWhy(pod *corev1.Pod) string {
	c := podcondition.Get(&pod.Status, corev1.PodScheduled)
	if c == nil || c.Status != corev1.ConditionFalse {
		return "replacement " + pod.Name + " not scheduled"
	}
	why := "replacement " + pod.Name + " not scheduled: " + c.Reason
	if c.Message != "" {
		why += ": " + c.Message
	}
	return why
}

// offeredTarget reports whether the pod carried PodNeedUpgrade True naming
// the target revision: an offer an owner could take.
func offeredTarget(pod *corev1.Pod, target string) bool {
	c := podcondition.Get(&pod.Status, podcondition.NeedUpgrade)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	rev, ok := podcondition.Revision(c.Message)
	return ok && rev == target
}

// templateSelects reports whether the DaemonSet's template lets its pod run
// on the node by node selector and required node affinity, as the
// DaemonSet controller decides where pods belong.
func templateSelects(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	return err == nil && ok
}

// untoleratedTaint names, for a failure's reason, a taint of the node that
// the template does not tolerate: why the DaemonSet controller creates no
// pod there. The node.kubernetes.io taints are left out: the DaemonSet
// controller adds tolerations for them to every pod it creates.
func untoleratedTaint(ds *appsv1.DaemonSet, node *corev1.Node) string {
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			taints = append(taints, t)
		}
	}
	taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, ds.Spec.Template.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	if !found {
		return ""
	}
	return fmt.Sprintf(" (taint %s not tolerated)", taint.ToString())
}

// settledAt is when a ready pod's ContainersReady has held for
// minReadySeconds.
func settledAt(pod *corev1.Pod, minReadySeconds int32) time.Time {
	c := podcondition.Get(&pod.Status, corev1.ContainersReady)
	if c == nil {
		return time.Time{}
	}
	return c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
}

// lastHeartbeat is the node's latest sign of life: the latest heartbeat seen
// from its Lease (seen), or its Ready condition's lastHeartbeatTime, the
// later.
func lastHeartbeat(node *corev1.Node, seen time.Time) time.Time {
	hb := seen
	if node == nil {
		return hb
	}
	if c := health.NodeCondition(node, corev1.NodeReady); c != nil && c.LastHeartbeatTime.After(hb) {
		hb = c.LastHeartbeatTime.Time
	}
	return hb
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	if node == nil {
		return "missing"
	}
	if c := health.NodeCondition(node, corev1.NodeReady); c != nil {
		return c.Status
	}
	return "missing"
}
