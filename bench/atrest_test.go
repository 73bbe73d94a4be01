package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/bench/measure"
)

func TestAtRestTableScalesCPUPerThousandNodesAndNamesTheBusiestInformer(t *testing.T) {
	f := atRestFigures{
		window: time.Minute, pods: 8000,
		cpu:         1200 * time.Millisecond, // 2% of a core over the minute
		memory:      measure.Memory{RSS: 40 << 20, PeakRSS: 70 << 20, AnonRSS: 20 << 20},
		goRuntime:   "GOGC=100 (Go's default), no GOMEMLIMIT",
		watchEvents: map[string]float64{"pods": 60, "leases": 12000, "nodes": 0},
		apiWrites:   map[string]float64{"leases": 12000, "pods": 6, "daemonsets": 3, "events": 3},
		apiWatchEvents: map[string]float64{
			"leases": 36000, "pods": 18,
		},
	}
	p := params{nodes: 2000}
	tb := atRestTable(p, f)
	if got := rowNamed(t, tb, "controller CPU"); got.edgeota != "2.00 %" {
		t.Errorf("CPU: got %+v, want 2.00 %%", got)
	}
	// 2% of a core for 2,000 nodes is 1% per 1,000, twice the target.
	if got := rowNamed(t, tb, "… per 1,000 nodes"); got.edgeota != "1.00 %" || got.target != "≤ 0.50 %" || got.met != "**missed**" {
		t.Errorf("per 1,000 nodes: got %+v, want 1.00 %% missed against 0.50 %%", got)
	}
	if got := rowNamed(t, tb, "controller peak RSS"); got.edgeota != "70.0 MiB (20.0 MiB anonymous at the end)" || got.met != "**missed**" {
		t.Errorf("peak RSS: got %+v, want 70.0 MiB (20.0 anonymous), missed", got)
	}
	if got := rowNamed(t, tb, "controller RSS at the end"); got.edgeota != "40.0 MiB (20.0 MiB)" {
		t.Errorf("RSS at the end: got %+v", got)
	}
	// The informers, busiest first, the first named so.
	var informers []string
	for _, r := range tb.rows {
		if name, ok := strings.CutPrefix(r.figure, "controller watch events: "); ok {
			informers = append(informers, name+" "+r.edgeota)
		}
	}
	if want := []string{"leases (the busiest informer) 200.0/s", "pods 1.0/s", "nodes 0.0/s"}; strings.Join(informers, ", ") != strings.Join(want, ", ") {
		t.Errorf("informers: got %q, want %q", informers, want)
	}
	if got := rowNamed(t, tb, "API server writes: leases"); got.edgeota != "200.0/s" || !strings.HasPrefix(got.baseline, "≥ 192.3/s") {
		t.Errorf("Lease writes: got %+v, want 200.0/s beside at least 2,000 per 10.4 s", got)
	}
	if got := rowNamed(t, tb, "API server writes: everything else"); got.edgeota != "0.1/s" {
		t.Errorf("other writes: got %+v, want the daemonsets' and events' 6 in 60 s", got)
	}
	if got := rowNamed(t, tb, "API server watch events sent: leases"); got.edgeota != "600.0/s" {
		t.Errorf("Lease watch events: got %+v", got)
	}
	if strings.Contains(tb.title, "holds") || !strings.Contains(strings.Join(tb.notes, " "), "GOGC=100") {
		t.Errorf("plain run: got title %q and notes %q, want no timed setup and the GC settings", tb.title, tb.notes)
	}
	p.atRestTimed = true
	f.held, f.offered = 800, 4000
	tb = atRestTable(p, f)
	if notes := strings.Join(tb.notes, " "); !strings.Contains(tb.title, "holds") || !strings.Contains(notes, "800 pods held") || !strings.Contains(notes, "4000 pods holding an offer") {
		t.Errorf("timed run: got title %q and notes %q", tb.title, notes)
	}
}

func TestGoMemorySettings(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		limit float64
		want  string
	}{
		{map[string]string{"PATH": "/bin"}, math.MaxInt64, "GOGC=100 (Go's default), no GOMEMLIMIT"},
		{map[string]string{"PATH": "/bin"}, 0, "GOGC=100 (Go's default), no GOMEMLIMIT"}, // no such metric
		{map[string]string{"GOGC": "50", "GOMEMLIMIT": "64MiB"}, 64 << 20, "GOGC=50, GOMEMLIMIT=64MiB"},
		{map[string]string{}, 0.9 * (256 << 20), "GOGC=100 (Go's default), a soft memory limit of 230.4 MiB (--memory-limit-ratio of its container's)"},
	} {
		if got := goMemorySettings(tc.env, tc.limit); got != tc.want {
			t.Errorf("%v, %g: got %q, want %q", tc.env, tc.limit, got, tc.want)
		}
	}
}
