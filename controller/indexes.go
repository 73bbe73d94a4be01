package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Cache indexes: a sync reads one DaemonSet's pods, one node's pods, one
// pod's Jobs or one DaemonSet's rollout records without scanning the whole
// cache, and a pod finds its DaemonSet by the UID it names.
const (
	byUID           = "uid"
	byControllerUID = "controllerUID"
	byNode          = "nodeName"
	byOwnerUID      = "ownerUID"
)

// The indexes of the caches of records, made with their informers
// (NewInformers): DaemonSet pods by DaemonSet and by node, pre-pull Jobs by
// the pod they pull for; Nodes by name alone.
var (
	daemonPodIndexers = cache.Indexers{byControllerUID: indexPodByOwner, byNode: indexPodByNode}
	jobIndexers       = cache.Indexers{byOwnerUID: indexJobByOwnerPod}
	nodeIndexers      = cache.Indexers{}
)

// indexByUID indexes DaemonSets by UID: a pod record names its DaemonSet by
// UID alone.
func indexByUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		return []string{string(m.GetUID())}, nil
	}
	return nil, nil
}

// indexPodByOwner indexes pod records by the DaemonSet controlling them.
func indexPodByOwner(obj any) ([]string, error) {
	if p, ok := obj.(*podRecord); ok && p.Owner != "" {
		return []string{string(p.Owner)}, nil
	}
	return nil, nil
}

// indexPodByNode indexes pod records by their node: the one they are bound
// to, or the one their node affinity names while unbound.
func indexPodByNode(obj any) ([]string, error) {
	if p, ok := obj.(*podRecord); ok && p.Node != "" {
		return []string{p.Node}, nil
	}
	return nil, nil
}

// indexByControllerUID indexes objects by their controller's UID: pre-pull
// pods by their Job.
func indexByControllerUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			return []string{string(ref.UID)}, nil
		}
	}
	return nil, nil
}

// indexJobByOwnerPod indexes Job records by the pods owning them (not as
// controller), which is how pre-pull Jobs point at the pod they pull for.
func indexJobByOwnerPod(obj any) ([]string, error) {
	job, ok := obj.(*jobRecord)
	if !ok {
		return nil, nil
	}
	uids := make([]string, 0, len(job.Pods))
	for _, p := range job.Pods {
		uids = append(uids, string(p.UID))
	}
	return uids, nil
}
