package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// prePullTask returns the work that serves the pod's pulls, or nil when
// there is none:
//   - the owner's request (PodImageReady=False naming the target, whatever
//     its reason but a failure's: edgeota's agent says PullImageRequested,
//     OpenYurt's yurthub gives no reason at all): the Job is created, and its
//     result written into PodImageReady once its pod shows it, True or False;
//   - a pre-download the decision asks for (start): the Job is created,
//     labelled as the controller's; once its images are pulled,
//     PodImageReady=True (the owner's view shows PULLED), and the Job goes;
//     a failure is never written into PodImageReady (the owner's contract:
//     a pull the owner did not ask for never blocks the owner's upgrade):
//     the decision records it, and the Job goes once it has (failed);
//   - a PodImageReady naming another revision than the target is removed
//     (the agent's upgrade gate only sees pulls for the current one), and
//     Jobs no pull needs any more are deleted.
//
// pinned are the images a new Job names by digest (Rollout.PinnedImages):
// a pod upgraded in place once its architecture has a pin is patched to
// them, so that is what its node should hold. A pre-download Job that
// pulled by tag is judged by the pin (tag, Rollout.TagPull): its success
// is written once the pin exists and its digests are the pin's; a Job
// whose tag resolved to other bytes goes, and the pull starts again by
// digest.
func (c *Controller) prePullTask(ds *appsv1.DaemonSet, rev *decision.Target, cfg *decision.Settings, pod *podRecord, start, failed bool,
	pinned map[string]string, tag decision.TagPull) func(context.Context) error {
	target := rev.Hash
	cond := pod.ImageReady.Get()
	jobs := c.prePullJobsOf(pod.UID)
	if cond.Status == "" && len(jobs) == 0 && !start {
		return nil // the common case, kept cheap
	}
	if rev.Images != nil && !maps.Equal(rev.Images, podchannel.ImagesOf(&ds.Spec.Template.Spec)) {
		// The Job would pull the DaemonSet's template, which the cache
		// shows out of step with the target revision: the event of the one
		// that lags syncs again.
		return nil
	}
	if c.expect.pendingWrite(pod.UID, writeImageReady, pod.ResourceVersion) {
		return nil // the cache does not show our last write yet
	}
	revision, named := "", false
	if cond.Status != "" {
		revision, named = podcondition.Revision(cond.Message)
	}
	stale := named && revision != target
	pulled := named && revision == target && cond.Status == string(corev1.ConditionTrue)
	requested := named && revision == target && cond.Status == string(corev1.ConditionFalse) &&
		cond.Reason != podcondition.ReasonPullImageFail && pod.Bound

	name := prePullJobName(pod, target)
	var job *jobRecord
	var obsolete []*jobRecord
	for _, j := range jobs {
		if j.Name == name && j.Revision == target &&
			(requested || j.ByController && cfg.PreDownload && !pulled && !failed && tag != decision.TagPullStale) {
			job = j
		} else {
			obsolete = append(obsolete, j)
		}
	}
	byController := !requested
	outcome, why := pullPending, ""
	if job != nil {
		timeout := time.Duration(0) // a pre-download's timeout is the decision's
		if requested {
			timeout = cfg.PullTimeout
		}
		outcome, why = judgePull(job, c.jobPods(job.UID), c.now(), timeout)
	}
	var act bool
	switch {
	case requested:
		// The owner's request: created, or its result written.
		act = job == nil || outcome != pullPending
	case byController:
		// A pre-download: created when asked, its success written (by
		// tag, once the pin holds it).
		act = job == nil && start && !pulled && pod.Bound || job != nil && outcome == pullSucceeded && tag == decision.TagPullCounts
	}
	if !stale && !act && len(obsolete) == 0 {
		return nil
	}
	if stale || act && job != nil {
		c.expect.expectWrite(pod.UID, writeImageReady, pod.ResourceVersion)
	}
	return func(ctx context.Context) error {
		var errs []error
		if stale {
			if _, err := podcondition.RemoveRef(ctx, c.client.CoreV1(), pod.ref(), podcondition.ImageReady, FieldManager); err != nil {
				c.expect.writeFailed(pod.UID, writeImageReady)
				errs = append(errs, err)
			}
		}
		for _, j := range obsolete {
			errs = append(errs, c.deleteJob(ctx, ds, j))
		}
		if act {
			errs = append(errs, c.servePrePull(ctx, ds, target, pod, job, outcome, why, byController, pinned))
		}
		return errors.Join(errs...)
	}
}

