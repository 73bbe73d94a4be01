package localcluster

// Modelled image pulls: what a pod waits for before it starts, and the
// options that say how long each pull takes and which ones fail. The
// simulator that carries them out is in pullsim.go; the KWOK stages it gates
// are named in stages.go (pullGatedStages).

import (
	"fmt"
	"slices"
	"time"
)

// PulledAnnotation, "true" on a pod, says that its node holds every image of
// the pod. With image pulls modelled (Options.ImagePulls) the KWOK stages
// that start a pod (pod-ready and the bad images' stages) select only pods
// that carry it, and the pull simulator sets it once the pod's node has
// pulled them: that is how a pod waits for its pull. A pod created with it
// starts without a pull, as every pod does when pulls are not modelled.
const PulledAnnotation = "localcluster.edgeota.io/images-pulled"

// The kubelet's image pull back-off: 10 s after the first failed pull,
// doubling after each further one, at most 5 minutes.
const (
	defaultPullBackOff = 10 * time.Second
	maxPullBackOff     = 5 * time.Minute
)

// ImagePulls model image pulls on the local cluster's nodes (Options.ImagePulls),
// so that what waits for a download (a rollout, a pre-pull Job, an upgrade
// gated on one) can be measured and tested. KWOK alone starts every pod at
// once; its stages select on the pod alone and cannot know which images its
// node pulled before, so a simulator in the process that created the cluster
// (the test, the bench or `make run`) keeps that and tells KWOK when a pod
// may start. It stops with the cluster (Cluster.Delete).
//
// What it does, from one shared watch of the bound pods:
//   - Each node has a set of pulled images. It starts with Preloaded and the
//     images of the pods that had already started on the node when the
//     simulator started (none on a new cluster, whose nodes start with empty
//     image stores); it grows with every pull that succeeds and with the
//     images of every pod seen started (Running or Succeeded), and never
//     shrinks.
//   - A Pending pod bound to a node that holds all its images (containers'
//     and init containers') gets PulledAnnotation at once, and KWOK's stages
//     take it on as they would without the model: Ready, or Succeeded for a
//     Job's pod, or a bad image's stage (CrashLoopImages, NeverReadyImages).
//   - Otherwise the node pulls each missing image, one pull per node and
//     image however many pods wait for it, and the pod shows what a kubelet
//     shows meanwhile: phase Pending, Ready and ContainersReady False
//     (ContainersNotReady), every container waiting in ContainerCreating.
//     A pull takes Delay (or Delays[image]); when the last of the pod's
//     images is pulled the pod gets PulledAnnotation and starts.
//   - A pull of an image that does not exist (Missing) fails at once, with
//     "not found"; one of PullFailImages, or one of the first
//     TransientFailures pulls of an image on a node, fails after the pull's
//     delay with an i/o timeout. The waiting pods then show ErrImagePull
//     with the error for the first half of the back-off, ImagePullBackOff
//     ("Back-off pulling image ...") for the second half and during the
//     next attempt; the back-off starts at BackOff and doubles after every
//     failure, up to 5 minutes, as the kubelet's. A missing image's pods
//     never start; a pull whose pods are all gone is dropped at its next
//     attempt.
//
// Every pod counts, whoever created it: a DaemonSet's pods, and the pods of
// the Jobs the controller runs to pre-pull a revision's images (label
// edgeota.io/prepull=true, pinned to their node by spec.nodeName; KWOK then
// finishes them with exit code 0), so a Job that pulled an image on a node
// lets the DaemonSet pod of that image start there at once.
//
// What it does not model: bandwidth shared between pulls on one node or
// from one registry (every pull takes its own delay, however many run at
// once), the kubelet's serialized pulls (pulls of different images run side
// by side), layers shared between images, image sizes, image garbage
// collection (a pulled image stays for the life of the cluster), registry
// rate limits and authentication (imagePullSecrets), pull policies (Always
// and Never act as IfNotPresent), digests and imageID (KWOK never sets
// one), init containers pulled and run before the others (a pod's images
// are pulled side by side and its containers start together), the kubelet's
// per-pod back-off (it is per node and image here) and the Pulling and
// Pulled events. An upgrade in place (a running pod whose images were
// patched) pulls the same way before its changed containers restart: see
// inplace.go. A pod's pull for its start goes on while its node is cut off
// (CutOffLabel); an upgrade in place waits for the node's return. Nodes are
// known by name only, so a node deleted and created again under its name
// keeps its images.
type ImagePulls struct {
	// Delay is how long a node takes to pull an image it does not hold,
	// unless Delays names the image. Zero still makes a pod of a new image
	// wait for the simulator's write, a round trip.
	Delay time.Duration
	// Delays are the pull delays of the images they name, in place of Delay.
	Delays map[string]time.Duration
	// Missing tells the images that do not exist in their registry (a
	// mistyped tag); nil means IsMissingImage (MissingImages).
	Missing func(image string) bool
	// TransientFailures is how many pulls of each image on each node time
	// out before one succeeds: a flaky registry, for retry tests.
	TransientFailures int
	// BackOff is the back-off after a pull's first failure, doubling after
	// each further one up to 5 minutes; zero means the kubelet's 10 s.
	BackOff time.Duration
	// Preloaded are images every node holds from the start, as a node's
	// disk image may.
	Preloaded []string
}

