package rollout

import (
	"fmt"
	"strconv"
	"strings"
)

// Scaled is a count written as an integer or as a percentage of a total, as
// max-unavailable, max-failed and partition are. It is the one parser of that
// form: intstr.GetScaledValueFromIntOrPercent accepts negative numbers and
// percentages over 100, and trims nothing.
type Scaled struct {
	// N is the integer, or the percentage.
	N int
	// Percent says that N is a percentage.
	Percent bool
}

// ParseScaled reads an integer or a percentage ("3", "30%", " 30 % "):
// spaces around the number and the sign are ignored; the number is a
// non-negative integer, and a percentage at most 100.
func ParseScaled(value string) (Scaled, error) {
	v := strings.TrimSpace(value)
	number, percent := strings.CutSuffix(v, "%")
	n, err := strconv.Atoi(strings.TrimSpace(number))
	if v == "" || err != nil || n < 0 || (percent && n > 100) {
		return Scaled{}, fmt.Errorf("%q is not a non-negative integer or a percentage between 0%% and 100%%", value)
	}
	return Scaled{N: n, Percent: percent}, nil
}

// Of resolves the count against total: the integer itself, or the
// percentage of total rounded up (10% of 11 nodes is 2).
func (s Scaled) Of(total int) int {
	if !s.Percent {
		return s.N
	}
	return (s.N*total + 99) / 100
}

// IsZero reports whether the count is zero however large the total: "0" or
// "0%".
func (s Scaled) IsZero() bool { return s.N == 0 }

// String writes the count as it is read.
func (s Scaled) String() string {
	if s.Percent {
		return strconv.Itoa(s.N) + "%"
	}
	return strconv.Itoa(s.N)
}
