// Package window is the calendar of edgeota's maintenance windows: it parses
// a DaemonSet's edgeota.io/maintenance-window annotation into a Schedule,
// resolves the time zone a node's windows are read in (the node's
// edgeota.io/time-zone, else the window's own zone, else UTC), and tells for
// any instant whether a node's window is open and when that next changes, so
// that the controller can requeue a DaemonSet for the next opening instead of
// polling.
//
// A window past midnight belongs to the day it starts on: "Sat 22:00-02:00"
// is open on Sunday at 01:00. Daylight saving is resolved explicitly, never
// left to time.Date: a wall time that falls in a spring-forward gap takes
// effect when the gap ends, and in a fall-back overlap a window opens at the
// first occurrence of its start and closes at the last occurrence of its end.
//
// At is called per node per decision on fleets of 10,000 nodes and more: it
// allocates nothing, and LoadZone caches the zones it loaded.
package window

import (
	"time"
)

// Schedule is a parsed maintenance-window annotation: a set of weekly
// windows. It is immutable and safe for concurrent use. The zero Schedule
// has no windows and places no restriction: it is always open.
type Schedule struct {
	windows []spec
	// fullWeek reports that the windows together cover every minute of the
	// week in wall-clock time, and oneZone that they share one zone: read in
	// a single zone, such a schedule is always open whatever daylight saving
	// does, which At answers without a search.
	fullWeek bool
	oneZone  bool
}

// spec is one window: the days it starts on, and its start and end as
// minutes of the day.
type spec struct {
	days  uint8 // bit 1<<time.Weekday for each day the window starts on
	start int   // 0 (00:00) to 1439 (23:59)
	end   int   // 1 (00:01) to 1440 (24:00); at or before start: on the next day
	zone  *time.Location
}

// Bounds of At's searches. A schedule's windows recur every week, so the
// next opening of each is within two weeks even when daylight saving empties
// one occurrence; a schedule open without a break for more than
// alwaysOpenHorizon (only possible when windows in different zones cover the
// whole week between them) is reported as never closing: a zone that has not
// changed its offset within a year has no daylight saving to close it.
const (
	openingSearchDays = 15
	alwaysOpenHorizon = 400 * 24 * 3600
)

// At reports whether the schedule is open at t for a node in nodeZone (nil
// when the node names none: each window's own zone applies, else UTC), and
// next, when that answer changes: the closing if open, the next opening if
// closed; the zero Time if it never changes (an always-open schedule). next
// is in t's location. Windows are half-open: open at their start, closed at
// their end. Overlapping or adjacent windows merge: next is the end of the
// merged stretch.
func (s Schedule) At(t time.Time, nodeZone *time.Location) (open bool, next time.Time) {
	if len(s.windows) == 0 || s.fullWeek && (nodeZone != nil || s.oneZone) {
		return true, time.Time{}
	}
	now := t.Unix() // windows begin and end on whole seconds: flooring t keeps every comparison exact
	end, open := s.coverEnd(now, nodeZone)
	if !open {
		at, ok := s.nextOpening(now, nodeZone)
		if !ok {
			return false, time.Time{}
		}
		return false, time.Unix(at, 0).In(t.Location())
	}
	for {
		later, ok := s.coverEnd(end, nodeZone)
		if !ok {
			return true, time.Unix(end, 0).In(t.Location())
		}
		if later-now > alwaysOpenHorizon {
			return true, time.Time{}
		}
		end = later
	}
}

// coverEnd returns the latest end among the occurrences open at instant x
// (Unix seconds), and whether there is one.
func (s Schedule) coverEnd(x int64, nodeZone *time.Location) (end int64, ok bool) {
	for i := range s.windows {
		w := &s.windows[i]
		loc := w.location(nodeZone)
		today := localDay(x, loc)
		// An occurrence open at x started on x's local day or the one before
		// (overnight); the day after only where a fall-back overlap crosses
		// midnight.
		for day := today - 1; day <= today+1; day++ {
			if !w.startsOn(day) {
				continue
			}
			opens := w.opening(day, loc)
			if opens > x {
				continue
			}
			if closes := w.closing(day, loc); x < closes && (!ok || closes > end) {
				end, ok = closes, true
			}
		}
	}
	return end, ok
}

// nextOpening returns the earliest opening after instant x among the
// occurrences that are not empty (daylight saving can swallow a short one),
// and whether there is one within openingSearchDays.
func (s Schedule) nextOpening(x int64, nodeZone *time.Location) (at int64, ok bool) {
	for i := range s.windows {
		w := &s.windows[i]
		loc := w.location(nodeZone)
		today := localDay(x, loc)
		for day := today - 1; day <= today+openingSearchDays; day++ {
			if !w.startsOn(day) {
				continue
			}
			opens := w.opening(day, loc)
			if opens <= x {
				continue
			}
			if ok && opens >= at {
				break // later days open later still
			}
			if w.closing(day, loc) > opens {
				at, ok = opens, true
				break
			}
		}
	}
	return at, ok
}

// location is the zone the window is read in for a node in nodeZone.
func (w *spec) location(nodeZone *time.Location) *time.Location {
	switch {
	case nodeZone != nil:
		return nodeZone
	case w.zone != nil:
		return w.zone
	}
	return time.UTC
}

// startsOn reports whether the window starts on the civil day (days since
// 1970-01-01, a Thursday).
func (w *spec) startsOn(day int64) bool {
	return w.days&(1<<weekday(day)) != 0
}

// opening is the instant the window opens on the civil day, in loc: the
// first occurrence of its start, or the end of a gap that swallowed it.
func (w *spec) opening(day int64, loc *time.Location) int64 {
	return resolve(loc, day*secondsPerDay+int64(w.start)*60, false)
}

// closing is the instant the occurrence that opens on the civil day closes,
// in loc: the last occurrence of its end (on the next day if the end is at
// or before the start), or the end of a gap that swallowed it.
func (w *spec) closing(day int64, loc *time.Location) int64 {
	end := w.end
	if end <= w.start {
		end += minutesPerDay
	}
	return resolve(loc, day*secondsPerDay+int64(end)*60, true)
}

const (
	secondsPerDay = 24 * 3600
	minutesPerDay = 24 * 60
	daysPerWeek   = 7
)

// weekday is the day of the week of the civil day (days since 1970-01-01,
// a Thursday).
func weekday(day int64) time.Weekday {
	return time.Weekday(floorMod(day+int64(time.Thursday), daysPerWeek))
}

// localDay is the civil day (days since 1970-01-01) of instant x in loc.
func localDay(x int64, loc *time.Location) int64 {
	_, offset := time.Unix(x, 0).In(loc).Zone()
	return floorDiv(x+int64(offset), secondsPerDay)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	return a - floorDiv(a, b)*b
}
