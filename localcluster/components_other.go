//go:build !linux

package localcluster

import (
	"context"
)

// waitComponents cannot check the components without Linux's /proc; Create
// refuses with ErrNeedsLinux before it gets here.
func (c *Cluster) waitComponents(context.Context) error {
	return ErrNeedsLinux
}

// SetHeartbeat restarts kwok-controller, found through /proc; without
// Linux there is no cluster to change.
func (c *Cluster) SetHeartbeat(context.Context, Heartbeat) error {
	return ErrNeedsLinux
}

// PIDs has no cluster to read without Linux.
func (c *Cluster) PIDs() (map[string]int, error) {
	return nil, ErrNeedsLinux
}
