package window

import (
	"testing"
	"time"
)

// atCase is one question to a schedule: is it open at this instant, for a
// node in this zone ("" for none), and when does that change ("" for never).
type atCase struct {
	name     string
	schedule string
	node     string
	at       string
	open     bool
	next     string
}

func (c atCase) check(t *testing.T) {
	t.Helper()
	s, err := Parse(c.schedule)
	if err != nil {
		t.Fatalf("%s: Parse(%q): %v", c.name, c.schedule, err)
	}
	var node *time.Location
	if c.node != "" {
		if node, err = LoadZone(c.node); err != nil {
			t.Fatal(err)
		}
	}
	at := mustTime(t, c.at)
	open, next := s.At(at, node)
	var want time.Time
	if c.next != "" {
		want = mustTime(t, c.next)
	}
	if open != c.open || !next.Equal(want) {
		t.Errorf("%s: %q.At(%s, node zone %q): got %v, %s, want %v, %s", c.name, c.schedule, c.at, c.node, open, show(next), c.open, show(want))
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func show(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// TestAtOvernight: a window past midnight belongs to the day it starts on.
// 2025-01-04 is a Saturday.
func TestAtOvernight(t *testing.T) {
	for _, c := range []atCase{
		{"second day", "Sat 22:00-02:00", "", "2025-01-05T01:00:00Z", true, "2025-01-05T02:00:00Z"},
		{"just before", "Sat 22:00-02:00", "", "2025-01-04T21:59:59Z", false, "2025-01-04T22:00:00Z"},
		{"at its start", "Sat 22:00-02:00", "", "2025-01-04T22:00:00Z", true, "2025-01-05T02:00:00Z"},
		{"at its end, the next one a week later", "Sat 22:00-02:00", "", "2025-01-05T02:00:00Z", false, "2025-01-11T22:00:00Z"},
		{"the night before is not listed", "Sat 22:00-02:00", "", "2025-01-04T01:00:00Z", false, "2025-01-04T22:00:00Z"},
		{"second day, local time", "Sat 22:00-02:00 Europe/Berlin", "", "2025-01-05T00:00:00Z", true, "2025-01-05T01:00:00Z"},
		{"to midnight", "Sat 22:00-00:00", "", "2025-01-04T23:59:00Z", true, "2025-01-05T00:00:00Z"},
		{"Sunday night into Monday", "Sun 23:00-01:00", "", "2025-01-05T23:30:00Z", true, "2025-01-06T01:00:00Z"},
	} {
		c.check(t)
	}
}

// TestAtNext: next is the next opening or closing across days, weeks and
// years, and merges overlapping and adjacent windows.
func TestAtNext(t *testing.T) {
	for _, c := range []atCase{
		{"next week", "Mon 09:00-10:00", "", "2025-01-06T10:00:00Z", false, "2025-01-13T09:00:00Z"},
		{"next year", "Mon 09:00-10:00", "", "2025-12-29T10:00:00Z", false, "2026-01-05T09:00:00Z"},
		{"over the weekend", "Fri-Mon 10:00-11:00", "", "2025-01-07T12:00:00Z", false, "2025-01-10T10:00:00Z"},
		{"wrapping range, Monday", "Fri-Mon 10:00-11:00", "", "2025-01-06T10:30:00Z", true, "2025-01-06T11:00:00Z"},
		{"wrapping range, Thursday", "Fri-Mon 10:00-11:00", "", "2025-01-09T10:30:00Z", false, "2025-01-10T10:00:00Z"},
		{"Saturday, Sunday's window", "Sun 23:00-01:00", "", "2025-01-04T12:00:00Z", false, "2025-01-05T23:00:00Z"},
		{"the earliest of several", "Wed 08:00-09:00; Tue 20:00-21:00; daily 23:00-23:30", "", "2025-01-07T12:00:00Z", false, "2025-01-07T20:00:00Z"},
		{"adjacent windows merge", "Mon 22:00-24:00; Tue 00:00-02:00", "", "2025-01-06T23:00:00Z", true, "2025-01-07T02:00:00Z"},
		{"overlapping windows merge", "daily 08:00-12:00; daily 10:00-14:00", "", "2025-01-06T09:00:00Z", true, "2025-01-06T14:00:00Z"},
		{"a window inside another", "daily 08:00-18:00; Mon 10:00-11:00", "", "2025-01-06T10:30:00Z", true, "2025-01-06T18:00:00Z"},
		// Fri 22:00 CET (21:00Z) to Sat 04:00 CET, then Saturday and Sunday
		// in UTC: open from Friday night to Monday 00:00Z.
		{"the issue's example, merged over the weekend", "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00", "", "2025-01-10T21:30:00Z", true, "2025-01-13T00:00:00Z"},
		{"the issue's example, Monday", "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00", "", "2025-01-13T00:00:00Z", false, "2025-01-13T21:00:00Z"},
	} {
		c.check(t)
	}
}

// TestAtAlwaysOpen: a schedule open all week never changes.
func TestAtAlwaysOpen(t *testing.T) {
	for _, c := range []atCase{
		{"one window", "daily 00:00-24:00", "", "2025-03-30T01:30:00Z", true, ""},
		{"weekdays and weekend", "Mon-Fri 00:00-24:00; Sat,Sun 00:00-24:00", "", "2025-01-06T10:00:00Z", true, ""},
		{"overnight windows", "daily 12:00-06:00; daily 06:00-12:00", "", "2025-01-06T10:00:00Z", true, ""},
		{"across daylight saving", "daily 00:00-24:00 Europe/Berlin", "", "2025-10-26T01:30:00Z", true, ""},
		{"in the node's zone", "daily 00:00-24:00 Europe/Berlin", "America/New_York", "2025-11-02T06:30:00Z", true, ""},
		// Tokyo 00:00-14:00 is 15:00Z-05:00Z; with UTC 04:00-24:00 the day
		// is covered, and neither zone has daylight saving.
		{"two zones between them", "daily 00:00-14:00 Asia/Tokyo; daily 04:00-24:00 UTC", "", "2025-01-15T12:00:00Z", true, ""},
		// Berlin 00:00-12:00 is 23:00Z-11:00Z in winter, 22:00Z-10:00Z in
		// summer: with UTC 11:00-23:15 the winter is covered, and the first
		// gap is 10:00Z-11:00Z on the day summer time starts.
		{"two zones, until summer time", "daily 00:00-12:00 Europe/Berlin; daily 11:00-23:15 UTC", "", "2025-01-15T12:00:00Z", true, "2025-03-30T10:00:00Z"},
		{"two zones read in the node's", "daily 00:00-12:00 Europe/Berlin; daily 11:00-23:15 UTC", "UTC", "2025-01-15T12:00:00Z", true, "2025-01-15T23:15:00Z"},
	} {
		c.check(t)
	}
}

// TestAtDaylightSaving: a start in a spring-forward gap takes effect right
// after the gap; in a fall-back overlap a window opens at the first
// occurrence of its start and closes at the last occurrence of its end.
func TestAtDaylightSaving(t *testing.T) {
	for _, c := range []atCase{
		// Europe/Berlin, 2025-03-30: 02:00 CET (01:00Z) jumps to 03:00 CEST.
		{"Berlin, start in the gap", "Sun 02:30-04:00 Europe/Berlin", "", "2025-03-30T00:30:00Z", false, "2025-03-30T01:00:00Z"},
		{"Berlin, open after the gap", "Sun 02:30-04:00 Europe/Berlin", "", "2025-03-30T01:00:00Z", true, "2025-03-30T02:00:00Z"},
		{"Berlin, window inside the gap skipped", "Sun 02:00-02:30 Europe/Berlin", "", "2025-03-30T00:30:00Z", false, "2025-04-06T00:00:00Z"},
		{"Berlin, end in the gap", "Sat 23:00-02:30 Europe/Berlin", "", "2025-03-30T00:45:00Z", true, "2025-03-30T01:00:00Z"},
		{"Berlin, next opening a week later in summer time", "Sun 03:00-04:00 Europe/Berlin", "", "2025-03-23T03:00:00Z", false, "2025-03-30T01:00:00Z"},
		// Europe/Berlin, 2025-10-26: 03:00 CEST (01:00Z) falls back to
		// 02:00 CET; 02:00-03:00 is read from 00:00Z and again from 01:00Z.
		{"Berlin, opens at the first 02:15", "Sun 02:15-02:45 Europe/Berlin", "", "2025-10-26T00:10:00Z", false, "2025-10-26T00:15:00Z"},
		{"Berlin, past the first 02:45", "Sun 02:15-02:45 Europe/Berlin", "", "2025-10-26T00:50:00Z", true, "2025-10-26T01:45:00Z"},
		{"Berlin, the second pass", "Sun 02:15-02:45 Europe/Berlin", "", "2025-10-26T01:20:00Z", true, "2025-10-26T01:45:00Z"},
		{"Berlin, closed at the last 02:45", "Sun 02:15-02:45 Europe/Berlin", "", "2025-10-26T01:45:00Z", false, "2025-11-02T01:15:00Z"},
		// America/New_York, 2025-03-09: 02:00 EST (07:00Z) jumps to 03:00 EDT.
		{"New York, start in the gap", "Sun 02:30-03:30 America/New_York", "", "2025-03-09T06:00:00Z", false, "2025-03-09T07:00:00Z"},
		{"New York, open after the gap", "Sun 02:30-03:30 America/New_York", "", "2025-03-09T07:00:00Z", true, "2025-03-09T07:30:00Z"},
		// America/New_York, 2025-11-02: 02:00 EDT (06:00Z) falls back to
		// 01:00 EST; 01:00-02:00 is read from 05:00Z and again from 06:00Z.
		{"New York, opens at the first 01:30", "Sun 01:30-04:00 America/New_York", "", "2025-11-02T05:00:00Z", false, "2025-11-02T05:30:00Z"},
		{"New York, overnight, closes at the last 01:30", "Sat 23:00-01:30 America/New_York", "", "2025-11-02T06:10:00Z", true, "2025-11-02T06:30:00Z"},
		// Australia/Lord_Howe shifts by 30 minutes. 2025-04-06: 02:00
		// (+11:00, 15:00Z) falls back to 01:30 (+10:30).
		{"Lord Howe, opens at the first 01:45", "Sun 01:45-02:15 Australia/Lord_Howe", "", "2025-04-05T14:00:00Z", false, "2025-04-05T14:45:00Z"},
		{"Lord Howe, closes after the overlap", "Sun 01:45-02:15 Australia/Lord_Howe", "", "2025-04-05T14:45:00Z", true, "2025-04-05T15:45:00Z"},
		// 2025-10-05: 02:00 (+10:30, 15:30Z) jumps to 02:30 (+11:00).
		{"Lord Howe, start in the gap", "Sun 02:10-03:00 Australia/Lord_Howe", "", "2025-10-04T14:00:00Z", false, "2025-10-04T15:30:00Z"},
		{"Lord Howe, open after the gap", "Sun 02:10-03:00 Australia/Lord_Howe", "", "2025-10-04T15:30:00Z", true, "2025-10-04T16:00:00Z"},
		// The node's zone has the transition, the window's does not.
		{"the node's zone's gap", "Sun 02:30-04:00 UTC", "Europe/Berlin", "2025-03-30T00:30:00Z", false, "2025-03-30T01:00:00Z"},
	} {
		c.check(t)
	}
}

// TestAtZones: the node's zone overrides every window's own; without it,
// the window's zone; without that, UTC.
func TestAtZones(t *testing.T) {
	for _, c := range []atCase{
		// 2025-06-01T02:30Z is 22:30 EDT on May 31, 04:30 CEST, 11:30 JST.
		{"node's zone over the window's", "daily 22:00-23:00 Europe/Berlin", "America/New_York", "2025-06-01T02:30:00Z", true, "2025-06-01T03:00:00Z"},
		{"window's zone", "daily 22:00-23:00 Europe/Berlin", "", "2025-06-01T02:30:00Z", false, "2025-06-01T20:00:00Z"},
		{"UTC", "daily 22:00-23:00", "", "2025-06-01T02:30:00Z", false, "2025-06-01T22:00:00Z"},
		{"node's zone over UTC", "daily 22:00-23:00", "Asia/Tokyo", "2025-06-01T02:30:00Z", false, "2025-06-01T13:00:00Z"},
		{"node's zone over every window's", "Mon 22:00-23:00 Europe/Berlin; Tue 22:00-23:00 Asia/Tokyo", "America/New_York", "2025-06-04T02:30:00Z", true, "2025-06-04T03:00:00Z"},
	} {
		c.check(t)
	}
}

// TestAtNextInTheLocationOfT: next is in t's location, for display.
func TestAtNextInTheLocationOfT(t *testing.T) {
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("daily 22:00-23:00")
	if err != nil {
		t.Fatal(err)
	}
	_, next := s.At(time.Date(2025, 6, 1, 12, 0, 0, 0, berlin), nil)
	if next.Location() != berlin || next.Format("15:04 MST") != "00:00 CEST" {
		t.Errorf("got next %s in %s, want 00:00 CEST in Europe/Berlin", next.Format("15:04 MST"), next.Location())
	}
}

// TestZeroScheduleIsAlwaysOpen: a DaemonSet without the annotation has no
// window to wait for.
func TestZeroScheduleIsAlwaysOpen(t *testing.T) {
	if open, next := (Schedule{}).At(time.Now(), nil); !open || !next.IsZero() {
		t.Errorf("got %v, %s, want true, never", open, show(next))
	}
	if got := (Schedule{}).String(); got != "" {
		t.Errorf("got %q, want \"\"", got)
	}
}

// TestAtAllocatesNothing: At runs per node per decision on large fleets.
func TestAtAllocatesNothing(t *testing.T) {
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schedule string
		node     *time.Location
		at       string
	}{
		{"Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00", nil, "2025-01-10T21:30:00Z"},
		{"Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00", berlin, "2025-01-08T12:00:00Z"},
		{"Sun 02:15-02:45 Europe/Berlin", nil, "2025-10-26T01:20:00Z"},
		{"daily 00:00-24:00", nil, "2025-10-26T01:20:00Z"},
	} {
		s, err := Parse(c.schedule)
		if err != nil {
			t.Fatal(err)
		}
		at := mustTime(t, c.at)
		if n := testing.AllocsPerRun(100, func() { s.At(at, c.node) }); n != 0 {
			t.Errorf("%q.At(%s): got %v allocations, want 0", c.schedule, c.at, n)
		}
	}
}

// BenchmarkAt is the cost of one node's decision.
func BenchmarkAt(b *testing.B) {
	s, err := Parse("Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2025, 1, 8, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		s.At(at, nil)
	}
}
