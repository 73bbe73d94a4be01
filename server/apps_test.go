package server

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

var appT0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// Phases, short.
const (
	upToDate           = edgeotav1.UpgradePhase_UPGRADE_PHASE_UP_TO_DATE
	upgradeAvailable   = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE
	phasePullRequested = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_REQUESTED
	pulled             = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULLED
	pullFailed         = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_FAILED
	queuedPhase        = edgeotav1.UpgradePhase_UPGRADE_PHASE_QUEUED
	upgrading          = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING
	upgraded           = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED
	failed             = edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED
	managed            = edgeotav1.UpgradePhase_UPGRADE_PHASE_MANAGED
)

// appPod is a running, ready pod of DaemonSet demo at revision rev.
func appPod(name, rev string, opts ...podOption) *corev1.Pod {
	pod := dsPod(name, withoutCondition(podcondition.NeedUpgrade), withCondition(corev1.PodCondition{
		Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(appT0)}))
	pod.UID = types.UID("uid-" + name)
	pod.Labels[revisionLabel] = rev
	pod.CreationTimestamp = metav1.NewTime(appT0)
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func needs(hash string) podOption {
	return withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue, Message: podcondition.RevisionMessage(hash)})
}

func upToDateMark() podOption {
	return withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse})
}

func waitingIn(reason string) podOption {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "back-off"}}}}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	}
}

func createdAt(t time.Time) podOption {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

// look evaluates the app made of pods, as the view does on each change.
func look(r phaseRule, mem *appMemory, now time.Time, pods ...*corev1.Pod) *edgeotav1.App {
	in := groupApps(pods)[appKey{"default", "demo"}]
	if in == nil {
		in = &appInput{key: appKey{"default", "demo"}, owner: mem.owner}
		r.follow(in, mem, nil, now)
	}
	return r.evaluate(in, mem, now).app
}

func TestAppPhaseInEveryState(t *testing.T) {
	queue := func(_, _ string) []*edgeotav1.QueuedAction {
		return []*edgeotav1.QueuedAction{{Namespace: "default", Name: "p", Action: ActionUpgrade, TargetRevision: testHash}}
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		queued     bool
		want       edgeotav1.UpgradePhase
		wantReason string
	}{
		{"not under OTA", appPod("p", "r1"), false, managed, ""},
		{"up to date", appPod("p", "r1", upToDateMark()), false, upToDate, ""},
		{"upgrade available", appPod("p", "r1", needs(testHash)), false, upgradeAvailable, ""},
		{"pull requested", appPod("p", "r1", needs(testHash),
			withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, testTarget))), false, phasePullRequested, podcondition.ReasonPullImageRequested},
		{"pulled", appPod("p", "r1", needs(testHash),
			withCondition(imageReady(corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, testTarget))), false, pulled, podcondition.ReasonPullImageSuccess},
		{"pull failed", appPod("p", "r1", needs(testHash),
			withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageFail, podcondition.FailureMessage(testHash, "ErrImagePull")))), false, pullFailed, podcondition.ReasonPullImageFail},
		{"a pull of an older revision does not count", appPod("p", "r1", needs(testHash),
			withCondition(imageReady(corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, podcondition.RevisionMessage("older")))), false, upgradeAvailable, ""},
		{"queued beats pull failed", appPod("p", "r1", needs(testHash),
			withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageFail, testTarget))), true, queuedPhase, reasonQueued},
		{"being deleted: upgrading beats queued", appPod("p", "r1", needs(testHash), deleting()), true, upgrading, ""},
		{"crash loop: failed beats everything", appPod("p", "r1", needs(testHash), waitingIn("CrashLoopBackOff")), true, failed, ""},
		{"config error fails at once", appPod("p", "r1", upToDateMark(), waitingIn("CreateContainerConfigError")), false, failed, "CreateContainerConfigError"},
		{"a pull error of a pod that is no upgrade's has no deadline", appPod("p", "r1", upToDateMark(), waitingIn("ImagePullBackOff"), createdAt(appT0.Add(-time.Hour))), false, upToDate, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := phaseRule{deadline: health.DefaultDeadline}
			if tc.queued {
				r.queued = queue
			}
			app := look(r, &appMemory{}, appT0.Add(time.Minute), tc.pod)
			if app.GetPhase() != tc.want {
				t.Errorf("got %s (%s: %s), want %s", app.GetPhase(), app.GetReason(), app.GetMessage(), tc.want)
			}
			if tc.wantReason != "" && app.GetReason() != tc.wantReason {
				t.Errorf("got reason %q, want %q", app.GetReason(), tc.wantReason)
			}
			if tc.want == failed && tc.wantReason == "" && app.GetReason() != "CrashLoopBackOff" {
				t.Errorf("got reason %q, want CrashLoopBackOff", app.GetReason())
			}
		})
	}
}