// servePrePull creates the pod's pre-pull Job, or writes the result of the one
// that finished and deletes it.
func (c *Controller) servePrePull(ctx context.Context, ds *appsv1.DaemonSet, target string, pod *podRecord,
	job *jobRecord, outcome pullOutcome, why string, byController bool, pinned map[string]string) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(pod.Namespace, pod.Name), "node", pod.Node)
	if job == nil {
		want := prePullJob(ds, pod, target, byController, pinned)
		_, err := c.client.BatchV1().Jobs(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // created by an earlier sync whose Job the cache does not show yet
		}
		if err != nil {
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedPrePullJob, "Creating pre-pull job for pod %s failed: %v", pod.Name, err)
			return fmt.Errorf("creating pre-pull job %s/%s: %w", want.Namespace, want.Name, err)
		}
		logger.V(2).Info("Created pre-pull job", "job", klog.KObj(want))
		return nil
	}

	result := decision.Condition{Status: string(corev1.ConditionTrue), Reason: podcondition.ReasonPullImageSuccess, Message: podcondition.RevisionMessage(target)}
	if outcome == pullFailed && byController {
		return nil // never the owner's condition: the decision records it
	}
	if outcome == pullFailed {
		result = decision.Condition{Status: string(corev1.ConditionFalse), Reason: podcondition.ReasonPullImageFail, Message: podcondition.FailureMessage(target, why)}
	}
	// A pod gone (taken by this very sync, say) needs no condition
	// (writeCondition ignores it); its Job goes all the same.
	if err := c.writeCondition(pod, writeImageReady, podcondition.ImageReady, result, nil)(ctx); err != nil {
		return err
	}
	switch {
	case outcome == pullFailed:
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonPrePullFailed, "Pre-pull for pod %s on node %s failed: %s", pod.Name, pod.Node, why)
	case !byController:
		// The owner's pull; a pre-download's success is counted in the
		// rollout status, not an event per node.
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonPrePullSucceeded, "Pre-pulled revision %s for pod %s on node %s", target, pod.Name, pod.Node)
	}
	logger.V(2).Info("Pre-pull finished", "job", klog.KObj(job), "succeeded", outcome == pullSucceeded)
	return c.deleteJob(ctx, ds, job)
}

// deleteJob removes a pre-pull Job and, in the background, its pod.
func (c *Controller) deleteJob(ctx context.Context, ds *appsv1.DaemonSet, job *jobRecord) error {
	err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
	})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedPrePullJob, "Deleting pre-pull job %s failed: %v", job.Name, err)
	return fmt.Errorf("deleting pre-pull job %s/%s: %w", job.Namespace, job.Name, err)
}

// jobPods returns the cached pods of a pre-pull Job.
func (c *Controller) jobPods(uid types.UID) []*corev1.Pod {
	objs, _ := c.prePullPods.ByIndex(byControllerUID, string(uid))
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pods = append(pods, obj.(*corev1.Pod))
	}
	return pods
}

// prePullJobsOf returns the pod's pre-pull Jobs from the cache.
func (c *Controller) prePullJobsOf(pod types.UID) []*jobRecord {
	objs, _ := c.jobIndexer.ByIndex(byOwnerUID, string(pod))
	jobs := make([]*jobRecord, 0, len(objs))
	for _, obj := range objs {
		if job := obj.(*jobRecord); job.PrePull {
			jobs = append(jobs, job)
		}
	}
	return jobs
}

// pullOf reads where the pull of the target's images for the node's old pod
// stands: done once its PodImageReady is True naming the target, else as its
// pre-pull Job's pods say (a pre-download's timeout is the decision's); and
// whether the controller's Job for it is still there, which holds its place
// in the parallelism until it is deleted. A done pull of the controller's
// Job says which images it named by tag, and what they resolved to.
func (c *Controller) pullOf(pod *decision.Pod, target string) decision.Pull {
	var p decision.Pull
	for _, job := range c.prePullJobsOf(pod.UID) {
		if job.Revision != target {
			continue
		}
		p = decision.Pull{State: decision.PullPending, Since: job.Created.Time(), ByController: job.ByController, Job: job.ByController}
		pods := c.jobPods(job.UID)
		switch outcome, why := judgePull(job, pods, c.now(), 0); outcome {
		case pullSucceeded:
			p.State = decision.PullDone
			if job.ByController {
				p.ByTag = resolvedTags(job, pods)
			}
		case pullFailed:
			p.State, p.Why = decision.PullFailed, why
		}
		break
	}
	if c := pod.ImageReady.Get(); c.Status == string(corev1.ConditionTrue) && podcondition.Names(c.Message, target) {
		p.State, p.Why, p.ByTag = decision.PullDone, "", nil
	}
	return p
}

