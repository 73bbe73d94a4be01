// Package holdtime is how long an owner's hold may last and how a person
// spells it: one rule for the node agent, which computes a hold's end, and
// for otactl, which refuses a bad --for before it dials.
package holdtime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/edgeota/edgeota/internal/untrusted"
)

// Max bounds a hold the agent writes, whichever way it is asked for: 30
// days, as Android bounds a postponed update. The DaemonSet's
// edgeota.io/max-hold-seconds bounds what the controller honours; this bound
// keeps a typo ("2000h") from reading as a plan.
const Max = 30 * 24 * time.Hour

// MaxText is Max as errors and usage spell it.
var MaxText = fmt.Sprintf("%d days (%dh)", Max/(24*time.Hour), Max/time.Hour)

// Syntax says how a duration is spelled, for usage and error messages.
const Syntax = `one or more of a number and a unit, d (24 hours), h, m or s: "2h", "90m", "1h30m", "3d", "1.5h"`

// units are the units a duration may use, in hours, minutes and seconds as
// a person counts them (a day is 24 hours: holds are counted on the API
// server's clock, not on a calendar).
var units = map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}

// ParseDuration reads a hold's duration as a person types it: one or more
// of a decimal number and a unit (d, h, m, s), with nothing between them,
// e.g. "2h", "1h30m", "3d" or "1.5h". It must be more than zero and at most
// Max; errors say which rule failed and quote the value.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("empty duration: want " + Syntax)
	}
	rest := s
	var total float64 // seconds, so that no sum overflows before it is checked
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("duration %s: want %s", untrusted.Quote(s), Syntax)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if errors.Is(err, strconv.ErrRange) {
			err = nil // n is +Inf: too long, said below
		}
		unit, ok := units[rest[i]]
		if err != nil || !ok {
			return 0, fmt.Errorf("duration %s: want %s", untrusted.Quote(s), Syntax)
		}
		total += n * unit.Seconds()
		rest = rest[i+1:]
	}
	switch {
	case total <= 0:
		return 0, fmt.Errorf("duration %s: must be more than zero", untrusted.Quote(s))
	case math.IsInf(total, 0) || total > Max.Seconds():
		return 0, fmt.Errorf("duration %s: more than %s, the longest hold", untrusted.Quote(s), MaxText)
	}
	return time.Duration(total * float64(time.Second)), nil
}