func TestAppShowsRevisionsAndImages(t *testing.T) {
	initContainer := func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1"}} }
	target := map[string]string{"app": "nginx:1.19.5", "init": "busybox:2"}
	pod := appPod("p", "r1", needs(testHash), initContainer, offered(testHash, target, 0))
	app := look(phaseRule{deadline: time.Minute}, &appMemory{}, appT0, pod)
	if app.GetPod() != "p" || app.GetCurrentRevision() != "r1" || app.GetTargetRevision() != testHash {
		t.Errorf("got pod %q current %q target %q, want p r1 %s", app.GetPod(), app.GetCurrentRevision(), app.GetTargetRevision(), testHash)
	}
	if got := app.GetCurrentImages(); len(got) != 2 || got["app"] != "nginx:1.19.4" || got["init"] != "busybox:1" {
		t.Errorf("got current images %v, want app=nginx:1.19.4 init=busybox:1", got)
	}
	if got := app.GetTargetImages(); got["app"] != "nginx:1.19.5" || got["init"] != "busybox:2" {
		t.Errorf("got target images %v, want app=nginx:1.19.5 init=busybox:2", got)
	}
	// Images of another revision, or of an offer that does not parse, are
	// never shown as the target's; the target revision still is.
	for name, opt := range map[string]podOption{
		"another revision's offer":  offered("other", map[string]string{"app": "nginx:9"}, 0),
		"an offer that is not JSON": withAnnotation(rollout.OfferAnnotation, "{nope"),
		"an offer with no revision": withAnnotation(rollout.OfferAnnotation, `{"images":{"app":"nginx:9"}}`),
	} {
		app := look(phaseRule{}, &appMemory{}, appT0, appPod("p", "r1", needs(testHash), opt))
		if got := app.GetTargetImages(); len(got) != 0 || app.GetTargetRevision() != testHash || app.GetPhase() != upgradeAvailable {
			t.Errorf("%s: got %s target %q images %v, want %s target %s and no images", name, app.GetPhase(), app.GetTargetRevision(), got, upgradeAvailable, testHash)
		}
	}
	// An offer left on a pod no longer offered anything shows no target.
	app = look(phaseRule{}, &appMemory{}, appT0, appPod("p", "r1", upToDateMark(), offered(testHash, target, 0)))
	if app.GetTargetRevision() != "" || len(app.GetTargetImages()) != 0 {
		t.Errorf("not offered: got target %q images %v, want none", app.GetTargetRevision(), app.GetTargetImages())
	}
}

// TestAppFollowsItsPodAcrossTheReplacement walks an upgrade as the cache sees
// it: the old pod deleted, a gap, a new pod under another name progressing,
// then available; the app stays one app, matched by its owner.
func TestAppFollowsItsPodAcrossTheReplacement(t *testing.T) {
	r := phaseRule{deadline: 10 * time.Minute}
	mem := &appMemory{}
	old := appPod("demo-old", "r1", needs("r2"))
	steps := []struct {
		name string
		at   time.Duration
		pods []*corev1.Pod
		want edgeotav1.UpgradePhase
		pod  string
	}{
		{"offered", 0, []*corev1.Pod{old}, upgradeAvailable, "demo-old"},
		{"old pod deleted", time.Second, []*corev1.Pod{appPod("demo-old", "r1", needs("r2"), deleting())}, upgrading, "demo-old"},
		{"gap", 2 * time.Second, nil, upgrading, ""},
		{"new pod creating", 3 * time.Second, []*corev1.Pod{appPod("demo-new", "r2", waitingIn("ContainerCreating"), createdAt(appT0.Add(3*time.Second)))}, upgrading, "demo-new"},
		{"new pod marked up to date, not ready yet", 4 * time.Second, []*corev1.Pod{appPod("demo-new", "r2", upToDateMark(), waitingIn("ContainerCreating"))}, upgrading, "demo-new"},
		{"new pod available", 5 * time.Second, []*corev1.Pod{appPod("demo-new", "r2", upToDateMark())}, upgraded, "demo-new"},
		{"still upgraded later", time.Hour, []*corev1.Pod{appPod("demo-new", "r2", upToDateMark())}, upgraded, "demo-new"},
		{"the next version is offered", 2 * time.Hour, []*corev1.Pod{appPod("demo-new", "r2", needs("r3"))}, upgradeAvailable, "demo-new"},
		{"and its offer withdrawn: the upgrade is over", 3 * time.Hour, []*corev1.Pod{appPod("demo-new", "r2", upToDateMark())}, upToDate, "demo-new"},
	}
	for _, s := range steps {
		app := look(r, mem, appT0.Add(s.at), s.pods...)
		if app.GetPhase() != s.want || app.GetPod() != s.pod || app.GetDaemonSet() != "demo" {
			t.Fatalf("%s: got %s pod %q app %q (%s), want %s pod %q app demo", s.name, app.GetPhase(), app.GetPod(), app.GetDaemonSet(), app.GetMessage(), s.want, s.pod)
		}
	}
}

