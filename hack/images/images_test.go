package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// root is the edgeota checkout, two levels above this tools module.
const root = "../.."

// wantPlatforms are the platforms every image index holds, in order.
var wantPlatforms = []string{"linux/amd64", "linux/arm64"}

// elfMachines is each platform's ELF machine.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkout is what the images must say about the commit they were built from.
type checkout struct {
	version  string    // the VERSION file
	revision string    // HEAD, "-dirty" with uncommitted changes
	created  time.Time // HEAD's commit time
	binaries []string  // the binaries with an image: the Makefile's IMAGE_BINARIES
}

func readCheckout(t *testing.T) checkout {
	t.Helper()
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	c := checkout{version: strings.TrimSpace(string(version)), revision: output(t, "git", "-C", root, "rev-parse", "HEAD")}
	if output(t, "git", "-C", root, "status", "--porcelain") != "" {
		c.revision += "-dirty"
	}
	epoch, err := strconv.ParseInt(output(t, "git", "-C", root, "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	c.created = time.Unix(epoch, 0).UTC()
	var mains []string
	for _, p := range strings.Fields(output(t, "go", "-C", root, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./cmd/...")) {
		mains = append(mains, path.Base(p))
	}
	c.binaries = strings.Fields(output(t, "make", "-s", "--no-print-directory", "-C", root, "image-binaries"))
	for _, bin := range c.binaries {
		if !slices.Contains(mains, bin) {
			t.Fatalf("got %s in make image-binaries, want only main packages under cmd/ %v", bin, mains)
		}
	}
	if !slices.Contains(c.binaries, "ota-server") || !slices.Contains(c.binaries, "ota-controller") {
		t.Fatalf("got image binaries %v, want at least ota-server and ota-controller", c.binaries)
	}
	return c
}

// TestMakeImages runs `make images` twice, each into a temporary directory,
// and checks that the builds are identical, that the images are those of the
// binaries the Makefile names (every one under cmd/ but those that never run
// in a cluster) and no other, and that each is what the manual promises
// (docs/operations/deploying.md), after a round trip through a registry.
func TestMakeImages(t *testing.T) {
	c := readCheckout(t)
	first, second := t.TempDir(), t.TempDir()
	makeImages(t, first)
	makeImages(t, second)
	tarballs, err := filepath.Glob(filepath.Join(first, "*.tar"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tarball := range tarballs {
		tarballs[i] = strings.TrimSuffix(filepath.Base(tarball), ".tar")
	}
	if want := slices.Sorted(slices.Values(c.binaries)); !slices.Equal(tarballs, want) {
		t.Errorf("got images %v, want one for each of %v and no other", tarballs, want)
	}

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	for _, bin := range c.binaries {
		t.Run(bin, func(t *testing.T) {
			tarball := filepath.Join(first, bin+".tar")
			if a, b := fileDigest(t, tarball), fileDigest(t, filepath.Join(second, bin+".tar")); a != b {
				t.Fatalf("got %s.tar sha256 %s and %s from two builds, want them equal", bin, a, b)
			}
			idx := checkLayout(t, tarball, bin, c)
			ref, err := name.ParseReference(strings.TrimPrefix(reg.URL, "http://") + "/edgeota/" + bin + ":" + c.version)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.WriteIndex(ref, idx); err != nil {
				t.Fatalf("pushing %s: %v", ref, err)
			}
			manifest, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			for _, desc := range manifest.Manifests {
				platform := desc.Platform.OS + "/" + desc.Platform.Architecture
				t.Run(platform, func(t *testing.T) {
					pulled, err := remote.Image(ref, remote.WithPlatform(*desc.Platform))
					if err != nil {
						t.Fatalf("pulling %s for %s: %v", ref, platform, err)
					}
					if got, err := pulled.Digest(); err != nil || got != desc.Digest {
						t.Fatalf("got digest %v (%v) pulling %s for %s, want %s", got, err, ref, platform, desc.Digest)
					}
					checkImage(t, pulled, bin, desc.Platform.Architecture, c)
				})
			}
		})
	}
	checkOverlay(t, first, c)
}

// makeImages runs make images into dir and logs what it printed (the sizes).
func makeImages(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "images", "IMAGES_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	t.Logf("make images IMAGES_DIR=%s: %s\n%s", dir, time.Since(start).Round(time.Second), out)
}

// checkLayout checks the layout tarball's index.json, which names the image
// index for docker load, ctr import and kind load, and returns that index.
func checkLayout(t *testing.T, tarball, bin string, c checkout) v1.ImageIndex {
	t.Helper()
	l, err := layout.ImageIndexFromPath(extracted(t, tarball))
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("got %d descriptors in index.json, want 1", len(top.Manifests))
	}
	desc := top.Manifests[0]
	wantAnnotations := map[string]string{
		"org.opencontainers.image.ref.name": c.version,
		"io.containerd.image.name":          "docker.io/edgeota/" + bin + ":" + c.version,
	}
	if desc.MediaType != types.OCIImageIndex || !maps.Equal(desc.Annotations, wantAnnotations) {
		t.Errorf("got index.json descriptor %s %v, want %s %v", desc.MediaType, desc.Annotations, types.OCIImageIndex, wantAnnotations)
	}
	idx, err := l.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range manifest.Manifests {
		if m.Platform == nil || m.MediaType != types.OCIManifestSchema1 {
			t.Fatalf("got index entry %s with platform %v, want an OCI image manifest with a platform", m.MediaType, m.Platform)
		}
		platforms = append(platforms, m.Platform.String())
	}
	if !slices.Equal(platforms, wantPlatforms) {
		t.Errorf("got platforms %v, want %v", platforms, wantPlatforms)
	}
	return idx
}

// checkImage checks one platform's image: config, files, binary.
func checkImage(t *testing.T, img v1.Image, bin, arch string, c checkout) {
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    bin,
		"org.opencontainers.image.source":   "https://github.com/edgeota/edgeota",
		"org.opencontainers.image.version":  c.version,
		"org.opencontainers.image.revision": c.revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  c.created.Format(time.RFC3339),
	}
	if cfg.OS != "linux" || cfg.Architecture != arch {
		t.Errorf("got config platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if !cfg.Created.Time.Equal(c.created) {
		t.Errorf("got created %s, want the commit time %s", cfg.Created.Time, c.created)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("got user %q, want 65532:65532", cfg.Config.User)
	}
	if want := []string{"/" + bin}; !slices.Equal(cfg.Config.Entrypoint, want) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("got entrypoint %q and cmd %q, want %q and none", cfg.Config.Entrypoint, cfg.Config.Cmd, want)
	}
	if !maps.Equal(cfg.Config.Labels, wantLabels) {
		t.Errorf("got labels %v, want %v", cfg.Config.Labels, wantLabels)
	}

	files := imageFiles(t, img, c.created)
	exe, ok := files[bin]
	if !ok {
		t.Fatalf("got no /%s in the image", bin)
	}
	checkFiles(t, files, bin, exe.data)
	checkBinary(t, exe.data, bin, arch, c)
}

// imageFile is a regular file or directory of an image's filesystem.
type imageFile struct {
	dir  bool
	mode int64
	data []byte
}

// imageFiles reads img's flattened filesystem, checking that every entry is
// a root-owned file or directory dated at the commit time.
func imageFiles(t *testing.T, img v1.Image, created time.Time) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(created) {
			t.Errorf("got %s owned by %d:%d dated %s, want 0:0 and the commit time %s", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, created)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			files[strings.TrimSuffix(hdr.Name, "/")] = imageFile{dir: true, mode: hdr.Mode}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = imageFile{mode: hdr.Mode, data: data}
		default:
			t.Errorf("got %s of tar type %q, want only files and directories (no links, no devices)", hdr.Name, hdr.Typeflag)
		}
	}
}

// checkFiles checks that the image holds exactly the binary, edgeota's
// LICENSE and, for the Go standard library and each module the binary
// links, that module's own license files, listed in MODULES; nothing else,
// so no shell.
func checkFiles(t *testing.T, files map[string]imageFile, bin string, exe []byte) {
	t.Helper()
	info, err := buildinfo.Read(bytes.NewReader(exe))
	if err != nil {
		t.Fatalf("reading the build information of /%s: %v", bin, err)
	}
	goroot := output(t, "go", "env", "GOROOT")
	modcache := output(t, "go", "env", "GOMODCACHE")
	sources := map[string]string{"go": goroot} // module path in the image → its source directory
	wantModules := []string{"go " + info.GoVersion}
	for _, dep := range info.Deps {
		m := dep
		if dep.Replace != nil {
			m = dep.Replace
		}
		dir, err := moduleDir(modcache, m.Path, m.Version)
		if err != nil {
			t.Fatal(err)
		}
		sources[dep.Path] = dir
		wantModules = append(wantModules, dep.Path+" "+m.Version)
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{bin: exe, "licenses/LICENSE": license,
		"licenses/third_party/MODULES": []byte(strings.Join(wantModules, "\n") + "\n")}
	licensed := map[string]bool{}
	for file, f := range files {
		rest, thirdParty := strings.CutPrefix(file, "licenses/third_party/")
		if f.dir || !thirdParty || want[file] != nil {
			continue
		}
		// The longest module path that holds the file, as nested modules do.
		module := ""
		for m := range sources {
			if strings.HasPrefix(rest, m+"/") && len(m) > len(module) {
				module = m
			}
		}
		if module == "" || strings.Contains(strings.TrimPrefix(rest, module+"/"), "/") {
			t.Errorf("got /%s, which is no module's top-level file", file)
			continue
		}
		base := path.Base(rest)
		source, err := os.ReadFile(filepath.Join(sources[module], base))
		if err != nil {
			t.Errorf("got /%s, not a file of %s: %v", file, module, err)
			continue
		}
		want[file] = source
		upper := strings.ToUpper(base)
		licensed[module] = licensed[module] || strings.HasPrefix(upper, "LICEN") || strings.HasPrefix(upper, "COPYING")
	}
	for m := range sources {
		if !licensed[m] {
			t.Errorf("got no license file of %s in /licenses/third_party/%s", m, m)
		}
	}
	for file, f := range files {
		if f.dir {
			continue
		}
		data, ok := want[file]
		switch {
		case !ok:
			t.Errorf("got /%s in the image, want only the binary and license files", file)
		case !bytes.Equal(f.data, data):
			t.Errorf("got /%s of %d bytes, not the %d bytes of its source", file, len(f.data), len(data))
		case file == bin && f.mode != 0o555:
			t.Errorf("got /%s mode %o, want 0555", file, f.mode)
		case file != bin && f.mode != 0o444:
			t.Errorf("got /%s mode %o, want 0444 (only the binary is executable: no shell, no tools)", file, f.mode)
		}
	}
	for file := range want {
		if _, ok := files[file]; !ok {
			t.Errorf("got no /%s in the image", file)
		}
	}
	for file, f := range files {
		if !f.dir {
			continue
		}
		if f.mode != 0o755 || !slices.ContainsFunc(slices.Collect(maps.Keys(want)), func(w string) bool { return strings.HasPrefix(w, file+"/") }) {
			t.Errorf("got directory /%s mode %o, want 0755 and only above the files", file, f.mode)
		}
	}
}

// checkBinary checks that the binary is a static ELF for arch and, on this
// machine's architecture, that it runs and reports the build.
func checkBinary(t *testing.T, exe []byte, bin, arch string, c checkout) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatalf("/%s is not an ELF file: %v", bin, err)
	}
	if f.Machine != elfMachines[arch] {
		t.Errorf("got ELF machine %s, want %s", f.Machine, elfMachines[arch])
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("got a program interpreter in /%s, want a static binary (the image has no libc)", bin)
		}
	}
	if arch != runtime.GOARCH {
		return
	}
	file := filepath.Join(t.TempDir(), bin)
	if err := os.WriteFile(file, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.Read(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	got := output(t, file, "--version")
	want := fmt.Sprintf("%s %s\ncommit: %s\nbuild date: %s\ngo: %s linux/%s",
		bin, c.version, c.revision, c.created.Format(time.RFC3339), info.GoVersion, arch)
	if got != want {
		t.Errorf("got %s --version\n%s\nwant\n%s", bin, got, want)
	}
}

// checkOverlay checks that the overlay make images wrote runs deploy/ with
// the images it built, by tag and digest.
func checkOverlay(t *testing.T, out string, c checkout) {
	t.Helper()
	var want []string
	for _, bin := range deployedImages(t, filepath.Join(root, "deploy")) {
		bin = strings.TrimPrefix(bin[:strings.LastIndex(bin, ":")], "edgeota/")
		l, err := layout.ImageIndexFromPath(extracted(t, filepath.Join(out, bin+".tar")))
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "docker.io/edgeota/"+bin+":"+c.version+"@"+m.Manifests[0].Digest.String())
	}
	if got := deployedImages(t, filepath.Join(out, "deploy")); !slices.Equal(got, want) {
		t.Errorf("got images %v from kubectl kustomize %s/deploy, want %v", got, out, want)
	}
}

