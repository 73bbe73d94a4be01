package choice

import "testing"

type color string

func TestParse(t *testing.T) {
	valid := []color{"red", "green", "blue"}
	for _, c := range valid {
		if got, err := Parse(string(c), valid); err != nil || got != c {
			t.Errorf("Parse(%q) = %q, %v; want %q, nil", c, got, err, c)
		}
	}
	for _, tt := range []struct {
		in    string
		valid []color
		want  string
	}{
		{"Red", valid, `"Red": want red, green or blue`},
		{"", valid, `"": want red, green or blue`},
		{"x", valid[:2], `"x": want red or green`},
		{"x", valid[:1], `"x": want red`},
	} {
		got, err := Parse(tt.in, tt.valid)
		if err == nil || err.Error() != tt.want || got != "" {
			t.Errorf("Parse(%q, %v) = %q, %v; want \"\", %s", tt.in, tt.valid, got, err, tt.want)
		}
	}
}
