package localcluster

// Images that the local cluster's KWOK stages (stages/pod-*.yaml) make
// misbehave when a pod's first container runs them, so that tests and the
// bench can ship a broken version without a real container runtime. Every
// other image becomes Ready at once (after its pull, when pulls are
// modelled: ImagePulls).
var (
	// CrashLoopImages crash-loop: Running, not Ready, containers waiting in
	// CrashLoopBackOff (stages/pod-crashloop.yaml).
	CrashLoopImages = []string{"edgeota.test/crashloop:v1", "edgeota.test/crashloop:v2", "edgeota.test/crashloop:v3"}
	// NeverReadyImages start and never become Ready, as behind a readiness
	// probe that never passes (stages/pod-never-ready.yaml).
	NeverReadyImages = []string{"edgeota.test/never-ready:v1", "edgeota.test/never-ready:v2", "edgeota.test/never-ready:v3"}
	// PullFailImages cannot be pulled: Pending, containers waiting in
	// ImagePullBackOff (stages/pod-pull-fail.yaml), as on a node whose
	// registry is out of reach. With image pulls modelled (ImagePulls) every
	// pull of them times out instead: ErrImagePull with an i/o timeout, then
	// ImagePullBackOff, for ever.
	PullFailImages = []string{"edgeota.test/pull-fail:v1", "edgeota.test/pull-fail:v2"}
	// MissingImages do not exist in their registry, as a mistyped tag: with
	// image pulls modelled (ImagePulls, its default Missing rule) their pods
	// show ErrImagePull and ImagePullBackOff ("not found") and never start.
	// Without the model no stage names them: they start as any image.
	MissingImages = []string{"edgeota.test/missing:v1", "edgeota.test/missing:v2"}
)
