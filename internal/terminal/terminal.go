// Package terminal draws the live views of edgeota's command-line tools
// (otactl's --wait, kubectl edgeota's rollout status --watch): whether the
// output is a terminal that can be redrawn at all, how wide it is, and a
// frame of lines redrawn in place there. Anywhere else (a pipe, a file, CI,
// TERM=dumb) the tools print plain lines, with no escape codes.
package terminal

import (
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	xterm "golang.org/x/term"
	"golang.org/x/text/width"
)

// Of returns the terminal w writes to, when a live view can be drawn there:
// w is a terminal (not a pipe, a file or /dev/null), and term, the value of
// $TERM, names one that moves the cursor (set, and not "dumb").
func Of(w io.Writer, term string) (*os.File, bool) {
	f, ok := w.(*os.File)
	if !ok || term == "" || term == "dumb" || !xterm.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	return f, true
}

// Size returns the terminal's width and height in cells; 80 by 24 when it
// cannot tell.
func Size(f *os.File) (cols, rows int) {
	cols, rows, err := xterm.GetSize(int(f.Fd()))
	if err != nil || cols <= 0 || rows <= 0 {
		return 80, 24
	}
	return cols, rows
}

// Clean replaces the control characters in s (a tab, a line break, the
// escape sequences a node could have written into a reason) by '?': a live
// view draws what it meant to, and knows how wide it is.
func Clean(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '?'
		}
		return r
	}, s)
}

// Escape writes the control characters in s as Go escapes (\x1b, \n):
// for a text that is printed once rather than drawn (kubectl edgeota's
// text view), where the reader may want to know what the node wrote.
func Escape(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }

// Cells is how many cells s takes on a terminal: an SGR escape sequence
// (colors, "\x1b[...m") none, an East Asian wide or fullwidth rune two, any
// other rune one. s holds no other control characters (see Clean).
func Cells(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if skip := sgrLen(s[i:]); skip > 0 {
			i += skip
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += runeCells(r)
		i += size
	}
	return n
}

// ellipsis ends a line cut to fit: ASCII, one cell per character whatever
// the terminal's locale.
const ellipsis = "..."

// Fit cuts s to at most cols cells, ending it with "..." when it was cut;
// colors open at the cut are reset. A terminal never wraps a fitted line.
func Fit(s string, cols int) string {
	if Cells(s) <= cols {
		return s
	}
	keep := cols - len(ellipsis)
	tail := ellipsis
	if keep < 0 {
		keep, tail = cols, ""
	}
	var b strings.Builder
	colored := false
	for i, n := 0, 0; i < len(s); {
		if skip := sgrLen(s[i:]); skip > 0 {
			b.WriteString(s[i : i+skip])
			colored = s[i:i+skip] != Reset
			i += skip
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if n+runeCells(r) > keep {
			break
		}
		n += runeCells(r)
		b.WriteString(s[i : i+size])
		i += size
	}
	if colored {
		b.WriteString(Reset)
	}
	b.WriteString(tail)
	return b.String()
}

// runeCells is how many cells r takes.
func runeCells(r rune) int {
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// sgrLen is the length of the SGR escape sequence s starts with, 0 if none.
func sgrLen(s string) int {
	if !strings.HasPrefix(s, "\x1b[") {
		return 0
	}
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c == 'm':
			return i + 1
		case c != ';' && (c < '0' || c > '9'):
			return 0
		}
	}
	return 0
}

// Reset ends a color.
const Reset = "\x1b[0m"

// Color wraps s in the SGR color code (e.g. "32", green).
func Color(code, s string) string { return "\x1b[" + code + "m" + s + Reset }