// resolvedTags reads, for each container the pull Job named by tag, the
// digest its pods' imageIDs name ("" when none does: not reported, or no
// digest a registry serves).
func resolvedTags(job *jobRecord, pods []*corev1.Pod) map[string]string {
	if len(job.ByTag) == 0 {
		return nil
	}
	out := make(map[string]string, len(job.ByTag))
	for _, name := range job.ByTag {
		out[name] = ""
	}
	for _, pod := range pods {
		for _, st := range pod.Status.ContainerStatuses {
			if _, ok := out[st.Name]; !ok {
				continue
			}
			if id, err := imageref.Parse(st.ImageID); err == nil {
				out[st.Name] = id.Digest
			}
		}
	}
	return out
}

// podlessGrace is how long a pre-pull Job may go without a pod before the
// controller asks why: the Job controller makes its pod within a second or
// two, unless admission refuses it.
const podlessGrace = 15 * time.Second

// pullRejections remembers, per DaemonSet and revision, why admission
// refuses its pre-download Jobs' pods (a namespace enforcing a Pod Security
// level they do not meet, a quota): the rollout then goes on without
// pre-download, as it would without the annotation, rather than wait for
// pulls that never start. And which podless Jobs were asked about already,
// with their DaemonSet's UID.
type pullRejections struct {
	mu      sync.Mutex
	why     map[string]string
	checked map[types.UID]types.UID
}

// forget drops what is remembered of a DaemonSet gone.
func (p *pullRejections) forget(ds types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.why {
		if strings.HasPrefix(k, string(ds)+"/") {
			delete(p.why, k)
		}
	}
	for job, owner := range p.checked {
		if owner == ds {
			delete(p.checked, job)
		}
	}
}

func (p *pullRejections) key(ds types.UID, target string) string { return string(ds) + "/" + target }

// rejected says why the DaemonSet's pre-downloads of target are refused, ""
// when they are not.
func (p *pullRejections) rejected(ds types.UID, target string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why[p.key(ds, target)]
}

// checkPodless returns the work that asks why a pre-download Job made no pod,
// once per Job, nil when there is nothing to ask: its events (FailedCreate)
// name the refusal. A refusal turns pre-download off for the revision, with a
// Warning naming it, and syncs the DaemonSet.
func (c *Controller) checkPodless(ds *appsv1.DaemonSet, key, target string, job *jobRecord) func(context.Context) error {
	if !job.ByController || len(c.jobPods(job.UID)) > 0 || job.Active > 0 ||
		c.now().Before(job.Created.Time().Add(podlessGrace)) {
		return nil
	}
	r := c.rejections
	r.mu.Lock()
	_, done := r.checked[job.UID]
	r.checked[job.UID] = ds.UID
	r.mu.Unlock()
	if done {
		return nil
	}
	return func(ctx context.Context) error {
		events, err := c.client.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.uid", string(job.UID)),
				fields.OneTermEqualSelector("reason", "FailedCreate")).String(),
		})
		if err != nil {
			r.mu.Lock()
			delete(r.checked, job.UID) // asked again at the next sync
			r.mu.Unlock()
			return fmt.Errorf("reading the events of pre-pull job %s/%s: %w", job.Namespace, job.Name, err)
		}
		if len(events.Items) == 0 {
			return nil // slow, not refused
		}
		why := events.Items[len(events.Items)-1].Message
		r.mu.Lock()
		r.why[r.key(ds.UID, target)] = why
		r.mu.Unlock()
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonPrePullRejected,
			"Pre-download of revision %s refused in namespace %s (%s): the rollout goes on without it, each node pulling as it upgrades", target, job.Namespace, why)
		c.queue.Add(key)
		return nil
	}
}
