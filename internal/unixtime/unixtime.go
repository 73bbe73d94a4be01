// Package unixtime is an instant in 8 bytes: the controller caches several
// per pod and node (creation, termination, conditions' transitions,
// heartbeats), and a time.Time takes 24 (its wall clock, monotonic reading
// and location pointer), which a cache of thousands of records pays for
// every one of them.
package unixtime

import (
	"math"
	"time"
)

// Time is an instant as Unix nanoseconds; 0 is the zero time.Time (none).
// Its range is the years 1678 to 2262: an instant outside it is held as the
// nearest end, which reads the same to every rule that compares it with
// today. Ordering Times orders their instants.
type Time int64

var (
	first = time.Unix(0, math.MinInt64+1)
	last  = time.Unix(0, math.MaxInt64)
)

// Of returns t as a Time: 0 for the zero time.Time, the nearest end for an
// instant out of range. An instant exactly at the Unix epoch reads as none.
func Of(t time.Time) Time {
	switch {
	case t.IsZero():
		return 0
	case t.Before(first):
		return math.MinInt64 + 1
	case t.After(last):
		return math.MaxInt64
	}
	return Time(t.UnixNano())
}

// Time returns t as a time.Time in UTC, whatever the machine's zone; the
// zero time.Time for 0.
func (t Time) Time() time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(t)).UTC()
}

// IsZero reports whether t is none.
func (t Time) IsZero() bool { return t == 0 }
