package podchannel

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/rollout"
)

// Proof of life. Once the controller judges an upgraded pod settled, it
// writes a Challenge on it (rollout.ChallengeAnnotation, a pods/status
// write); the node agent, seeing it in its watch of its node's pods, writes
// the same value back as its Answer (rollout.AnswerAnnotation), acting as its
// node. An answer the controller sees in its cache reached the API server
// after the challenge did: a node cut off from the API server never answers,
// whatever its clock says. The nonce is random and fresh for each settled
// pod, and the controller compares the answer with the nonce it issued (kept
// in its memory, never read back from the pod, which the node may rewrite):
// no earlier answer, and no answer on another pod, can prove this one.
//
// The value is "<pod UID>/<nonce>": the UID ties it to one pod, the nonce is
// nonceBytes random bytes in unpadded base64url.

// nonceBytes is the challenge's entropy: 128 bits, never guessed.
const nonceBytes = 16

// maxChallengeLength bounds a value the agent accepts: a UID (36) and a
// nonce (22), with room to spare; anything longer is not ours.
const maxChallengeLength = 128

// Challenge is one proof-of-life challenge.
type Challenge struct {
	// UID is the pod's UID.
	UID types.UID
	// Nonce is the random part.
	Nonce string
}

// NewChallenge makes a fresh challenge for the pod with the UID.
func NewChallenge(uid types.UID) (Challenge, error) {
	b := make([]byte, nonceBytes)
	if _, err := rand.Read(b); err != nil {
		return Challenge{}, fmt.Errorf("reading randomness for a challenge: %w", err)
	}
	return Challenge{UID: uid, Nonce: base64.RawURLEncoding.EncodeToString(b)}, nil
}

// String is the annotation value.
func (c Challenge) String() string { return string(c.UID) + "/" + c.Nonce }

// ParseChallenge reads an annotation value (a challenge, or an answer, which
// echoes one).
func ParseChallenge(value string) (Challenge, error) {
	if len(value) > maxChallengeLength {
		return Challenge{}, fmt.Errorf("a value of %d bytes, more than %d", len(value), maxChallengeLength)
	}
	uid, nonce, ok := strings.Cut(value, "/")
	if !ok || uid == "" || nonce == "" {
		return Challenge{}, errors.New(`want "<pod UID>/<nonce>"`)
	}
	if _, err := base64.RawURLEncoding.DecodeString(nonce); err != nil {
		return Challenge{}, fmt.Errorf("nonce %q is not unpadded base64url", nonce)
	}
	return Challenge{UID: types.UID(uid), Nonce: nonce}, nil
}

// ToAnswer returns the answer the pod's agent should write: its challenge,
// echoed, when the pod carries one for itself that it has not answered yet;
// ok is false otherwise (no challenge, one not for this pod, one that does
// not parse, or one answered already).
func ToAnswer(pod *corev1.Pod) (answer string, ok bool) {
	value, has := pod.Annotations[rollout.ChallengeAnnotation]
	if !has {
		return "", false
	}
	c, err := ParseChallenge(value)
	if err != nil || c.UID != pod.UID {
		return "", false
	}
	if pod.Annotations[rollout.AnswerAnnotation] == value {
		return "", false
	}
	return value, true
}

// Hash is a short digest of a channel annotation's value (an offer, a
// challenge): the controller caches pods as compact records holding it, and
// compares it with the digest of what it would write. Never 0, which stands
// for an absent annotation.
func Hash(value string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(value))
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}
