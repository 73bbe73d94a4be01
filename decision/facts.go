package decision

import (
	"maps"
	"slices"
	"strings"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/internal/unixtime"
)

// Target is the revision a rollout moves its DaemonSet's pods to: the
// DaemonSet's newest ControllerRevision.
type Target struct {
	// Hash is the revision's hash, the controller-revision-hash label of
	// its pods; Number its .revision. A rollback reuses a hash under a new
	// number, which is a new rollout (a new record).
	Hash   string
	Number int64
	// TemplateGeneration is the DaemonSet's template generation, by which
	// a pod from before revision hashes is judged.
	TemplateGeneration string
	// Images maps each container of the revision's template to its image;
	// nil when the revision's data names none.
	Images map[string]string
	// Templates are the digests of the DaemonSet's revisions' pod
	// templates (package inplace), by revision hash, the target's among
	// them: what decides whether a pod moves to the target in place. Nil
	// for a DaemonSet that upgrades by recreation.
	Templates map[string]*inplace.Template
	// TemplateCurrent: the DaemonSet's template, as its cache shows it, is
	// the target revision's, so that TemplateGeneration is the target's
	// and a patch may label a pod with it. A cache that shows the
	// DaemonSet a change ahead of its revisions (or behind) holds the
	// patches back until it catches up.
	TemplateCurrent bool
}

// Same reports whether t and o are one target: the same hash under the same
// number.
func (t Target) Same(o Target) bool { return t.Hash == o.Hash && t.Number == o.Number }

// UpToDate reports whether the pod runs the target: by its hash, or, for a
// pod without one (created before hashes), by its template generation, as
// the native controller decides it. A pod with a hash is judged by it alone:
// the target comes from the ControllerRevisions, which a cache may show
// before the DaemonSet whose stale generation would call every old pod up to
// date.
func (t Target) UpToDate(p *Pod) bool {
	if p.Hash != "" {
		return t.Hash != "" && p.Hash == t.Hash
	}
	return t.TemplateGeneration != "" && p.Generation() == t.TemplateGeneration
}

// Node is what a decision reads of a Node.
type Node struct {
	// Name is the node's name.
	Name string
	// Exists is false for a node that left the cluster.
	Exists bool
	// Ready is health.NodeReady's answer; ReadyStatus the condition's
	// status as it reads ("Unknown", or "missing"), for messages.
	Ready       bool
	ReadyStatus string
	// Heartbeat is the Ready condition's lastHeartbeatTime, by the node's
	// clock: its heartbeat when it has no Lease.
	Heartbeat time.Time
	// Labels are all the node's labels: rollout node selectors are
	// arbitrary.
	Labels map[string]string
	// Zone is the time zone the node's windows are read in
	// (edgeota.io/time-zone), nil when it names none; ZoneErr says why a
	// zone it names is not one.
	Zone    *time.Location
	ZoneErr error
}

// Condition is an OTA pod condition as the controller wrote it, or as the
// node rewrote it: Status is "" when the pod has none.
type Condition struct {
	Status, Reason, Message string
}

// SharedCondition is a Condition held once for every pod that carries the
// same (package unique): during a rollout thousands of pods carry one offer,
// PodNeedUpgrade=True naming the target, and each holds 8 bytes instead of
// 48 and three strings. The zero value is no condition.
type SharedCondition struct {
	h unique.Handle[Condition]
}

// Share returns the shared copy of c; the zero SharedCondition for a zero
// c.
func Share(c Condition) SharedCondition {
	if c == (Condition{}) {
		return SharedCondition{}
	}
	return SharedCondition{unique.Make(c)}
}

// Get returns the condition; the zero Condition for none.
func (s SharedCondition) Get() Condition {
	if s == (SharedCondition{}) {
		return Condition{}
	}
	return s.h.Value()
}

