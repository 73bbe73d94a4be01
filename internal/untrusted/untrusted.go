// Package untrusted quotes values that came from outside (a request's path,
// a caller's name) for error messages and logs, so that one rule keeps them
// on one short, printable line wherever they are repeated.
package untrusted

import "fmt"

// MaxQuoted bounds how much of a value a message repeats, so that a 64 KiB
// path segment does not come back as a 64 KiB error.
const MaxQuoted = 64

// Quote quotes value, escaping control and non-ASCII characters and cutting
// it short, with its length, when it is longer than MaxQuoted bytes.
func Quote(value string) string {
	if len(value) > MaxQuoted {
		return fmt.Sprintf("%+q… (%d bytes)", value[:MaxQuoted], len(value))
	}
	return fmt.Sprintf("%+q", value)
}
