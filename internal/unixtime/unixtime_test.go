package unixtime

import (
	"testing"
	"time"
)

func TestTimeRoundTripsInstants(t *testing.T) {
	for _, in := range []time.Time{
		time.Date(2026, 11, 26, 14, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 26, 14, 30, 0, 123456789, time.FixedZone("x", 3600)),
		time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC),
	} {
		if got := Of(in).Time(); !got.Equal(in) {
			t.Errorf("Of(%v).Time(): got %v, want the same instant", in, got)
		}
	}
}

func TestZeroTimeIsNone(t *testing.T) {
	if got := Of(time.Time{}); got != 0 || !got.IsZero() {
		t.Errorf("Of(zero): got %d, want 0", got)
	}
	if got := Time(0).Time(); !got.IsZero() {
		t.Errorf("Time(0).Time(): got %v, want the zero time.Time", got)
	}
}

func TestInstantsOutOfRangeHeldAtTheNearestEnd(t *testing.T) {
	far, early := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	if got := Of(far); got.Time().Before(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Of(year 9999): got %v, want the end of the range (2262)", got.Time())
	}
	if got := Of(early); got.IsZero() || !got.Time().Before(time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Of(year 1): got %v, want the start of the range (1677)", got.Time())
	}
	if !(Of(early) < Of(time.Now()) && Of(time.Now()) < Of(far)) {
		t.Errorf("got the order of year 1, now and year 9999 lost")
	}
}
