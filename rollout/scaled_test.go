package rollout

import "testing"

func TestParseScaled(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  Scaled
		of10  int
	}{
		{"3", Scaled{N: 3}, 3},
		{" 3 ", Scaled{N: 3}, 3},
		{"0", Scaled{}, 0},
		{"30%", Scaled{N: 30, Percent: true}, 3},
		{" 25 % ", Scaled{N: 25, Percent: true}, 3}, // rounded up
		{"100%", Scaled{N: 100, Percent: true}, 10},
		{"0%", Scaled{Percent: true}, 0},
		{"1%", Scaled{N: 1, Percent: true}, 1},
	} {
		got, err := ParseScaled(tc.value)
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.value, got, err, tc.want)
			continue
		}
		if n := got.Of(10); n != tc.of10 {
			t.Errorf("%q of 10: got %d, want %d", tc.value, n, tc.of10)
		}
	}
	for _, bad := range []string{"", " ", "%", "-1", "-5%", "101%", "1.5", "ten", "10%%", "0x10"} {
		if got, err := ParseScaled(bad); err == nil {
			t.Errorf("%q: got %+v, want an error", bad, got)
		}
	}
}
