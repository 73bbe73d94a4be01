package health

import (
	"testing"
	"time"
)

func TestParseProgressDeadline(t *testing.T) {
	for value, want := range map[string]time.Duration{"1": time.Second, "600": 10 * time.Minute, " 30 ": 30 * time.Second} {
		if got, err := ParseProgressDeadline(value); err != nil || got != want {
			t.Errorf("%q: got %s, %v; want %s", value, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "1.5", "10m", "99999999999"} {
		if got, err := ParseProgressDeadline(bad); err == nil {
			t.Errorf("%q: got %s, want an error", bad, got)
		}
	}
}
