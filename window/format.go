package window

import (
	"fmt"
	"strings"
	"time"
)

// String renders the schedule canonically, for events and status: windows
// separated by "; ", each as DAYS START-END [ZONE] with days as
// three-letter names in runs from Monday ("Mon-Fri", "Fri-Mon", "Sat,Sun",
// "daily"), times as HH:MM (an end at midnight as 24:00) and the zone as
// given. Parse reads it back to the same schedule. The zero Schedule renders
// as "".
func (s Schedule) String() string {
	var b strings.Builder
	for i, w := range s.windows {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s-%s", formatDays(w.days), formatTime(w.start), formatTime(w.end))
		if w.zone != nil {
			b.WriteString(" " + w.zone.String())
		}
	}
	return b.String()
}

// formatDays renders a days mask as runs of days in week order from Monday:
// one day by its name, two as a list, three or more as a range.
func formatDays(days uint8) string {
	if days == allDays {
		return "daily"
	}
	on := func(d time.Weekday) bool { return days&(1<<(d%daysPerWeek)) != 0 }
	var runs []string
	for i := range time.Weekday(daysPerWeek) {
		first := (time.Monday + i) % daysPerWeek
		if !on(first) || on(first+daysPerWeek-1) {
			continue // not the first day of a run
		}
		last := first
		for on(last + 1) {
			last = (last + 1) % daysPerWeek
		}
		switch {
		case last == first:
			runs = append(runs, dayNames[first])
		case (last+daysPerWeek-first)%daysPerWeek == 1:
			runs = append(runs, dayNames[first]+","+dayNames[last])
		default:
			runs = append(runs, dayNames[first]+"-"+dayNames[last])
		}
	}
	return strings.Join(runs, ",")
}

// formatTime renders minutes of the day as HH:MM.
func formatTime(minutes int) string {
	return fmt.Sprintf("%02d:%02d", minutes/60, minutes%60)
}
