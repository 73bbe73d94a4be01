package window

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

// zones caches the zones LoadZone loaded: time.LoadLocation reads and parses
// a zone's rules on every call, and the controller asks for a node's zone on
// every decision. Only valid names are kept, so the cache is bounded by the
// zone database (a few hundred names).
var zones = struct {
	sync.RWMutex
	byName map[string]*time.Location
}{byName: map[string]*time.Location{}}

// LoadZone returns the IANA time zone of that name (Europe/Berlin,
// America/New_York, UTC), from the system's zone database or the copy
// embedded in the binaries (time/tzdata). It refuses the empty name and
// "Local", which time.LoadLocation would read as UTC and as the controller
// machine's own zone: neither is where a node is.
func LoadZone(name string) (*time.Location, error) {
	zones.RLock()
	loc, ok := zones.byName[name]
	zones.RUnlock()
	if ok {
		return loc, nil
	}
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as Europe/Berlin or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w; want an IANA name such as Europe/Berlin or UTC (case matters)", name, err)
	}
	zones.Lock()
	zones.byName[name] = loc
	zones.Unlock()
	return loc, nil
}

// NodeZone returns the zone a node's windows are read in, from the node's
// annotations (surrounding spaces ignored): nil when it names none (each
// window's own zone applies). An invalid name is an error for that node
// alone, naming the annotation.
func NodeZone(annotations map[string]string) (*time.Location, error) {
	name, ok := annotations[rollout.NodeTimeZoneAnnotation]
	if !ok {
		return nil, nil
	}
	loc, err := LoadZone(strings.TrimSpace(name))
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", rollout.NodeTimeZoneAnnotation, err)
	}
	return loc, nil
}

// resolve returns the instant (Unix seconds) at which the wall clock of loc
// reads wall (seconds since 1970-01-01 00:00 on that clock). time.Date leaves
// unspecified which side of a daylight-saving transition it picks, so the
// zone's periods around wall are examined one by one:
//   - in a spring-forward gap, where the clock never reads wall, the end of
//     the gap: a window starting or ending in it takes effect right after it;
//   - in a fall-back overlap, where the clock reads wall twice, the first
//     occurrence, or the last one when late is set (a window opens at the
//     first occurrence of its start and closes at the last of its end).
func resolve(loc *time.Location, wall int64, late bool) int64 {
	// Every offset from UTC the zone database holds is under a day, so the
	// instants that read wall lie within a day of wall read as UTC.
	lo, hi := wall-secondsPerDay, wall+secondsPerDay
	at, found := wall, false
	previousOffset, first := 0, true
	for x := lo; ; {
		t := time.Unix(x, 0).In(loc)
		_, offset := t.Zone()
		start, end := t.ZoneBounds()
		candidate := wall - int64(offset)
		afterStart := start.IsZero() || candidate >= start.Unix()
		beforeEnd := end.IsZero() || candidate < end.Unix()
		switch {
		case afterStart && beforeEnd:
			if !late {
				return candidate // periods come in order: the first match is the earliest
			}
			at, found = candidate, true
		case !found && !first && wall-int64(previousOffset) >= start.Unix() && !afterStart:
			// The previous period ended before its clock reached wall, and
			// this one starts past it: wall is in the gap between them.
			at = start.Unix()
		}
		if end.IsZero() || end.Unix() > hi {
			return at
		}
		previousOffset, first = offset, false
		x = end.Unix()
	}
}
