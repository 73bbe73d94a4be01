package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/edgeota/edgeota/internal/terminal"
	"github.com/edgeota/edgeota/rollout"
)

// display shows the views of a rollout as status finds them: text blocks,
// or the live view on a terminal.
type display interface {
	// show takes the latest view.
	show(v view)
	// close ends the display, the last view shown.
	close()
}

// display returns where status --watch (watch) or status shows views: the
// live view when watching on a terminal, text blocks anywhere else.
func (c *cli) display(watch bool) display {
	if watch && c.tty != nil {
		return c.newLiveView()
	}
	return &textBlocks{c: c}
}

// textBlocks prints each view as a text block, when it differs from the
// last one printed: on a pipe, a file, or without --watch.
type textBlocks struct {
	c       *cli
	printed *view
}

func (t *textBlocks) show(v view) {
	if t.printed == nil || v.key() != t.printed.key() {
		t.c.print(v)
		t.printed = &v
	}
}

func (t *textBlocks) close() {}

// minRedraw spaces the live view's redraws in a burst of changes (a wave's
// status writes): the terminal is not made to flicker.
const minRedraw = 100 * time.Millisecond

// liveView draws the rollout on a terminal, one frame redrawn in place: at
// each change of the view, each second while it shows a countdown, and when
// the terminal is resized. The view comes from the watch alone: a countdown
// ticks from the times the rollout status holds, with no request to the API
// server. client-go's log lines (a watch broken, then resumed) appear above
// the frame.
type liveView struct {
	c      *cli
	screen *terminal.Live
	color  bool

	mu   sync.Mutex
	v    view
	seen bool

	changed chan struct{}
	done    chan struct{}
	stopped chan struct{}
	// restoreLogs sends client-go's log lines back where they went.
	restoreLogs func()
}

func (c *cli) newLiveView() *liveView {
	l := &liveView{
		c:       c,
		screen:  terminal.NewLive(c.tty, func() (int, int) { return terminal.Size(c.tty) }),
		color:   c.color,
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	l.restoreLogs = func() {}
	if c.logs != nil {
		l.restoreLogs = c.logs.redirect(l.screen.Above(c.stderr))
	}
	go l.run()
	return l
}

func (l *liveView) show(v view) {
	l.mu.Lock()
	l.v, l.seen = v, true
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default: // a redraw is pending, which will draw v
	}
}

// close draws the last view as the last frame, whole, and shows the cursor
// below it.
func (l *liveView) close() {
	close(l.done)
	<-l.stopped
	l.restoreLogs()
	lines, _ := l.frame()
	l.screen.Close(lines)
}

// run redraws the frame until close.
func (l *liveView) run() {
	defer close(l.stopped)
	redraw, stopFollowing := l.screen.Follow()
	defer stopFollowing()
	tick := time.NewTimer(time.Hour)
	defer tick.Stop()
	var drawn time.Time
	for {
		lines, ticking := l.frame()
		if lines != nil {
			l.screen.Draw(lines)
			drawn = time.Now()
		}
		tick.Stop()
		var ticks <-chan time.Time
		if ticking {
			tick.Reset(untilNextSecond(l.c.now()))
			ticks = tick.C
		}
		select {
		case <-l.done:
			return
		case <-redraw:
		case <-ticks:
		case <-l.changed:
			select {
			case <-time.After(time.Until(drawn.Add(minRedraw))):
			case <-l.done:
				return
			}
		}
	}
}

// frame renders the latest view for the terminal's width now; nil before
// the first view.
func (l *liveView) frame() (lines []string, ticking bool) {
	l.mu.Lock()
	v, seen := l.v, l.seen
	l.mu.Unlock()
	if !seen {
		return nil, false
	}
	cols, _ := terminal.Size(l.c.tty)
	return l.c.frame(v, cols, l.color)
}

// untilNextSecond is how long from now until a countdown shows its next
// second: the times in a rollout status are whole seconds, so a countdown
// changes just after each second of the clock.
func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now)
}

// nodeState is a state of nodes in the live view's bar: its glyph, which
// also starts the state's line (the bar reads without colors, and in a
// copy of the screen), and its color (an SGR code; none for the rest).
type nodeState struct {
	glyph byte
	color string
}

// The states the bar draws, in the order it draws them.
var (
	stateUpdated  = nodeState{'#', "32"}   // green
	stateDown     = nodeState{'!', "33"}   // yellow: settled, pod unavailable now
	stateFailed   = nodeState{'X', "1;31"} // bold red
	stateInFlight = nodeState{'>', "36"}   // cyan
	stateHeldBack = nodeState{'=', "90"}   // grey: pause, selector, partition
	stateHeld     = nodeState{'h', "35"}   // magenta: held by the owner
	stateWaiting  = nodeState{'w', "34"}   // blue: waiting for the window
	stateOffered  = nodeState{'o', "96"}   // bright cyan: OTA offers not taken
	stateSkipped  = nodeState{'-', "90"}   // grey: NotReady
	stateRest     = nodeState{'.', ""}     // the other nodes: not started
)

// segment is a state's nodes in the bar.
type segment struct {
	state *nodeState
	nodes int
}

