// Package exitcode holds the exit codes edgeota's command-line tools share
// (otactl, kubectl edgeota), so that a script driving one reads the other
// alike; docs/reference/exit-codes.md says what they mean for each tool.
package exitcode

const (
	// OK: done (an upgrade finished, a rollout complete).
	OK = 0
	// Failed: what was asked failed or halted; the reason is printed.
	Failed = 1
	// Usage: bad usage, said on standard error.
	Usage = 2
	// Timeout: --timeout passed first.
	Timeout = 3
	// Unreachable: the server is unreachable or unavailable.
	Unreachable = 4
	// Refused: unauthenticated, or refused; the server's message is printed.
	Refused = 5
	// NotFound: no such app on the node, or no such DaemonSet.
	NotFound = 6
)
