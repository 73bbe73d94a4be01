package decision

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/inplace"
)

// Stage is where one node stands in the rollout of the target revision, as
// the controller records it.
type Stage string

const (
	// StageOffered (OTA): the controller offered the target to the node's
	// owner at OfferedAt.
	StageOffered Stage = "offered"
	// StageInFlight: the controller deletes, or deleted, the node's old pod
	// (Pod), or saw an offered one terminate, at Since (nil: written ahead
	// of the deletion, the old pod still a candidate). Until the node runs a
	// pod of the revision it holds the budget, and fails at the deadline.
	StageInFlight Stage = "inFlight"
	// StageSettled: the node's pod of the revision settled and the node
	// proved alive since, at At. Final for the revision: whatever the node
	// does later (a power cycle, a restart, a crash) is never a failure of
	// this rollout.
	StageSettled Stage = "settled"
	// StageFailed: the node failed for the revision at At, for Reason. It
	// stands, and holds the budget, even if the node recovers.
	StageFailed Stage = "failed"
)

// Entry is one node's entry in the rollout record: the controller's own state,
// never a node's claim.
type Entry struct {
	Stage Stage `json:"state"`
	// Reason says why a failed node failed.
	Reason string `json:"reason,omitempty"`
	// At is when the node failed, or settled.
	At *metav1.Time `json:"at,omitempty"`
	// Pod is, in flight, the UID of the old pod deleted.
	Pod types.UID `json:"pod,omitempty"`
	// Since is, in flight, when the deletion was issued (or the pod was
	// first seen terminating, or the node first seen without a pod): the
	// start of the deadline while no replacement exists. Nil: written ahead
	// of the deletion.
	Since *metav1.Time `json:"since,omitempty"`
	// OfferedAt is, for OTA, when the controller first offered the target
	// to the node: its upgrade deadline counts from it. Kept through the
	// later stages.
	OfferedAt *metav1.Time `json:"offeredAt,omitempty"`
	// NoPodLost marks a failure before harm: the node's pull of the target's
	// images failed for good before its old pod was touched. It counts
	// toward max-failed, and holds no budget: its old pod still serves.
	NoPodLost bool `json:"noPodLost,omitempty"`
	// Proof is, settled, what proved the node alive after its pod settled:
	// kept in the record so that the rollout status counts each kind of
	// proof the same after a restart. Empty in entries an older controller
	// wrote.
	Proof Proof `json:"proof,omitempty"`
	// InPlace is, in flight, the upgrade in place of Pod: what its patch
	// writes and what the node is judged against (the generation the patch
	// made, the containers that ran before it). Written before the patch,
	// as a deletion's entry is, and completed once the patch returns. Nil
	// for a node whose pod is recreated.
	InPlace *InPlace `json:"inPlace,omitempty"`
}

// InPlace is an upgrade in place as the rollout record keeps it: the
// controller's own, never read from the pod, whose annotations a node may
// rewrite.
type InPlace struct {
	// From is the revision hash the pod ran before the patch.
	From string `json:"from,omitempty"`
	// Images are what the patch writes: the changed containers (regular
	// ones and native sidecars), by name, with their new image.
	Images map[string]string `json:"images"`
	// Before is the pod's metadata.generation the patch was decided on (it
	// is conditional on the pod's resourceVersion, so the generation too).
	Before int64 `json:"before"`
	// Generation is the pod's metadata.generation the patch returned; 0
	// until it returned (a controller stopped before: Before+1, what a
	// patch of the spec makes).
	Generation int64 `json:"generation,omitempty"`
	// Containers are the IDs of the pod's containers before the patch
	// (health.ContainerID, in hexadecimal), by name: a changed container
	// is upgraded once it runs under another.
	Containers map[string]string `json:"containers,omitempty"`
}

// Expect is what the node is judged against (health.JudgeInPlace).
func (p *InPlace) Expect() health.InPlace {
	up := health.InPlace{Generation: p.Generation, Before: make(map[string]uint64, len(p.Containers)),
		Changed: slices.Sorted(maps.Keys(p.Images))}
	if up.Generation == 0 {
		up.Generation = p.Before + 1
	}
	for name, id := range p.Containers {
		if v, err := strconv.ParseUint(id, 16, 64); err == nil {
			up.Before[name] = v
		}
	}
	return up
}

// Equal reports whether two entries' upgrades in place say the same.
func (p *InPlace) Equal(q *InPlace) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.From == q.From && p.Before == q.Before && p.Generation == q.Generation &&
		maps.Equal(p.Images, q.Images) && maps.Equal(p.Containers, q.Containers)
}

