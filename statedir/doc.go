// Package statedir keeps the node agent's state on the node's disk so that it
// outlives restarts and power cycles: a directory only the agent's user can
// enter (0700), files only it can read (0600), each file replaced atomically
// (a temporary file, fsync, rename, fsync of the directory) so that a crash or
// a power cut mid-write leaves the previous version, never a torn one.
//
// Files are stored in a versioned JSON envelope (see Dir.WriteJSON and
// Dir.ReadJSON): a reader refuses a file of another kind or version, or one
// it cannot decode, with an error that says which, and the caller decides to
// ignore it. Nothing here ever panics on what it reads.
//
// Where each behaviour lives:
//   - dir.go: Open (validate or create the directory), Prepare (what a
//     privileged init step does before the agent runs: create and chown it),
//     and the atomic WriteFile and ReadFile.
//   - envelope.go: the versioned JSON envelope and its errors.
package statedir
