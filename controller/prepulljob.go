package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

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
	// PrePullByLabel says who asked for the pull: "controller" for a
	// pre-download ahead of the node's turn, absent for the owner's
	// imagepull. A pull the controller started never writes a failure into
	// PodImageReady, the owner's condition.
	PrePullByLabel      = "edgeota.io/prepull-by"
	prePullByController = "controller"
)

// prePullTTLSeconds lets the Job controller clean up a finished pre-pull Job
// the controller could not delete itself.
const prePullTTLSeconds = 600

// Pull errors, as the kubelet reports them in a container's waiting reason
// and message. The kubelet retries a failed pull itself, backing off to five
// minutes, so a pull Job waits through transient errors (a registry timeout,
// a reset connection, a registry unavailable for a while). An error is final
// when no retry can help:
//   - the image's name is invalid, or the node may never pull it
//     (finalPullReasons);
//   - the registry answered that the image does not exist or that it is not
//     allowed (finalPullMessages in an ErrImagePull or ImagePullBackOff
//     message);
//   - the pull outlasted its timeout (edgeota.io/pre-download-timeout-seconds),
//     whatever the errors.
var (
	pullErrorReasons = map[string]bool{
		"ErrImagePull":              true,
		"ImagePullBackOff":          true,
		"InvalidImageName":          true,
		"ErrImageNeverPull":         true,
		"RegistryUnavailable":       true,
		"SignatureValidationFailed": true,
	}
	finalPullReasons = map[string]bool{
		"InvalidImageName":          true,
		"ErrImageNeverPull":         true,
		"SignatureValidationFailed": true,
	}
	finalPullMessages = []string{
		"manifest unknown", "not found", "does not exist", "no such host", "unauthorized", "denied",
		"forbidden", "invalid reference", "repository name must",
	}
)

// finalPullError reports whether a pull error can only recur.
func finalPullError(reason, message string) bool {
	if finalPullReasons[reason] {
		return true
	}
	m := strings.ToLower(message)
	for _, f := range finalPullMessages {
		if strings.Contains(m, f) {
			return true
		}
	}
	return false
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
// keep the others from being pulled. Its pod passes the Pod Security
// Standards' restricted profile (non-root, no privilege escalation, every
// capability dropped, the runtime's default seccomp profile, no token, no
// service links): a namespace that enforces it admits it. byController
// labels a pre-download the controller started; pinned names the
// containers whose image it pulls by digest instead (nil: none).
func prePullJob(ds *appsv1.DaemonSet, pod *podRecord, target string, byController bool, pinned map[string]string) *batchv1.Job {
	template := &ds.Spec.Template.Spec
	var containers []corev1.Container
	for _, list := range [][]corev1.Container{template.InitContainers, template.Containers} {
		for _, ctr := range list {
			image := ctr.Image
			if p, ok := pinned[ctr.Name]; ok {
				image = p
			}
			containers = append(containers, corev1.Container{
				Name:            ctr.Name,
				Image:           image,
				ImagePullPolicy: ctr.ImagePullPolicy,
				// Whether this runs does not matter: a started container
				// proves the image was pulled.
				Command: []string{"true"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			})
		}
	}
	labels := map[string]string{PrePullLabel: "true", PrePullRevisionLabel: target}
	if byController {
		labels[PrePullByLabel] = prePullByController
	}
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
					NodeName:                     pod.Node,
					RestartPolicy:                corev1.RestartPolicyNever,
					Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					ImagePullSecrets:             template.ImagePullSecrets,
					Containers:                   containers,
					AutomountServiceAccountToken: ptr.To(false),
					// A user no image needs to define: an image that runs as
					// root (most do) starts as nobody, which is all a pull
					// needs.
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65534),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
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
// "true" binary fails to start), or that the kubelet could not configure
// after pulling (CreateContainerConfigError), had its image pulled. A Job that
// completed ran every container; one that failed otherwise pulled not all
// images. A pull error fails the pull only when final (finalPullError), or
// once the pull has lasted timeout since the Job's creation (zero: never);
// until then the kubelet retries. The message says why a pull failed.
func judgePull(job *jobRecord, pods []*corev1.Pod, now time.Time, timeout time.Duration) (pullOutcome, string) {
	want := int(job.Containers)
	var transient string
	for _, pod := range pods {
		started := 0
		for _, st := range pod.Status.ContainerStatuses {
			switch w := st.State.Waiting; {
			case w != nil && pullErrorReasons[w.Reason]:
				why := fmt.Sprintf("image %s: %s: %s", st.Image, w.Reason, w.Message)
				if finalPullError(w.Reason, w.Message) {
					return pullFailed, why
				}
				transient = why
			case w != nil && w.Reason == "CreateContainerConfigError":
				started++ // pulled; the kubelet could not configure it
			case st.State.Running != nil || st.State.Terminated != nil:
				started++
			}
		}
		if want > 0 && started == want {
			return pullSucceeded, ""
		}
	}
	switch {
	case job.Complete:
		return pullSucceeded, ""
	case job.Failed:
		return pullFailed, fmt.Sprintf("job %s failed before its images were pulled: %s", job.Name, job.FailedWhy)
	}
	if timeout > 0 && !now.Before(job.Created.Time().Add(timeout)) {
		why := fmt.Sprintf("not pulled within %s", timeout)
		if transient != "" {
			why += "; " + transient
		}
		return pullFailed, why
	}
	return pullPending, ""
}
