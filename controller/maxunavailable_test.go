package controller

import "testing"

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
			got, err := maxUnavailable(tt.value, tt.nodes)
			if (err != nil) != tt.wantErr {
				t.Fatalf("maxUnavailable(%q, %d): got error %v, want error %v", tt.value, tt.nodes, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("maxUnavailable(%q, %d): got %d, want %d", tt.value, tt.nodes, got, tt.want)
			}
		})
	}
}
