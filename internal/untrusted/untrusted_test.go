package untrusted

import (
	"strings"
	"testing"
)

func TestQuoteBoundsLongValues(t *testing.T) {
	got := Quote(strings.Repeat("x", 64<<10))
	if len(got) > 2*MaxQuoted {
		t.Errorf("got %d bytes, want at most %d", len(got), 2*MaxQuoted)
	}
	if !strings.Contains(got, "(65536 bytes)") {
		t.Errorf("got %q, want the original length named", got)
	}
}

func TestQuoteEscapes(t *testing.T) {
	if got := Quote("a\nb\x00é"); got != `"a\nb\x00\u00e9"` {
		t.Errorf("got %s, want control and non-ASCII characters escaped", got)
	}
}
