//go:build !unix

package terminal

// Follow asks for no redraw where there is no SIGWINCH: the view is drawn
// again at its next change, at the width then.
func (l *Live) Follow() (redraw <-chan struct{}, stop func()) {
	return nil, func() {}
}
