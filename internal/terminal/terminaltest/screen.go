// Package terminaltest reads what a live view wrote to a terminal as the
// terminal shows it, for tests: the plugin's unit tests and the end-to-end
// scenario compare screens, not byte streams.
package terminaltest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Screen is a terminal's screen as far as a live view uses one: text, line
// feeds (which return the carriage, as a terminal's default output
// processing makes them) and carriage returns, ECMA-48's cursor up, erase in line and in
// display, cursor home, the cursor's visibility; colors (SGR) are ignored.
// Like xterm, it does not rewrap its lines when it narrows.
type Screen struct {
	cols, rows int
	cells      [][]rune
	row, col   int
	// scrolled are the lines scrolled off the top, oldest first.
	scrolled []string
	shown    bool
	// problems are what a live view must never do: a line reaching the
	// last column (where terminals differ: some wrap there, some later),
	// an escape sequence or control character it does not use.
	problems []string
}

// NewScreen is an empty screen cols wide and rows high, the cursor shown at
// the top left.
func NewScreen(cols, rows int) *Screen {
	s := &Screen{cols: cols, rows: rows, shown: true}
	s.cells = make([][]rune, rows)
	for i := range s.cells {
		s.cells[i] = blank(cols)
	}
	return s
}

func blank(cols int) []rune { return []rune(strings.Repeat(" ", cols)) }

// Resize narrows or widens the screen; what no longer fits is cut.
func (s *Screen) Resize(cols int) {
	for i, line := range s.cells {
		if cols < len(line) {
			s.cells[i] = line[:cols]
		} else {
			s.cells[i] = append(line, blank(cols-len(line))...)
		}
	}
	s.cols = cols
	s.col = min(s.col, cols-1)
}

// csi matches a control sequence: ESC [, an optional ?, parameters, the
// final letter.
var csi = regexp.MustCompile(`^\x1b\[(\??)([0-9;]*)([A-Za-z])`)

// Write draws out, as the terminal would.
func (s *Screen) Write(out string) {
	for i := 0; i < len(out); {
		if m := csi.FindStringSubmatch(out[i:]); m != nil {
			s.control(m[1], m[2], m[3])
			i += len(m[0])
			continue
		}
		r, size := utf8.DecodeRuneInString(out[i:])
		i += size
		switch {
		case r == '\r':
			s.col = 0
		case r == '\n':
			// A terminal's default output processing (ONLCR) returns
			// the carriage at each line feed.
			s.col = 0
			s.lineFeed()
		case r == '\b':
			s.col = max(s.col-1, 0)
		case r < ' ' || r == 0x7f:
			s.problems = append(s.problems, fmt.Sprintf("control character %q near %q", r, out[max(i-12, 0):min(i+12, len(out))]))
		default:
			if s.col >= s.cols-1 {
				s.problems = append(s.problems, fmt.Sprintf("a line reaching the last column of %d: %q", s.cols, string(s.cells[s.row])))
				if s.col >= s.cols {
					s.col = 0
					s.lineFeed()
				}
			}
			s.cells[s.row][s.col] = r
			s.col++
		}
	}
}

func (s *Screen) lineFeed() {
	if s.row < s.rows-1 {
		s.row++
		return
	}
	s.scrolled = append(s.scrolled, strings.TrimRight(string(s.cells[0]), " "))
	s.cells = append(s.cells[1:], blank(s.cols))
}

func (s *Screen) control(private, params, final string) {
	n, _ := strconv.Atoi(params)
	switch {
	case private == "?" && params == "25" && final == "l":
		s.shown = false
	case private == "?" && params == "25" && final == "h":
		s.shown = true
	case private != "":
		s.problems = append(s.problems, "escape sequence ?"+params+final)
	case final == "m":
	case final == "A":
		s.row = max(s.row-max(n, 1), 0)
	case final == "H" && params == "":
		s.row, s.col = 0, 0
	case final == "K" && n == 0:
		for c := s.col; c < s.cols; c++ {
			s.cells[s.row][c] = ' '
		}
	case final == "J" && n == 0:
		for c := s.col; c < s.cols; c++ {
			s.cells[s.row][c] = ' '
		}
		for r := s.row + 1; r < s.rows; r++ {
			s.cells[r] = blank(s.cols)
		}
	case final == "J" && n == 2:
		for r := range s.cells {
			s.cells[r] = blank(s.cols)
		}
	default:
		s.problems = append(s.problems, "escape sequence "+params+final)
	}
}

// Lines are the screen's lines, trailing blanks cut, down to the last one
// that is not blank.
func (s *Screen) Lines() []string {
	var lines []string
	for _, l := range s.cells {
		lines = append(lines, strings.TrimRight(string(l), " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Scrolled are the lines scrolled off the top, oldest first.
func (s *Screen) Scrolled() []string { return s.scrolled }

// CursorShown reports whether the cursor is visible.
func (s *Screen) CursorShown() bool { return s.shown }

// Problems are what the output did that a live view must never do.
func (s *Screen) Problems() []string { return s.problems }
