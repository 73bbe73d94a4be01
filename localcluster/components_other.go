//go:build !linux

package localcluster

import (
	"context"
	"time"
)

// waitComponents cannot check the components without Linux's /proc; Create
// refuses with ErrNeedsLinux before it gets here.
func (c *Cluster) waitComponents(context.Context) error {
	return ErrNeedsLinux
}

// SetNodeHeartbeat restarts kwok-controller, found through /proc; without
// Linux there is no cluster to change.
func (c *Cluster) SetNodeHeartbeat(context.Context, time.Duration) error {
	return ErrNeedsLinux
}
