package feed

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// Rescale gives the job the servers its tracker decided for epoch
// (`ps-submit scale`): every worker of a synchronous job calls it at the
// start of every epoch, after the previous epoch's end and before any
// push of epoch. When the count changed, the keys move between the
// servers (psnode.Tables.Rescale) and worker 0 reports it
// (tracker.EventScaled). Tables that cannot change their servers
// (psnode.Tables.CheckScalable) never ask: the tracker then refuses a
// change.
func Rescale(ctx context.Context, tc *tracker.Client, tables *psnode.Tables, epoch int, log *logrus.Entry) error {
	if tables.CheckScalable() != nil {
		return nil
	}
	servers, err := tc.View(ctx, epoch)
	if err != nil {
		return fmt.Errorf("epoch %d: the job's servers: %w", epoch, err)
	}
	res, err := tables.Rescale(ctx, epoch, servers)
	if err != nil {
		return fmt.Errorf("epoch %d: %w", epoch, err)
	}
	if res.Keys == 0 && res.Moved == 0 || tables.Node().Rank() != 0 {
		return nil
	}
	ev := tracker.Event{Kind: tracker.EventScaled, Task: "worker 0", Took: res.Took,
		Detail: fmt.Sprintf("servers %d → %d at epoch %d: moved %.1f%% of the keys (%d of %d)", res.From, res.To, epoch, 100*res.Share(), res.Moved, res.Keys)}
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := tc.ReportEvent(rctx, ev); err != nil {
		log.WithError(err).Warn("could not report the change of servers to the tracker")
	}
	return nil
}
