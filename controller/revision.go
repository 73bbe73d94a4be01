package controller

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations the native DaemonSet controller writes; edgeota reads
// them instead of re-implementing its hashing.
const (
	revisionHashLabel          = appsv1.DefaultDaemonSetUniqueLabelKey // "controller-revision-hash"
	podTemplateGenerationLabel = "pod-template-generation"
	templateGenerationAnnot    = "deprecated.daemonset.template.generation"
)

// revision identifies a DaemonSet's target: the hash pods are labelled with,
// and the ControllerRevision's number. A rollback reuses an old hash under a
// new number, so a rollout's failure record is keyed by both.
type revision struct {
	hash   string
	number int64
	// created is the ControllerRevision's creation: a time no node owner
	// can reset, from which holds are limited.
	created time.Time
}

// targetRevision returns the DaemonSet's current ControllerRevision (see
// NewestRevision); a zero hash while the native controller has not created
// one yet (its creation requeues the DaemonSet).
func (c *Controller) targetRevision(ds *appsv1.DaemonSet) (revision, error) {
	revisions, err := c.revisionLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return revision{}, fmt.Errorf("listing controller revisions of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	current := NewestRevision(ds.UID, revisions)
	if current == nil {
		return revision{}, nil
	}
	return revision{hash: current.Labels[revisionHashLabel], number: current.Revision, created: current.CreationTimestamp.Time}, nil
}

// NewestRevision returns, among revisions, the one the DaemonSet with the
// UID controls with the highest .revision: the target the controller rolls
// out, and what its rollout status is about; nil when there is none. The
// kubectl plugin tells a stale status by it.
func NewestRevision(dsUID types.UID, revisions []*appsv1.ControllerRevision) *appsv1.ControllerRevision {
	var current *appsv1.ControllerRevision
	for _, r := range revisions {
		if ref := controllerOf(r); ref == nil || ref.UID != dsUID {
			continue
		}
		if current == nil || r.Revision > current.Revision {
			current = r
		}
	}
	return current
}

// upToDate reports whether the pod runs the target revision: by its hash
// label, or, for a pod without one (created before hashes), by the template
// generation, as the native controller decides it. A pod with a hash is
// judged by it alone: the target comes from the ControllerRevisions, which
// the cache may show before the DaemonSet whose template changed, and that
// DaemonSet's stale generation would call every old pod up to date.
func upToDate(ds *appsv1.DaemonSet, target string, pod *corev1.Pod) bool {
	if hash, ok := pod.Labels[revisionHashLabel]; ok && hash != "" {
		return target != "" && hash == target
	}
	generation, ok := ds.Annotations[templateGenerationAnnot]
	return ok && pod.Labels[podTemplateGenerationLabel] == generation
}