// inPlaceOf is the write-ahead entry part of the upgrade in place of pod to
// plan's images: the pod's generation and containers as cached (planFor
// plans no upgrade in place of a pod without them).
func inPlaceOf(pod *Pod, plan *inplace.Plan) *InPlace {
	p := &InPlace{From: pod.Hash, Images: plan.Images}
	if run := pod.Health.Run; run != nil {
		p.Before, p.Containers = run.Generation, make(map[string]string, len(run.Containers))
		for _, c := range run.Containers {
			p.Containers[c.Name] = strconv.FormatUint(c.ID, 16)
		}
	}
	return p
}

// Proof is what proved a node alive after its new pod settled.
type Proof string

const (
	// ProofAnswer: its agent's answer to the challenge this controller
	// issued about the pod.
	ProofAnswer Proof = "answer"
	// ProofHeartbeat: a heartbeat the node sent after the pod settled, its
	// Lease's renewal or its Ready condition's lastHeartbeatTime.
	ProofHeartbeat Proof = "heartbeat"
)

// Valid reports whether an entry read back from the cluster is one the
// controller writes.
func (e *Entry) Valid() bool {
	switch e.Stage {
	case StageOffered:
		return e.OfferedAt != nil
	case StageInFlight, StageFailed:
		return true
	case StageSettled:
		return e.At != nil
	}
	return false
}

// Rank orders the stages a node passes through, for a record that holds
// two entries of one node (a stage that moved between ConfigMaps, the old
// one not removed yet): the later stage wins.
func (s Stage) Rank() int {
	switch s {
	case StageOffered:
		return 1
	case StageInFlight:
		return 2
	case StageSettled:
		return 3
	case StageFailed:
		return 4
	}
	return 0
}

// Meta is what the record holds about the rollout itself.
type Meta struct {
	// TargetSince is when the controller first saw the revision as the
	// target: the hold limit counts from it. Not the ControllerRevision's
	// creation, which `kubectl rollout undo` keeps.
	TargetSince metav1.Time `json:"targetSince"`
	// LostFailures counts failures the controller once published (in the
	// rollout status) that the record no longer holds: counted, unnamed.
	LostFailures int `json:"lostFailures,omitempty"`
	// Pins are, with pinning on (Settings.Pin), what each architecture's
	// canary ran, by its nodes' kubernetes.io/arch label ("" for nodes
	// without one): written, once, before any decision reads it.
	Pins map[string]Pin `json:"pins,omitempty"`
}

// Equal reports whether two metas say the same.
func (m Meta) Equal(o Meta) bool {
	return m.TargetSince.Equal(&o.TargetSince) && m.LostFailures == o.LostFailures &&
		maps.EqualFunc(m.Pins, o.Pins, Pin.Equal)
}

// Pin is what one architecture's canary ran: the first node of that
// architecture whose pod of the revision settled and proved alive.
type Pin struct {
	// Canary is the node.
	Canary string `json:"canary"`
	// At is when it settled.
	At metav1.Time `json:"at"`
	// Digests are the digests its containers ran (package imageref), by
	// container name: the containers its upgrade changed (in place) or all
	// of them (recreated).
	Digests map[string]string `json:"digests,omitempty"`
	// Unpinnable says, by container name, why a container's imageID names
	// no digest a node could pull (an image imported without one): those
	// containers go on with the template's tag.
	Unpinnable map[string]string `json:"unpinnable,omitempty"`
}

// Equal reports whether two pins say the same.
func (p Pin) Equal(q Pin) bool {
	return p.Canary == q.Canary && p.At.Equal(&q.At) && maps.Equal(p.Digests, q.Digests) && maps.Equal(p.Unpinnable, q.Unpinnable)
}

// Ledger is the rollout record of one DaemonSet's target revision as the
// controller holds it: the truth while this process leads, rebuilt from the
// cluster (package record) when it starts. Each change is reported to the
// Changed hook, which persists it.
type Ledger struct {
	mu sync.Mutex
	// entries are the nodes' entries, packed (held).
	entries map[string]held
	failed  int
	meta    Meta
	// Changed, set by the persistence, is called with every changed node
	// (and "" for the meta) and whether the change must be written before
	// the controller acts again; under no lock of the ledger's.
	Changed func(node string, urgent bool)
}

// NewLedger returns a ledger holding entries and meta, as read back from the
// cluster.
func NewLedger(entries map[string]Entry, meta Meta) *Ledger {
	l := &Ledger{entries: make(map[string]held, len(entries)), meta: meta}
	for node, e := range entries {
		l.entries[node] = hold(e)
		if e.Stage == StageFailed {
			l.failed++
		}
	}
	return l
}

