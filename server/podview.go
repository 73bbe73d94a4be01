package server

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/statedir"
)

// The stored pod view's file in the state directory, and its format. A
// change of podViewData's meaning takes a new version: a reader ignores a
// version it does not know rather than misread it.
const (
	podViewFile    = "pods.json"
	podViewKind    = "PodView"
	podViewVersion = 1
)

// How often the view is written, at most. A burst of pod events (a rollout
// marking every pod, a node's pods restarting together) costs one write per
// podViewWriteInterval, not one per event: flash storage wears out. The time
// of last contact alone, which moves with every watch event and bookmark, is
// written every contactWriteInterval, and once more at a clean shutdown; a
// power cut loses at most that much of it, which only makes the stored view
// look older than it is.
const (
	podViewWriteInterval = time.Second
	contactWriteInterval = 5 * time.Minute
)

// podViewData is what the state directory keeps of the live view: the node's
// pods, reduced to what ListPods shows (see storedPod), and the time of the
// last contact with the API server, by the API server's clock.
type podViewData struct {
	LastContact time.Time    `json:"lastContact"`
	Pods        []corev1.Pod `json:"pods"`
}

// storedView is the view a previous run left on disk, served from start until
// the informer syncs.
type storedView struct {
	lastContact time.Time
	list        *edgeotav1.ListPodsResponse
	pods        corelisters.PodLister
}

// loadView reads the stored view. A file that is missing, unreadable,
// truncated, corrupt or of another version is logged and ignored (nil): the
// agent then serves only what the API server tells it. Pods that do not
// belong to nodeName or whose names are invalid are dropped, never served.
func loadView(ctx context.Context, dir *statedir.Dir, nodeName string) *storedView {
	logger := klog.FromContext(ctx)
	var data podViewData
	if err := dir.ReadJSON(podViewFile, podViewKind, podViewVersion, &data); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			logger.Info("No stored pod view: serving once the API server answers", "dir", dir.Path())
		} else {
			logger.Error(err, "Ignoring the stored pod view: serving once the API server answers", "dir", dir.Path())
		}
		return nil
	}
	if data.LastContact.IsZero() {
		logger.Error(nil, "Ignoring the stored pod view: it has no time of last contact", "dir", dir.Path())
		return nil
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	dropped := 0
	for i := range data.Pods {
		pod := &data.Pods[i]
		if pod.Spec.NodeName != nodeName || validatePodRef(pod.Namespace, pod.Name) != nil {
			dropped++
			continue
		}
		_ = indexer.Add(pod) // MetaNamespaceKeyFunc never fails on a pod
	}
	if dropped > 0 {
		logger.Error(nil, "Dropped pods of the stored view that are not this node's or are not valid", "dropped", dropped)
	}
	v := &storedView{lastContact: data.LastContact, pods: corelisters.NewPodLister(indexer)}
	pods, _ := v.pods.List(labels.Everything())
	v.list = podListResponse(pods)
	logger.Info("Serving the stored pod view until the API server answers", "pods", len(pods), "lastContact", data.LastContact)
	return v
}

// viewStore writes the live view to the state directory.
type viewStore struct {
	dir *statedir.Dir
	// writes counts the view's writes since start, for the log (and so for
	// the benchmark that counts them).
	writes atomic.Int64
}

// persist keeps the stored view current until ctx is done, then writes it a
// last time if it changed. Nothing is written before the informer has synced:
// until then the stored view is the better one. It checks every
// podViewWriteInterval, so a burst of pod events costs one write per interval.
func (c *PodCache) persist(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var written bool
	var writtenGeneration uint64
	var writtenContact time.Time
	ticker := time.NewTicker(podViewWriteInterval)
	defer ticker.Stop()
	for {
		var stopping bool
		select {
		case <-ctx.Done():
			stopping = true
		case <-ticker.C:
		}
		if c.informer.HasSynced() {
			generation, contact := c.generation.Load(), c.contact.last()
			stale := contact.Sub(writtenContact) >= contactWriteInterval || (stopping && !contact.Equal(writtenContact))
			if !written || generation != writtenGeneration || stale {
				if err := c.writeView(logger, contact); err != nil {
					logger.Error(err, "Storing the pod view; the previous one stays on disk")
				} else {
					written, writtenGeneration, writtenContact = true, generation, contact
				}
			}
		}
		if stopping {
			return
		}
	}
}

// writeView stores the cache's pods with the time of last contact.
func (c *PodCache) writeView(logger klog.Logger, contact time.Time) error {
	cached, err := corelisters.NewPodLister(c.informer.GetIndexer()).List(labels.Everything())
	if err != nil {
		return err
	}
	data := podViewData{LastContact: contact, Pods: make([]corev1.Pod, 0, len(cached))}
	for _, p := range cached {
		if p.Spec.NodeName == c.nodeName {
			data.Pods = append(data.Pods, storedPod(p))
		}
	}
	slices.SortFunc(data.Pods, func(a, b corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if err := c.store.dir.WriteJSON(podViewFile, podViewKind, podViewVersion, data); err != nil {
		return err
	}
	n := c.store.writes.Add(1)
	logger.V(2).Info("Stored the pod view", "pods", len(data.Pods), "lastContact", contact, "writes", n)
	return nil
}

// storedPod is the part of pod that ListPods shows (see podToProto), that
// the checks of a queued action read, and that the owner's view follows an
// upgrade in place by (the pod's generation, its containers' IDs, init
// containers' included, and the generation its kubelet observed): the
// node's disk keeps no more of a pod than its owner can already see, and a
// stored pod converts to the same answer as the live one.
func storedPod(pod *corev1.Pod) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			Labels:            pod.Labels,
			Annotations:       pod.Annotations,
			OwnerReferences:   pod.OwnerReferences,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
		},
		Spec: corev1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			Containers:     storedContainers(pod.Spec.Containers),
			InitContainers: storedContainers(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			Reason:                pod.Status.Reason,
			Message:               pod.Status.Message,
			HostIP:                pod.Status.HostIP,
			PodIP:                 pod.Status.PodIP,
			StartTime:             pod.Status.StartTime,
			Conditions:            pod.Status.Conditions,
			ContainerStatuses:     pod.Status.ContainerStatuses,
			InitContainerStatuses: pod.Status.InitContainerStatuses,
			ObservedGeneration:    pod.Status.ObservedGeneration,
		},
	}
}

// storedContainers keeps each container's name and image: not its command,
// environment or mounts, which ListPods never shows.
func storedContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, 0, len(cs))
	for _, c := range cs {
		out = append(out, corev1.Container{Name: c.Name, Image: c.Image})
	}
	return out
}
