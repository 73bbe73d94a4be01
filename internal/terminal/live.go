package terminal

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Escape sequences a live view writes: ECMA-48's, which every terminal
// emulator in use reads (xterm, VTE, the Linux console, Windows Terminal).
const (
	hideCursor  = "\x1b[?25l"
	showCursor  = "\x1b[?25h"
	eraseLine   = "\x1b[K"        // from the cursor to the end of its line
	eraseBelow  = "\x1b[J"        // from the cursor to the end of the screen
	clearScreen = "\x1b[H\x1b[2J" // the cursor to the top left, the screen erased
)

// Live is a frame of lines drawn below the cursor and redrawn in place, the
// cursor hidden meanwhile and left below the last frame, shown, by Close.
//
// Invariant: after each write, the cursor is at the start of the line just
// below the frame on screen, and that frame is frame, each line fitted to
// one less cell than the terminal's width then (a line as wide as the
// terminal leaves the cursor pending at its end, where some terminals wrap
// and some do not). Moving up len(frame) lines therefore finds the frame's
// first line, as long as the terminal has not narrowed below a line (a
// terminal that rewraps would have split it) nor grown shorter than the
// frame (its first lines would have scrolled away): the screen is cleared
// then.
type Live struct {
	mu   sync.Mutex
	out  io.Writer
	size func() (cols, rows int)
	// frame is the frame on screen, as written; widest its widest line;
	// cols and rows the terminal's size then.
	frame      []string
	widest     int
	cols, rows int
	// hidden: the cursor is hidden.
	hidden bool
	closed bool
}

// NewLive returns a live view writing to out, a terminal whose size is
// size's. It writes nothing until the first frame.
func NewLive(out io.Writer, size func() (cols, rows int)) *Live {
	return &Live{out: out, size: size}
}

// Draw replaces the frame on screen with lines, in one write: each line cut
// to the terminal's width (never wrapped), and no more lines than the
// terminal's height less one (the cursor's line). Nothing is drawn once
// closed.
func (l *Live) Draw(lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.draw(lines, false)
	}
}

// Close draws lines as the last frame, whole however tall, then shows the
// cursor below it; the frame stays on screen. Later calls do nothing.
func (l *Live) Close(lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.draw(lines, true)
	l.closed = true
}

// draw writes the frame; the last one is not cut to the terminal's height.
// A frame the same as the one on screen, at the same size, is not written
// again.
func (l *Live) draw(lines []string, last bool) {
	cols, rows := l.size()
	if !last && len(lines) > rows-1 {
		lines = lines[:max(rows-1, 1)]
	}
	fitted := make([]string, len(lines))
	widest := 0
	for i, line := range lines {
		fitted[i] = Fit(line, cols-1)
		widest = max(widest, Cells(fitted[i]))
	}
	if !last && l.hidden && cols == l.cols && rows == l.rows && slices.Equal(fitted, l.frame) {
		return
	}
	var b strings.Builder
	if !l.hidden && !last {
		b.WriteString(hideCursor)
		l.hidden = true
	}
	l.erase(&b, cols, rows)
	for _, line := range fitted {
		b.WriteString(line + eraseLine + "\n")
	}
	l.frame, l.widest, l.cols, l.rows = fitted, widest, cols, rows
	b.WriteString(eraseBelow)
	if last && l.hidden {
		b.WriteString(showCursor)
		l.hidden = false
	}
	io.WriteString(l.out, b.String())
}

// erase moves the cursor to where the next frame starts: the start of the
// frame on screen, or the top of a cleared screen when the terminal
// narrowed or shortened under it (see Live).
func (l *Live) erase(b *strings.Builder, cols, rows int) {
	switch n := len(l.frame); {
	case n == 0:
		b.WriteString("\r")
	case l.widest > cols-1 || n > rows-1:
		b.WriteString(clearScreen)
	default:
		fmt.Fprintf(b, "\r\x1b[%dA", n)
	}
}

// Above returns a writer whose writes (log lines) appear above the frame:
// the frame is erased, the text written to w, and the frame drawn again
// below it. w may be another stream to the same terminal (standard error);
// elsewhere the frame is merely redrawn.
func (l *Live) Above(w io.Writer) io.Writer { return &above{l: l, w: w} }

type above struct {
	l *Live
	w io.Writer
}

func (a *above) Write(p []byte) (int, error) {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.frame) == 0 {
		return a.w.Write(p)
	}
	var b strings.Builder
	cols, rows := l.size()
	l.erase(&b, cols, rows)
	b.WriteString(eraseBelow)
	io.WriteString(l.out, b.String())
	n, err := a.w.Write(p)
	if len(p) > 0 && p[len(p)-1] != '\n' {
		io.WriteString(a.w, "\n")
	}
	frame := l.frame
	l.frame = nil
	l.draw(frame, false)
	return n, err
}

// Suspend shows the cursor and lets go of the frame, before the process
// stops (Ctrl-Z): the shell writes below it. Resume hides the cursor again;
// the next frame is drawn where the cursor then is.
func (l *Live) Suspend() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hidden {
		io.WriteString(l.out, showCursor)
		l.hidden = false
	}
	l.frame = nil
}

// Resume undoes Suspend, once the process is continued.
func (l *Live) Resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && !l.hidden {
		io.WriteString(l.out, hideCursor)
		l.hidden = true
	}
}
