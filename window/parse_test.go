package window

import (
	"testing"
	"time"
)

// TestParseDays checks every form of the days: what each means, and how the
// schedule renders back.
func TestParseDays(t *testing.T) {
	const (
		sun = time.Sunday
		mon = time.Monday
		tue = time.Tuesday
		wed = time.Wednesday
		thu = time.Thursday
		fri = time.Friday
		sat = time.Saturday
	)
	every := []time.Weekday{sun, mon, tue, wed, thu, fri, sat}
	for _, c := range []struct {
		value string
		days  []time.Weekday
		want  string
	}{
		{"Mon 10:00-11:00", []time.Weekday{mon}, "Mon 10:00-11:00"},
		{"mon 10:00-11:00", []time.Weekday{mon}, "Mon 10:00-11:00"},
		{"MON 10:00-11:00", []time.Weekday{mon}, "Mon 10:00-11:00"},
		{"Monday 10:00-11:00", []time.Weekday{mon}, "Mon 10:00-11:00"},
		{"wEDNESDAY 10:00-11:00", []time.Weekday{wed}, "Wed 10:00-11:00"},
		{"Thursday,Sunday 10:00-11:00", []time.Weekday{thu, sun}, "Thu,Sun 10:00-11:00"},
		{"Mon-Fri 10:00-11:00", []time.Weekday{mon, tue, wed, thu, fri}, "Mon-Fri 10:00-11:00"},
		{"mon - fri 10:00-11:00", []time.Weekday{mon, tue, wed, thu, fri}, "Mon-Fri 10:00-11:00"},
		{"Fri-Mon 10:00-11:00", []time.Weekday{fri, sat, sun, mon}, "Fri-Mon 10:00-11:00"},
		{"Saturday-Tuesday 10:00-11:00", []time.Weekday{sat, sun, mon, tue}, "Sat-Tue 10:00-11:00"},
		{"Sat-Sun 10:00-11:00", []time.Weekday{sat, sun}, "Sat,Sun 10:00-11:00"},
		{"Sun,Sat 10:00-11:00", []time.Weekday{sat, sun}, "Sat,Sun 10:00-11:00"},
		{"Sun,Mon 10:00-11:00", []time.Weekday{sun, mon}, "Sun,Mon 10:00-11:00"},
		{"Mon, Wed ,Fri 10:00-11:00", []time.Weekday{mon, wed, fri}, "Mon,Wed,Fri 10:00-11:00"},
		{"Mon-Wed,Fri-Sun 10:00-11:00", []time.Weekday{mon, tue, wed, fri, sat, sun}, "Fri-Wed 10:00-11:00"},
		{"Tue,Mon-Wed 10:00-11:00", []time.Weekday{mon, tue, wed}, "Mon-Wed 10:00-11:00"},
		{"Wed-Wed 10:00-11:00", []time.Weekday{wed}, "Wed 10:00-11:00"},
		{"Sun-Sat 10:00-11:00", every, "daily 10:00-11:00"},
		{"Mon-Sun 10:00-11:00", every, "daily 10:00-11:00"},
		{"* 10:00-11:00", every, "daily 10:00-11:00"},
		{"daily 10:00-11:00", every, "daily 10:00-11:00"},
		{"Daily 10:00-11:00", every, "daily 10:00-11:00"},
		{"10:00-11:00", every, "daily 10:00-11:00"},
		{"Mon,* 10:00-11:00", every, "daily 10:00-11:00"},
	} {
		s, err := Parse(c.value)
		if err != nil {
			t.Errorf("Parse(%q): got error %v, want %q", c.value, err, c.want)
			continue
		}
		var want uint8
		for _, d := range c.days {
			want |= 1 << d
		}
		if got := s.windows[0].days; got != want {
			t.Errorf("Parse(%q): got days %07b, want %07b (bit 0 Sunday)", c.value, got, want)
		}
		if got := s.String(); got != c.want {
			t.Errorf("Parse(%q).String(): got %q, want %q", c.value, got, c.want)
		}
	}
}

// TestParseSchedules checks times, zones and separators, and that the
// canonical form reads back to itself.
func TestParseSchedules(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00", "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"},
		{"Mon-Fri 22:00-04:00 Europe/Berlin\nSat,Sun 00:00-24:00\n", "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"},
		{"\r\n  Sat 22:00-02:00  ;;\n\n Sun 9:05-17:30 America/New_York ; ", "Sat 22:00-02:00; Sun 09:05-17:30 America/New_York"},
		{"22:00-00:00", "daily 22:00-24:00"},
		{"00:00-24:00 UTC", "daily 00:00-24:00 UTC"},
		{"Mon 23:59-00:01", "Mon 23:59-00:01"},
		{"Tue 10:00 - 11:00\tAsia/Kolkata", "Tue 10:00-11:00 Asia/Kolkata"},
		{"Sun 02:00-03:00 Australia/Lord_Howe", "Sun 02:00-03:00 Australia/Lord_Howe"},
	} {
		s, err := Parse(c.value)
		if err != nil {
			t.Errorf("Parse(%q): got error %v, want %q", c.value, err, c.want)
			continue
		}
		if got := s.String(); got != c.want {
			t.Errorf("Parse(%q).String(): got %q, want %q", c.value, got, c.want)
		}
		again, err := Parse(s.String())
		if err != nil || again.String() != c.want {
			t.Errorf("Parse(%q): got %q, %v, want it to read back as %q", s.String(), again.String(), err, c.want)
		}
	}
}

