package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRejectsBadOptions(t *testing.T) {
	base := options{binaries: "b", out: "o", version: "v0.1.0", platforms: []string{"linux/amd64", "linux/arm64"}}
	cases := []struct {
		name    string
		change  func(*options)
		wantErr string // "" means valid
	}{
		{name: "valid", change: func(*options) {}},
		{name: "no output", change: func(o *options) { o.out = "" }, wantErr: "-binaries and -out are required"},
		{name: "no version", change: func(o *options) { o.version = "" }, wantErr: "not a valid image tag"},
		{name: "version with a slash", change: func(o *options) { o.version = "v0.1/0" }, wantErr: "not a valid image tag"},
		{name: "version starting with a dot", change: func(o *options) { o.version = ".v1" }, wantErr: "not a valid image tag"},
		{name: "version too long", change: func(o *options) { o.version = strings.Repeat("1", 129) }, wantErr: "not a valid image tag"},
		{name: "no platforms", change: func(o *options) { o.platforms = nil }, wantErr: "-platforms is empty"},
		{name: "platform without an OS", change: func(o *options) { o.platforms = []string{"/amd64"} }, wantErr: `"/amd64" is not OS/ARCH`},
		{name: "platform with a variant", change: func(o *options) { o.platforms = []string{"linux/arm/v7"} }, wantErr: `"linux/arm/v7" is not OS/ARCH`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			err := o.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
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
