// Package workerloop runs the epochs of the example trainers' workers
// (ps-lr, ps-fm), which differ only in their model: where a worker that
// replaces a dead one, or one started for a scale-out, begins; the feed
// over the job's shards through the model's pipeline; in synchronous
// mode the change of servers and workers between epochs and the wait for
// every worker at an epoch's end; the report of each epoch; and worker
// 0's checkpoints.
package workerloop

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// Layout are the flags that say how records are written, for training
// and for scoring a model alike.
type Layout struct {
	Format    string // --format
	CSVHeader bool   // --csv-header
}

// Register defines the flags on fl.
func (l *Layout) Register(fl *flag.FlagSet) {
	fl.StringVar(&l.Format, "format", records.FormatLibSVM, "input format: libsvm, or csv (the label first, then each feature's value; a feature's id is its column, the label's being 0)")
	fl.BoolVar(&l.CSVHeader, "csv-header", false, "with --format csv: the first line of each file is a header, not a record")
}

// Check reports the flags' errors.
func (l Layout) Check() []error {
	var errs []error
	if l.Format != records.FormatLibSVM && l.Format != records.FormatCSV {
		errs = append(errs, fmt.Errorf("--format %q: want %s or %s", l.Format, records.FormatLibSVM, records.FormatCSV))
	}
	if l.CSVHeader && l.Format != records.FormatCSV {
		errs = append(errs, fmt.Errorf("--csv-header: only with --format %s", records.FormatCSV))
	}
	return errs
}

// Records are the options of reading records so written.
func (l Layout) Records() records.Options {
	return records.Options{Format: l.Format, CSVHeader: l.CSVHeader}
}

// Data are the trainers' flags for how a worker reads its shards.
type Data struct {
	Layout               // --format, --csv-header
	Batch         int    // --batch
	MaxBadRecords int    // --max-bad-records
	CacheMB       int    // --cache-mb
	DieAfter      string // --die-after (tests: fault injection)
	HangAfter     string // --hang-after (likewise)
}

// AutoCache, --cache-mb's default, sizes a worker's cache of examples
// by its memory (CacheBytes).
const AutoCache = -1

// CacheBytes is the budget of a worker's cache of examples
// (feed.Options.CacheBytes) for a task given memMB of memory
// (conf.Job.TaskMemoryMB; 0 when unknown, then a default container's,
// conf.DefaultTaskMemoryMB): --cache-mb's, or with AutoCache a quarter of
// memMB, which leaves the rest to the Go heap's growth between
// collections (the cache is live heap) and to the model's buffers.
func (d Data) CacheBytes(memMB int) int64 {
	if d.CacheMB != AutoCache {
		return int64(d.CacheMB) << 20
	}
	if memMB <= 0 {
		memMB = conf.DefaultTaskMemoryMB
	}
	return int64(memMB) << 20 / 4
}

// Register defines the flags on fl.
func (d *Data) Register(fl *flag.FlagSet) {
	fl.IntVar(&d.Batch, "batch", 100, "examples per mini-batch")
	d.Layout.Register(fl)
	fl.IntVar(&d.MaxBadRecords, "max-bad-records", 0, "malformed records each worker may skip (and count) before failing, one met again in a later epoch counting once; the first 10 skipped are printed with their file and line; 0 fails on the first")
	fl.IntVar(&d.CacheMB, "cache-mb", AutoCache, "MiB of parsed examples each worker keeps in memory for the next epochs, which then read no file for the shards kept; -1: a quarter of the worker's memory (its container's: ps-submit --worker-memory), 0: read the files every epoch")
	fl.StringVar(&d.DieAfter, "die-after", "", "testing: RANK:N makes that worker's first attempt SIGKILL itself after N shards")
	fl.StringVar(&d.HangAfter, "hang-after", "", "testing: RANK:N makes that worker's first attempt block for ever after N shards, its node still answering heartbeats")
}

// Check reports the flags' errors.
func (d Data) Check() []error {
	errs := d.Layout.Check()
	if d.Batch < 1 {
		errs = append(errs, fmt.Errorf("--batch %d: need at least 1", d.Batch))
	}
	if d.MaxBadRecords < 0 {
		errs = append(errs, fmt.Errorf("--max-bad-records %d: must not be negative", d.MaxBadRecords))
	}
	if d.CacheMB < AutoCache || d.CacheMB > feed.MaxCacheMiB {
		errs = append(errs, fmt.Errorf("--cache-mb %d: want %d (a quarter of the worker's memory) or 0 to %d", d.CacheMB, AutoCache, feed.MaxCacheMiB))
	}
	return errs
}

