//go:build unix

package terminal

import (
	"os"
	"os/signal"
	"syscall"
)

// Follow keeps the live view right through what the terminal's user does,
// until stop is called: each resize (SIGWINCH) asks for a redraw, at the new
// width; Ctrl-Z (SIGTSTP) shows the cursor before the process stops, and
// once it continues (fg, SIGCONT) hides it again and asks for a new frame
// below what the shell wrote meanwhile.
func (l *Live) Follow() (redraw <-chan struct{}, stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGWINCH, syscall.SIGTSTP)
	continued := make(chan os.Signal, 1)
	signal.Notify(continued, syscall.SIGCONT)
	asks := make(chan struct{}, 1)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case s := <-signals:
				if s == syscall.SIGTSTP && !l.suspend(continued, done) {
					return
				}
				select {
				case asks <- struct{}{}:
				default: // a redraw is already asked for
				}
			}
		}
	}()
	return asks, func() {
		signal.Stop(signals)
		signal.Stop(continued)
		close(done)
		<-finished
	}
}

// suspend stops the process as the default action of SIGTSTP would, the
// cursor shown, and returns once it is continued, the cursor hidden again;
// false if done closed first.
func (l *Live) suspend(continued <-chan os.Signal, done <-chan struct{}) bool {
	l.Suspend()
	select {
	case <-continued: // an earlier SIGCONT, not this stop's
	default:
	}
	// The stop takes effect shortly after kill returns: only SIGCONT says
	// that the process stopped and was continued.
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {
	case <-continued:
	case <-done:
		return false
	}
	l.Resume()
	return true
}
