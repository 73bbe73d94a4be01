package main

import (
	"testing"

	"github.com/edgeota/edgeota/rollout"
)

// TestPinLine shows each architecture's canary with its pinned images, and
// why a container could not be pinned.
func TestPinLine(t *testing.T) {
	for _, tc := range []struct {
		arch string
		pin  rollout.Pin
		want string
	}{
		{"arm64", rollout.Pin{Canary: "edge-node-3", Images: map[string]string{"web": "nginx@sha256:ab", "agent": "registry/agent@sha256:cd"}},
			"arm64 to what canary edge-node-3 ran: agent=registry/agent@sha256:cd; web=nginx@sha256:ab"},
		{"", rollout.Pin{Canary: "n1", Unpinnable: map[string]string{"web": "imageID \"sha256:ab\": no digest"}},
			"nodes without kubernetes.io/arch to what canary n1 ran: web not pinned: imageID \"sha256:ab\": no digest"},
	} {
		if got := pinLine(tc.arch, tc.pin); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