// TestParseInvalid checks that every mistake gets an error saying which
// window is wrong and how.
func TestParseInvalid(t *testing.T) {
	days := "want Mon..Sun or Monday..Sunday (any case), a range such as Mon-Fri or Fri-Mon, a comma-separated list, * or daily; the days come before the time range"
	for _, c := range []struct{ value, want string }{
		{"", `no window: want one or more, separated by ";" or new lines, e.g. "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"`},
		{" ;\n ; ", `no window: want one or more, separated by ";" or new lines, e.g. "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"`},
		{"Mon-Fri", `window "Mon-Fri": no time range: want [DAYS] HH:MM-HH:MM [ZONE], e.g. "Mon-Fri 22:00-04:00 Europe/Berlin; Sat,Sun 00:00-24:00"`},
		{"Mon-Fry 22:00-04:00", `window "Mon-Fry 22:00-04:00": unknown day "Fry": ` + days},
		{"Mo 22:00-04:00", `window "Mo 22:00-04:00": unknown day "Mo": ` + days},
		{"Mon Wed 22:00-04:00", `window "Mon Wed 22:00-04:00": unknown day "Mon Wed": ` + days},
		{"Mon,,Wed 22:00-04:00", `window "Mon,,Wed 22:00-04:00": days "Mon,,Wed": an empty entry between commas`},
		{"Mon- 22:00-04:00", `window "Mon- 22:00-04:00": unknown day "": ` + days},
		{"Mon-Tue-Wed 22:00-04:00", `window "Mon-Tue-Wed 22:00-04:00": unknown day "Tue-Wed": ` + days},
		{"Europe/Berlin Mon 22:00-04:00", `window "Europe/Berlin Mon 22:00-04:00": unknown day "Europe/Berlin Mon": ` + days},
		{"Mon 22:00", `window "Mon 22:00": time range "22:00": want HH:MM-HH:MM, e.g. 22:00-04:00`},
		{"Mon 22:00-", `window "Mon 22:00-": time range "22:00-": want HH:MM-HH:MM, e.g. 22:00-04:00`},
		{"Mon 22:00 04:00", `window "Mon 22:00 04:00": time range "22:00 04:00": want HH:MM-HH:MM, e.g. 22:00-04:00`},
		{"Mon 22-04", `window "Mon 22-04": start "22": want HH:MM from 00:00 to 23:59`},
		{"Mon 24:00-04:00", `window "Mon 24:00-04:00": start "24:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 22:60-04:00", `window "Mon 22:60-04:00": start "22:60": want HH:MM from 00:00 to 23:59`},
		{"Mon 123:00-04:00", `window "Mon 123:00-04:00": start "123:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 22:00:00-04:00", `window "Mon 22:00:00-04:00": start "22:00:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 22:00-4:0", `window "Mon 22:00-4:0": end "4:0": want HH:MM from 00:00 to 24:00`},
		{"Mon 22:00-24:01", `window "Mon 22:00-24:01": end "24:01": want HH:MM from 00:00 to 24:00`},
		{"Mon 22:00-25:00", `window "Mon 22:00-25:00": end "25:00": want HH:MM from 00:00 to 24:00`},
		{"Mon 10:00-10:00", `window "Mon 10:00-10:00": start and end are both 10:00: a window needs a length (a whole day is 00:00-24:00)`},
		{"Mon 00:00-00:00", `window "Mon 00:00-00:00": start and end are both 00:00: a window needs a length (a whole day is 00:00-24:00)`},
		{"Mon 22:00-04:00Europe/Berlin", `window "Mon 22:00-04:00Europe/Berlin": unexpected "Europe/Berlin" after the time range: want at most one time zone, after a space, e.g. 22:00-04:00 Europe/Berlin`},
		{"Mon 22:00-04:00-05:00", `window "Mon 22:00-04:00-05:00": unexpected "-05:00" after the time range: want at most one time zone, after a space, e.g. 22:00-04:00 Europe/Berlin`},
		{"Mon 22:00-04:00 Europe/Berlin UTC", `window "Mon 22:00-04:00 Europe/Berlin UTC": unexpected "Europe/Berlin UTC" after the time range: want at most one time zone, after a space, e.g. 22:00-04:00 Europe/Berlin`},
		{"Mon 22:00-04:00 Europe/Berlim", `window "Mon 22:00-04:00 Europe/Berlim": time zone "Europe/Berlim": unknown time zone Europe/Berlim; want an IANA name such as Europe/Berlin or UTC (case matters)`},
		{"Mon 22:00-04:00 Local", `window "Mon 22:00-04:00 Local": time zone "Local": want an IANA name such as Europe/Berlin or UTC`},
		{"Sat,Sun 00:00-24:00; Mon 25:00-26:00", `window "Mon 25:00-26:00": start "25:00": want HH:MM from 00:00 to 23:59`},
		{"Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;" +
			"Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;" +
			"Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;" +
			"Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;Mon 1:00-2:00;" +
			"Mon 1:00-2:00", "more than 32 windows"},
	} {
		_, err := Parse(c.value)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q): got error %v, want %q", c.value, err, c.want)
		}
	}
}
