package localcluster

// Images that the local cluster's KWOK stages (stages/pod-*.yaml) make
// misbehave when a pod's first container runs them, so that tests and the
// bench can ship a broken version without a real container runtime. Every
// other image becomes Ready at once.
var (
	// CrashLoopImages crash-loop: Running, not Ready, containers waiting in
	// CrashLoopBackOff (stages/pod-crashloop.yaml).
	CrashLoopImages = []string{"edgeota.test/crashloop:v1", "edgeota.test/crashloop:v2", "edgeota.test/crashloop:v3"}
	// NeverReadyImages start and never become Ready, as behind a readiness
	// probe that never passes (stages/pod-never-ready.yaml).
	NeverReadyImages = []string{"edgeota.test/never-ready:v1", "edgeota.test/never-ready:v2", "edgeota.test/never-ready:v3"}
	// PullFailImages cannot be pulled: Pending, containers waiting in
	// ImagePullBackOff (stages/pod-pull-fail.yaml).
	PullFailImages = []string{"edgeota.test/pull-fail:v1", "edgeota.test/pull-fail:v2"}
)
