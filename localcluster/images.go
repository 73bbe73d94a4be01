package localcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Images that the local cluster's KWOK stages (stages/pod-*.yaml) make
// misbehave when a pod's first container runs them, so that tests and the
// bench can ship a broken version without a real container runtime. Every
// other image becomes Ready at once (after its pull, when pulls are
// modelled: ImagePulls).
var (
	// CrashLoopImages crash-loop: Running, not Ready, containers waiting in
	// CrashLoopBackOff (stages/pod-crashloop.yaml).
	CrashLoopImages = []string{"edgeota.test/crashloop:v1", "edgeota.test/crashloop:v2", "edgeota.test/crashloop:v3"}
	// NeverReadyImages start and never become Ready, as behind a readiness
	// probe that never passes (stages/pod-never-ready.yaml).
	NeverReadyImages = []string{"edgeota.test/never-ready:v1", "edgeota.test/never-ready:v2", "edgeota.test/never-ready:v3"}
	// PullFailImages cannot be pulled: Pending, containers waiting in
	// ImagePullBackOff (stages/pod-pull-fail.yaml), as on a node whose
	// registry is out of reach. With image pulls modelled (ImagePulls) every
	// pull of them times out instead: ErrImagePull with an i/o timeout, then
	// ImagePullBackOff, for ever.
	PullFailImages = []string{"edgeota.test/pull-fail:v1", "edgeota.test/pull-fail:v2"}
	// MissingImages do not exist in their registry, as a mistyped tag: with
	// image pulls modelled (ImagePulls, its default Missing rule) their pods
	// show ErrImagePull and ImagePullBackOff ("not found") and never start.
	// Without the model no stage names them: they start as any image.
	MissingImages = []string{"edgeota.test/missing:v1", "edgeota.test/missing:v2"}
)

// ImportedPrefix starts the images the local cluster models as imported
// onto the nodes without a registry digest (ctr import, kind load): their
// imageID is the bare config digest "sha256:…", which no registry serves,
// so nothing can be pinned to it.
const ImportedPrefix = "edgeota.test/imported"

// RetagSuffix ends a tag that the local cluster models as the same image
// pushed again under another tag: its imageID (ImageID) is that of the tag
// without it, as a registry's digest is for the same bytes.
const RetagSuffix = "-retag"

// ImageID is the imageID the local cluster's stages report for a container
// running image: "kwok://<repository>@sha256:<the SHA-256 of the image
// reference, RetagSuffix cut off>", "sha256:<the SHA-256 of the reference>"
// for an image of ImportedPrefix, or for an image named by its digest
// ("<repository>@sha256:…") that very digest, "kwok://<image>": a pull by
// digest runs the bytes it names, and the same digest as the tag it was
// read from. KWOK reports none; a digest per image lets the tests show what
// no rule may read it for: an upgrade in place to a tag of the same digest
// completes like any other.
func ImageID(image string) string {
	if strings.Contains(image, "@") {
		return "kwok://" + image
	}
	if strings.HasPrefix(image, ImportedPrefix) {
		sum := sha256.Sum256([]byte(image))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	repository := image
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository = image[:i]
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(image, RetagSuffix)))
	return "kwok://" + repository + "@sha256:" + hex.EncodeToString(sum[:])
}

// ImageIDsAnnotation carries, on a pod the image pull simulator released,
// the imageID of each of its images on its node (a JSON object, image →
// imageID): the digest the node's pull resolved the tag to. KWOK's stages
// report it as the containers' imageID (ImageID's otherwise).
const ImageIDsAnnotation = "localcluster.edgeota.io/image-ids"

// RegistryImageID is the imageID a node of arch gets when it pulls image
// after its tag was pushed again pushes times (Cluster.Repush): ImageID's
// on amd64 before any push (and for an image named by digest, or
// imported); other bytes, so another digest, on each other architecture
// and after each push, as a multi-platform tag's per-platform manifests.
func RegistryImageID(image, arch string, pushes int) string {
	if (arch == "" || arch == "amd64") && pushes == 0 || strings.Contains(image, "@") || strings.HasPrefix(image, ImportedPrefix) {
		return ImageID(image)
	}
	repository := image
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository = image[:i]
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", strings.TrimSuffix(image, RetagSuffix), arch, pushes)))
	return "kwok://" + repository + "@sha256:" + hex.EncodeToString(sum[:])
}
