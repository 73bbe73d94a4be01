package imageref

import (
	"errors"
	"strings"
	"testing"
)

const (
	d1 = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	d2 = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// TestParse reads each form of imageID the runtimes write into the same
// repository and digest.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, imageID string
		want          ID
	}{
		{"cri-dockerd", "docker-pullable://nginx@" + d1, ID{"docker.io/library/nginx", d1}},
		{"containerd, Docker Hub", "docker.io/library/nginx@" + d1, ID{"docker.io/library/nginx", d1}},
		{"containerd, a user's repository", "docker.io/acme/app@" + d1, ID{"docker.io/acme/app", d1}},
		{"short user repository", "acme/app@" + d1, ID{"docker.io/acme/app", d1}},
		{"index.docker.io", "index.docker.io/library/nginx@" + d1, ID{"docker.io/library/nginx", d1}},
		{"a registry with a port", "registry.local:5000/team/app@" + d1, ID{"registry.local:5000/team/app", d1}},
		{"localhost", "localhost/app@" + d1, ID{"localhost/app", d1}},
		{"an upper-case host and digest", "Registry.Example.com/app@" + strings.ToUpper(d1), ID{"registry.example.com/app", d1}},
		{"the local cluster's", "kwok://registry.local:5000/app@" + d2, ID{"registry.local:5000/app", d2}},
		{"a tag kept before the digest", "quay.io/org/app:v2@" + d1, ID{"quay.io/org/app", d1}},
		{"surrounding spaces", "  ghcr.io/org/app@" + d1 + "\n", ID{"ghcr.io/org/app", d1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.imageID)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.imageID, err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.imageID, got, tc.want)
			}
		})
	}
}

// TestParseUnpinnable: what names no registry digest is an
// *UnpinnableError saying why, never a digest.
func TestParseUnpinnable(t *testing.T) {
	for _, tc := range []struct {
		name, imageID, why string
	}{
		{"bare config digest (ctr import, kind load)", d1, "config digest"},
		{"docker:// config digest", "docker://" + d1, "config digest"},
		{"CRI-O's bare image ID", strings.TrimPrefix(d1, "sha256:"), "config digest"},
		{"nothing", "", "reported none"},
		{"a tag, no digest", "nginx:1.25", "names no digest"},
		{"a short digest", "nginx@sha256:abc", "want sha256"},
		{"an unknown algorithm", "nginx@md5:0123456789abcdef0123456789abcdef", "want sha256"},
		{"not hex", "nginx@sha256:" + strings.Repeat("z", 64), "want sha256"},
		{"a digest and no repository", "@" + d1, "config digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.imageID)
			var unpinnable *UnpinnableError
			if !errors.As(err, &unpinnable) {
				t.Fatalf("Parse(%q) = %+v, %v; want an *UnpinnableError", tc.imageID, got, err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Parse(%q): %v; want it to say %q", tc.imageID, err, tc.why)
			}
			if unpinnable.ImageID != tc.imageID {
				t.Errorf("ImageID = %q, want %q", unpinnable.ImageID, tc.imageID)
			}
		})
	}
}

// TestNormalize: Docker Hub's short names completed, tags and digests cut
// off, other registries as written.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                              "docker.io/library/nginx",
		"nginx:1.25":                         "docker.io/library/nginx",
		"nginx@" + d1:                        "docker.io/library/nginx",
		"library/nginx":                      "docker.io/library/nginx",
		"docker.io/nginx":                    "docker.io/library/nginx",
		"registry-1.docker.io/library/nginx": "docker.io/library/nginx",
		"acme/app:v1":                        "docker.io/acme/app",
		"registry.local:5000/app:v2":         "registry.local:5000/app",
		"registry.local:5000/app":            "registry.local:5000/app",
		"localhost:5000/a/b/c:v1":            "localhost:5000/a/b/c",
		"edgeota.test/crashloop:v1":          "edgeota.test/crashloop",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPinned keeps the repository as the spec writes it (admission
// compares it so) and replaces tag and digest.
func TestPinned(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"nginx:1.25", "nginx@" + d2},
		{"registry.local:5000/app:v2", "registry.local:5000/app@" + d2},
		{"registry.local:5000/app", "registry.local:5000/app@" + d2},
		{"quay.io/org/app:v2@" + d1, "quay.io/org/app@" + d2},
	} {
		got := Pinned(tc.image, d2)
		if got != tc.want {
			t.Errorf("Pinned(%q) = %q, want %q", tc.image, got, tc.want)
		}
		if !IsPinned(got) {
			t.Errorf("IsPinned(%q) = false", got)
		}
		if RepositoryOf(got) != RepositoryOf(tc.image) {
			t.Errorf("RepositoryOf(%q) = %q, want the spec's %q", got, RepositoryOf(got), RepositoryOf(tc.image))
		}
	}
	for _, image := range []string{"nginx:1.25", "nginx", "nginx@sha256:abc", "registry:5000/app:v1"} {
		if IsPinned(image) {
			t.Errorf("IsPinned(%q) = true", image)
		}
	}
}
