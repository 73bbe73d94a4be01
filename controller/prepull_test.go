package controller

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

func imageReady(status corev1.ConditionStatus, reason, hash string) corev1.PodCondition {
	return corev1.PodCondition{Type: podcondition.ImageReady, Status: status, Reason: reason, Message: podcondition.RevisionMessage(hash)}
}

// requestedPod is an out-of-date pod whose owner asked to pre-pull hash.
func requestedPod(hash string) *corev1.Pod {
	return newPod("web", "edge-1", oldHash,
		offeredFor(newHash),
		withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, hash)))
}

// prePullFor is the pod's pre-pull Job as the controller creates it, as the
// cache shows it, with a UID.
func prePullFor(pod *corev1.Pod, hash string) *batchv1.Job {
	job := prePullJob(newDaemonSet(), podRecordOf(pod).(*podRecord), hash, false, nil)
	job.UID = types.UID(job.Name + "-uid")
	job.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute))
	return job
}

// jobPod is the Job's pod with one container status per container.
func jobPod(job *batchv1.Job, states ...corev1.ContainerState) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: job.Namespace, Name: job.Name + "-x", UID: types.UID(job.Name + "-x-uid"),
		Labels:          job.Spec.Template.Labels, // as the Job controller labels its pods
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
	}}
	for i, st := range states {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: job.Spec.Template.Spec.Containers[i].Name, Image: job.Spec.Template.Spec.Containers[i].Image, State: st,
		})
	}
	return pod
}

var (
	running    = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited     = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	startError = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError",
		Message: `exec: "true": executable file not found in $PATH`}}
	creating  = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	pullError = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "manifest unknown"}}
)

// prePullCluster is an OTA DaemonSet with the pod on node edge-1, offered
// the target by the controller an hour ago.
func prePullCluster(pod *corev1.Pod, extra ...runtime.Object) []runtime.Object {
	return withOffers(append(append(otaDaemonSet(), newNode("edge-1", corev1.ConditionTrue), pod), extra...), "edge-1")
}

func TestPrePullCreatesJob(t *testing.T) {
	pod := requestedPod(newHash)
	f := newFixture(t, prePullCluster(pod)...)
	f.sync()

	var created *batchv1.Job
	for _, a := range f.writes() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
			created = a.(core.CreateAction).GetObject().(*batchv1.Job)
		}
	}
	if created == nil {
		t.Fatalf("got writes %v, want a Job created", f.writes())
	}
	spec := created.Spec.Template.Spec
	if spec.NodeName != "edge-1" {
		t.Errorf("got nodeName %q, want edge-1", spec.NodeName)
	}
	var images []string
	for _, c := range spec.Containers {
		images = append(images, c.Image)
	}
	if want := []string{"busybox:1.36", "nginx:1.19.4"}; !slices.Equal(images, want) {
		t.Errorf("got images %v, want %v (init containers' too, as regular containers)", images, want)
	}
	if len(spec.InitContainers) != 0 {
		t.Errorf("got %d init containers, want none", len(spec.InitContainers))
	}
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("got image pull secrets %v, want [regcred]", spec.ImagePullSecrets)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever || *created.Spec.BackoffLimit != 0 || created.Spec.TTLSecondsAfterFinished == nil {
		t.Errorf("got restartPolicy %s, backoffLimit %d, ttl %v; want Never, 0, set", spec.RestartPolicy, *created.Spec.BackoffLimit, created.Spec.TTLSecondsAfterFinished)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("got tolerations %v, want one tolerating every taint", spec.Tolerations)
	}
	refs := created.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].UID != pod.UID || *refs[0].BlockOwnerDeletion {
		t.Errorf("got owner references %v, want the pod, not blocking its deletion", refs)
	}
	if created.Name != prePullJobName(podRecordOf(pod).(*podRecord), newHash) || len(created.Name) > 63 {
		t.Errorf("got name %q, want %q of at most 63 characters", created.Name, prePullJobName(podRecordOf(pod).(*podRecord), newHash))
	}
	if got := f.conditionPatches(); len(got) != 0 {
		t.Errorf("got condition patches %v, want none before the Job ran", got)
	}
}

