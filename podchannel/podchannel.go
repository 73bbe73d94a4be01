// Package podchannel is the channel between ota-controller and the node agent
// that runs on the pod itself, so that the agent needs to read nothing but its
// own node's pods:
//
//   - Offer (annotation edgeota.io/offer), written by the controller in the
//     same pods/status patch that sets PodNeedUpgrade: what the target
//     revision is (its images, its progress deadline), since when it has been
//     offered to this pod, when the controller carries the offer out itself
//     (an OTA upgrade deadline), and until when an owner's hold is honoured.
//   - Hold (annotation edgeota.io/hold), written by the node agent on the
//     owner's request, in a pods/status patch too: the owner asks that this
//     pod not be upgraded until a time, for a reason.
//   - Challenge (annotation edgeota.io/alive-challenge), written by the
//     controller on a pod it judged settled, and the Answer
//     (edgeota.io/alive-answer), the same value written back by the node
//     agent as soon as its live cache shows it: proof that the node reaches
//     the API server (challenge.go).
//   - UpgradeRequest (annotation edgeota.io/upgrade-request), written by the
//     node agent on the owner's Upgrade of a pod whose offer says it is
//     upgraded in place: a node may not change a pod's spec, so the
//     controller carries the request out (request.go).
//
// All are annotations written through the pods/status subresource, which the
// API server lets change annotations (never labels, spec or owners), and
// which a node's identity may write for its own pods under NodeRestriction:
// no new rights and no write to the Node; the offer rides in a write made
// anyway, and a proof of life costs two writes per upgraded pod. OpenYurt's
// agent reads only the PodNeedUpgrade condition and ignores them all. A pod
// replaced by its upgrade starts without any; a pod upgraded in place keeps
// them all (the controller's copies are written again as they change).
package podchannel

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgeota/edgeota/rollout"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReasonLength bounds a hold's reason, in bytes: it is shown to people and
// logged, and an annotation is no place for essays. A reason is also valid
// UTF-8 without control characters (C0, DEL, C1): one printable line.
const MaxReasonLength = 256

// Offer is what the controller tells a pod's node agent about the pod's
// target revision. Its fields only grow; the agent ignores those it does not
// know.
type Offer struct {
	// Revision is the target ControllerRevision's hash, as PodNeedUpgrade's
	// message names it ("controllerrevision: <hash>").
	Revision string `json:"revision"`
	// Images maps each container of the target's pod template, init
	// containers included, to its image.
	Images map[string]string `json:"images,omitempty"`
	// ProgressDeadlineSeconds is how long an upgraded pod may take to become
	// available before its upgrade counts as failed (the DaemonSet's
	// edgeota.io/progress-deadline-seconds); zero leaves the agent's default.
	ProgressDeadlineSeconds int64 `json:"progressDeadlineSeconds,omitempty"`
	// OfferedAt is when the revision was first offered to this pod
	// (PodNeedUpgrade True naming it). A pause leaves it as it is; a new
	// revision starts it again. Nil: not offered yet.
	OfferedAt *metav1.Time `json:"offeredAt,omitempty"`
	// UpgradeDeadline is when the controller carries the offer out itself if
	// the owner has not (OfferedAt plus the DaemonSet's
	// edgeota.io/upgrade-deadline-seconds), within the budget and the node's
	// window. Nil: never.
	UpgradeDeadline *metav1.Time `json:"upgradeDeadline,omitempty"`
	// HoldLimit is the time after which an owner's hold on this pod is no
	// longer honoured (the target revision's creation plus the DaemonSet's
	// edgeota.io/max-hold-seconds). Nil: not known yet.
	HoldLimit *metav1.Time `json:"holdLimit,omitempty"`
	// InPlace says that this pod moves to the revision in place: its
	// images are patched by the controller, the pod stays. The owner's
	// Upgrade then writes an UpgradeRequest, which the controller carries
	// out, instead of deleting the pod (a node may not change a pod's
	// spec). False: the pod is recreated, as agents that do not know this
	// field do anyway.
	InPlace bool `json:"inPlace,omitempty"`
}

