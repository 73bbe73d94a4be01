package terminal

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/edgeota/edgeota/internal/terminal/terminaltest"
)

// TestOf: a live view needs a terminal that moves the cursor.
func TestOf(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, c := range []struct {
		name string
		w    io.Writer
		term string
		want bool
	}{
		{"a terminal", tty, "xterm-256color", true},
		{"a terminal, TERM=dumb", tty, "dumb", false},
		{"a terminal, no TERM", tty, "", false},
		{"a pipe", w, "xterm", false},
		{"/dev/null, a character device", null, "xterm", false},
		{"a buffer", &bytes.Buffer{}, "xterm", false},
	} {
		if _, got := Of(c.w, c.term); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 57, Rows: 13}); err != nil {
		t.Fatal(err)
	}
	if cols, rows := Size(tty); cols != 57 || rows != 13 {
		t.Errorf("got the size %dx%d, want 57x13", cols, rows)
	}
	if cols, rows := Size(w); cols != 80 || rows != 24 {
		t.Errorf("got the size of a pipe %dx%d, want 80x24", cols, rows)
	}
}

// TestFit: lines are cut to the cells they may take, colors and wide runes
// counted as a terminal draws them.
func TestFit(t *testing.T) {
	red := Color("31", "failed")
	for _, c := range []struct {
		s     string
		cols  int
		want  string
		cells int
	}{
		{"short", 10, "short", 5},
		{"exactly ten", 11, "exactly ten", 11},
		{"a line too long", 10, "a line ...", 10},
		{"abc", 2, "ab", 2},
		{red + " nodes", 12, red + " nodes", 12},
		{red + " nodes", 5, "\x1b[31mfa" + Reset + "...", 5},
		{"节点失败了", 7, "节点...", 7},
		{"", 0, "", 0},
	} {
		got := Fit(c.s, c.cols)
		if got != c.want || Cells(got) != c.cells {
			t.Errorf("Fit(%q, %d): got %q (%d cells), want %q (%d cells)", c.s, c.cols, got, Cells(got), c.want, c.cells)
		}
	}
}

// TestClean: what a node wrote never moves the cursor.
func TestClean(t *testing.T) {
	if got, want := Clean("CrashLoop\x1b[2J\tBackOff\r\n\u009b"), "CrashLoop?[2J?BackOff???"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if s := "plain, ünïcode 节点"; Clean(s) != s {
		t.Errorf("got %q, want it unchanged", Clean(s))
	}
}

// screen is a Live's output as a terminal cols x rows shows it.
type screen struct {
	out        bytes.Buffer
	cols, rows int
}

func (s *screen) live() *Live { return NewLive(&s.out, func() (int, int) { return s.cols, s.rows }) }

func (s *screen) lines(t *testing.T) []string {
	t.Helper()
	vt := terminaltest.NewScreen(s.cols, s.rows)
	vt.Write(s.out.String())
	for _, p := range vt.Problems() {
		t.Errorf("the screen got %s", p)
	}
	return vt.Lines()
}

// TestLiveRedrawsInPlace: each frame replaces the last, taller or shorter,
// below what was on the screen before; the last one stays, the cursor shown.
func TestLiveRedrawsInPlace(t *testing.T) {
	s := &screen{cols: 20, rows: 10}
	s.out.WriteString("$ kubectl edgeota\n")
	l := s.live()
	l.Draw([]string{"one", "two", "three"})
	if !strings.HasPrefix(s.out.String()[len("$ kubectl edgeota\n"):], hideCursor) {
		t.Errorf("got %q, want the cursor hidden first", s.out.String())
	}
	l.Draw([]string{"four", "a line far too long to fit"})
	l.Draw([]string{"five", "six", "seven", "eight"})
	l.Close([]string{"last"})
	l.Draw([]string{"after the end"})
	want := []string{"$ kubectl edgeota", "last"}
	if got := s.lines(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got the screen %q, want %q", got, want)
	}
	if !strings.HasSuffix(s.out.String(), showCursor) {
		t.Errorf("got %q, want the cursor shown at the end", s.out.String())
	}
}

