package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// prePullTask returns the work that serves the pod's pre-pull request, or nil
// when there is none: it removes a PodImageReady naming another revision than
// the target (so the agent's upgrade gate only sees pulls for the current
// one), abandons Jobs no request needs any more, creates the Job a request
// needs, and writes its result once the Job's pod shows it.
func (c *Controller) prePullTask(ds *appsv1.DaemonSet, rev *decision.Target, pod *podRecord) func(context.Context) error {
	target := rev.Hash
	cond := pod.ImageReady
	jobs := c.prePullJobsOf(pod.UID)
	if cond.Status == "" && len(jobs) == 0 {
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
	// A request is PodImageReady=False naming the target, whatever its
	// reason but a failure's: edgeota's agent says PullImageRequested,
	// OpenYurt's yurthub gives no reason at all.
	requested := named && revision == target && cond.Status == string(corev1.ConditionFalse) &&
		cond.Reason != podcondition.ReasonPullImageFail && pod.Bound

	var job *batchv1.Job
	var obsolete []*batchv1.Job
	name := ""
	if requested {
		name = prePullJobName(pod, target)
	}
	for _, j := range jobs {
		if requested && j.Name == name {
			job = j
		} else {
			obsolete = append(obsolete, j)
		}
	}
	outcome, why := pullPending, ""
	if job != nil {
		outcome, why = judgePull(job, c.jobPods(job.UID))
	}
	act := requested && (job == nil || outcome != pullPending)
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
			errs = append(errs, c.servePrePull(ctx, ds, target, pod, job, outcome, why))
		}
		return errors.Join(errs...)
	}
}

// servePrePull creates the pod's pre-pull Job, or writes the result of the one
// that finished and deletes it.
func (c *Controller) servePrePull(ctx context.Context, ds *appsv1.DaemonSet, target string, pod *podRecord,
	job *batchv1.Job, outcome pullOutcome, why string) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(pod.Namespace, pod.Name), "node", pod.Node)
	if job == nil {
		want := prePullJob(ds, pod, target)
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
	if outcome == pullFailed {
		result = decision.Condition{Status: string(corev1.ConditionFalse), Reason: podcondition.ReasonPullImageFail, Message: podcondition.FailureMessage(target, why)}
	}
	if err := c.writeCondition(pod, writeImageReady, podcondition.ImageReady, result, nil)(ctx); err != nil {
		return err
	}
	if outcome == pullFailed {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonPrePullFailed, "Pre-pull for pod %s on node %s failed: %s", pod.Name, pod.Node, why)
	} else {
		c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonPrePullSucceeded, "Pre-pulled revision %s for pod %s on node %s", target, pod.Name, pod.Node)
	}
	logger.V(2).Info("Pre-pull finished", "job", klog.KObj(job), "succeeded", outcome == pullSucceeded)
	return c.deleteJob(ctx, ds, job)
}

// deleteJob removes a pre-pull Job and, in the background, its pod.
func (c *Controller) deleteJob(ctx context.Context, ds *appsv1.DaemonSet, job *batchv1.Job) error {
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
func (c *Controller) prePullJobsOf(pod types.UID) []*batchv1.Job {
	objs, _ := c.jobIndexer.ByIndex(byOwnerUID, string(pod))
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, obj := range objs {
		if job := obj.(*batchv1.Job); job.Labels[PrePullLabel] == "true" {
			jobs = append(jobs, job)
		}
	}
	return jobs
}