func TestPrePullWaitsForJob(t *testing.T) {
	pod := requestedPod(newHash)
	job := prePullFor(pod, newHash)
	f := newFixture(t, prePullCluster(pod, job, jobPod(job, running, creating))...)
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("got writes %v, want none while an image is still being pulled", w)
	}
}

func TestPrePullResult(t *testing.T) {
	tests := []struct {
		name       string
		states     []corev1.ContainerState
		jobFailed  bool
		wantStatus corev1.ConditionStatus
		wantReason string
		wantEvent  string
	}{
		{"success", []corev1.ContainerState{exited, running}, false, corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, rollout.ReasonPrePullSucceeded},
		{"success although the command failed", []corev1.ContainerState{startError, startError}, true, corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, rollout.ReasonPrePullSucceeded},
		{"image pull failure", []corev1.ContainerState{exited, pullError}, false, corev1.ConditionFalse, podcondition.ReasonPullImageFail, rollout.ReasonPrePullFailed},
		{"job failed before any container started", nil, true, corev1.ConditionFalse, podcondition.ReasonPullImageFail, rollout.ReasonPrePullFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := requestedPod(newHash)
			job := prePullFor(pod, newHash)
			if tt.jobFailed {
				job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
			}
			f := newFixture(t, prePullCluster(pod, job, jobPod(job, tt.states...))...)
			f.sync()

			got := f.conditionPatches()["web"]
			if len(got) != 1 {
				t.Fatalf("got condition patches %v, want one on pod web", f.conditionPatches())
			}
			c := got[0]
			message, _ := c["message"].(string)
			if c["type"] != string(podcondition.ImageReady) || c["status"] != string(tt.wantStatus) || c["reason"] != tt.wantReason ||
				!strings.HasPrefix(message, podcondition.RevisionMessage(newHash)) {
				t.Errorf("got condition %v, want %s=%s reason %s naming %s", c, podcondition.ImageReady, tt.wantStatus, tt.wantReason, newHash)
			}
			if tt.wantStatus == corev1.ConditionFalse && message == podcondition.RevisionMessage(newHash) {
				t.Errorf("got message %q, want the failure's cause in it", message)
			}
			if d := f.deleted("jobs"); !slices.Equal(d, []string{job.Name}) {
				t.Errorf("got jobs deleted %v, want [%s]", d, job.Name)
			}
			f.wantEvent(f.events(), map[bool]string{true: corev1.EventTypeNormal, false: corev1.EventTypeWarning}[tt.wantStatus == corev1.ConditionTrue], tt.wantEvent)
		})
	}
}

func TestPrePullForOutdatedRevisionIsAbandoned(t *testing.T) {
	pod := requestedPod(oldHash) // requested when oldHash was the target
	job := prePullFor(pod, oldHash)
	f := newFixture(t, prePullCluster(pod, job, jobPod(job, exited, exited))...)
	f.sync()

	got := f.conditionPatches()["web"]
	if len(got) != 1 || got[0]["$patch"] != "delete" || got[0]["type"] != string(podcondition.ImageReady) {
		t.Errorf("got condition patches %v, want only the removal of %s", got, podcondition.ImageReady)
	}
	if d := f.deleted("jobs"); !slices.Equal(d, []string{job.Name}) {
		t.Errorf("got jobs deleted %v, want [%s]", d, job.Name)
	}
	for _, a := range f.writes() {
		if a.GetVerb() == "create" {
			t.Errorf("got %s %s created, want nothing for an outdated revision", a.GetResource().Resource, a.(core.CreateAction).GetObject())
		}
	}
}

