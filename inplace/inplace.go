// Package inplace decides whether a DaemonSet pod can move from one revision
// to another in place, by a patch of its images, or must be recreated: the
// one rule of edgeota.io/update-method InPlaceIfPossible, as OpenKruise's
// InPlaceIfPossible applies it.
//
// A pod can move in place only when at least one of its regular containers'
// images (or a native sidecar's: an init container with restartPolicy
// Always, which the kubelet restarts in place) changed between the two
// revisions' pod templates and nothing else did: not a label or an
// annotation of the template, not a field of the pod spec (volumes,
// tolerations, ...), not a field of any container but its image (env,
// resources, probes, ports, ...), not a regular init container at all
// (those never run again in a running pod), not the containers' names or
// order. Anything else, or no image change at all (kubectl rollout restart
// changes an annotation only), recreates the pod, for a reason that says
// what changed. The target template must also carry rollout.InPlaceLabel,
// the operator's consent, without which the controller's admission policy
// refuses its patch.
//
// The rule reads Templates, digests of a pod template computed once per
// ControllerRevision (TemplateOf): the controller's cache keeps them
// instead of the revisions' templates. It reaches no API server.
package inplace

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/rollout"
)

// Template is what the rule reads of one revision's pod template: digests
// of its parts, and its containers' names and images.
type Template struct {
	// Full is a digest of the whole template, images included: two
	// templates with the same Full are the same template.
	Full uint64
	// Meta are digests of the template's labels and annotations, by field.
	Meta Fields
	// Spec are digests of the pod spec's fields but its containers and
	// init containers, by field.
	Spec Fields
	// Containers are the regular containers, Init the init containers, in
	// the template's order.
	Containers, Init []Container
	// OptedIn: the template carries rollout.InPlaceLabel "true".
	OptedIn bool
}

// Container is one container of a template.
type Container struct {
	Name, Image string
	// Rest are digests of the container's fields but its name and image.
	Rest Fields
	// Sidecar: an init container with restartPolicy Always (a native
	// sidecar), which the kubelet restarts in place when its image changes.
	Sidecar bool
}

// Fields are digests of an object's fields, by JSON name, in name order;
// fields that are absent (empty) are left out.
type Fields []Field

// Field is one field's digest.
type Field struct {
	Name   string
	Digest uint64
}

// FullDigest is Template.Full of a pod template: a DaemonSet's, compared
// with its revision's.
func FullDigest(t *corev1.PodTemplateSpec) (uint64, error) {
	full, err := json.Marshal(t)
	if err != nil {
		return 0, fmt.Errorf("encoding the pod template: %w", err)
	}
	return digest(full), nil
}

// TemplateOf digests a pod template, as a ControllerRevision's data or a
// DaemonSet's spec holds it. It fails only on a value JSON cannot encode,
// which a template decoded from the API server never holds.
func TemplateOf(t *corev1.PodTemplateSpec) (Template, error) {
	var out Template
	var err error
	if out.Full, err = FullDigest(t); err != nil {
		return out, err
	}
	if out.Meta, err = fieldsOf(struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}{t.Labels, t.Annotations}); err != nil {
		return out, err
	}
	spec := t.Spec
	spec.Containers, spec.InitContainers = nil, nil
	if out.Spec, err = fieldsOf(spec); err != nil {
		return out, err
	}
	if out.Containers, err = containersOf(t.Spec.Containers); err != nil {
		return out, err
	}
	if out.Init, err = containersOf(t.Spec.InitContainers); err != nil {
		return out, err
	}
	out.OptedIn = t.Labels[rollout.InPlaceLabel] == "true"
	return out, nil
}

func containersOf(containers []corev1.Container) ([]Container, error) {
	out := make([]Container, 0, len(containers))
	for _, c := range containers {
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		rest := c
		rest.Name, rest.Image = "", ""
		fields, err := fieldsOf(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, Container{Name: c.Name, Image: c.Image, Rest: fields, Sidecar: sidecar})
	}
	return out, nil
}