// Hold is the owner's request that a pod not be upgraded by the controller
// until a time. It never delays the owner's own upgrades.
type Hold struct {
	// Until is when the hold ends, by the API server's clock.
	Until metav1.Time `json:"until"`
	// Reason says why, for people (e.g. "driving").
	Reason string `json:"reason,omitempty"`
	// By names who asked, as the node API authenticated them ("" when
	// anonymous).
	By string `json:"by,omitempty"`
	// At is when the hold was asked for, by the API server's clock.
	At metav1.Time `json:"at"`
}

// Validate checks an offer as the agent and the controller read it.
func (o *Offer) Validate() error {
	if o.Revision == "" {
		return errors.New("no revision")
	}
	if o.ProgressDeadlineSeconds < 0 {
		return fmt.Errorf("negative progressDeadlineSeconds %d", o.ProgressDeadlineSeconds)
	}
	for name, image := range o.Images {
		if name == "" || image == "" {
			return fmt.Errorf("an image entry %q: %q is empty", name, image)
		}
	}
	return nil
}

// Validate checks a hold as the controller and the agent read it.
func (h *Hold) Validate() error {
	if h.Until.IsZero() {
		return errors.New("no end time")
	}
	if len(h.Reason) > MaxReasonLength {
		return fmt.Errorf("reason of %d bytes, more than %d", len(h.Reason), MaxReasonLength)
	}
	if !utf8.ValidString(h.Reason) {
		return errors.New("reason is not valid UTF-8")
	}
	if strings.ContainsFunc(h.Reason, unicode.IsControl) {
		return errors.New("reason holds control characters")
	}
	return nil
}

// Active reports whether the hold still stands at now.
func (h *Hold) Active(now time.Time) bool { return h != nil && now.Before(h.Until.Time) }

// Equal reports whether two offers say the same.
func (o *Offer) Equal(p *Offer) bool {
	if o == nil || p == nil {
		return o == p
	}
	return o.Revision == p.Revision && maps.Equal(o.Images, p.Images) &&
		o.ProgressDeadlineSeconds == p.ProgressDeadlineSeconds &&
		timesEqual(o.OfferedAt, p.OfferedAt) && timesEqual(o.UpgradeDeadline, p.UpgradeDeadline) &&
		timesEqual(o.HoldLimit, p.HoldLimit) && o.InPlace == p.InPlace
}

func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// OfferOf reads the pod's offer: nil without one; an error when it does not
// parse or validate (written by someone else than the controller).
func OfferOf(pod *corev1.Pod) (*Offer, error) {
	value, ok := pod.Annotations[rollout.OfferAnnotation]
	if !ok {
		return nil, nil
	}
	var o Offer
	if err := json.Unmarshal([]byte(value), &o); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", rollout.OfferAnnotation, pod.Namespace, pod.Name, err)
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", rollout.OfferAnnotation, pod.Namespace, pod.Name, err)
	}
	return &o, nil
}

// HoldOf reads the pod's hold: nil without one; an error when it does not
// parse or validate.
func HoldOf(pod *corev1.Pod) (*Hold, error) {
	value, ok := pod.Annotations[rollout.HoldAnnotation]
	if !ok {
		return nil, nil
	}
	var h Hold
	if err := json.Unmarshal([]byte(value), &h); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", rollout.HoldAnnotation, pod.Namespace, pod.Name, err)
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", rollout.HoldAnnotation, pod.Namespace, pod.Name, err)
	}
	return &h, nil
}

// Encode returns the annotation value of an offer, a hold or an upgrade
// request.
func Encode[T Offer | Hold | UpgradeRequest](v *T) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding %T: %w", v, err)
	}
	return string(data), nil
}

// ImagesOf maps each container of a pod spec, init containers included, to
// its image: an Offer's Images for a template.
func ImagesOf(spec *corev1.PodSpec) map[string]string {
	images := make(map[string]string, len(spec.InitContainers)+len(spec.Containers))
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			images[c.Name] = c.Image
		}
	}
	return images
}