// Pod is what a decision reads of one DaemonSet pod, and what the
// controller's writes compare against: the controller caches pods as these
// records and nothing else, thousands of them, so a Pod is laid out for
// size (240 bytes, against 520 with time.Times and the rare fields inline):
// times in 8 bytes, the OTA conditions and imageIDs shared, values compared as hashes,
// what few pods have behind Rare, and what an upgrade in place is judged by
// behind Health.Run (kept for the pods that opted in alone).
type Pod struct {
	// Namespace, Name and UID identify the pod; ResourceVersion the state
	// it was read in (a write made from it is seen once the cache moves
	// past it).
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Owner is the UID of the DaemonSet controlling the pod.
	Owner types.UID
	// Node is the node the pod is bound to, or, while unbound, the node its
	// required node affinity names (as the DaemonSet controller writes it);
	// Bound tells which.
	Node string
	// Hash is the controller-revision-hash label (a pod without one is
	// judged by its template generation: Rare.Generation).
	Hash string
	// Created is the pod's creation.
	Created unixtime.Time
	// TerminatingSince is, for a terminating pod (Terminating: it has a
	// deletionTimestamp), when its termination began (the timestamp less its
	// grace period).
	TerminatingSince unixtime.Time
	// Health is what the health rules read.
	Health health.Pod
	// NeedUpgrade and ImageReady are the OTA conditions.
	NeedUpgrade, ImageReady SharedCondition
	// Offer, Challenge are hashes of the values of the controller's copies
	// on the pod (podchannel.Hash; 0: absent), which it rewrites when they
	// differ from what it holds; Answer the hash of the agent's answer to a
	// proof-of-life challenge, compared with the hash of the challenge this
	// process issued.
	Offer, Challenge, Answer uint64
	// ImageIDs are the imageIDs its containers run, what a pin is read
	// from and checked against.
	ImageIDs ImageIDs
	// Rare holds what few pods have; nil for most.
	Rare *RarePod
	// Bound and Terminating: see Node and TerminatingSince.
	Bound, Terminating bool
}

// ImageIDs are a pod's containers' imageIDs (containerStatuses[].imageID,
// init containers' included), by container name, held once for every pod
// that reports the same (package unique): the pods of one revision and
// architecture run the same digests, so each pod holds 8 bytes. The zero
// value holds none.
type ImageIDs struct {
	h unique.Handle[string]
}

// ShareImageIDs returns the shared copy of ids (container name → imageID;
// empty imageIDs are left out).
func ShareImageIDs(ids map[string]string) ImageIDs {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(ids)) {
		if ids[name] == "" {
			continue
		}
		b.WriteString(name)
		b.WriteByte(0)
		b.WriteString(ids[name])
		b.WriteByte(0)
	}
	if b.Len() == 0 {
		return ImageIDs{}
	}
	return ImageIDs{unique.Make(b.String())}
}

// Get returns the imageID of the container; "" when it reports none.
func (i ImageIDs) Get(container string) string {
	if i == (ImageIDs{}) {
		return ""
	}
	s := i.h.Value()
	for s != "" {
		name, rest, _ := strings.Cut(s, "\x00")
		id, rest, _ := strings.Cut(rest, "\x00")
		if name == container {
			return id
		}
		s = rest
	}
	return ""
}

// Names are the containers that report an imageID, in name order.
func (i ImageIDs) Names() []string {
	if i == (ImageIDs{}) {
		return nil
	}
	var names []string
	for s := i.h.Value(); s != ""; {
		name, rest, _ := strings.Cut(s, "\x00")
		_, s, _ = strings.Cut(rest, "\x00")
		names = append(names, name)
	}
	return names
}

// RarePod is what few pods have: a pod from before revision hashes, an
// unbound pod the scheduler refused, a pod its owner holds.
type RarePod struct {
	// Generation is the pod-template-generation label of a pod without a
	// hash (read only then).
	Generation string
	// Unscheduled, for an unbound pod the scheduler refused, is its
	// PodScheduled=False reason and message ("Unschedulable: 0/20 nodes are
	// available: ...").
	Unscheduled string
	// HoldUntil is the end of the owner's hold on the pod (zero: none, or
	// one that does not parse).
	HoldUntil unixtime.Time
	// Requested is the revision the owner's request to upgrade the pod in
	// place names (podchannel.UpgradeRequest, for this pod's UID); "" when
	// none, or one for another pod or that does not parse.
	Requested string
}

// Generation is the pod-template-generation label of a pod without a hash;
// "" for one with a hash.
func (p *Pod) Generation() string {
	if p.Rare == nil {
		return ""
	}
	return p.Rare.Generation
}

