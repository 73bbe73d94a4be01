package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NewestRevision returns, among revisions, the one the DaemonSet with the
// UID controls with the highest .revision: the target the controller rolls
// out, and what its rollout status is about; nil when there is none. The
// kubectl plugin tells a stale status by it.
func NewestRevision(dsUID types.UID, revisions []*appsv1.ControllerRevision) *appsv1.ControllerRevision {
	var current *appsv1.ControllerRevision
	for _, r := range revisions {
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID != dsUID {
			continue
		}
		if current == nil || r.Revision > current.Revision {
			current = r
		}
	}
	return current
}
