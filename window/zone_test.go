package window

import (
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

// TestLoadZone: IANA names load (from the embedded database when the system
// has none), once; anything else is an error naming the zone.
func TestLoadZone(t *testing.T) {
	for _, name := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Etc/GMT+5"} {
		loc, err := LoadZone(name)
		if err != nil || loc.String() != name {
			t.Errorf("LoadZone(%q): got %v, %v, want the zone", name, loc, err)
			continue
		}
		if again, _ := LoadZone(name); again != loc {
			t.Errorf("LoadZone(%q) twice: got two locations, want the cached one", name)
		}
	}
	for name, want := range map[string]string{
		"":              `time zone "": want an IANA name such as Europe/Berlin or UTC`,
		"Local":         `time zone "Local": want an IANA name such as Europe/Berlin or UTC`,
		"Europe/Berlim": `time zone "Europe/Berlim": unknown time zone Europe/Berlim; want an IANA name such as Europe/Berlin or UTC (case matters)`,
		"europe/berlin": `time zone "europe/berlin": unknown time zone europe/berlin; want an IANA name such as Europe/Berlin or UTC (case matters)`,
		"../etc/passwd": `time zone "../etc/passwd": time: invalid location name; want an IANA name such as Europe/Berlin or UTC (case matters)`,
	} {
		if loc, err := LoadZone(name); err == nil || err.Error() != want {
			t.Errorf("LoadZone(%q): got %v, %v, want error %q", name, loc, err, want)
		}
	}
}

// TestNodeZone: a node without the annotation has no zone of its own; an
// invalid one is an error naming the annotation.
func TestNodeZone(t *testing.T) {
	if loc, err := NodeZone(map[string]string{"other": "x"}); loc != nil || err != nil {
		t.Errorf("no annotation: got %v, %v, want nil, nil", loc, err)
	}
	if loc, err := NodeZone(map[string]string{rollout.NodeTimeZoneAnnotation: " Asia/Tokyo\n"}); err != nil || loc.String() != "Asia/Tokyo" {
		t.Errorf("Asia/Tokyo: got %v, %v, want Asia/Tokyo", loc, err)
	}
	want := `annotation edgeota.io/time-zone: time zone "Mars/Olympus": unknown time zone Mars/Olympus; want an IANA name such as Europe/Berlin or UTC (case matters)`
	if loc, err := NodeZone(map[string]string{rollout.NodeTimeZoneAnnotation: "Mars/Olympus"}); err == nil || err.Error() != want {
		t.Errorf("Mars/Olympus: got %v, %v, want error %q", loc, err, want)
	}
}

// TestResolve checks the wall-clock resolution on both sides of
// transitions, and in zones without any.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		zone, wall string
		late       bool
		want       string
	}{
		{"UTC", "2025-03-30T02:30:00Z", false, "2025-03-30T02:30:00Z"},
		{"Asia/Kolkata", "2025-03-30T02:30:00Z", true, "2025-03-29T21:00:00Z"},
		{"Europe/Berlin", "2025-03-30T01:59:00Z", false, "2025-03-30T00:59:00Z"},
		{"Europe/Berlin", "2025-03-30T02:00:00Z", false, "2025-03-30T01:00:00Z"},
		{"Europe/Berlin", "2025-03-30T02:59:00Z", true, "2025-03-30T01:00:00Z"},
		{"Europe/Berlin", "2025-03-30T03:00:00Z", false, "2025-03-30T01:00:00Z"},
		{"Europe/Berlin", "2025-10-26T02:00:00Z", false, "2025-10-26T00:00:00Z"},
		{"Europe/Berlin", "2025-10-26T02:00:00Z", true, "2025-10-26T01:00:00Z"},
		{"Europe/Berlin", "2025-10-26T03:00:00Z", false, "2025-10-26T02:00:00Z"},
		{"Europe/Berlin", "2025-10-26T01:59:00Z", true, "2025-10-25T23:59:00Z"},
		// Far past the zone database's table, where Go applies the rule.
		{"Europe/Berlin", "2100-03-28T02:30:00Z", false, "2100-03-28T01:00:00Z"},
		{"Europe/Berlin", "2100-10-31T02:30:00Z", true, "2100-10-31T01:30:00Z"},
	} {
		loc, err := LoadZone(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		got := resolve(loc, mustTime(t, c.wall).Unix(), c.late)
		if want := mustTime(t, c.want).Unix(); got != want {
			t.Errorf("resolve(%s, %s, late %v): got %s, want %s", c.zone, c.wall, c.late, show(time.Unix(got, 0)), c.want)
		}
	}
}

// TestLoadZoneConcurrently: the controller's workers ask for zones at once
// (go test -race checks the cache).
func TestLoadZoneConcurrently(t *testing.T) {
	names := []string{"Europe/Paris", "Asia/Tokyo", "America/Chicago", "Nowhere/Near"}
	done := make(chan error)
	for i := range 8 {
		go func() {
			_, err := LoadZone(names[i%len(names)])
			done <- err
		}()
	}
	failed := 0
	for range 8 {
		if <-done != nil {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("got %d errors from 8 loads, want 2 (Nowhere/Near, twice)", failed)
	}
}
