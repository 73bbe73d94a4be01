package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Labels on pre-pull Jobs, to find them and the revision they pull.
const (
	// PrePullLabel ("true") marks the Jobs the controller creates to pre-pull.
	PrePullLabel = "edgeota.io/prepull"
	// PrePullRevisionLabel names the revision hash a pre-pull Job pulls.
	PrePullRevisionLabel = "edgeota.io/revision"
)

// prePullTTLSeconds lets the Job controller clean up a finished pre-pull Job
// the controller could not delete itself.
const prePullTTLSeconds = 600

// pullErrorReasons are the waiting reasons with which the kubelet reports that
// it could not get a container's image.
var pullErrorReasons = map[string]bool{
	"ErrImagePull":              true,
	"ImagePullBackOff":          true,
	"InvalidImageName":          true,
	"ErrImageNeverPull":         true,
	"RegistryUnavailable":       true,
	"SignatureValidationFailed": true,
}

// prePullJobName is deterministic in the pod and the revision, so that a sync
// whose cache lags finds the Job (AlreadyExists) instead of creating a twin;
// at most 56 characters, so the names derived from it stay valid labels.
func prePullJobName(pod *podRecord, target string) string {
	sum := sha256.Sum256([]byte(pod.Namespace + "/" + pod.Name + "/" + target))
	prefix := strings.TrimRight(pod.Name[:min(len(pod.Name), 40)], "-.")
	return prefix + "-pull-" + hex.EncodeToString(sum[:])[:10]
}

// prePullJob is a Job pinned to the pod's node whose containers use every image
// of the DaemonSet's template, so that the node's kubelet pulls them. All
// images run as regular containers: an init container that cannot start would
// keep the others from being pulled.
func prePullJob(ds *appsv1.DaemonSet, pod *podRecord, target string) *batchv1.Job {
	template := &ds.Spec.Template.Spec
	var containers []corev1.Container
	for _, list := range [][]corev1.Container{template.InitContainers, template.Containers} {
		for _, ctr := range list {
			containers = append(containers, corev1.Container{
				Name:            ctr.Name,
				Image:           ctr.Image,
				ImagePullPolicy: ctr.ImagePullPolicy,
				// Whether this runs does not matter: a started container
				// proves the image was pulled.
				Command: []string{"true"},
			})
		}
	}
	labels := map[string]string{PrePullLabel: "true", PrePullRevisionLabel: target}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      prePullJobName(pod, target),
			Namespace: pod.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Pod",
				Name:               pod.Name,
				UID:                pod.UID,
				BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](prePullTTLSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName:                      pod.Node,
					RestartPolicy:                 corev1.RestartPolicyNever,
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					ImagePullSecrets:              template.ImagePullSecrets,
					Containers:                    containers,
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
}

// pullOutcome is what a pre-pull Job's pods say about the images.
type pullOutcome int

const (
	pullPending pullOutcome = iota
	pullSucceeded
	pullFailed
)

// judgePull reads the outcome from the Job pods' container statuses, not from
// exit codes: a container that ran, whatever its exit code (an image without a
// "true" binary fails to start), had its image pulled. A Job that completed ran
// every container; one that failed otherwise pulled not all images. The
// message says why a pull failed.
func judgePull(job *batchv1.Job, pods []*corev1.Pod) (pullOutcome, string) {
	want := len(job.Spec.Template.Spec.Containers)
	for _, pod := range pods {
		started := 0
		for _, st := range pod.Status.ContainerStatuses {
			switch {
			case st.State.Waiting != nil && pullErrorReasons[st.State.Waiting.Reason]:
				return pullFailed, fmt.Sprintf("image %s: %s: %s", st.Image, st.State.Waiting.Reason, st.State.Waiting.Message)
			case st.State.Running != nil || st.State.Terminated != nil:
				started++
			}
		}
		if want > 0 && started == want {
			return pullSucceeded, ""
		}
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return pullSucceeded, ""
		case batchv1.JobFailed:
			return pullFailed, fmt.Sprintf("job %s failed before its images were pulled: %s: %s", job.Name, cond.Reason, cond.Message)
		}
	}
	return pullPending, ""
}
