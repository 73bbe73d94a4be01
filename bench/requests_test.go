package main

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRequestsTableSumsEachRoundsTurn(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	runs := []requestCosts{
		{Write: ms(0.5), Challenge: ms(0.4), Delete: ms(0.3), Follow: ms(1.2)}, // on Leases 2.0, by answer 1.2
		{Write: ms(0.2), Challenge: ms(0.1), Delete: ms(0.2), Follow: ms(0.5)}, // 0.9, 0.5
		{Write: ms(0.6), Challenge: ms(0.3), Delete: ms(0.3), Follow: ms(0.2)}, // 1.1, 1.2
	}
	tb := requestsTable(params{nodes: 500}, runs)
	rowStarting := func(prefix string) (row, bool) {
		for _, r := range tb.rows {
			if strings.HasPrefix(r.figure, prefix) {
				return r, true
			}
		}
		return row{}, false
	}
	for _, want := range []struct{ prefix, value, met string }{
		{"the record's entry", "0.50 ms", ""},
		{"the least a node's turn", "1.10 ms", verdict(false)}, // the median of 2.0, 0.9, 1.1: not of the medians' sum
		{"… with the agents' answers", "1.20 ms", verdict(false)},
	} {
		r, ok := rowStarting(want.prefix)
		if !ok {
			t.Fatalf("no row starting %q in %v", want.prefix, tb.rows)
		}
		if r.edgeota != want.value || r.met != want.met {
			t.Errorf("row %q: got %s (%q), want %s (%q)", r.figure, r.edgeota, r.met, want.value, want.met)
		}
	}
}

func TestInParallelCallsEachOnceAndJoinsErrors(t *testing.T) {
	var (
		mu    sync.Mutex
		calls = map[int]int{}
	)
	errOdd := errors.New("odd")
	err := inParallel(25, 4, func(i int) error {
		mu.Lock()
		calls[i]++
		mu.Unlock()
		if i%2 == 1 {
			return errOdd
		}
		return nil
	})
	if len(calls) != 25 {
		t.Fatalf("got %d indexes called, want 25", len(calls))
	}
	for i, n := range calls {
		if n != 1 {
			t.Errorf("index %d: got %d calls, want 1", i, n)
		}
	}
	if !errors.Is(err, errOdd) {
		t.Errorf("got error %v, want one wrapping %v", err, errOdd)
	}
	if err := inParallel(3, 8, func(int) error { return nil }); err != nil {
		t.Errorf("got error %v, want none", err)
	}
}