func TestPrePullJobLeftOverIsDeleted(t *testing.T) {
	pod := newPod("web", "edge-1", oldHash,
		offeredFor(newHash),
		withCondition(imageReady(corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, newHash)))
	job := prePullFor(pod, newHash)
	f := newFixture(t, prePullCluster(pod, job)...)
	f.sync()
	if d := f.deleted("jobs"); !slices.Equal(d, []string{job.Name}) {
		t.Errorf("got jobs deleted %v, want [%s] whose result is already written", d, job.Name)
	}
	if got := f.conditionPatches(); len(got) != 0 {
		t.Errorf("got condition patches %v, want none", got)
	}
}

func TestPrePullJobName(t *testing.T) {
	long := newPod(strings.Repeat("a", 250), "n", oldHash)
	short := newPod("web-x7k2p", "n", oldHash)
	for _, pod := range []*corev1.Pod{long, short} {
		name := prePullJobName(podRecordOf(pod).(*podRecord), newHash)
		if len(name) > 63 {
			t.Errorf("got %q of %d characters, want at most 63", name, len(name))
		}
		if again := prePullJobName(podRecordOf(pod).(*podRecord), newHash); again != name {
			t.Errorf("got %q then %q, want the same name each time", name, again)
		}
		if other := prePullJobName(podRecordOf(pod).(*podRecord), oldHash); other == name {
			t.Errorf("got %q for both revisions, want distinct names", name)
		}
	}
}

// TestPrePullRequestWithoutReason: OpenYurt's yurthub asks for a pre-pull
// with PodImageReady=False naming the revision and no reason; any reason but
// PullImageFail is a request, a failure is not retried.
func TestPrePullRequestWithoutReason(t *testing.T) {
	tests := []struct {
		reason     string
		wantCreate bool
	}{
		{"", true},
		{"SomethingElse", true},
		{podcondition.ReasonPullImageFail, false},
	}
	for _, tt := range tests {
		t.Run("reason "+tt.reason, func(t *testing.T) {
			pod := newPod("web", "edge-1", oldHash,
				offeredFor(newHash),
				withCondition(imageReady(corev1.ConditionFalse, tt.reason, newHash)))
			f := newFixture(t, prePullCluster(pod)...)
			f.sync()
			created := 0
			for _, a := range f.writes() {
				if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
					created++
				}
			}
			if got := created == 1; got != tt.wantCreate {
				t.Errorf("got %d Jobs created, want created=%v", created, tt.wantCreate)
			}
		})
	}
}

// TestTransientPullErrorsWait: a pull the kubelet could not do yet for a
// reason a retry may fix (a registry timeout) waits for the kubelet's
// retries, until the pull timeout; one the registry answered for good fails
// at once.
func TestTransientPullErrorsWait(t *testing.T) {
	timeout := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
		Message: `failed to pull image "nginx:1.19.5": dial tcp 10.0.0.1:443: i/o timeout`}}
	for _, tc := range []struct {
		name string
		age  time.Duration
		want string // "" no write; else the status written
	}{
		{"young", time.Minute, ""},
		{"past the timeout", 31 * time.Minute, "False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := requestedPod(newHash)
			job := prePullFor(pod, newHash)
			job.CreationTimestamp = metav1.NewTime(time.Now().Add(-tc.age))
			f := newFixture(t, prePullCluster(pod, job, jobPod(job, exited, timeout))...)
			f.sync()
			got := f.conditionPatches()["web"]
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("got %v, want no result while the kubelet retries", got)
			case tc.want != "" && (len(got) != 1 || got[0]["status"] != tc.want || !strings.Contains(got[0]["message"].(string), "not pulled within")):
				t.Errorf("got %v, want PodImageReady %s saying it timed out", got, tc.want)
			}
		})
	}
	for reason, message := range map[string]string{"ErrImagePull": "manifest unknown", "ImagePullBackOff": `pull access denied, repository does not exist`,
		"InvalidImageName": "bad"} {
		if !finalPullError(reason, message) {
			t.Errorf("%s %q: got transient, want final", reason, message)
		}
	}
	if finalPullError("ErrImagePull", "connection reset by peer") {
		t.Errorf("a reset connection: got final, want transient")
	}
}

