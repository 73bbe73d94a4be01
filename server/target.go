package server

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"

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
	if need == nil {
		return targetInfo{}
	}
	revision, ok := podcondition.Offered(need.Status, need.Message)
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

// showChannel puts on the app what the pod's channel says of when it is
// upgraded (from the pod as the cache or the stored view holds it, as
// offeredTarget does): the owner's hold while it stands at now (the API
// server's time), and the controller's hold limit and OTA upgrade deadline
// for a revision the pod does not run yet. An offer of the pod's own
// revision (left from before a rollback) or of another revision than
// PodNeedUpgrade names is stale and shows nothing; the deadline shows only
// beside a standing offer (PodNeedUpgrade True), since the controller
// carries out no other. It returns how long until the hold ends, zero
// without one: the app changes then.
func showChannel(app *edgeotav1.App, pod *corev1.Pod, need *corev1.PodCondition, now time.Time) time.Duration {
	var ends time.Duration
	if h, err := podchannel.HoldOf(pod); err == nil && h.Active(now) {
		app.Hold = &edgeotav1.OwnerHold{
			Until: timestamppb.New(h.Until.Time), Reason: h.Reason, By: h.By, HeldAt: timestamppb.New(h.At.Time),
		}
		ends = h.Until.Sub(now)
	}
	offer, err := podchannel.OfferOf(pod)
	if err != nil || offer == nil || offer.Revision == pod.Labels[revisionLabel] {
		return ends
	}
	target := offeredTarget(pod, need)
	if need != nil && need.Status == corev1.ConditionTrue && target.revision != offer.Revision {
		return ends
	}
	if offer.HoldLimit != nil {
		app.HoldLimit = timestamppb.New(offer.HoldLimit.Time)
	}
	if offer.UpgradeDeadline != nil && target.revision == offer.Revision {
		app.UpgradeDeadline = timestamppb.New(offer.UpgradeDeadline.Time)
	}
	return ends
}
