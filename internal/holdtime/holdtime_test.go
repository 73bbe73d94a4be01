package holdtime

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"2h", 2 * time.Hour},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"3d", 72 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5h", 90 * time.Minute},
		{"45s", 45 * time.Second},
		{"30d", Max},
		{"720h", Max},
	} {
		if got, err := ParseDuration(tc.in); err != nil || got != tc.want {
			t.Errorf("%q: got %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty duration"},
		{"2", "want one or more"},
		{"h", "want one or more"},
		{"2 h", "want one or more"},
		{"-2h", "want one or more"},
		{"2w", "want one or more"},
		{"1..5h", "want one or more"},
		{"2H", "want one or more"},
		{"0s", "more than zero"},
		{"0d0h", "more than zero"},
		{"31d", "more than 30 days (720h), the longest hold"},
		{"720h1s", "the longest hold"},
		{strings.Repeat("9", 400) + "d", "the longest hold"},
		{strings.Repeat("1h", 10000), "the longest hold"},
		{"2h\n", "want one or more"},
	} {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%q: got a %d-byte error, want the value cut short", tc.in, len(err.Error()))
		}
	}
}
