package server

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidatePodRef(t *testing.T) {
	cases := []struct {
		ns, name string
		wantErr  string // "" means valid
	}{
		{"default", "nginx-abc12", ""},
		{"kube-system", "a.b.c", ""},
		{strings.Repeat("a", 63), strings.Repeat("b", 253), ""},
		{"", "p", "pod namespace must not be empty"},
		{"default", "", "pod name must not be empty"},
		{"Default", "p", "invalid pod namespace"},
		{"a.b", "p", "invalid pod namespace"},
		{"default", "P", "invalid pod name"},
		{"default", "a\x00b", "invalid pod name"},
		{"default", "pöd", "invalid pod name"},
		{"default", "..", `must not be the path segment ".."`},
		{".", "p", `must not be the path segment "."`},
		{"default", "a%2fb", "must not contain '/'"},
		{"default", "a/b", "must not contain '/'"},
		{strings.Repeat("a", 64), "p", "no more than 63"},
		{"default", strings.Repeat("b", 254), "no more than 253"},
	}
	for _, tc := range cases {
		err := validatePodRef(tc.ns, tc.name)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("validatePodRef(%q, %q): got %v, want nil", tc.ns, tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("validatePodRef(%q, %q): got %v, want an error containing %q", tc.ns, tc.name, err, tc.wantErr)
		}
	}
}

// FuzzValidatePodRef checks that validation never panics, never accepts what
// cannot be a Kubernetes namespace and name, and keeps its messages short,
// printable and on one line.
func FuzzValidatePodRef(f *testing.F) {
	for _, seed := range [][2]string{{"default", "p"}, {"..", "p"}, {"default", "a%2Fb"}, {"a\x00", "\xff"}, {"ns", strings.Repeat("n", 300)}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, ns, name string) {
		err := validatePodRef(ns, name)
		if err == nil {
			if strings.ContainsAny(ns+name, "/%\x00") || ns == "" || name == "" || len(ns) > 63 || len(name) > 253 {
				t.Fatalf("accepted %q/%q", ns, name)
			}
			return
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\n\r") || !utf8.ValidString(msg) || len(msg) > 1024 {
			t.Fatalf("message not one short printable line: %q", msg)
		}
	})
}
