package controller

import (
	"encoding/json"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// Labels and annotations the native DaemonSet controller writes; edgeota reads
// them instead of re-implementing its hashing.
const (
	revisionHashLabel          = appsv1.DefaultDaemonSetUniqueLabelKey // "controller-revision-hash"
	podTemplateGenerationLabel = "pod-template-generation"
	templateGenerationAnnot    = "deprecated.daemonset.template.generation"
)

// targetRevision returns the DaemonSet's target: its newest
// ControllerRevision (see rollout.NewestRevision); a zero hash while the
// native controller has not created one yet (its creation requeues the
// DaemonSet).
func (c *Controller) targetRevision(ds *appsv1.DaemonSet, key string) (decision.Target, error) {
	revisions, err := c.revisionLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return decision.Target{}, fmt.Errorf("listing controller revisions of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	current := rollout.NewestRevision(ds.UID, revisions)
	if current == nil {
		return decision.Target{}, nil
	}
	return decision.Target{Hash: current.Labels[revisionHashLabel], Number: current.Revision,
		TemplateGeneration: ds.Annotations[templateGenerationAnnot], Images: c.targetImages.of(key, current)}, nil
}

// revisionImageCache keeps the images of each DaemonSet's target revision
// (revisionImages), by the revision's UID: a revision's data never changes,
// and decoding it at every sync cost more than the rest of a sync's reads
// at 2,000 nodes. One entry per DaemonSet, dropped when it is forgotten.
type revisionImageCache struct {
	mu   sync.Mutex
	byDS map[string]revisionImagesOf
}

// revisionImagesOf is the images of the revision with the UID.
type revisionImagesOf struct {
	uid    types.UID
	images map[string]string
}

// of returns the images of the DaemonSet's target revision r. Read only.
func (c *revisionImageCache) of(key string, r *appsv1.ControllerRevision) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byDS[key]; ok && e.uid == r.UID {
		return e.images
	}
	if c.byDS == nil {
		c.byDS = map[string]revisionImagesOf{}
	}
	images := revisionImages(r)
	c.byDS[key] = revisionImagesOf{uid: r.UID, images: images}
	return images
}

// forget drops the DaemonSet's entry.
func (c *revisionImageCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byDS, key)
}

// revisionData is what the controller reads of a ControllerRevision's data
// (the native controller's patch of the DaemonSet: its whole pod template),
// and all the cache keeps of it (Transform): the containers as a pre-pull
// Job copies them (trimContainers), whose images an offer names.
type revisionData struct {
	Spec struct {
		Template struct {
			Spec corev1.PodSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// decodeRevisionData reads a ControllerRevision's data, its containers
// trimmed; false when it holds no template the controller can read.
func decodeRevisionData(data runtime.RawExtension) (revisionData, bool) {
	var d revisionData
	if len(data.Raw) == 0 || json.Unmarshal(data.Raw, &d) != nil {
		return d, false
	}
	spec := &d.Spec.Template.Spec
	*spec = corev1.PodSpec{InitContainers: trimContainers(spec.InitContainers), Containers: trimContainers(spec.Containers)}
	return d, len(spec.InitContainers)+len(spec.Containers) > 0
}

// trimRevisionData keeps only the containers of a ControllerRevision's data,
// as decodeRevisionData reads them.
func trimRevisionData(data runtime.RawExtension) runtime.RawExtension {
	d, ok := decodeRevisionData(data)
	if !ok {
		return runtime.RawExtension{}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return runtime.RawExtension{}
	}
	return runtime.RawExtension{Raw: raw}
}

// revisionImages maps each container of the revision's template to its
// image (podchannel.ImagesOf): what an offer of the revision names, taken
// from the revision itself, since the cache may show the DaemonSet's next
// template before its revision. Nil when the data names no container.
func revisionImages(r *appsv1.ControllerRevision) map[string]string {
	d, ok := decodeRevisionData(r.Data)
	if !ok {
		return nil
	}
	return podchannel.ImagesOf(&d.Spec.Template.Spec)
}