// TestPreDownloadNeverWritesAFailure: a pull the controller started ahead of
// the node's turn writes PodImageReady=True once the images are on the node
// (the owner sees PULLED), and never a failure, which would refuse the
// owner's upgrade.
func TestPreDownloadNeverWritesAFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states []corev1.ContainerState
		want   string
	}{
		{"pulled", []corev1.ContainerState{exited, running}, "True"},
		{"failed", []corev1.ContainerState{exited, pullError}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("web", "edge-1", oldHash, offeredFor(newHash))
			job := prePullJob(newDaemonSet(), podRecordOf(pod).(*podRecord), newHash, true, nil)
			job.UID, job.CreationTimestamp = types.UID(job.Name+"-uid"), metav1.NewTime(time.Now().Add(-time.Minute))
			ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withAnnotation(rollout.PreDownloadAnnotation, "true"))
			objs := withOffers(append(append([]runtime.Object{ds}, revisions()...), newNode("edge-1", corev1.ConditionTrue), pod, job,
				jobPod(job, tc.states...)), "edge-1")
			f := newFixture(t, objs...)
			f.sync()
			var ready []map[string]any
			for _, c := range f.conditionPatches()["web"] {
				if c["type"] == string(podcondition.ImageReady) {
					ready = append(ready, c)
				}
			}
			switch {
			case tc.want == "" && len(ready) != 0:
				t.Errorf("got %v, want no PodImageReady written for a failed pre-download", ready)
			case tc.want != "" && (len(ready) != 1 || ready[0]["status"] != tc.want):
				t.Errorf("got %v, want PodImageReady %s", ready, tc.want)
			}
			if tc.want == "" {
				if s, _ := f.rollout().State("edge-1"); s != decision.StatePullFailed {
					t.Errorf("got edge-1 %v, want its pull failed, no pod lost", s)
				}
			}
		})
	}
}

// TestPreDownloadNextJobAfterTheLastIsDeleted: with pre-download-parallelism
// 1, the sync that reads a pull's success takes its node and deletes its
// Job, and creates no other beside it: the next node's Job comes in the
// next sync, so that there are never more Jobs than the parallelism.
func TestPreDownloadNextJobAfterTheLastIsDeleted(t *testing.T) {
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, string(rollout.StrategyAdvancedRollingUpdate)),
		withAnnotation(rollout.MaxUnavailableAnnotation, "1"), withAnnotation(rollout.PreDownloadAnnotation, "true"),
		withAnnotation(rollout.PreDownloadParallelismAnnotation, "1"))
	objs := cluster(ds, readyNodes(2))
	first := objs[len(objs)-3].(*corev1.Pod) // pod-0 on node-0
	job := prePullJob(ds, podRecordOf(first).(*podRecord), newHash, true, nil)
	job.UID, job.CreationTimestamp = types.UID(job.Name+"-uid"), metav1.NewTime(time.Now().Add(-time.Minute))
	f := newFixture(t, append(objs, job, jobPod(job, exited, exited))...)
	f.sync()
	if got := f.deletedPods(); !slices.Equal(got, []string{first.Name}) {
		t.Errorf("got pods deleted %v, want [%s], pulled", got, first.Name)
	}
	if got := f.deleted("jobs"); !slices.Equal(got, []string{job.Name}) {
		t.Errorf("got Jobs deleted %v, want [%s], whose result was read", got, job.Name)
	}
	created := func() (names []string) {
		for _, a := range f.writes() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
				names = append(names, a.(core.CreateAction).GetObject().(*batchv1.Job).Spec.Template.Spec.NodeName)
			}
		}
		return names
	}
	if got := created(); len(got) != 0 {
		t.Fatalf("got Jobs created on %v beside the one read, want none (parallelism 1)", got)
	}
	if err := f.indexer(job).Delete(cached(job)); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := created(); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("the first Job gone: got Jobs created on %v, want [node-1]", got)
	}
}

