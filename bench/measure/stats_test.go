package measure

import (
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{7}, 7},
		{"odd, unsorted", []float64{9, 1, 5}, 5},
		{"even: mean of the middle two", []float64{4, 1, 3, 10}, 3.5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("%s: Median(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestMedianLeavesItsInputAlone(t *testing.T) {
	in := []time.Duration{3, 1, 2}
	if got, want := Median(in), time.Duration(2); got != want {
		t.Fatalf("Median = %v, want %v", got, want)
	}
	if want := []time.Duration{3, 1, 2}; !slices.Equal(in, want) {
		t.Errorf("input after Median = %v, want %v", in, want)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	twenty := hundred[:20]
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"p50 of 1..100", hundred, 0.50, 50 * time.Millisecond},
		{"p99 of 1..100", hundred, 0.99, 99 * time.Millisecond},
		{"p100 of 1..100", hundred, 1, 100 * time.Millisecond},
		{"rank 99.4 rounds to 99", hundred, 0.994, 99 * time.Millisecond},
		{"rank 99.6 rounds to 100", hundred, 0.996, 100 * time.Millisecond},
		{"p0 is the smallest", hundred, 0, time.Millisecond},
		{"p99 of 20 is the largest", twenty, 0.99, 20 * time.Millisecond},
		{"p50 of 20", twenty, 0.50, 10 * time.Millisecond},
		{"empty", nil, 0.5, 0},
	} {
		if got := Percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSorted(t *testing.T) {
	in := []int{3, 1, 2}
	if got, want := Sorted(in), []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("Sorted(%v) = %v, want %v", in, got, want)
	}
	if want := []int{3, 1, 2}; !slices.Equal(in, want) {
		t.Errorf("input after Sorted = %v, want %v", in, want)
	}
}

func TestSum(t *testing.T) {
	if got, want := Sum([]int{1, 2, 3, 4}), 10; got != want {
		t.Errorf("Sum = %d, want %d", got, want)
	}
}

func TestMean(t *testing.T) {
	if got, want := Mean([]time.Duration{time.Second, 2 * time.Second, 6 * time.Second}), 3*time.Second; got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	if got := Mean[int](nil); got != 0 {
		t.Errorf("Mean(nil) = %d, want 0", got)
	}
}

func TestRatio(t *testing.T) {
	if got, want := Ratio(3*time.Second, 2*time.Second), 1.5; got != want {
		t.Errorf("Ratio(3s, 2s) = %v, want %v", got, want)
	}
	if got := Ratio(int64(5), 0); got != 0 {
		t.Errorf("Ratio(5, 0) = %v, want 0", got)
	}
}

func TestPairRatiosDividesEachRunByItsOwnPair(t *testing.T) {
	a := []time.Duration{2 * time.Second, 9 * time.Second, 4 * time.Second}
	b := []time.Duration{time.Second, 3 * time.Second, 8 * time.Second}
	got := PairRatios(a, b)
	if want := []float64{2, 3, 0.5}; !slices.Equal(got, want) {
		t.Fatalf("PairRatios = %v, want %v", got, want)
	}
	// The median of the pair ratios differs from the ratio of the medians:
	// the benchmark reports the former.
	if got, want := Median(got), 2.0; got != want {
		t.Errorf("median pair ratio = %v, want %v", got, want)
	}
}
