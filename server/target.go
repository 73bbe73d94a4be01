package server

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
)

// targetInfo is what the agent knows of the revision a pod is offered.
type targetInfo struct {
	// revision is the offered revision's hash, "" when none is offered.
	revision string
	// images are the revision's images by container name; nil when the
	// pod's offer does not say (an older controller, or an offer of another
	// revision).
	images map[string]string
	// deadline is the DaemonSet's progress deadline as the offer carries it;
	// zero leaves the agent's --upgrade-deadline.
	deadline time.Duration
}

// offeredTarget is the revision the pod is offered (need, its PodNeedUpgrade
// condition, True and naming it) with what the controller's offer says of
// it: the offer (annotation edgeota.io/offer, written in the same patch as
// the condition) counts only when it names that revision, and one that does
// not parse or validate counts as none. Everything comes from the pod as the
// cache or the stored view holds it: no API request, and the same answer in a
// dead zone and after a restart.
func offeredTarget(pod *corev1.Pod, need *corev1.PodCondition) targetInfo {
	if need == nil || need.Status != corev1.ConditionTrue {
		return targetInfo{}
	}
	revision, ok := podcondition.Revision(need.Message)
	if !ok {
		return targetInfo{}
	}
	t := targetInfo{revision: revision}
	if offer, err := podchannel.OfferOf(pod); err == nil && offer != nil && offer.Revision == revision {
		t.images = offer.Images
		if offer.ProgressDeadlineSeconds <= math.MaxInt32 {
			// The bound the DaemonSet's annotation has (health.ParseProgressDeadline).
			t.deadline = time.Duration(offer.ProgressDeadlineSeconds) * time.Second
		}
	}
	return t
}
