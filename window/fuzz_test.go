package window

import (
	"testing"
	"time"
)

// fuzzZones are the node zones FuzzParse picks from: none, UTC, zones with
// daylight saving on both hemispheres, a 30-minute shift, and Samoa, which
// skipped a whole day in 2011.
var fuzzZones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata"}

// FuzzParse: Parse never panics; a valid schedule renders to a canonical form
// that reads back to itself, and At is consistent: the answer holds until
// next, and flips there.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00",
		"Sat 22:00-02:00",
		"Sun 02:30-04:00 Europe/Berlin",
		"Sun 01:30-04:00 America/New_York\nFri-Mon 9:00-00:00",
		"daily 00:00-24:00",
		"daily 00:00-12:00 Europe/Berlin; daily 11:00-23:15 UTC",
		"* 23:59-00:01 Pacific/Apia",
		"Mon,,Wed 22:00-25:00 Local",
	} {
		f.Add(seed, int64(1743298200), uint8(0))
	}
	f.Fuzz(func(t *testing.T, value string, seconds int64, zone uint8) {
		s, err := Parse(value)
		if err != nil {
			return
		}
		canonical := s.String()
		again, err := Parse(canonical)
		if err != nil || again.String() != canonical {
			t.Fatalf("Parse(%q).String() = %q reads back as %q, %v", value, canonical, again.String(), err)
		}
		var node *time.Location
		if name := fuzzZones[int(zone)%len(fuzzZones)]; name != "" {
			if node, err = LoadZone(name); err != nil {
				t.Fatal(err)
			}
		}
		// Any second from 1970 to 2200: the zone database's range.
		const span = 230 * 365 * 24 * 3600
		at := time.Unix((seconds%span+span)%span, 0).UTC()
		open, next := s.At(at, node)
		if next.IsZero() {
			return
		}
		if !next.After(at) {
			t.Fatalf("%q.At(%s): got next %s, want it later", canonical, at, next)
		}
		before := next.Add(-time.Second)
		if o, n := s.At(before, node); o != open || !n.Equal(next) {
			t.Fatalf("%q.At(%s) = %v, %s but At(%s) = %v, %s", canonical, at, open, next, before, o, n)
		}
		if o, _ := s.At(next, node); o == open {
			t.Fatalf("%q.At(%s) = %v, %s, and still %v at %s", canonical, at, open, next, o, next)
		}
	})
}