// fieldsOf digests each field of v's JSON encoding (an object).
func fieldsOf(v any) (Fields, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod template: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading the pod template: %w", err)
	}
	out := make(Fields, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Field{Name: name, Digest: digest(m[name])})
	}
	return out, nil
}

func digest(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// changed names the fields that differ between a and b, in name order.
func changed(a, b Fields) []string {
	var names []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Name < b[j].Name:
			names = append(names, a[i].Name)
			i++
		case i == len(a) || b[j].Name < a[i].Name:
			names = append(names, b[j].Name)
			j++
		default:
			if a[i].Digest != b[j].Digest {
				names = append(names, a[i].Name)
			}
			i++
			j++
		}
	}
	return names
}

// Plan is how a pod moves from one revision to another.
type Plan struct {
	// InPlace: by a patch of the pod's images, Images; otherwise the pod is
	// recreated, for Reason.
	InPlace bool
	// Images are the containers whose image changes (regular containers
	// and native sidecars), by name, with the target's image: what the
	// patch writes, and nothing else.
	Images map[string]string
	// Sidecars names those of Images that are init containers (native
	// sidecars), in name order: the patch writes them among the pod's init
	// containers.
	Sidecars []string
	// Reason says why the pod is recreated; empty in place.
	Reason string
}

// Classify is the rule: how a pod of revision from moves to revision to.
func Classify(from, to *Template) Plan {
	recreate := func(format string, args ...any) Plan { return Plan{Reason: fmt.Sprintf(format, args...)} }
	if !to.OptedIn {
		return recreate("the pod template does not carry the label %s: \"true\", the operator's consent to patch its pods", rollout.InPlaceLabel)
	}
	if names := changed(from.Meta, to.Meta); len(names) > 0 {
		return recreate("the pod template's %s changed", strings.Join(names, " and "))
	}
	if names := changed(from.Spec, to.Spec); len(names) > 0 {
		return recreate("the pod spec's %s changed", list(names))
	}
	if why := sameNames("containers", from.Containers, to.Containers); why != "" {
		return recreate("%s", why)
	}
	if why := sameNames("init containers", from.Init, to.Init); why != "" {
		return recreate("%s", why)
	}
	images := map[string]string{}
	var sidecars []string
	for i, c := range to.Containers {
		old := &from.Containers[i]
		if names := changed(old.Rest, c.Rest); len(names) > 0 {
			return recreate("container %s: its %s changed, not only its image", c.Name, list(names))
		}
		if old.Image != c.Image {
			images[c.Name] = c.Image
		}
	}
	for i, c := range to.Init {
		old := &from.Init[i]
		switch {
		case old.Sidecar != c.Sidecar:
			return recreate("init container %s: its restartPolicy changed", c.Name)
		case !c.Sidecar && (old.Image != c.Image || len(changed(old.Rest, c.Rest)) > 0):
			return recreate("init container %s changed: a regular init container never runs again in a running pod", c.Name)
		}
		if names := changed(old.Rest, c.Rest); len(names) > 0 {
			return recreate("sidecar container %s: its %s changed, not only its image", c.Name, list(names))
		}
		if old.Image != c.Image {
			images[c.Name] = c.Image
			sidecars = append(sidecars, c.Name)
		}
	}
	if len(images) == 0 {
		return recreate("no image changed (a restart, as kubectl rollout restart asks, recreates)")
	}
	slices.Sort(sidecars)
	return Plan{InPlace: true, Images: images, Sidecars: sidecars}
}

// sameNames says how two revisions' containers of a kind differ in their
// names or order; "" when they do not.
func sameNames(kind string, from, to []Container) string {
	names := func(cs []Container) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name
		}
		return out
	}
	a, b := names(from), names(to)
	if slices.Equal(a, b) {
		return ""
	}
	return fmt.Sprintf("the %s changed from [%s] to [%s]: added, removed, renamed or reordered", kind, strings.Join(a, " "), strings.Join(b, " "))
}

// list names fields for a reason: "env", "env and resources", "env,
// ports and resources".
func list(names []string) string {
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
