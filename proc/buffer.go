package proc

import "bytes"

// maxErrorOutput bounds how much of a command's standard error goes into an
// error message.
const maxErrorOutput = 4096

// TailBuffer keeps the last maxErrorOutput bytes written to it: a command's
// standard error, bounded for an error message.
type TailBuffer struct{ bytes.Buffer }

// Write never fails; it drops the oldest bytes beyond the bound.
func (b *TailBuffer) Write(p []byte) (int, error) {
	n, _ := b.Buffer.Write(p)
	if over := b.Len() - maxErrorOutput; over > 0 {
		b.Next(over)
	}
	return n, nil
}
