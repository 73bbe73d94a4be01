package podchannel

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/rollout"
)

// UpgradeRequest is the owner's request that the controller upgrade a pod
// in place (rollout.UpgradeRequestAnnotation): the node agent writes it on
// the owner's Upgrade of a pod whose offer says InPlace, in a pods/status
// patch as it writes a hold, since neither a node nor its agent may change a
// pod's spec. It is bound to the pod (UID) and to the revision the owner
// agreed to (Revision), so that consent to one version is never taken for
// the next: the controller carries it out only for that pod, only while
// Revision is the target it offered that pod, and only within the failure
// brake (never once the rollout halted). It is the owner's claim, as a
// node writes it: it lets the controller do no more than the owner's
// Upgrade of a recreated pod does (the node may delete its own pods).
type UpgradeRequest struct {
	// UID is the pod's UID.
	UID types.UID `json:"uid"`
	// Revision is the target revision's hash, as the offer named it.
	Revision string `json:"revision"`
	// By names who asked, as the node API authenticated them ("" when
	// anonymous).
	By string `json:"by,omitempty"`
	// At is when the owner asked, by the API server's clock as the agent
	// last saw it.
	At metav1.Time `json:"at"`
}

// maxRequestLength bounds a request the controller reads: a UID, a
// revision hash, a caller's name and a time fit in far less.
const maxRequestLength = 1024

// Validate checks a request as the controller and the agent read it.
func (r *UpgradeRequest) Validate() error {
	switch {
	case r.UID == "":
		return errors.New("no pod UID")
	case r.Revision == "":
		return errors.New("no revision")
	case len(r.By) > MaxReasonLength:
		return fmt.Errorf("a caller's name of %d bytes, more than %d", len(r.By), MaxReasonLength)
	}
	return nil
}

// For reports whether the request asks for the upgrade of the pod with the
// UID to revision.
func (r *UpgradeRequest) For(uid types.UID, revision string) bool {
	return r != nil && r.UID == uid && r.Revision == revision
}

// RequestOf reads the pod's upgrade request: nil without one; an error when
// it does not parse or validate. A request for another pod (a UID that is
// not this pod's) is returned: For tells.
func RequestOf(pod *corev1.Pod) (*UpgradeRequest, error) {
	value, ok := pod.Annotations[rollout.UpgradeRequestAnnotation]
	if !ok {
		return nil, nil
	}
	return ParseRequest(value)
}

// ParseRequest reads an upgrade request's annotation value.
func ParseRequest(value string) (*UpgradeRequest, error) {
	if len(value) > maxRequestLength {
		return nil, fmt.Errorf("annotation %s: a value of %d bytes, more than %d", rollout.UpgradeRequestAnnotation, len(value), maxRequestLength)
	}
	var r UpgradeRequest
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", rollout.UpgradeRequestAnnotation, err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", rollout.UpgradeRequestAnnotation, err)
	}
	return &r, nil
}
