package main

import (
	"cmp"
	"sync"
	"time"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeHeartbeat is how often the nodes report their status during the
// rollout and cut-off scenarios unless BENCH_HEARTBEAT says otherwise
// (every 2 to 3 s; localcluster.Heartbeat). ota-controller's failure brake
// keeps a node in flight until one heartbeat after its new pod settles, so a
// rollout pays up to one heartbeat per wave where the native controller pays
// none. 2 s is the e2e suite's interval: short enough that the waits do not
// swamp the rollout, long enough that 1000 nodes (400–500 status writes/s)
// leave the 2 cores to the controllers being measured. Both controllers run
// on the same cluster, so the comparison stays fair. The other scenarios
// run at the cluster's default (10–15 s), which does not load the API
// server they measure. BENCH_HEARTBEAT=lease runs the two on node Leases
// renewed every 10 s instead, as kubelets: five times fewer heartbeats,
// each a Lease update rather than a Node status write, and waves as long as
// on a real cluster.
const nodeHeartbeat = 2 * time.Second

// flightKind is what a flightEvent says happened to a node.
type flightKind int

const (
	// podDeleted: the node's old pod was seen terminating; the node is in
	// flight.
	podDeleted flightKind = iota
	// podSettled: the node's new pod was seen Ready.
	podSettled
	// heartbeatSeen: the node reported its status or renewed its Lease; at
	// is when the bench saw it, sent when the node says it sent it.
	heartbeatSeen
	// answerSeen: the node's agent answered the controller's challenge on
	// its new pod (the pod's edgeota.io/alive-answer echoes its
	// edgeota.io/alive-challenge), as the pod watch saw it.
	answerSeen
	// podCreated: the node's new pod was first seen, created by the
	// native DaemonSet controller (its node from its node affinity).
	podCreated
	// podBound: the node's new pod was first seen bound to its node.
	podBound
	// podPatched: the node's pod, seen before at the old image, was seen
	// patched to the new one (an upgrade in place); the node is in flight.
	podPatched
)

// flightEvent is one event of a rollout, as the bench's watches saw it, in
// the order they saw it.
type flightEvent struct {
	at   time.Time
	node string
	kind flightKind
	// sent is, for podSettled, when the pod's containers turned ready (its
	// ContainersReady condition's lastTransitionTime) and, for
	// heartbeatSeen, the node's lastHeartbeatTime or its Lease's renewTime:
	// a heartbeat proves the pod's node alive only if sent after the pod
	// settled (the controller's rule, decision.ProvesAlive).
	sent time.Time
}

// waveFigures are what the flight events of one rollout say about its pacing.
type waveFigures struct {
	// freeToDelete are, in order, for each event that freed budget and was followed
	// by a deletion, the time until that next deletion. The image change
	// counts as the first freeing event.
	freeToDelete []time.Duration
	// proofWait sums, over the nodes whose flight a heartbeat ended, the
	// time from their new pod being seen settled to that heartbeat being
	// seen: what the proof of life cost each node.
	proofWait time.Duration
	// proven counts those nodes.
	proven int
	// replaced counts the nodes whose old pod was deleted (or patched in
	// place), each once.
	replaced int
	// proofs are, in order, how the flights the proof of life ended did.
	proofs []nodeProof
	// turns are, for each node whose turn the bench saw whole, how long
	// each step of it took (turnSteps).
	turns []turn
}

// turn is one node's turn, step by step, as the bench's watches saw it:
// what an upgraded node waits for between its old pod's deletion and the
// proof that frees its budget slot.
type turn struct {
	// created: old pod seen terminating → new pod seen (kwok ends the old
	// pod, the native DaemonSet controller sees it gone and creates the
	// next); bound: → seen bound (kube-scheduler); ready: → seen Ready
	// (kwok); proven: → proof of life seen (zero without it).
	created, bound, ready, proven time.Duration
}

// turnSteps names a turn's steps, in order, for the report.
var turnSteps = []string{"deletion → new pod", "→ bound", "→ Ready", "→ proof of life"}

// steps lists t's steps in turnSteps' order.
func (t turn) steps() []time.Duration { return []time.Duration{t.created, t.bound, t.ready, t.proven} }

// nodeProof is how one node's flight ended, as the bench's watches saw it.
type nodeProof struct {
	node string
	// settled is when the node's new pod was seen Ready; proven when what
	// proved the node alive was seen: its agent's answer, or the first
	// heartbeat sent after the pod settled (settled itself when a
	// heartbeat seen earlier proves it).
	settled, proven time.Time
	// by is answerSeen or heartbeatSeen, or podSettled for a node proven
	// by a heartbeat seen before its pod settled.
	by flightKind
}

// waves is how many budget's worths of nodes went through: the controller
// keeps at most budget nodes in flight, so the replaced nodes pass in
// ⌈replaced / budget⌉ generations, and each generation waits at most one
// heartbeat period for its proof of life. (The deletions that followed a
// freeing event, freeToDelete's samples, are far more: every node leaving
// flight frees budget for one more.)
func (f waveFigures) waves(budget int) int {
	return (f.replaced + budget - 1) / budget
}

// meanProofWait is what the proof of life cost a node on average: proofWait
// / proven, zero when no node was proven.
func (f waveFigures) meanProofWait() time.Duration {
	if f.proven == 0 {
		return 0
	}
	return f.proofWait / time.Duration(f.proven)
}

// heartbeatWait is how much of the rollout's wall time went to proof of
// life: the budget's slots each pass one node per wave in turn, and each
// node held its slot for its heartbeat wait, on average meanProofWait,
// before the slot's next node could start. The last wave's waits come after
// its pods are Ready, where the wall time ends, so waves − 1 of them count.
// The waits overlap across slots, not within one, so a rollout without them
// would have ended about this much earlier.
func (f waveFigures) heartbeatWait(budget int) time.Duration {
	return time.Duration(max(f.waves(budget)-1, 0)) * f.meanProofWait()
}

// analyzeWaves replays a rollout's flight events from its start (the image
// change). A node enters flight when its old pod is deleted and leaves it
// when its new pod settles or, when proofOfLife is set (ota-controller's
// brake), at the first heartbeat sent after that or its agent's answer,
// whichever is seen first; a node leaving flight frees budget. events must
// be in the order they were seen.
func analyzeWaves(start time.Time, events []flightEvent, proofOfLife bool) waveFigures {
	var f waveFigures
	inFlight := map[string]*flight{}
	// lastSent is each node's latest heartbeat, seen or not before its pod
	// settled: the controller compares timestamps (decision.ProvesAlive),
	// not the order the bench saw them in.
	lastSent := map[string]time.Time{}
	freed, pending := start, true
	for _, e := range events {
		fl := inFlight[e.node]
		switch e.kind {
		case podDeleted, podPatched:
			// A deletion (or a patch in place) takes budget; the first
			// after a freeing event is the controller's answer to it.
			if fl != nil {
				continue
			}
			inFlight[e.node] = &flight{deleted: e.at}
			if e.kind == podPatched {
				// No pod to create or bind: the turn goes from the patch
				// to the restarted containers' readiness.
				inFlight[e.node].created, inFlight[e.node].bound = e.at, e.at
			}
			f.replaced++
			if pending {
				f.freeToDelete = append(f.freeToDelete, e.at.Sub(freed))
				pending = false
			}
		case podSettled:
			// The new pod is Ready: without proof of life the node is
			// done; with it, it waits for a heartbeat.
			if fl == nil || fl.settled {
				continue
			}
			fl.settled, fl.sent, fl.seen = true, e.sent, e.at
			if proven := decision.ProvesAlive(lastSent[e.node], e.sent); !proofOfLife || proven {
				delete(inFlight, e.node)
				f.end(fl, e.at)
				if proofOfLife {
					f.proven++ // no wait
					f.proofs = append(f.proofs, nodeProof{node: e.node, settled: e.at, proven: e.at, by: podSettled})
				}
				if !pending {
					freed, pending = e.at, true
				}
			}
		case heartbeatSeen:
			// A heartbeat sent after the pod settled ends the flight.
			lastSent[e.node] = maxTime(lastSent[e.node], e.sent)
			if !proofOfLife || fl == nil || !fl.settled || !decision.ProvesAlive(e.sent, fl.sent) {
				continue
			}
			f.prove(inFlight, e, fl)
			if !pending {
				freed, pending = e.at, true
			}
		case answerSeen:
			// The agent's answer ends the flight, whatever the clocks say.
			if !proofOfLife || fl == nil || !fl.settled {
				continue
			}
			f.prove(inFlight, e, fl)
			if !pending {
				freed, pending = e.at, true
			}
		case podCreated:
			// A step of the node's turn; the first seen counts.
			if fl != nil && fl.created.IsZero() {
				fl.created = e.at
			}
		case podBound:
			if fl != nil && fl.bound.IsZero() {
				fl.bound = e.at
			}
		}
	}
	return f
}

// prove ends the flight fl of e's node by e, a heartbeat or an answer.
func (f *waveFigures) prove(inFlight map[string]*flight, e flightEvent, fl *flight) {
	delete(inFlight, e.node)
	f.end(fl, e.at)
	f.proofWait += e.at.Sub(fl.seen)
	f.proven++
	f.proofs = append(f.proofs, nodeProof{node: e.node, settled: fl.seen, proven: e.at, by: e.kind})
}

// flight is a node in flight: whether its new pod has settled, when it
// turned Ready, and when the bench saw it.
type flight struct {
	settled    bool
	sent, seen time.Time
	// deleted, created and bound are when the bench saw the old pod
	// terminating and the new one created and bound: the turn's steps.
	deleted, created, bound time.Time
}

// end records fl's turn, ended at at, when the bench saw each of its steps.
func (f *waveFigures) end(fl *flight, at time.Time) {
	if fl.created.IsZero() || fl.bound.IsZero() || !fl.settled {
		return
	}
	f.turns = append(f.turns, turn{created: fl.created.Sub(fl.deleted), bound: fl.bound.Sub(fl.created),
		ready: fl.seen.Sub(fl.bound), proven: at.Sub(fl.seen)})
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// flightRecorder turns the rollout's pod, node and node Lease watch events
// into flight events for the nodes rolling to img.
type flightRecorder struct {
	img string
	// mu orders the events of the two watches as they arrive.
	mu     sync.Mutex
	events []flightEvent
	// deleted, created, bound, settled, answered and patched remember the
	// pods already reported, so that each pod yields one event of each
	// kind.
	deleted, created, bound, settled, answered, patched map[string]bool
	// old are the pods seen at another image (a pod seen at img after that
	// was patched in place), with the challenge each carried then: a pod
	// patched in place keeps its annotations, and an answer to that
	// challenge is its last upgrade's, which proves nothing of this one.
	old map[string]string
	// heartbeat is each node's latest heartbeat seen, of either kind: the
	// controller takes the later of the two.
	heartbeat map[string]time.Time
}

func newFlightRecorder(img string) *flightRecorder {
	return &flightRecorder{img: img, deleted: map[string]bool{}, created: map[string]bool{}, bound: map[string]bool{},
		settled: map[string]bool{}, answered: map[string]bool{}, patched: map[string]bool{}, old: map[string]string{}, heartbeat: map[string]time.Time{}}
}

// sawOld records a pod seen at another image than img, and the challenge it
// carried (r.mu held, or before the recorder observes any watch).
func (r *flightRecorder) sawOld(p *corev1.Pod) {
	r.old[p.Name] = p.Annotations[rollout.ChallengeAnnotation]
}

// pod records an old pod's deletion (or its patch in place), a new pod's
// creation, binding and Ready (a patched pod's new container started and
// Ready), and its agent's answer.
func (r *flightRecorder) pod(at time.Time, p *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	node, current := p.Spec.NodeName, isImage(p.Spec.Containers[0].Image, r.img)
	if !current && p.DeletionTimestamp == nil {
		r.sawOld(p)
	}
	lastChallenge, old := r.old[p.Name]
	if current && p.DeletionTimestamp == nil && old && !r.patched[p.Name] {
		r.patched[p.Name] = true
		r.events = append(r.events, flightEvent{at: at, node: node, kind: podPatched})
	}
	if current && p.DeletionTimestamp == nil && !old {
		if !r.created[p.Name] {
			r.created[p.Name] = true
			r.events = append(r.events, flightEvent{at: at, node: cmp.Or(node, affinityNode(p)), kind: podCreated})
		}
		if node != "" && !r.bound[p.Name] {
			r.bound[p.Name] = true
			r.events = append(r.events, flightEvent{at: at, node: node, kind: podBound})
		}
	}
	switch {
	case p.DeletionTimestamp != nil && !current && !r.deleted[p.Name]:
		r.deleted[p.Name] = true
		r.events = append(r.events, flightEvent{at: at, node: node, kind: podDeleted})
	case p.DeletionTimestamp == nil && current && isReady(p) && runs(p, p.Spec.Containers[0].Image) && !r.settled[p.Name]:
		r.settled[p.Name] = true
		var sent time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.ContainersReady {
				sent = c.LastTransitionTime.Time
			}
		}
		if r.patched[p.Name] {
			// Settled from its new container's start, as the controller
			// judges a pod patched in place (health.JudgeInPlace): its
			// ContainersReady kept the old container's time.
			sent = p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		}
		r.events = append(r.events, flightEvent{at: at, node: node, kind: podSettled, sent: sent})
	}
	if p.DeletionTimestamp == nil && current && answered(p) && p.Annotations[rollout.ChallengeAnnotation] != lastChallenge &&
		r.settled[p.Name] && !r.answered[p.Name] {
		r.answered[p.Name] = true
		r.events = append(r.events, flightEvent{at: at, node: node, kind: answerSeen})
	}
}

// affinityNode is the node a DaemonSet pod not yet bound is for: the
// native controller pins each pod to its node by a required node affinity
// on the node's name.
func affinityNode(p *corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// answered reports whether the pod carries its agent's answer to the
// challenge on it.
func answered(p *corev1.Pod) bool {
	challenge := p.Annotations[rollout.ChallengeAnnotation]
	return challenge != "" && p.Annotations[rollout.AnswerAnnotation] == challenge
}

// node records a heartbeat: a newer lastHeartbeatTime of the Ready condition.
func (r *flightRecorder) node(at time.Time, n *corev1.Node) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			r.beat(at, n.Name, c.LastHeartbeatTime.Time)
		}
	}
}

// lease records a heartbeat: a newer renewTime of a node's Lease (named
// after its node).
func (r *flightRecorder) lease(at time.Time, l *coordinationv1.Lease) {
	if l.Spec.RenewTime != nil {
		r.beat(at, l.Name, l.Spec.RenewTime.Time)
	}
}

// beat records the node's heartbeat sent at sent, seen at at, if it is
// newer than any seen before.
func (r *flightRecorder) beat(at time.Time, node string, sent time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent.After(r.heartbeat[node]) {
		r.heartbeat[node] = sent
		r.events = append(r.events, flightEvent{at: at, node: node, kind: heartbeatSeen, sent: sent})
	}
}
