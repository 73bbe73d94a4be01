package controller

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/inplace"
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
// DaemonSet). For a DaemonSet that asks for upgrades in place it carries the
// digests of every revision's template (package inplace), and whether the
// DaemonSet's template as cached is the target's.
func (c *Controller) targetRevision(ds *appsv1.DaemonSet, key string) (decision.Target, error) {
	revisions, err := c.revisionLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return decision.Target{}, fmt.Errorf("listing controller revisions of daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	current := rollout.NewestRevision(ds.UID, revisions)
	if current == nil {
		return decision.Target{}, nil
	}
	t := decision.Target{Hash: current.Labels[revisionHashLabel], Number: current.Revision,
		TemplateGeneration: ds.Annotations[templateGenerationAnnot]}
	method, _ := rollout.ParseUpdateMethod(ds.Annotations[rollout.UpdateMethodAnnotation])
	t.Images, t.Templates = c.revisions.of(key, ds.UID, current, revisions, method == rollout.MethodInPlaceIfPossible)
	if target := t.Templates[t.Hash]; target != nil {
		t.TemplateCurrent = ds.Annotations[templateDigestKey] == digestString(target.Full)
	}
	return t, nil
}

// revisionCache keeps what the controller reads of each DaemonSet's
// revisions, decoded once per revision (by its UID): a revision's data never
// changes, and decoding it at every sync cost more than the rest of a sync's
// reads at 2,000 nodes. Per DaemonSet: the target's images (what an offer
// names), and, for a DaemonSet that upgrades in place, every revision's
// template digests. Dropped when the DaemonSet is forgotten.
type revisionCache struct {
	mu   sync.Mutex
	byDS map[string]*dsRevisions
}

// dsRevisions is one DaemonSet's decoded revisions.
type dsRevisions struct {
	target    types.UID
	images    map[string]string
	templates map[types.UID]revisionTemplate
}

// revisionTemplate is one revision's hash and template digests.
type revisionTemplate struct {
	hash     string
	template *inplace.Template
}

// of returns the images of the DaemonSet's target revision current, and,
// when inPlace, the template digests of its revisions by hash (nil
// otherwise). Read only.
func (c *revisionCache) of(key string, dsUID types.UID, current *appsv1.ControllerRevision, revisions []*appsv1.ControllerRevision,
	inPlace bool) (map[string]string, map[string]*inplace.Template) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byDS == nil {
		c.byDS = map[string]*dsRevisions{}
	}
	d := c.byDS[key]
	if d == nil {
		d = &dsRevisions{}
		c.byDS[key] = d
	}
	if d.target != current.UID {
		d.target, d.images = current.UID, revisionImages(current)
	}
	if !inPlace {
		d.templates = nil
		return d.images, nil
	}
	kept := make(map[types.UID]revisionTemplate, len(revisions))
	templates := make(map[string]*inplace.Template, len(revisions))
	for _, r := range revisions {
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID != dsUID {
			continue
		}
		rt, ok := d.templates[r.UID]
		if !ok {
			rt = revisionTemplate{hash: r.Labels[revisionHashLabel]}
			if data, ok := decodeRevisionData(r.Data); ok {
				rt.template = data.InPlace
			}
		}
		kept[r.UID] = rt
		if rt.hash != "" && rt.template != nil {
			templates[rt.hash] = rt.template
		}
	}
	d.templates = kept
	return d.images, templates
}

// forget drops the DaemonSet's entry.
func (c *revisionCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byDS, key)
}

// revisionData is what the controller reads of a ControllerRevision's data
// (the native controller's patch of the DaemonSet: its whole pod template),
// and all the cache keeps of it (Transform): the containers as a pre-pull
// Job copies them (trimContainers), whose images an offer names, and the
// template's digests for the rule of upgrades in place, computed from the
// whole template the first time the revision is cached.
type revisionData struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
	// InPlace are the template's digests (package inplace).
	InPlace *inplace.Template `json:"edgeota.io/inPlace,omitempty"`
}

// decodeRevisionData reads a ControllerRevision's data, its template
// digested (unless the data holds the digests already: the cache's own
// trimmed data) and its containers trimmed; false when it holds no template
// the controller can read.
func decodeRevisionData(data runtime.RawExtension) (revisionData, bool) {
	var d revisionData
	if len(data.Raw) == 0 || json.Unmarshal(data.Raw, &d) != nil {
		return d, false
	}
	if d.InPlace == nil {
		if t, err := inplace.TemplateOf(&d.Spec.Template); err == nil {
			d.InPlace = &t
		}
	}
	spec := &d.Spec.Template.Spec
	d.Spec.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: trimContainers(spec.InitContainers), Containers: trimContainers(spec.Containers)}}
	spec = &d.Spec.Template.Spec
	return d, len(spec.InitContainers)+len(spec.Containers) > 0
}

// trimRevisionData keeps only the containers of a ControllerRevision's data,
// and its template's digests, as decodeRevisionData reads them.
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

// templateDigestKey is where the controller's cache of DaemonSets keeps a
// digest of each DaemonSet's pod template (Transform): the cache keeps no
// template, and a patch in place may label a pod with the DaemonSet's
// template generation only while that template is the target revision's
// (decision.Target.TemplateCurrent). Only in the cache: the controller never
// writes a DaemonSet's annotations but its rollout status. A DaemonSet that
// carries the key already is one transformed before (client-go may apply a
// transform twice), whose template is trimmed: its digest is kept.
const templateDigestKey = "edgeota.io/cached-template-digest"

// digestString renders a template digest as templateDigestKey holds it.
func digestString(d uint64) string { return strconv.FormatUint(d, 16) }

// templateDigest is the digest of a DaemonSet's whole pod template, as
// inplace.Template.Full digests a revision's; "" when it cannot be encoded.
func templateDigest(t *corev1.PodTemplateSpec) string {
	d, err := inplace.FullDigest(t)
	if err != nil {
		return ""
	}
	return digestString(d)
}
