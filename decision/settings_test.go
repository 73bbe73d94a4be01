package decision

import (
	"errors"
	"testing"

	"github.com/edgeota/edgeota/rollout"
)

func TestMaxUnavailable(t *testing.T) {
	tests := []struct {
		value   string
		nodes   int
		want    int
		wantErr bool
	}{
		{"3", 10, 3, false},
		{" 7 ", 10, 7, false},
		{"15", 10, 15, false},
		{"30%", 10, 3, false},
		{"30%", 11, 4, false}, // 3.3 rounds up
		{"1%", 1000, 10, false},
		{"1%", 3, 1, false},
		{"100%", 7, 7, false},
		{"", 10, 1, false},    // absent: 10%
		{"", 25, 3, false},    // 2.5 rounds up
		{"0", 25, 3, false},   // 0 means 10%
		{"0%", 9, 1, false},   // 0% means 10%
		{"", 0, 0, false},     // no nodes
		{"-1", 10, 0, true},   // negative
		{"101%", 10, 0, true}, // above 100%
		{"abc", 10, 0, true},
		{"%", 10, 0, true},
		{"1.5", 10, 0, true},
		{"30 %", 10, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			annotations := map[string]string{}
			if tt.value != "" {
				annotations[rollout.MaxUnavailableAnnotation] = tt.value
			}
			s, err := ParseSettings(rollout.StrategyAdvancedRollingUpdate, annotations, 0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("%q: got error %v, want error %v", tt.value, err, tt.wantErr)
			}
			if err != nil {
				if !IsMaxUnavailable(err) {
					t.Errorf("%q: got %v, want an error about %s", tt.value, err, rollout.MaxUnavailableAnnotation)
				}
				return
			}
			if got := s.MaxUnavailable(tt.nodes); got != tt.want {
				t.Errorf("%q of %d nodes: got %d, want %d", tt.value, tt.nodes, got, tt.want)
			}
		})
	}
}

// TestCountsKeepTheirRounding: max-failed rounds up to at least 1 and
// refuses zero; partition rounds up and takes zero; each names itself when
// invalid.
func TestCountsKeepTheirRounding(t *testing.T) {
	parse := func(key, value string) (Settings, error) {
		return ParseSettings(rollout.StrategyOTA, map[string]string{key: value}, 0)
	}
	for _, tc := range []struct {
		value      string
		nodes, max int
	}{{"1%", 3, 1}, {"50%", 5, 3}, {"2", 100, 2}} {
		s, err := parse(rollout.MaxFailedAnnotation, tc.value)
		if err != nil || s.MaxFailed(tc.nodes) != tc.max {
			t.Errorf("max-failed %q of %d: got %d, %v; want %d", tc.value, tc.nodes, s.MaxFailed(tc.nodes), err, tc.max)
		}
	}
	if s, _ := ParseSettings(rollout.StrategyOTA, map[string]string{rollout.MaxUnavailableAnnotation: "20%"}, 0); s.MaxFailed(10) != 2 {
		t.Errorf("max-failed absent: got %d, want the budget, 2", s.MaxFailed(10))
	}
	for _, bad := range []string{"0", "0%", "-1", "101%", "x"} {
		_, err := parse(rollout.MaxFailedAnnotation, bad)
		var invalid *InvalidError
		if !errors.As(err, &invalid) || invalid.Annotation != rollout.MaxFailedAnnotation {
			t.Errorf("max-failed %q: got %v, want an error naming %s", bad, err, rollout.MaxFailedAnnotation)
		}
	}
	for _, tc := range []struct {
		value string
		of    int
		want  int
	}{{"0", 10, 0}, {"25%", 10, 3}, {"4", 10, 4}} {
		s, err := parse(rollout.PartitionAnnotation, tc.value)
		if err != nil || s.Partition(tc.of) != tc.want {
			t.Errorf("partition %q of %d: got %d, %v; want %d", tc.value, tc.of, s.Partition(tc.of), err, tc.want)
		}
	}
	if s, _ := parse(rollout.PausedAnnotation, "true"); s.Partition(10) != -1 {
		t.Errorf("no partition: got %d, want -1", s.Partition(10))
	}
	for key, bad := range map[string]string{rollout.PartitionAnnotation: "-2", rollout.PausedAnnotation: "maybe",
		rollout.AgentProofAnnotation: "sometimes", rollout.UpgradeDeadlineAnnotation: "0", rollout.MaxHoldAnnotation: "-1",
		rollout.RolloutNodeSelectorAnnotation: "a in (", rollout.MaintenanceWindowAnnotation: "Mon 25:00-26:00",
		rollout.ProgressDeadlineAnnotation: "10m"} {
		_, err := parse(key, bad)
		var invalid *InvalidError
		if !errors.As(err, &invalid) || invalid.Annotation != key || invalid.Value != bad {
			t.Errorf("%s=%q: got %v, want an error naming the annotation and the value", key, bad, err)
		}
	}
}
