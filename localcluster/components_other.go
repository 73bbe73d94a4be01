//go:build !linux

package localcluster

import "context"

// waitComponents cannot check the components without Linux's /proc; Create
// refuses with ErrNeedsLinux before it gets here.
func (c *Cluster) waitComponents(context.Context) error {
	return ErrNeedsLinux
}
