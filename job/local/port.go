package local

import (
	"context"

	"github.com/spindle-ps/spindle/internal/freeport"
)

// SchedulerPort returns a port free on this machine now, which the
// scheduler's process binds once it has started: one below the kernel's
// ephemeral range, where no connection's source port can take it in
// between, when one is free (see internal/freeport).
func (c *Cluster) SchedulerPort(ctx context.Context) (int, error) {
	return freeport.Pick(ctx, Node)
}