// Validate refuses negative delays and counts.
func (p ImagePulls) Validate() error {
	if p.Delay < 0 || p.BackOff < 0 || p.TransientFailures < 0 {
		return fmt.Errorf("image pulls: a negative delay (%s), back-off (%s) or failure count (%d)", p.Delay, p.BackOff, p.TransientFailures)
	}
	for image, d := range p.Delays {
		if d < 0 {
			return fmt.Errorf("image pulls: a negative delay %s for image %s", d, image)
		}
	}
	return nil
}

// IsMissingImage is the default rule for images that do not exist: those of
// MissingImages.
func IsMissingImage(image string) bool {
	return slices.Contains(MissingImages, image)
}

// delay is how long a pull of the image takes.
func (p ImagePulls) delay(image string) time.Duration {
	if d, ok := p.Delays[image]; ok {
		return d
	}
	return p.Delay
}

// missing says whether the image does not exist.
func (p ImagePulls) missing(image string) bool {
	if p.Missing != nil {
		return p.Missing(image)
	}
	return IsMissingImage(image)
}

// backOff is the wait after a pull's failures-th failure (1-based) before its
// next attempt.
func (p ImagePulls) backOff(failures int) time.Duration {
	b := p.BackOff
	if b == 0 {
		b = defaultPullBackOff
	}
	for i := 1; i < failures && b < maxPullBackOff; i++ {
		b *= 2
	}
	return min(b, maxPullBackOff)
}

// The waiting reasons a kubelet shows while it pulls a container's image and
// when the pull failed, and the pod condition reason of unready containers.
const (
	reasonContainerCreating  = "ContainerCreating"
	reasonErrImagePull       = "ErrImagePull"
	reasonImagePullBackOff   = "ImagePullBackOff"
	reasonContainersNotReady = "ContainersNotReady"
)

// notFoundMessage is the error of a pull of an image that does not exist, as
// containerd reports it through the kubelet.
func notFoundMessage(image string) string {
	return fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", image, image, image)
}

// timeoutMessage is the error of a pull whose registry did not answer.
func timeoutMessage(image string) string {
	return fmt.Sprintf("rpc error: code = Unknown desc = failed to pull and unpack image %q: failed to resolve reference %q: failed to do request: dial tcp: i/o timeout", image, image)
}

// backOffMessage is what a container shows while its image's pull backs off
// after failing with message.
func backOffMessage(image, message string) string {
	return fmt.Sprintf("Back-off pulling image %q: %s: %s", image, reasonErrImagePull, message)
}