// segments splits the status's nodes by state, in the bar's order. The
// status's counts may overlap (a node that went offline after settling is
// both updated and skipped; an offer may be held; a paused rollout holds
// back nodes that also wait for their window): each state takes its nodes
// out of what the states before it left, so the segments add up to the
// total, and a state's line says its own count. What binds comes first:
// held back (pause, selector, partition) before a hold or a window.
func segments(s *rollout.Status) []segment {
	down := 0
	if u := s.SettledUnavailable; u != nil {
		down = u.Count
	}
	left := s.Total
	var segs []segment
	take := func(state *nodeState, n int) {
		n = min(max(n, 0), left)
		left -= n
		segs = append(segs, segment{state, n})
	}
	take(&stateUpdated, s.Updated-down)
	take(&stateDown, down)
	take(&stateFailed, s.Failed.Count)
	take(&stateInFlight, s.InFlight)
	take(&stateHeldBack, s.HeldBack)
	take(&stateHeld, count(s.Held))
	take(&stateWaiting, count(s.WaitingForWindow))
	take(&stateOffered, count(s.Offered))
	take(&stateSkipped, s.Skipped)
	take(&stateRest, left)
	return segs
}

// apportion splits cells among segments in proportion to their nodes
// (largest remainders), at least one cell for a segment with a node when
// there are cells enough: a single failed node among thousands shows.
func apportion(segs []segment, cells int) []int {
	total := 0
	for _, s := range segs {
		total += s.nodes
	}
	out := make([]int, len(segs))
	if total == 0 || cells <= 0 {
		return out
	}
	used := 0
	order := make([]int, len(segs))
	for i, s := range segs {
		out[i] = s.nodes * cells / total
		used += out[i]
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return segs[order[a]].nodes*cells%total > segs[order[b]].nodes*cells%total
	})
	for k := 0; used < cells; k++ {
		out[order[k%len(order)]]++
		used++
	}
	for i, s := range segs {
		if s.nodes == 0 || out[i] > 0 {
			continue
		}
		widest := 0
		for j := range out {
			if out[j] > out[widest] {
				widest = j
			}
		}
		if out[widest] > 1 {
			out[widest]--
			out[i]++
		}
	}
	return out
}

// maxBar is the widest the bar's inside grows, however wide the terminal.
const maxBar = 60

// bar draws the nodes by state, and the share updated:
// [#####>>ww.......]  41%. It fits cols-1 cells: without the share on a
// narrow terminal, not at all on one too narrow for a bar.
func bar(s *rollout.Status, cols int, paint func(*nodeState, string) string) string {
	share := fmt.Sprintf("  %d%%", s.Updated*100/max(s.Total, 1))
	inner := min(cols-1-2-len(share), maxBar)
	if inner < 10 {
		share, inner = "", cols-1-2
	}
	if inner < 1 {
		return ""
	}
	segs := segments(s)
	line := "["
	for i, cells := range apportion(segs, inner) {
		if cells > 0 {
			glyphs := make([]byte, cells)
			for j := range glyphs {
				glyphs[j] = segs[i].state.glyph
			}
			line += paint(segs[i].state, string(glyphs))
		}
	}
	return line + "]" + share
}

// frame renders the live view of v for a terminal cols cells wide: the
// headline, the bar, then the view's details, each line that counts nodes
// starting with its state's glyph; color paints the glyphs. ticking says
// whether it shows a countdown, which changes every second.
func (c *cli) frame(v view, cols int, color bool) (lines []string, ticking bool) {
	paint := func(state *nodeState, s string) string {
		if !color || state.color == "" {
			return s
		}
		return terminal.Color(state.color, s)
	}
	fit := func(s string) string { return terminal.Fit(s, cols-1) }
	lines = append(lines, fit(terminal.Clean(v.headline)))
	s := v.status
	if s != nil && s.Total > 0 {
		if b := bar(s, cols, paint); b != "" {
			lines = append(lines, b)
		}
	}
	for _, d := range c.details(v, true) {
		text := terminal.Fit(terminal.Clean(fmt.Sprintf("%-10s %s", d.label, d.text)), cols-1-2)
		glyph := " "
		if d.state != nil {
			glyph = paint(d.state, string(d.state.glyph))
		}
		lines = append(lines, fit(glyph+" "+text))
	}
	if s != nil {
		for _, t := range []*rollout.TimedNodes{s.WaitingForWindow, s.Held, s.Offered} {
			ticking = ticking || t != nil && t.Count > 0 && t.At != nil
		}
	}
	return lines, ticking
}

// countdownTo renders a duration from now to the second, as a countdown
// that ticks: in 3h12m05s, in 2d4h05m09s, 5s ago.
func countdownTo(d time.Duration) string {
	past := d < 0
	if past {
		d = -d
	}
	d = d.Round(time.Second)
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", sec)
	case d < time.Hour:
		s = fmt.Sprintf("%dm%02ds", m, sec)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm%02ds", h, m, sec)
	default:
		s = fmt.Sprintf("%dd%dh%02dm%02ds", h/24, h%24, m, sec)
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

// span renders a limit's duration as written: 24h, 1h30m, 90s.
func span(d time.Duration) string {
	s := d.String()
	if len(s) > 3 && s[len(s)-3:] == "m0s" {
		s = s[:len(s)-2]
	}
	if len(s) > 3 && s[len(s)-3:] == "h0m" {
		s = s[:len(s)-2]
	}
	return s
}

// logOutput is where client-go's log lines (klog) go: standard error, or,
// while the live view is drawn, above its frame.
type logOutput struct {
	mu sync.Mutex
	w  io.Writer
}

func newLogOutput() *logOutput { return &logOutput{w: os.Stderr} }

func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

// redirect sends the log lines to w until restore is called.
func (o *logOutput) redirect(w io.Writer) (restore func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	was := o.w
	o.w = w
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.w = was
	}
}
