package decision

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// held is an Entry as a Ledger holds it. A controller holds one per node and
// DaemonSet for as long as the revision is the target, so the common entry
// (settled at a time, by a known proof) takes 40 bytes and no allocation,
// where an Entry takes 96 and a *metav1.Time allocation per time. Its times
// are whole Unix seconds, the record's own precision (timeOf, and
// metav1.Time's RFC 3339), which an int64 holds for every year a time.Time
// can. What few entries carry hangs off rare: a failure's reason, the pod in
// flight, and a stage or proof this controller does not name (a newer
// controller's, read back), kept as it came so that nothing is lost.
type held struct {
	at, since, offeredAt int64
	stage                stageCode
	proof                proofCode
	flags                heldFlags
	rare                 *heldRare
}

// heldRare is what an uncommon entry carries besides.
type heldRare struct {
	reason  string
	pod     types.UID
	inPlace *InPlace
	// stage and proof, when their code is unnamed.
	stage Stage
	proof Proof
}

// stageCode and proofCode name the Stages and Proofs this controller writes;
// unnamed means the value is in heldRare.
type (
	stageCode uint8
	proofCode uint8
)

const (
	stageNone stageCode = iota // Stage ""
	stageOffered
	stageInFlight
	stageSettled
	stageFailed
	stageUnnamed
)

const (
	proofNone proofCode = iota // Proof "", as older controllers wrote
	proofAnswer
	proofHeartbeat
	proofUnnamed
)

// stages and proofs are the values of the named codes, by code.
var (
	stages = [...]Stage{stageNone: "", stageOffered: StageOffered, stageInFlight: StageInFlight,
		stageSettled: StageSettled, stageFailed: StageFailed}
	proofs = [...]Proof{proofNone: "", proofAnswer: ProofAnswer, proofHeartbeat: ProofHeartbeat}
)

// heldFlags say which times an entry has, and its NoPodLost.
type heldFlags uint8

const (
	hasAt heldFlags = 1 << iota
	hasSince
	hasOfferedAt
	noPodLost
)

// hold packs e.
func hold(e Entry) held {
	h := held{stage: stageUnnamed, proof: proofUnnamed}
	for c, s := range stages {
		if s == e.Stage {
			h.stage = stageCode(c)
			break
		}
	}
	for c, p := range proofs {
		if p == e.Proof {
			h.proof = proofCode(c)
			break
		}
	}
	h.at = holdTime(e.At, &h.flags, hasAt)
	h.since = holdTime(e.Since, &h.flags, hasSince)
	h.offeredAt = holdTime(e.OfferedAt, &h.flags, hasOfferedAt)
	if e.NoPodLost {
		h.flags |= noPodLost
	}
	if e.Reason != "" || e.Pod != "" || e.InPlace != nil || h.stage == stageUnnamed || h.proof == proofUnnamed {
		h.rare = &heldRare{reason: e.Reason, pod: e.Pod, inPlace: e.InPlace}
		if h.stage == stageUnnamed {
			h.rare.stage = e.Stage
		}
		if h.proof == proofUnnamed {
			h.rare.proof = e.Proof
		}
	}
	return h
}

// holdTime is t in Unix seconds, setting flag in flags unless t is nil.
func holdTime(t *metav1.Time, flags *heldFlags, flag heldFlags) int64 {
	if t == nil {
		return 0
	}
	*flags |= flag
	return t.Unix()
}

// entry unpacks h.
func (h held) entry() Entry {
	e := Entry{NoPodLost: h.flags&noPodLost != 0}
	if h.stage != stageUnnamed {
		e.Stage = stages[h.stage]
	}
	if h.proof != proofUnnamed {
		e.Proof = proofs[h.proof]
	}
	if h.rare != nil {
		e.Reason, e.Pod, e.InPlace = h.rare.reason, h.rare.pod, h.rare.inPlace
		if h.stage == stageUnnamed {
			e.Stage = h.rare.stage
		}
		if h.proof == proofUnnamed {
			e.Proof = h.rare.proof
		}
	}
	e.At = h.time(h.at, hasAt)
	e.Since = h.time(h.since, hasSince)
	e.OfferedAt = h.time(h.offeredAt, hasOfferedAt)
	return e
}

// reason is the failure's reason, empty if none: what FailedNodes reads,
// without unpacking the rest.
func (h held) reason() string {
	if h.rare == nil {
		return ""
	}
	return h.rare.reason
}

// time is the time held as sec, nil unless flag is set.
func (h held) time(sec int64, flag heldFlags) *metav1.Time {
	if h.flags&flag == 0 {
		return nil
	}
	return &metav1.Time{Time: time.Unix(sec, 0)}
}
