package measure

import (
	"slices"
	"time"
)

// Number is what the order statistics work on.
type Number interface {
	~int | ~int64 | ~float64
}

// Sorted returns a sorted copy of xs.
func Sorted[T Number](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

// Median is the middle value of xs, or the mean of the two middle ones; 0
// for an empty list.
func Median[T Number](xs []T) T {
	s := Sorted(xs)
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return s[n/2]
	default:
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// Percentile is the q-quantile (0..1) of sorted values by nearest rank: the
// value at the 1-based rank q·n rounded to the nearest whole, kept within the
// list. With 20 values the p99 is the largest; 0 for an empty list.
func Percentile[T Number](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Sum adds xs.
func Sum[T Number](xs []T) T {
	var total T
	for _, x := range xs {
		total += x
	}
	return total
}

// Mean is the arithmetic mean of xs (in T's own arithmetic, so truncated
// for integers); 0 for an empty list.
func Mean[T Number](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	return Sum(xs) / T(len(xs))
}

// Ratio is a/b, or 0 when b is 0 (nothing to compare with).
func Ratio[T Number](a, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// PairRatios divides each run by the baseline run it alternated with:
// a[i]/b[i]. Their median is how the benchmark compares two methods on a
// noisy machine, since drift hits both runs of a pair alike.
func PairRatios(a, b []time.Duration) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = Ratio(a[i], b[i])
	}
	return out
}
