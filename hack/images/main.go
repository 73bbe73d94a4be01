// Command edgeota-images is `make images`: it packs the binaries the
// Makefile cross-compiled (one directory per platform, every main package
// under cmd/ but the Makefile's NO_IMAGE) into one OCI image-layout tarball
// per binary, bin/images/NAME.tar, each holding an image index with one
// image per platform. It writes the kustomize overlay bin/images/deploy/, which runs
// deploy/ with the exact tags and digests built, and prints each image's size
// per platform.
//
// Each image is the static binary on an empty base: no shell, no package
// manager, no CA bundle, no /etc/passwd. Nothing else is needed at run time:
// the binaries verify TLS only against CAs they are given (the service
// account's ca.crt, a kubeconfig's certificate-authority, --client-ca-file),
// run as the numeric user 65532:65532 without looking it up, and log in UTC.
// Beside the binary, /licenses holds edgeota's LICENSE and the license
// notices of every module linked into that binary (read from the binary's own
// build information and the Go module cache, so it works offline).
//
// Everything is reproducible: file times, the config's created and the
// build date come from SOURCE_DATE_EPOCH (the commit time), tar entries are
// sorted with fixed owners and modes, so two builds of a commit give the same
// bytes and digests.
//
// Files: main.go, the flags and the run; image.go, the layers, config, index
// and layout tarball; notices.go, the license notices of what a binary links;
// overlay.go, the kustomize overlay and the size report; images_test.go runs
// `make images` twice and checks every image (make test-images).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// options are the Makefile's inputs to one run.
type options struct {
	root       string   // the edgeota checkout (go.mod, LICENSE, deploy/)
	binaries   string   // holds OS_ARCH/NAME for each platform
	out        string   // receives NAME.tar and deploy/
	repository string   // image names are REPOSITORY/NAME
	version    string   // the image tag and org.opencontainers.image.version
	revision   string   // the git commit
	platforms  []string // OS/ARCH, in index order
	created    time.Time
}

func main() {
	var o options
	var epoch, platforms string
	flag.StringVar(&o.root, "root", ".", "the edgeota checkout: go.mod, LICENSE and deploy/")
	flag.StringVar(&o.binaries, "binaries", "", "directory holding OS_ARCH/NAME, the static binaries of each platform")
	flag.StringVar(&o.out, "out", "", "output directory: NAME.tar for each binary and the overlay deploy/")
	flag.StringVar(&o.repository, "repository", "docker.io/edgeota", "registry and namespace of the image names")
	flag.StringVar(&o.version, "version", "", "release version: the image tag (the VERSION file)")
	flag.StringVar(&o.revision, "revision", "", "git commit the binaries were built from; empty outside git")
	flag.StringVar(&epoch, "source-date-epoch", "", "commit time, seconds since 1970: every timestamp in the images")
	flag.StringVar(&platforms, "platforms", "linux/amd64 linux/arm64", "OS/ARCH list, space-separated")
	flag.Parse()
	o.platforms = strings.Fields(platforms)
	err := o.parseEpoch(epoch)
	if err == nil {
		err = o.validate()
	}
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgeota-images:", err)
		os.Exit(1)
	}
}

func (o *options) parseEpoch(epoch string) error {
	seconds, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || seconds < 0 {
		return fmt.Errorf("-source-date-epoch %q is not a number of seconds since 1970 (outside git, set SOURCE_DATE_EPOCH)", epoch)
	}
	o.created = time.Unix(seconds, 0).UTC()
	return nil
}

func (o options) validate() error {
	switch {
	case o.binaries == "" || o.out == "":
		return errors.New("-binaries and -out are required")
	case !validTag(o.version):
		return fmt.Errorf("-version %q is not a valid image tag (the VERSION file, e.g. v0.1.0)", o.version)
	case len(o.platforms) == 0:
		return errors.New("-platforms is empty")
	}
	for _, p := range o.platforms {
		if os, arch, ok := strings.Cut(p, "/"); !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return fmt.Errorf("-platforms: %q is not OS/ARCH", p)
		}
	}
	return nil
}

// validTag reports whether tag is a valid image tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
func validTag(tag string) bool {
	if tag == "" || len(tag) > 128 || tag[0] == '.' || tag[0] == '-' {
		return false
	}
	for _, c := range tag {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func run(o options) error {
	env, err := goEnv()
	if err != nil {
		return err
	}
	module, err := modulePath(filepath.Join(o.root, "go.mod"))
	if err != nil {
		return err
	}
	license, err := os.ReadFile(filepath.Join(o.root, "LICENSE"))
	if err != nil {
		return fmt.Errorf("reading edgeota's license: %w", err)
	}
	names, err := binaryNames(o.binaries, o.platforms)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	spec := imageSpec{
		repository: o.repository,
		version:    o.version,
		revision:   o.revision,
		source:     "https://" + module,
		created:    o.created,
		license:    license,
		env:        env,
	}
	var built []builtImage
	for _, name := range names {
		b, err := spec.build(name, o.binaries, o.platforms, filepath.Join(o.out, name+".tar"))
		if err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		built = append(built, b)
	}
	overlay, err := writeOverlay(o.out, filepath.Join(o.root, "deploy"), built)
	if err != nil {
		return err
	}
	report(os.Stdout, built)
	fmt.Printf("overlay with these tags and digests: %s (kubectl apply -k %s)\n", overlay, filepath.Dir(overlay))
	return nil
}

// binaryNames lists the binaries of the first platform's directory and checks
// that every platform has exactly the same ones.
func binaryNames(dir string, platforms []string) ([]string, error) {
	var names []string
	for i, p := range platforms {
		entries, err := os.ReadDir(filepath.Join(dir, platformDir(p)))
		if err != nil {
			return nil, fmt.Errorf("binaries for %s: %w", p, err)
		}
		var these []string
		for _, e := range entries {
			if e.Type().IsRegular() {
				these = append(these, e.Name())
			}
		}
		if len(these) == 0 {
			return nil, fmt.Errorf("no binaries for %s in %s", p, filepath.Join(dir, platformDir(p)))
		}
		if i > 0 && strings.Join(these, " ") != strings.Join(names, " ") {
			return nil, fmt.Errorf("%s has binaries %v but %s has %v", platforms[0], names, p, these)
		}
		names = these
	}
	return names, nil
}

// platformDir is where the Makefile puts a platform's binaries: linux/arm64 → linux_arm64.
func platformDir(platform string) string { return strings.ReplaceAll(platform, "/", "_") }
