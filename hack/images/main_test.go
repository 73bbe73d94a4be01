package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRejectsBadOptions: options as the Makefile gives them pass, and each
// bad one is refused with an error naming what is wrong.
func TestRejectsBadOptions(t *testing.T) {
	valid := options{binaries: "b", out: "o", version: "v0.1.0", platforms: []string{"linux/amd64", "linux/arm64"}}
	if err := valid.validate(); err != nil {
		t.Fatalf("valid options: got %v, want nil", err)
	}
	for _, bad := range []struct {
		name   string
		change func(*options)
		want   string
	}{
		{"no output", func(o *options) { o.out = "" }, "-binaries and -out are required"},
		{"no version", func(o *options) { o.version = "" }, "not a valid image tag"},
		{"version with a slash", func(o *options) { o.version = "v0.1/0" }, "not a valid image tag"},
		{"version starting with a dot", func(o *options) { o.version = ".v1" }, "not a valid image tag"},
		{"version too long", func(o *options) { o.version = strings.Repeat("1", 129) }, "not a valid image tag"},
		{"no platforms", func(o *options) { o.platforms = nil }, "-platforms is empty"},
		{"platform without an OS", func(o *options) { o.platforms = []string{"/amd64"} }, `"/amd64" is not OS/ARCH`},
		{"platform with a variant", func(o *options) { o.platforms = []string{"linux/arm/v7"} }, `"linux/arm/v7" is not OS/ARCH`},
	} {
		o := valid
		bad.change(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want an error containing %q", bad.name, err, bad.want)
		}
	}
}

func TestRejectsBadSourceDateEpoch(t *testing.T) {
	for _, epoch := range []string{"", "yesterday", "-1"} {
		var o options
		if err := o.parseEpoch(epoch); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
			t.Errorf("got %v for %q, want an error naming SOURCE_DATE_EPOCH", err, epoch)
		}
	}
}

// TestRejectsPlatformsWithDifferentBinaries proves that a platform whose
// build is missing a binary fails the build instead of shipping an index
// without that platform.
func TestRejectsPlatformsWithDifferentBinaries(t *testing.T) {
	dir := t.TempDir()
	for file, data := range map[string]string{"linux_amd64/ota-server": "x", "linux_amd64/otactl": "x", "linux_arm64/ota-server": "x"} {
		path := filepath.Join(dir, file)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := binaryNames(dir, []string{"linux/amd64", "linux/arm64"})
	if want := "linux/amd64 has binaries [ota-server otactl] but linux/arm64 has [ota-server]"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	names, err := binaryNames(dir, []string{"linux/amd64"})
	if err != nil || strings.Join(names, " ") != "ota-server otactl" {
		t.Errorf("got %v, %v, want [ota-server otactl]", names, err)
	}
}
