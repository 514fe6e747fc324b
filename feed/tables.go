package feed

import (
	"context"
	"fmt"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// TablesOptions builds the options of a job's psnode.Tables from its
// configuration: checkpoints under job.CheckpointDir (and restore from
// job.ResumeFrom) through res, tc as the committer, the model written to
// job.Output in modelFormat (model.PartText or PartBinary).
//
// tc may be nil (no tracker: the servers of a job whose workers take no
// checkpoint); Committer is then left nil, not a nil *tracker.Client in
// the interface, which psnode would take for a committer.
func TablesOptions(job conf.Job, res *dfs.Resolver, tc *tracker.Client, modelFormat string) (psnode.TablesOptions, error) {
	opts := psnode.TablesOptions{ResumeFrom: job.ResumeFrom}
	if job.CheckpointDir != "" || job.ResumeFrom != "" {
		opts.Checkpoints = ckpt.NewTableStore(res, job.CheckpointDir)
	}
	if job.CheckpointDir != "" {
		opts.CheckpointInterval = job.CheckpointInterval
	}
	if tc != nil {
		opts.Committer = tc
		opts.OnEvent = func(ctx context.Context, kind, task, detail string, took time.Duration) {
			// For the job's events only: a failed report is ignored.
			_ = tc.ReportEvent(ctx, tracker.Event{Kind: kind, Task: task, Detail: detail, Took: took})
		}
	}
	if job.Output != "" {
		w, err := model.NewTableWriter(res, job.Output, modelFormat)
		if err != nil {
			return opts, err
		}
		opts.Model = w
	}
	return opts, nil
}

// OpenEpoch returns the first epoch from first on, below epochs, whose
// shards are not all done: where a worker of an asynchronous or
// bounded-delay job begins. For a worker that replaces a dead one, the
// epochs before it are over, their metrics reported and their
// checkpoints taken; starting again at first (the job's
// conf.Job.ResumeEpoch) would report and checkpoint them once more. It
// returns epochs when every one is done.
func OpenEpoch(ctx context.Context, t Tracker, first, epochs int) (int, error) {
	total := -1 // the plan's shards, asked for only if an epoch has any done
	for e := first; e < epochs; e++ {
		done, err := t.DoneShards(ctx, e)
		if err != nil {
			return 0, fmt.Errorf("the shards done in epoch %d: %w", e, err)
		}
		if len(done) == 0 {
			return e, nil
		}
		if total < 0 {
			plan, err := t.Plan(ctx)
			if err != nil {
				return 0, fmt.Errorf("the plan: %w", err)
			}
			total = len(plan)
		}
		if len(done) < total {
			return e, nil
		}
	}
	return max(first, epochs), nil
}

// Rejoin takes a worker that replaces a dead one back into the steps of
// its job's synchronous tables (psnode.Tables.Rejoin) and returns the
// epoch to start at, and the Options.Resume to read it with. For any
// other worker it returns epoch first (the job's conf.Job.ResumeEpoch)
// and no Resume.
func Rejoin(ctx context.Context, ts *psnode.Tables, first int) (int, *psnode.SyncResume, error) {
	r, ok, err := ts.Rejoin(ctx)
	if err != nil || !ok {
		return first, nil, err
	}
	return max(first, r.Epoch), &r, nil
}
