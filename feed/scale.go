package feed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// Scaler is the part of the tracker's client Rescale uses;
// *tracker.Client is one.
type Scaler interface {
	EventReporter
	View(ctx context.Context, epoch int) (servers, workers int, err error)
}

// Rescale is Rescale with the feed's tracker, after which the feed
// splits the plan among the epoch's workers: the call a synchronous
// training loop makes at the start of each epoch. It returns true for a
// worker left out, which stops.
func (f *Feed) Rescale(ctx context.Context, tables *psnode.Tables, epoch int, log *logrus.Entry) (bool, error) {
	sc, ok := f.o.Tracker.(Scaler)
	if !ok {
		return false, errors.New("feed: the tracker's client cannot tell the epoch's servers and workers")
	}
	retired, err := Rescale(ctx, sc, tables, epoch, log)
	if err != nil || retired {
		return retired, err
	}
	return false, f.SetWorkers(tables.Node().NumWorkers())
}

// Rescale gives the job the servers and workers its tracker decided for
// epoch (`ps-submit scale`): every worker of a synchronous job calls it
// at the start of every epoch, after the previous epoch's end and before
// any push of epoch. When a count changed, the keys move between the
// servers and the steps count the new workers (psnode.Tables.Rescale),
// and worker 0 reports it (tracker.EventScaled). It returns true for a
// worker the new count leaves out: it stops before epoch. Tables that
// cannot change (psnode.Tables.CheckScalable) never ask: the tracker then
// refuses a change.
func Rescale(ctx context.Context, tc Scaler, tables *psnode.Tables, epoch int, log *logrus.Entry) (bool, error) {
	if tables.CheckScalable() != nil {
		return false, nil
	}
	servers, workers, err := tc.View(ctx, epoch)
	if err != nil {
		return false, fmt.Errorf("epoch %d: the job's servers and workers: %w", epoch, err)
	}
	res, err := tables.Rescale(ctx, epoch, servers, workers)
	if err != nil {
		return false, fmt.Errorf("epoch %d: %w", epoch, err)
	}
	if tables.Retired() {
		return true, nil
	}
	if tables.Node().Rank() != 0 || res.From == res.To && res.FromWorkers == res.ToWorkers {
		return false, nil
	}
	var detail string
	if res.From != res.To {
		detail = fmt.Sprintf("servers %d → %d at epoch %d: moved %.1f%% of the keys (%d of %d)", res.From, res.To, epoch, 100*res.Share(), res.Moved, res.Keys)
	}
	if res.FromWorkers != res.ToWorkers {
		if detail != "" {
			detail += "; "
		}
		detail += fmt.Sprintf("workers %d → %d at epoch %d", res.FromWorkers, res.ToWorkers, epoch)
	}
	ev := tracker.Event{Kind: tracker.EventScaled, Task: "worker 0", Took: res.Took, Detail: detail}
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := tc.ReportEvent(rctx, ev); err != nil {
		log.WithError(err).Warn("could not report the change of servers and workers to the tracker")
	}
	return false, nil
}

// DefaultJoinWait bounds how long a worker that joins a running job
// waits for the epoch boundary that takes it (JoinEpoch).
const DefaultJoinWait = 6 * time.Hour

// JoinEpoch returns the epoch a worker started to join a running job
// (conf.PS.Joining) begins at: the first whose count of workers the
// tracker switched to includes it. It asks the tracker until then, at
// most wait; the switch comes at the first epoch boundary after every
// joining worker started.
func JoinEpoch(ctx context.Context, tc *tracker.Client, rank int, wait time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pause := 50 * time.Millisecond
	for {
		e, err := tc.JoinEpoch(ctx, rank)
		if err == nil && e >= 0 {
			return e, nil
		}
		if err != nil && ctx.Err() == nil {
			return 0, fmt.Errorf("worker %d joining the job: %w", rank, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("worker %d joining the job: no epoch took it within %v: %w", rank, wait, ctx.Err())
		}
		pause = min(2*pause, time.Second)
	}
}
