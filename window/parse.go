package window

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxWindows bounds a schedule: At's cost grows with its windows, and it runs
// per node per decision.
const maxWindows = 32

// allDays is the days mask of every day of the week.
const allDays = 1<<daysPerWeek - 1

// dayNames are the days' three-letter names by time.Weekday, as String
// writes them; Parse also takes the full names, in any case.
var dayNames = [daysPerWeek]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// example is a valid value, quoted by errors that need to show the syntax.
const example = `"Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"`

// Parse reads an edgeota.io/maintenance-window value: one or more windows,
// separated by ";" or new lines, each "[DAYS] START-END [ZONE]":
//
//   - DAYS: a comma-separated list of days (Mon, Monday, any case), ranges of
//     days (Mon-Fri; Fri-Mon wraps over the weekend), "*" or "daily"; absent,
//     every day. A window belongs to the day it starts on.
//   - START, END: HH:MM, 00:00 to 23:59; END may be 24:00. An END at or
//     before START is on the next day (22:00-04:00 runs overnight); START and
//     END may not be equal (a whole day is 00:00-24:00).
//   - ZONE: an IANA time zone (Europe/Berlin); absent, UTC. A node's
//     edgeota.io/time-zone overrides it.
//
// An error names the window and what is wrong with it.
func Parse(value string) (Schedule, error) {
	var s Schedule
	for text := range strings.FieldsFuncSeq(value, func(r rune) bool { return r == ';' || r == '\n' || r == '\r' }) {
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if len(s.windows) == maxWindows {
			return Schedule{}, fmt.Errorf("more than %d windows", maxWindows)
		}
		w, err := parseWindow(text)
		if err != nil {
			return Schedule{}, fmt.Errorf("window %q: %w", text, err)
		}
		s.windows = append(s.windows, w)
	}
	if len(s.windows) == 0 {
		return Schedule{}, fmt.Errorf("no window: want one or more, separated by \";\" or new lines, e.g. %s", example)
	}
	s.fullWeek = coversWeek(s.windows)
	s.oneZone = true
	for _, w := range s.windows[1:] {
		s.oneZone = s.oneZone && zoneName(w.zone) == zoneName(s.windows[0].zone)
	}
	return s, nil
}

// parseWindow reads one window: [DAYS] START-END [ZONE]. Days never hold a
// digit and a time always starts with one, which is where the days end.
func parseWindow(text string) (spec, error) {
	i := strings.IndexAny(text, "0123456789")
	if i < 0 {
		return spec{}, fmt.Errorf("no time range: want [DAYS] HH:MM-HH:MM [ZONE], e.g. %s", example)
	}
	var w spec
	var err error
	if w.days, err = parseDays(strings.TrimSpace(text[:i])); err != nil {
		return spec{}, err
	}
	startText, rest := cutTime(text[i:])
	rest = strings.TrimLeft(rest, " \t")
	rest, dash := strings.CutPrefix(rest, "-")
	endText, rest := cutTime(strings.TrimLeft(rest, " \t"))
	if !dash || endText == "" {
		return spec{}, fmt.Errorf("time range %q: want HH:MM-HH:MM, e.g. 22:00-04:00", strings.TrimSpace(text[i:]))
	}
	if w.start, err = parseTime(startText, false); err != nil {
		return spec{}, fmt.Errorf("start %w", err)
	}
	if w.end, err = parseTime(endText, true); err != nil {
		return spec{}, fmt.Errorf("end %w", err)
	}
	if w.start == w.end {
		return spec{}, fmt.Errorf("start and end are both %s: a window needs a length (a whole day is 00:00-24:00)", formatTime(w.start))
	}
	if w.end == 0 {
		w.end = minutesPerDay // 22:00-00:00 ends at midnight, as 22:00-24:00 does
	}
	if zone := strings.TrimSpace(rest); zone != "" {
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "\t") || strings.ContainsAny(zone, " \t") {
			return spec{}, fmt.Errorf("unexpected %q after the time range: want at most one time zone, after a space, e.g. 22:00-04:00 Europe/Berlin", zone)
		}
		if w.zone, err = LoadZone(zone); err != nil {
			return spec{}, err
		}
	}
	return w, nil
}

// cutTime splits off the leading time of s: its digits and colons.
func cutTime(s string) (clock, rest string) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != ':' })
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// parseTime reads H:MM or HH:MM as minutes of the day; 24:00 only as an end.
func parseTime(text string, end bool) (int, error) {
	want := "want HH:MM from 00:00 to 23:59"
	if end {
		want = "want HH:MM from 00:00 to 24:00"
	}
	h, m, ok := strings.Cut(text, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return 0, fmt.Errorf("%q: %s", text, want)
	}
	hour, minute := digits(h), digits(m)
	switch {
	case hour < 0 || minute < 0 || minute > 59 || hour > 24:
		return 0, fmt.Errorf("%q: %s", text, want)
	case hour == 24 && (!end || minute != 0):
		return 0, fmt.Errorf("%q: %s", text, want)
	}
	return hour*60 + minute, nil
}

// digits reads a short string of ASCII digits; -1 if it holds anything else.
func digits(s string) int {
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// parseDays reads the days a window starts on; empty is every day.
func parseDays(text string) (uint8, error) {
	if text == "" {
		return allDays, nil
	}
	var days uint8
	for item := range strings.SplitSeq(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return 0, fmt.Errorf("days %q: an empty entry between commas", text)
		}
		if item == "*" || strings.EqualFold(item, "daily") {
			days = allDays
			continue
		}
		from, to, isRange := strings.Cut(item, "-")
		first, err := parseDay(strings.TrimSpace(from))
		if err != nil {
			return 0, err
		}
		last := first
		if isRange {
			if last, err = parseDay(strings.TrimSpace(to)); err != nil {
				return 0, err
			}
		}
		for d := first; ; d = (d + 1) % daysPerWeek {
			days |= 1 << d
			if d == last {
				break
			}
		}
	}
	return days, nil
}

// errDayWanted says what a day may be.
var errDayWanted = errors.New("want Mon..Sun or Monday..Sunday (any case), a range such as Mon-Fri or Fri-Mon, a comma-separated list, * or daily; the days come before the time range")

// parseDay reads a day's three-letter or full English name, in any case.
func parseDay(name string) (time.Weekday, error) {
	for d := range time.Weekday(daysPerWeek) {
		if strings.EqualFold(name, dayNames[d]) || strings.EqualFold(name, d.String()) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown day %q: %w", name, errDayWanted)
}

// coversWeek reports whether the windows cover every minute of the week on
// the wall clock.
func coversWeek(windows []spec) bool {
	var covered [daysPerWeek * minutesPerDay]bool
	for _, w := range windows {
		length := w.end - w.start
		if length <= 0 {
			length += minutesPerDay
		}
		for d := range daysPerWeek {
			if w.days&(1<<d) == 0 {
				continue
			}
			for m := range length {
				covered[(d*minutesPerDay+w.start+m)%len(covered)] = true
			}
		}
	}
	return !slices.Contains(covered[:], false)
}

// zoneName is the name of a window's own zone: UTC when it has none.
func zoneName(loc *time.Location) string {
	if loc == nil {
		return "UTC"
	}
	return loc.String()
}