// TestPrePullJobPinned: a pull for a pod upgraded in place under a pin names
// the pinned containers by digest, the others by the template's image.
func TestPrePullJobPinned(t *testing.T) {
	pinned := "nginx@sha256:" + strings.Repeat("a", 64)
	job := prePullJob(newDaemonSet(), podRecordOf(requestedPod(newHash)).(*podRecord), newHash, true, map[string]string{"nginx": pinned})
	got := map[string]string{}
	for _, c := range job.Spec.Template.Spec.Containers {
		got[c.Name] = c.Image
	}
	if want := map[string]string{"init": "busybox:1.36", "nginx": pinned}; !maps.Equal(got, want) {
		t.Errorf("got images %v, want %v", got, want)
	}
}

// TestPreDownloadByTagJudgedByThePin: a pre-download Job that named its
// images by tag says what each tag resolved to (its pod's imageIDs); as the
// pin makes of it (decision.TagPull), its success is written and its Job
// deleted (the pin's bytes), nothing is done yet (no pin), or its Job goes
// without a word written (other bytes), for the pull to start again by
// digest. A Job that named a container by digest says nothing of it.
func TestPreDownloadByTagJudgedByThePin(t *testing.T) {
	resolved := "sha256:" + strings.Repeat("b", 64)
	ds := newDaemonSet(withAnnotation(rollout.StrategyAnnotation, string(rollout.StrategyAdvancedRollingUpdate)),
		withAnnotation(rollout.PreDownloadAnnotation, "true"))
	pod := newPod("web", "edge-1", oldHash)
	rec := podRecordOf(pod).(*podRecord)
	for _, tt := range []struct {
		name       string
		tag        decision.TagPull
		wantTask   bool
		wantStatus corev1.ConditionStatus
	}{
		{"the pin's bytes", decision.TagPullCounts, true, corev1.ConditionTrue},
		{"no pin yet", decision.TagPullAwaitsPin, false, ""},
		{"other bytes", decision.TagPullStale, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := prePullJob(ds, rec, newHash, true, map[string]string{"init": "busybox@" + resolved})
			job.UID, job.CreationTimestamp = types.UID(job.Name+"-uid"), metav1.NewTime(time.Now().Add(-time.Minute))
			jp := jobPod(job, exited, exited)
			for i := range jp.Status.ContainerStatuses {
				jp.Status.ContainerStatuses[i].ImageID = "docker.io/library/x@" + resolved
			}
			f := newFixture(t, ds, newNode("edge-1", corev1.ConditionTrue), pod, job, jp)
			obj, _, _ := f.c.podIndexer.GetByKey(pod.Namespace + "/" + pod.Name)
			cachedPod := obj.(*podRecord)
			p := f.c.pullOf(&cachedPod.Pod, newHash)
			if want := map[string]string{"nginx": resolved}; p.State != decision.PullDone || !maps.Equal(p.ByTag, want) {
				t.Fatalf("got pull %+v, want done with ByTag %v (init was named by digest)", p, want)
			}
			task := f.c.prePullTask(ds, &decision.Target{Hash: newHash}, &decision.Settings{PreDownload: true}, cachedPod, false, false, nil, tt.tag)
			if (task != nil) != tt.wantTask {
				t.Fatalf("got a task %v, want %v", task != nil, tt.wantTask)
			}
			if task == nil {
				return
			}
			if err := task(f.ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.deleted("jobs"); len(got) != 1 || got[0] != job.Name {
				t.Errorf("got Jobs deleted %v, want [%s]", got, job.Name)
			}
			var statuses []any
			for _, c := range f.conditionPatches()["web"] {
				statuses = append(statuses, c["status"])
			}
			want := []any{}
			if tt.wantStatus != "" {
				want = append(want, string(tt.wantStatus))
			}
			if !slices.Equal(statuses, want) {
				t.Errorf("got %s written %v, want %v", podcondition.ImageReady, statuses, want)
			}
		})
	}
}