// Records are the options of reading a held-out set.
func (d Data) Records() records.Options {
	o := d.Layout.Records()
	o.MaxBadRecords = d.MaxBadRecords
	return o
}

// Feed returns the feed options of worker n, attempt attempt, given
// memMB of memory (conf.Job.TaskMemoryMB), reading through tc and res;
// asynchronously (shards on demand) when async.
func (d Data) Feed(n *psnode.Node, tc *tracker.Client, res *dfs.Resolver, attempt, memMB int, async bool) (feed.Options, error) {
	die, err := feed.DieAfter(d.DieAfter, n.Rank(), attempt)
	if err != nil {
		return feed.Options{}, fmt.Errorf("--die-after: %w", err)
	}
	hang, err := feed.HangAfter(d.HangAfter, n.Rank(), attempt)
	if err != nil {
		return feed.Options{}, fmt.Errorf("--hang-after: %w", err)
	}
	if hang != nil {
		die = hang
	}
	return feed.Options{
		Tracker: tc, Resolver: res,
		Rank: n.Rank(), Workers: n.NumWorkers(), Attempt: attempt,
		Format: d.Format, CSVHeader: d.CSVHeader, Batch: d.Batch, MaxBadRecords: d.MaxBadRecords,
		CacheBytes: d.CacheBytes(memMB),
		Async:      async, AfterShard: die,
	}, nil
}

// Counts is what a worker's steps add up in an epoch: Loop clears it
// before each epoch and reports it after.
type Counts struct {
	LossSum  float64
	Examples int64
}

// Loop is one worker's part of a job.
type Loop[S any] struct {
	Tables  *psnode.Tables
	Tracker *tracker.Client
	Pipe    *feed.Pipeline[S]
	Log     *logrus.Entry
	// Feed configures the feed; Run sets its Resume and, in free modes
	// (Feed.Async), its Idle.
	Feed feed.Options
	// Epochs is the job's number of epochs; ResumeEpoch the first one of
	// a job resumed from a checkpoint (conf.Job.ResumeEpoch).
	Epochs, ResumeEpoch int
	// Joining marks a worker started for a scale-out (conf.PS.Joining).
	Joining bool
	// RequestTimeout bounds the wait for the servers at Idle.
	RequestTimeout time.Duration
	// Counts is what the pipeline's steps add up in an epoch.
	Counts *Counts
	// EndEpoch, in synchronous mode, returns once every worker is done
	// with the epoch.
	EndEpoch func(ctx context.Context, epoch int) error
	// Evaluate, when not nil, scores the model on a held-out set after
	// each epoch (every shard's pushes are applied then); ok is false
	// when this worker holds none. Out gets the scores, and the
	// malformed records skipped (feed.Stats.BadSamples).
	Evaluate func(ctx context.Context) (auc, logloss float64, ok bool, err error)
	Out      io.Writer
}