// Unscheduled is why the scheduler refused an unbound pod; "" when it did
// not.
func (p *Pod) Unscheduled() string {
	if p.Rare == nil {
		return ""
	}
	return p.Rare.Unscheduled
}

// HoldUntil is the end of the owner's hold on the pod; zero when none.
func (p *Pod) HoldUntil() time.Time {
	if p.Rare == nil {
		return time.Time{}
	}
	return p.Rare.HoldUntil.Time()
}

// Requested is the revision the owner asked to upgrade the pod to in
// place; "" when none.
func (p *Pod) Requested() string {
	if p.Rare == nil {
		return ""
	}
	return p.Rare.Requested
}

// DeepCopy returns a copy of p that shares nothing a writer could change
// (the shared conditions are never changed).
func (p *Pod) DeepCopy() *Pod {
	c := *p
	c.Health = p.Health.DeepCopy()
	if p.Rare != nil {
		r := *p.Rare
		c.Rare = &r
	}
	return &c
}

// NodeFacts is everything one judgement of a node reads, for one DaemonSet:
// the node, the DaemonSet's pods there, and what this process knows that the
// caches may not show yet.
type NodeFacts struct {
	Node Node
	// Pods are the DaemonSet's pods on the node, terminating ones included.
	Pods []*Pod
	// Taking is the UID of the old pod this process deleted or patched
	// there and its cache does not show deleted (or patched) yet; "" when
	// none.
	Taking types.UID
	// LeaseRenewed is the latest renewal of the node's Lease seen, by the
	// node's clock.
	LeaseRenewed time.Time
	// Answered is the UID of the pod whose proof-of-life challenge the node
	// answered with the nonce this process issued for the pod's current
	// generation; "" when none.
	Answered types.UID
	// Pull is where the pull of the target's images for the node's old pod
	// stands.
	Pull Pull
	// Fit says whether the DaemonSet's template lets its pod run on the
	// node (node selector, required affinity), and names a taint the
	// template does not tolerate; read only for a node without a pod, so
	// computed on demand. Nil: it fits.
	Fit func() (selects bool, untolerated string)
}

// PullState is where a node's pull of the target's images stands.
type PullState int

const (
	// PullNone: no pull asked for, nor done.
	PullNone PullState = iota
	// PullPending: a pull Job runs, or waits for the kubelet's retries of a
	// transient error.
	PullPending
	// PullDone: the images are on the node (the Job's containers started,
	// or the pod's PodImageReady is True naming the target).
	PullDone
	// PullFailed: the pull failed for good: the image does not exist, its
	// name is invalid, access is denied.
	PullFailed
)

// Pull is a node's pull of the target's images for its old pod.
type Pull struct {
	State PullState
	// Since is when a pending pull's Job was created.
	Since time.Time
	// Why says why a pull failed.
	Why string
	// ByController: the controller started the pull ahead of the node's
	// turn (pre-download), not its owner (imagepull).
	ByController bool
	// Job: a pre-download Job of the controller's for the target exists for
	// the pod, whatever its outcome; one that is done or failed holds its
	// place in the parallelism until it is gone.
	Job bool
	// ByTag are, for a pull of the controller's Job that is done, the
	// containers whose image it named by tag, each with the digest the
	// node's runtime resolved the tag to (its imageID read by package
	// imageref; "" when it names none). With pinning on, such a pull
	// counts only once its digests are the pin's (Rollout.TagPull).
	ByTag map[string]string
}

// FactsFunc gathers the facts of one node.
type FactsFunc func(node string) NodeFacts

// ProvesAlive reports whether a heartbeat sent at sent proves a node alive
// after its new pod settled at settled. A pod's conditions say when it
// turned ready to the second only, while a Lease's renewTime has
// microseconds: a renewal at 10.5 s may come before a pod that turned ready
// at 10.7 s, shown as 10 s. Only a heartbeat from the next whole second on
// is surely later. Both times are the node's clock.
func ProvesAlive(sent, settled time.Time) bool {
	return !sent.Before(settled.Truncate(time.Second).Add(time.Second))
}