// TestDeployNamesImagesByVersion checks that deploy/ runs the images of the
// VERSION file's tag: an image of each deployed binary, never :latest.
func TestDeployNamesImagesByVersion(t *testing.T) {
	c := readCheckout(t)
	var want []string
	for _, bin := range []string{"ota-controller", "ota-server"} {
		want = append(want, "edgeota/"+bin+":"+c.version)
	}
	if got := deployedImages(t, filepath.Join(root, "deploy")); !slices.Equal(got, want) {
		t.Errorf("got images %v from kubectl kustomize deploy/, want %v", got, want)
	}
}

// imageLine matches a container's image in kustomize's YAML output.
var imageLine = regexp.MustCompile(`(?m)^\s*image: (\S+)$`)

// deployedImages returns the sorted, distinct images that kubectl kustomize
// dir renders, with bin/kubectl from make tools.
func deployedImages(t *testing.T, dir string) []string {
	t.Helper()
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("%v: run make tools (make test-images does)", err)
	}
	var images []string
	for _, m := range imageLine.FindAllStringSubmatch(output(t, kubectl, "kustomize", dir), -1) {
		images = append(images, m[1])
	}
	slices.Sort(images)
	return slices.Compact(images)
}

// output runs a command and returns its standard output, trimmed.
func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

func fileDigest(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}

// extracted unpacks a layout tarball into a temporary directory.
func extracted(t *testing.T, tarball string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("got tar entry %q outside the archive's root", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, data, 0o644)
			}
		default:
			t.Fatalf("got tar entry %s of type %q in the layout, want files and directories", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