// TestAppUnseenDeletion: the agent misses the old pod's deletion (a dead
// zone) and sees a pod of the new revision under another name: an upgrade.
func TestAppUnseenDeletion(t *testing.T) {
	r := phaseRule{deadline: 10 * time.Minute}
	mem := &appMemory{}
	look(r, mem, appT0, appPod("demo-old", "r1", needs("r2")))
	if app := look(r, mem, appT0.Add(time.Minute), appPod("demo-new", "r2", upToDateMark())); app.GetPhase() != upgraded {
		t.Errorf("got %s, want %s", app.GetPhase(), upgraded)
	}
	// A pod restarted at the same revision is no upgrade.
	mem = &appMemory{}
	look(r, mem, appT0, appPod("demo-a", "r1", upToDateMark()))
	if app := look(r, mem, appT0.Add(time.Minute), appPod("demo-b", "r1", upToDateMark())); app.GetPhase() != upToDate {
		t.Errorf("restart: got %s, want %s", app.GetPhase(), upToDate)
	}
}

// TestAppFailedUpgrade applies health.Judge to the new pod: a crash loop
// fails at once; a pull error only at the deadline, and names the pull.
func TestAppFailedUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reason     string
		at         time.Duration
		want       edgeotav1.UpgradePhase
		wantReason string
	}{
		{"crash loop", "CrashLoopBackOff", 10 * time.Second, failed, "CrashLoopBackOff"},
		{"pull error before the deadline", "ImagePullBackOff", 5 * time.Minute, upgrading, "ImagePullBackOff"},
		{"pull error at the deadline", "ImagePullBackOff", 11 * time.Minute, failed, "ImagePullBackOff"},
		{"never ready by the deadline", "", 11 * time.Minute, failed, health.ReasonProgressDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := phaseRule{deadline: 10 * time.Minute}
			mem := &appMemory{}
			look(r, mem, appT0, appPod("demo-old", "r1", needs("r2")))
			look(r, mem, appT0, appPod("demo-old", "r1", needs("r2"), deleting()))
			opts := []podOption{upToDateMark(), waitingIn(tc.reason)}
			if tc.reason == "" {
				opts = []podOption{upToDateMark(), waitingIn("ContainerCreating"), func(p *corev1.Pod) { p.Status.ContainerStatuses = nil }}
			}
			// The old pod is still going: FAILED beats UPGRADING.
			app := look(r, mem, appT0.Add(tc.at), appPod("demo-new", "r2", opts...), appPod("demo-old", "r1", needs("r2"), deleting()))
			if app.GetPhase() != tc.want || app.GetReason() != tc.wantReason {
				t.Errorf("got %s reason %q (%s), want %s reason %q", app.GetPhase(), app.GetReason(), app.GetMessage(), tc.want, tc.wantReason)
			}
		})
	}
}

// TestAppDeadlineFromTheDaemonSet: the progress deadline the offer carried
// (the DaemonSet's) replaces the agent's for the new pod, whether the old
// pod's deletion was seen or not, and for a replacement that never comes.
func TestAppDeadlineFromTheDaemonSet(t *testing.T) {
	offer := offered("r2", map[string]string{"app": "nginx:1.19.5"}, 60)
	pulling := appPod("demo-new", "r2", upToDateMark(), waitingIn("ErrImagePull"))
	for _, tc := range []struct {
		name  string
		steps [][]*corev1.Pod
		last  []*corev1.Pod
	}{
		{"deletion seen", [][]*corev1.Pod{{appPod("demo-old", "r1", needs("r2"), offer)}, {appPod("demo-old", "r1", needs("r2"), offer, deleting())}}, []*corev1.Pod{pulling}},
		{"deletion unseen", [][]*corev1.Pod{{appPod("demo-old", "r1", needs("r2"), offer)}}, []*corev1.Pod{pulling}},
		{"no replacement", [][]*corev1.Pod{{appPod("demo-old", "r1", needs("r2"), offer)}, {appPod("demo-old", "r1", needs("r2"), offer, deleting())}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := phaseRule{deadline: time.Hour}
			mem := &appMemory{}
			for _, pods := range tc.steps {
				look(r, mem, appT0, pods...)
			}
			if app := look(r, mem, appT0.Add(30*time.Second), tc.last...); app.GetPhase() != upgrading {
				t.Errorf("within the DaemonSet's 1m deadline: got %s (%s), want %s", app.GetPhase(), app.GetMessage(), upgrading)
			}
			if app := look(r, mem, appT0.Add(2*time.Minute), tc.last...); app.GetPhase() != failed {
				t.Errorf("past the DaemonSet's 1m deadline: got %s (%s), want %s", app.GetPhase(), app.GetMessage(), failed)
			}
		})
	}
}

