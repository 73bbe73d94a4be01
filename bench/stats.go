package main

import (
	"slices"
	"time"
)

// percentile is the q-quantile (0..1) of sorted durations, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sorted returns a sorted copy.
func sorted[T int | float64 | time.Duration](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

// median of a non-empty list: the middle one, or the mean of the two.
func median[T int | float64 | time.Duration](xs []T) T {
	s := sorted(xs)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func sum[T int | float64 | time.Duration](xs []T) T {
	var total T
	for _, x := range xs {
		total += x
	}
	return total
}