// TestLiveFitsTheScreen: no line wraps, and a frame taller than the screen
// keeps its first lines (the cursor's line stays free), except the last
// frame, drawn whole.
func TestLiveFitsTheScreen(t *testing.T) {
	s := &screen{cols: 12, rows: 4}
	l := s.live()
	l.Draw([]string{"headline that is long", "b", "c", "d", "e"})
	if got, want := s.lines(t), []string{"headline...", "b", "c"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got the screen %q, want %q", got, want)
	}
	l.Close([]string{"x", "y", "z", "w"})
	vt := terminaltest.NewScreen(s.cols, s.rows)
	vt.Write(s.out.String())
	if got := append(vt.Scrolled(), vt.Lines()...); strings.Join(got, "|") != "x|y|z|w" {
		t.Errorf("got the screen %q (scrolled and shown), want the last frame whole", got)
	}
}

// TestLiveNarrowed: when the terminal narrows below the frame's lines
// (which a terminal may have rewrapped), the screen is cleared and the frame
// drawn at the top; when it widens, or narrows above them, in place.
func TestLiveNarrowed(t *testing.T) {
	s := &screen{cols: 40, rows: 10}
	l := s.live()
	l.Draw([]string{"a line of 25 cells, about", "short"})
	s.cols = 30
	before := s.out.Len()
	l.Draw([]string{"a line of 25 cells, about", "short"})
	if strings.Contains(s.out.String()[before:], clearScreen) {
		t.Errorf("got the screen cleared for a terminal still wider than the frame")
	}
	s.cols = 20
	before = s.out.Len()
	l.Draw([]string{"a line of 25 cells, about", "short"})
	if !strings.HasPrefix(s.out.String()[before:], clearScreen) {
		t.Errorf("got %q, want the screen cleared first", s.out.String()[before:])
	}
	s.rows = 2
	before = s.out.Len()
	l.Draw([]string{"x"})
	if !strings.HasPrefix(s.out.String()[before:], clearScreen) {
		t.Errorf("got %q after the terminal shortened under the frame, want the screen cleared first", s.out.String()[before:])
	}
}

// TestLiveAbove: a log line goes above the frame, which is drawn again
// below it.
func TestLiveAbove(t *testing.T) {
	s := &screen{cols: 40, rows: 10}
	l := s.live()
	log := l.Above(&s.out)
	if _, err := log.Write([]byte("before any frame\n")); err != nil {
		t.Fatal(err)
	}
	l.Draw([]string{"frame 1", "line 2"})
	if _, err := log.Write([]byte("W0101 a warning")); err != nil {
		t.Fatal(err)
	}
	l.Draw([]string{"frame 2", "line 2"})
	want := []string{"before any frame", "W0101 a warning", "frame 2", "line 2"}
	if got := s.lines(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got the screen %q, want %q", got, want)
	}
}

// TestLiveSuspended: Ctrl-Z shows the cursor; continued, the next frame
// starts where the cursor is, below what the shell wrote.
func TestLiveSuspended(t *testing.T) {
	s := &screen{cols: 40, rows: 10}
	l := s.live()
	l.Draw([]string{"frame 1"})
	l.Suspend()
	if !strings.HasSuffix(s.out.String(), showCursor) {
		t.Errorf("got %q, want the cursor shown once suspended", s.out.String())
	}
	s.out.WriteString("^Z\n[1]+  Stopped\n$ fg\n")
	l.Resume()
	l.Draw([]string{"frame 2"})
	want := []string{"frame 1", "^Z", "[1]+  Stopped", "$ fg", "frame 2"}
	if got := s.lines(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got the screen %q, want %q", got, want)
	}
	if strings.Count(s.out.String(), hideCursor) != 2 {
		t.Errorf("got %q, want the cursor hidden again once continued", s.out.String())
	}
}
