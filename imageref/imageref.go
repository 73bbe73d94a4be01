// Package imageref reads the image references a pin is made of: the
// imageID a container runtime reports for a running container
// (containerStatuses[].imageID), which names the bytes it runs, and the
// image a pod's spec names, whose repository a pinned reference keeps.
//
// Runtimes write an imageID in several forms for the same kind of thing:
//   - "docker-pullable://repo@sha256:…" (cri-dockerd, dockershim before it);
//   - "repo@sha256:…" (containerd, CRI-O);
//   - "sha256:…", or "docker://sha256:…", the image's config digest, for an
//     image that came without a registry digest (`ctr import`, `kind load`,
//     `docker load`): no registry serves it by that digest, so it cannot be
//     pinned;
//   - any other "<scheme>://" prefix before one of those (the local
//     cluster's "kwok://").
//
// Parse normalises them: the scheme dropped, the repository as the
// registry knows it (docker.io/library/ added where Docker Hub's short
// names leave it out), the digest lower-case. What it cannot normalise: a
// runtime that reports a multi-platform image's index digest and one that
// reports the per-platform manifest's digest name the same bytes by two
// digests; nothing but the registry tells they match.
package imageref

import (
	"fmt"
	"strings"
)

// ID is an imageID a runtime reported, read: the digest of the bytes a
// container runs, and the repository it was pulled from.
type ID struct {
	// Repository is the normalised repository (Normalize); "" for an
	// imageID that names none.
	Repository string
	// Digest is "<algorithm>:<hex>", lower-case.
	Digest string
}

// UnpinnableError says why an imageID names no digest a node could pull
// the same bytes by.
type UnpinnableError struct {
	// ImageID is the imageID as the runtime reported it.
	ImageID string
	// Why says what it lacks.
	Why string
}

func (e *UnpinnableError) Error() string {
	if e.ImageID == "" {
		return "no imageID reported: " + e.Why
	}
	return fmt.Sprintf("imageID %q: %s", e.ImageID, e.Why)
}

// configDigest is why an imageID that is a bare digest cannot be pinned.
const configDigest = "the image's config digest, with no registry digest (an image imported onto the node, such as by ctr import or kind load): no registry serves it by that digest"

// Parse reads an imageID. One that names no registry digest (a bare config
// digest, nothing at all, or something that is no imageID) is an
// *UnpinnableError saying why.
func Parse(imageID string) (ID, error) {
	s := strings.TrimSpace(imageID)
	if s == "" {
		return ID{}, &UnpinnableError{ImageID: imageID, Why: "the runtime reported none (the container has not started, or the runtime does not say)"}
	}
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+len("://"):]
	}
	at := strings.LastIndex(s, "@")
	if at < 0 {
		if _, err := ParseDigest(s); err == nil || isHex(s, 64) {
			return ID{}, &UnpinnableError{ImageID: imageID, Why: configDigest}
		}
		return ID{}, &UnpinnableError{ImageID: imageID, Why: "it names no digest"}
	}
	digest, err := ParseDigest(s[at+1:])
	if err != nil {
		return ID{}, &UnpinnableError{ImageID: imageID, Why: err.Error()}
	}
	repo := s[:at]
	if repo == "" {
		return ID{}, &UnpinnableError{ImageID: imageID, Why: configDigest}
	}
	return ID{Repository: Normalize(repo), Digest: digest}, nil
}

// ParseDigest checks a digest ("sha256:<64 hex>" or "sha512:<128 hex>",
// any case) and returns it lower-case.
func ParseDigest(s string) (string, error) {
	algorithm, hex, ok := strings.Cut(strings.ToLower(s), ":")
	if !ok {
		return "", fmt.Errorf("digest %q: want <algorithm>:<hex>", s)
	}
	switch {
	case algorithm == "sha256" && isHex(hex, 64), algorithm == "sha512" && isHex(hex, 128):
		return algorithm + ":" + hex, nil
	}
	return "", fmt.Errorf("digest %q: want sha256:<64 hex digits> or sha512:<128 hex digits>", s)
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RepositoryOf is an image reference's repository as written: the tag and
// digest cut off ("registry:5000/app:v2@sha256:…" → "registry:5000/app").
func RepositoryOf(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name
}

// Normalize is a repository as its registry knows it: Docker Hub's short
// forms completed ("nginx" → "docker.io/library/nginx", "user/app" →
// "docker.io/user/app", "index.docker.io/…" → "docker.io/…"), the
// registry's host lower-case; a tag or digest is cut off.
func Normalize(image string) string {
	repo := RepositoryOf(image)
	host, rest, ok := strings.Cut(repo, "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		host, rest = "docker.io", repo
	}
	host = strings.ToLower(host)
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		host = "docker.io"
	}
	if host == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return host + "/" + rest
}

// Pinned is the reference that pulls digest from image's repository, as
// image writes it: "registry:5000/app:v2" and "sha256:ab…" →
// "registry:5000/app@sha256:ab…". A pod's image keeps its repository as
// the template wrote it, which admission checks (deploy/'s policy).
func Pinned(image, digest string) string {
	return RepositoryOf(image) + "@" + digest
}

// IsPinned reports whether an image reference names a digest.
func IsPinned(image string) bool {
	_, digest, ok := strings.Cut(image, "@")
	if !ok {
		return false
	}
	_, err := ParseDigest(digest)
	return err == nil
}
