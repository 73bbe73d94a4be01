package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What every image is, and where its files are.
const (
	// user is the numeric non-root user and group the binaries run as
	// (distroless's "nonroot"; deploy/ sets the same runAsUser).
	user = "65532:65532"
	// licenseID is edgeota's license, as SPDX names it.
	licenseID = "Apache-2.0"
	// licensesDir holds edgeota's LICENSE, and third_party/ the notices of
	// everything linked in, one directory per module.
	licensesDir   = "licenses"
	thirdPartyDir = licensesDir + "/third_party"
)

// Annotations on the image index's descriptor in the layout's index.json:
// the tag (OCI image-layout) and the full name (containerd's ctr import,
// kind load image-archive and docker load read it), as docker save writes them.
const (
	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationImageName = "io.containerd.image.name"
)

// imageSpec is what every image of one build shares.
type imageSpec struct {
	repository string
	version    string
	revision   string
	source     string
	created    time.Time
	license    []byte
	env        goEnvironment
}

// builtImage is one tarball written: its name and the digests and sizes of
// its index and platform images.
type builtImage struct {
	name      string // the binary, e.g. ota-server
	repo      string // repository/name
	tag       string // the version
	digest    v1.Hash
	platforms []builtPlatform
}

// ref is the image's name with its tag.
func (b builtImage) ref() string { return b.repo + ":" + b.tag }

type builtPlatform struct {
	platform     string
	digest       v1.Hash
	compressed   int64 // manifest, config and gzipped layers: what a pull transfers
	uncompressed int64 // the layers unpacked: what the node stores
}

// labels are the image config's labels and the index's annotations.
func (s imageSpec) labels(name string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    name,
		"org.opencontainers.image.source":   s.source,
		"org.opencontainers.image.version":  s.version,
		"org.opencontainers.image.licenses": licenseID,
		"org.opencontainers.image.created":  s.created.Format(time.RFC3339),
	}
	if s.revision != "" {
		l["org.opencontainers.image.revision"] = s.revision
	}
	return l
}

// build writes the image-layout tarball of binary name for platforms to dest.
func (s imageSpec) build(name, binaries string, platforms []string, dest string) (builtImage, error) {
	b := builtImage{name: name, repo: s.repository + "/" + name, tag: s.version}
	idx := v1.ImageIndex(empty.Index)
	for _, p := range platforms {
		img, err := s.image(name, filepath.Join(binaries, platformDir(p), name), p)
		if err != nil {
			return b, fmt.Errorf("%s: %w", p, err)
		}
		bp, err := measure(p, img)
		if err != nil {
			return b, err
		}
		b.platforms = append(b.platforms, bp)
		os, arch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}},
		})
	}
	idx = mutate.Annotations(idx, s.labels(name)).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return b, err
	}
	b.digest = digest
	return b, writeLayoutTar(dest, idx, map[string]string{
		annotationRefName:   s.version,
		annotationImageName: b.ref(),
	}, s.created)
}

// image is one platform's image: a layer of license notices, then a layer
// with the binary, which is the entrypoint.
func (s imageSpec) image(name, binary, platform string) (v1.Image, error) {
	exe, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	notices, err := thirdPartyNotices(binary, s.env)
	if err != nil {
		return nil, err
	}
	licenses := []tarFile{{name: licensesDir + "/LICENSE", mode: 0o444, data: s.license}}
	for _, n := range notices {
		licenses = append(licenses, tarFile{name: thirdPartyDir + "/" + n.path, mode: 0o444, data: n.data})
	}
	app := []tarFile{{name: name, mode: 0o555, data: exe}}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range []struct {
		files []tarFile
		what  string
	}{
		{licenses, "/" + licensesDir + ": LICENSE and the third-party notices of what " + name + " links"},
		{app, "/" + name + ": the static binary"},
	} {
		layer, err := s.layer(l.files)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: s.created}, CreatedBy: "edgeota make images", Comment: l.what},
		})
		if err != nil {
			return nil, err
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, _ = strings.Cut(platform, "/")
	cfg.Created = v1.Time{Time: s.created}
	cfg.Config = v1.Config{
		User:       user,
		Entrypoint: []string{"/" + name},
		WorkingDir: "/",
		Labels:     s.labels(name),
	}
	return mutate.ConfigFile(img, cfg)
}

// layer packs files into a gzipped layer, compressed once. The default level:
// on the controller's binary, the best level takes twice as long for 0.4%
// fewer bytes, and the fastest is 14% larger (edge links are slow).
func (s imageSpec) layer(files []tarFile) (v1.Layer, error) {
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := writeTar(zw, files, s.created); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// measure reports img's digest and sizes.
func measure(platform string, img v1.Image) (builtPlatform, error) {
	bp := builtPlatform{platform: platform}
	m, err := img.Manifest()
	if err != nil {
		return bp, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return bp, err
	}
	if bp.digest, err = img.Digest(); err != nil {
		return bp, err
	}
	bp.compressed = int64(len(raw)) + m.Config.Size
	layers, err := img.Layers()
	if err != nil {
		return bp, err
	}
	for _, l := range layers {
		size, err := l.Size()
		if err != nil {
			return bp, err
		}
		bp.compressed += size
		rc, err := l.Uncompressed()
		if err != nil {
			return bp, err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return bp, err
		}
		bp.uncompressed += n
	}
	return bp, nil
}

// tarFile is a regular file in a tar stream; name is relative to the root.
type tarFile struct {
	name string
	mode int64
	data []byte
}

// writeTar writes files in name order, each preceded by the directories
// above it not yet written, owned by root and dated mtime. Same files, same
// bytes.
func writeTar(w io.Writer, files []tarFile, mtime time.Time) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b tarFile) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	dirs := map[string]bool{".": true}
	var addDir func(dir string) error
	addDir = func(dir string) error {
		if dirs[dir] {
			return nil
		}
		if err := addDir(path.Dir(dir)); err != nil {
			return err
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
	}
	for _, f := range files {
		if err := addDir(path.Dir(f.name)); err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeLayoutTar writes idx as an OCI image layout (oci-layout, index.json
// naming idx with annotations, blobs/) into the tarball dest, atomically.
func writeLayoutTar(dest string, idx v1.ImageIndex, annotations map[string]string, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(dest), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(annotations)); err != nil {
		return err
	}
	var files []tarFile
	err = filepath.WalkDir(dir, func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, file)
		files = append(files, tarFile{name: filepath.ToSlash(rel), mode: 0o644, data: data})
		return err
	})
	if err != nil {
		return err
	}
	tmp := dest + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := writeTar(f, files, mtime); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}
