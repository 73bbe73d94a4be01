package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cache indexes: a sync reads one DaemonSet's pods, one node's pods, one
// pod's Jobs or one DaemonSet's rollout records without scanning the whole
// cache.
const (
	byControllerUID = "controllerUID"
	byNode          = "nodeName"
	byOwnerUID      = "ownerUID"
	byRecordOwner   = "recordOwner"
)

func indexByControllerUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		if ref := controllerOf(m); ref != nil {
			return []string{string(ref.UID)}, nil
		}
	}
	return nil, nil
}

// indexByNode indexes a pod by its node: the one it is bound to, or the one
// its node affinity names while unbound (nodeOfPod).
func indexByNode(obj any) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		if node := nodeOfPod(pod); node != "" {
			return []string{node}, nil
		}
	}
	return nil, nil
}

// indexByOwnerUID indexes Jobs by the pods owning them (not as controller),
// which is how pre-pull Jobs point at the pod they pull for.
func indexByOwnerUID(obj any) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	var uids []string
	for i := range job.OwnerReferences {
		if isKind(&job.OwnerReferences[i], podKind) {
			uids = append(uids, string(job.OwnerReferences[i].UID))
		}
	}
	return uids, nil
}

// indexByRecordOwner indexes rollout record ConfigMaps by the UID of their
// DaemonSet.
func indexByRecordOwner(obj any) ([]string, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		if uid := cm.Labels[RecordLabel]; uid != "" {
			return []string{uid}, nil
		}
	}
	return nil, nil
}