// Entry returns the node's entry.
func (l *Ledger) Entry(node string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.entries[node]
	if !ok {
		return Entry{}, false
	}
	return h.entry(), true
}

// Nodes returns the nodes the ledger has entries for.
func (l *Ledger) Nodes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Keys(l.entries))
}

// Entries returns a copy of every entry.
func (l *Ledger) Entries() map[string]Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	entries := make(map[string]Entry, len(l.entries))
	for node, h := range l.entries {
		entries[node] = h.entry()
	}
	return entries
}

// Meta returns the record's meta.
func (l *Ledger) Meta() Meta {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.meta
}

// Failed is how many nodes failed, counted exactly however many, the lost
// failures included.
func (l *Ledger) Failed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed + l.meta.LostFailures
}

// FailedNodes returns the failed nodes in name order with why.
func (l *Ledger) FailedNodes() (names []string, why map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	why = make(map[string]string, l.failed)
	for node, h := range l.entries {
		if h.stage == stageFailed {
			names = append(names, node)
			why[node] = h.reason()
		}
	}
	slices.Sort(names)
	return names, why
}

// maxReason bounds the reason kept for a failed node, enough for a
// scheduler's message; the node's name is always kept whole.
const maxReason = 400

// Set records the node's entry. A failure stands: nothing replaces it; a
// settled node is final: only a failure (never judged of it) could replace it.
func (l *Ledger) Set(node string, e Entry, urgent bool) {
	l.mu.Lock()
	old, had := l.entries[node]
	switch {
	case had && old.stage == stageFailed:
		l.mu.Unlock()
		return
	case had && old.stage == stageSettled && e.Stage != StageFailed:
		l.mu.Unlock()
		return
	}
	if e.Stage == StageFailed {
		l.failed++
		if len(e.Reason) > maxReason {
			e.Reason = e.Reason[:maxReason] + "…"
		}
	}
	l.entries[node] = hold(e)
	changed := l.Changed
	l.mu.Unlock()
	if changed != nil {
		changed(node, urgent)
	}
}

// Clear removes the node's entry unless it failed or settled, which stand.
func (l *Ledger) Clear(node string) {
	l.mu.Lock()
	h, ok := l.entries[node]
	if !ok || h.stage == stageFailed || h.stage == stageSettled {
		l.mu.Unlock()
		return
	}
	delete(l.entries, node)
	changed := l.Changed
	l.mu.Unlock()
	if changed != nil {
		changed(node, false)
	}
}

// Forget removes the node's entry whatever it is: the node left the cluster,
// or the DaemonSet no longer runs there.
func (l *Ledger) Forget(node string) {
	l.mu.Lock()
	h, ok := l.entries[node]
	if !ok {
		l.mu.Unlock()
		return
	}
	if h.stage == stageFailed {
		// A failure is counted for ever, even once its node is gone: a
		// fleet the version broke does not get its budget back by losing
		// the nodes.
		l.mu.Unlock()
		return
	}
	delete(l.entries, node)
	changed := l.Changed
	l.mu.Unlock()
	if changed != nil {
		changed(node, false)
	}
}

// SetMeta records the record's meta.
func (l *Ledger) SetMeta(m Meta, urgent bool) {
	l.mu.Lock()
	if l.meta.Equal(m) {
		l.mu.Unlock()
		return
	}
	l.meta = m
	changed := l.Changed
	l.mu.Unlock()
	if changed != nil {
		changed("", urgent)
	}
}

// timeOf is a record time: whole seconds, as the record keeps them, so that
// a controller that reads them back computes the same deadlines.
func timeOf(t time.Time) *metav1.Time { return &metav1.Time{Time: t.Truncate(time.Second)} }

// SetPin records the architecture's pin, urgently (it must be written
// before a patch names its digests), unless the ledger holds one for it
// already: the first canary's stands for the revision. It reports whether
// it recorded p.
func (l *Ledger) SetPin(arch string, p Pin) bool {
	l.mu.Lock()
	if _, ok := l.meta.Pins[arch]; ok {
		l.mu.Unlock()
		return false
	}
	pins := make(map[string]Pin, len(l.meta.Pins)+1)
	maps.Copy(pins, l.meta.Pins)
	pins[arch] = p
	l.meta.Pins = pins // never changed in place: Meta's copies share it
	changed := l.Changed
	l.mu.Unlock()
	if changed != nil {
		changed("", true)
	}
	return true
}

// Pin returns the architecture's pin.
func (l *Ledger) Pin(arch string) (Pin, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.meta.Pins[arch]
	return p, ok
}