// Run trains this worker's epochs.
func (l Loop[S]) Run(ctx context.Context) error {
	opts := l.Feed
	free := opts.Async
	// A worker that replaces a dead one goes on where it left off.
	first, resume, err := feed.Rejoin(ctx, l.Tables, l.ResumeEpoch)
	if err != nil {
		return err
	}
	opts.Resume = resume
	if free && !l.Joining {
		// A worker that replaces a dead one goes on at the job's
		// current epoch.
		if first, err = feed.OpenEpoch(ctx, l.Tracker, first, l.Epochs); err != nil {
			return err
		}
	}
	if l.Joining {
		// Started for a scale-out: it takes part from the epoch the job
		// switches at.
		if first, err = feed.JoinEpoch(ctx, l.Tracker, opts.Rank, feed.DefaultJoinWait); err != nil {
			return err
		}
	}
	if free {
		opts.Idle = l.Pipe.IdleHook(l.Tables, l.RequestTimeout)
	}
	// The tables' traffic is reported by epoch, from where this worker
	// begins; what the steps added up and the traffic go with each shard
	// reported done, the rest with the epoch's report.
	t := tally{counts: l.Counts, tables: l.Tables, traffic: l.Tables.Bytes()}
	opts.ShardMetrics = t.take
	fd, err := feed.New(opts)
	if err != nil {
		return err
	}
	// The job's progress is measured against the epochs planned.
	if opts.Rank == 0 {
		if err := l.Tracker.PlanEpochs(ctx, l.Epochs); err != nil {
			return err
		}
	}
	// A resumed job starts where its checkpoint left off.
	for epoch := first; epoch < l.Epochs; epoch++ {
		*l.Counts, t.sent = Counts{}, Counts{}
		if !free {
			// The servers and workers may change between epochs
			// (ps-submit scale); a worker left out stops here.
			if retired, err := fd.Rescale(ctx, l.Tables, epoch, l.Log); err != nil || retired {
				return err
			}
		}
		st, err := fd.Epoch(ctx, epoch, l.Pipe.Step)
		if err == nil {
			err = l.Pipe.Flush(ctx) // (free modes flush in the Idle hook already)
		}
		if err != nil {
			return err
		}
		if opts.CacheBytes > 0 && epoch == first+1 {
			l.Log.WithFields(logrus.Fields{"shards": st.Shards, "cached": st.Cached}).Info("data cache: shards read from memory")
		}
		if !free {
			if err := l.EndEpoch(ctx, epoch); err != nil {
				return fmt.Errorf("epoch %d: %w", epoch, err)
			}
		}
		if err := l.report(ctx, epoch, st, &t); err != nil {
			return err
		}
		// Worker 0 asks for checkpoints. In synchronous mode no step of
		// the next epoch can be applied meanwhile: it is the exact state.
		if opts.Rank == 0 && l.Tables.CheckpointDue(epoch+1) {
			if err := l.Tables.Checkpoint(ctx, epoch+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// report sends an epoch's metrics: what the steps added up and the
// tables' traffic since the last shard reported done (t), and what the
// feed read of it; worker 0 scores the model first. The scoring's pulls
// are left out of the traffic, this epoch's and the next's.
func (l Loop[S]) report(ctx context.Context, epoch int, st feed.Stats, t *tally) error {
	for _, e := range st.BadSamples {
		fmt.Fprintf(l.Out, "epoch %d: skipped a malformed record (--max-bad-records): %v\n", epoch, e)
	}
	m := t.take()
	m["bad_records_sum"] = float64(st.Bad)
	if l.Evaluate != nil {
		auc, logloss, ok, err := l.Evaluate(ctx)
		if err != nil {
			return err
		}
		if ok {
			m["test_auc"], m["test_logloss"] = auc, logloss
			fmt.Fprintf(l.Out, "epoch %d: test AUC %.4f, log loss %.4f\n", epoch, auc, logloss)
		}
		t.traffic = l.Tables.Bytes()
	}
	return l.Tracker.ReportMetrics(ctx, epoch, l.Feed.Rank, m)
}

// tally hands out a worker's sums in parts: each shard reported done
// takes what the steps added up, and the traffic, since the part before
// (feed.Options.ShardMetrics), and the epoch's report the rest. The
// tracker adds the parts up, and keeps those of a worker that died in the
// epoch. A shard's last batches may still be computing as it is reported
// done: what they add goes with the next part.
type tally struct {
	counts  *Counts
	sent    Counts // of counts, what was taken; Run clears both each epoch
	tables  *psnode.Tables
	traffic psnode.AppBytes // of tables, when it was last taken
}

// take returns the sums since the last take.
func (t *tally) take() map[string]float64 {
	m := map[string]float64{"loss_sum": t.counts.LossSum - t.sent.LossSum, "examples_count": float64(t.counts.Examples - t.sent.Examples)}
	now := t.tables.Bytes()
	feed.AddTraffic(m, t.traffic, now)
	t.sent, t.traffic = *t.counts, now
	return m
}

// DefaultRequestTimeout is a worker's --request-timeout when not given.
const DefaultRequestTimeout = 5 * time.Minute

// RequestTimeout is the longest a worker waits for one request: d, the
// --request-timeout given (given), or else the larger of
// DefaultRequestTimeout and the job's stall timeout (conf.PS.StallTimeout)
// plus a minute, so that a worker hung in its own code is found, and
// started again, before the workers that wait for it give up.
func RequestTimeout(given bool, d, stall time.Duration) time.Duration {
	if given || stall <= 0 {
		return d
	}
	return max(d, stall+time.Minute)
}