func TestAppLastTransitionTime(t *testing.T) {
	r := phaseRule{deadline: time.Hour}
	mem := &appMemory{}
	offeredAt := appT0.Add(-time.Hour)
	pod := appPod("p", "r1", withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue,
		Message: podcondition.RevisionMessage("r2"), LastTransitionTime: metav1.NewTime(offeredAt)}))
	if got := look(r, mem, appT0, pod).GetLastTransitionTime().AsTime(); !got.Equal(offeredAt) {
		t.Errorf("first look: got %s, want the condition's %s", got, offeredAt)
	}
	if got := look(r, mem, appT0.Add(time.Minute), pod).GetLastTransitionTime().AsTime(); !got.Equal(offeredAt) {
		t.Errorf("unchanged: got %s, want %s", got, offeredAt)
	}
	changedAt := appT0.Add(2 * time.Minute)
	deleted := appPod("p", "r1", needs("r2"), deleting())
	if got := look(r, mem, changedAt, deleted).GetLastTransitionTime().AsTime(); !got.Equal(changedAt) {
		t.Errorf("after a change: got %s, want %s", got, changedAt)
	}
}

// TestAppWithoutReplacement: the old pod gone (its deletion seen or not) and
// no replacement on the node: UPGRADING with the replacement pending, saying
// so, until the deadline; FAILED after it, by health.Judge's deadline rule,
// and still shown; a replacement that turns up late and runs is UPGRADED.
func TestAppWithoutReplacement(t *testing.T) {
	for _, seen := range []bool{true, false} {
		name := "deletion seen"
		if !seen {
			name = "vanished in the middle of an offer"
		}
		t.Run(name, func(t *testing.T) {
			r := phaseRule{deadline: 10 * time.Minute}
			mem := &appMemory{}
			look(r, mem, appT0, appPod("demo-old", "r1", needs("r2")))
			if seen {
				app := look(r, mem, appT0.Add(time.Second), appPod("demo-old", "r1", needs("r2"), deleting()))
				if app.GetPhase() != upgrading || app.GetReason() != ReasonReplacementPending || !strings.Contains(app.GetMessage(), "pod demo-old is terminating") {
					t.Errorf("terminating: got %s %q %q, want %s %s naming the terminating pod", app.GetPhase(), app.GetReason(), app.GetMessage(), upgrading, ReasonReplacementPending)
				}
			}
			steps := []struct {
				name       string
				at         time.Duration
				pods       []*corev1.Pod
				want       edgeotav1.UpgradePhase
				wantReason string
				wantInMsg  string
			}{
				{"gone", 2 * time.Second, nil, upgrading, ReasonReplacementPending, "pod demo-old is gone; its replacement is not on this node yet"},
				{"past the deadline", 11 * time.Minute, nil, failed, health.ReasonProgressDeadlineExceeded, "no replacement appeared on this node: not available within 10m0s"},
				{"still failed", time.Hour, nil, failed, health.ReasonProgressDeadlineExceeded, "pod demo-old is gone"},
				{"a replacement turns up and runs", 2 * time.Hour, []*corev1.Pod{appPod("demo-new", "r2", upToDateMark())}, upgraded, "", ""},
			}
			for _, s := range steps {
				app := look(r, mem, appT0.Add(s.at), s.pods...)
				if app.GetPhase() != s.want || app.GetReason() != s.wantReason || !strings.Contains(app.GetMessage(), s.wantInMsg) {
					t.Errorf("%s: got %s %q %q, want %s %q containing %q", s.name, app.GetPhase(), app.GetReason(), app.GetMessage(), s.want, s.wantReason, s.wantInMsg)
				}
			}
		})
	}
}
