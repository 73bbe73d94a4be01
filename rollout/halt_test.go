package rollout

import "testing"

func TestHaltReason(t *testing.T) {
	tests := []struct {
		name   string
		status Status
		want   HaltReason
	}{
		{"not halted", Status{Failed: FailedNodes{Count: 3}}, ""},
		{"upgrades failed", Status{Halted: true, Failed: FailedNodes{Count: 2}}, HaltNodesFailed},
		{"pulls failed only", Status{Halted: true, Failed: FailedNodes{Count: 2}, Pulls: &Pulls{Failed: 2}}, HaltPullsFailed},
		{"an upgrade among pulls", Status{Halted: true, Failed: FailedNodes{Count: 3}, Pulls: &Pulls{Failed: 2}}, HaltNodesFailed},
		{"lost failures only", Status{Halted: true, Failed: FailedNodes{Count: 1, Lost: 1}}, HaltRecordLost},
		{"pulls and lost failures", Status{Halted: true, Failed: FailedNodes{Count: 2, Lost: 1}, Pulls: &Pulls{Failed: 1}}, HaltPullsFailed},
		{"no failure counted", Status{Halted: true}, HaltNodesFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.status.HaltReason(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHaltReasonsListsEveryReason: every reason HaltReason can return is in
// HaltReasons, which the metric exports; labels are Prometheus-safe.
func TestHaltReasonsListsEveryReason(t *testing.T) {
	seen := map[HaltReason]bool{}
	for _, r := range HaltReasons {
		if seen[r] {
			t.Errorf("%q listed twice", r)
		}
		seen[r] = true
		for _, c := range r {
			if (c < 'a' || c > 'z') && c != '_' {
				t.Errorf("%q: want lower-case letters and underscores", r)
			}
		}
	}
	for _, r := range []HaltReason{HaltNodesFailed, HaltPullsFailed, HaltRecordLost} {
		if !seen[r] {
			t.Errorf("%q missing from HaltReasons", r)
		}
	}
}
