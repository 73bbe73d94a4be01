package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cache indexes: a sync reads one DaemonSet's pods, one node's pods or one
// pod's Jobs without scanning the whole cluster's.
const (
	byControllerUID = "controllerUID"
	byNode          = "nodeName"
	byOwnerUID      = "ownerUID"
)

func indexByControllerUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		if ref := controllerOf(m); ref != nil {
			return []string{string(ref.UID)}, nil
		}
	}
	return nil, nil
}

func indexByNode(obj any) ([]string, error) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
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
