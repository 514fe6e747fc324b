package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// Tracker is the part of the tracker's client a Feed uses;
// *tracker.Client is one.
type Tracker interface {
	Plan(ctx context.Context) ([]tracker.Shard, error)
	NextShard(ctx context.Context, epoch, worker, attempt int) (tracker.Shard, tracker.Dispatch, time.Duration, error)
	ShardDone(ctx context.Context, epoch int, id int64, worker, attempt int, records int64, m map[string]float64) error
	DoneShards(ctx context.Context, epoch int) (map[int64]int64, error)
}

// EventReporter is a Tracker that also records the job's events
// (tracker.Client is one). A Feed resuming a dead worker's place reports
// its rejoin through it.
type EventReporter interface {
	ReportEvent(ctx context.Context, e tracker.Event) error
}

// started approximates the process's start, for how long a replacement
// worker took to rejoin.
var started = time.Now()

// Options configure a Feed.
type Options struct {
	// Tracker hands out the shards and is told when each is done.
	Tracker Tracker
	// Resolver opens the shards' files (a *dfs.Resolver: local and HDFS).
	Resolver split.Resolver
	// Rank is this worker's rank, Workers the job's number of workers,
	// Attempt the worker's attempt (conf.PS.NumAttempt).
	Rank, Workers, Attempt int
	// Format is the records' format (records.FormatLibSVM, FormatCSV).
	Format string
	// CSVHeader says the first line of each CSV file is a header, not a
	// record (records.Options.CSVHeader).
	CSVHeader bool
	// Batch is the number of examples per mini-batch; the last batch of
	// a shard may hold fewer.
	Batch int
	// MaxBadRecords is how many malformed records this worker may skip,
	// across all its shards, before failing; 0 fails on the first. A
	// record skipped in one epoch and met again in the next counts once.
	MaxBadRecords int
	// Async takes shards on demand instead of this worker's share of the
	// plan.
	Async bool
	// ShardMetrics, if set, is called as each shard is read, right before
	// it is reported done, and returns what the step function added up
	// since the last call, sums and counts only (names ending in _sum or
	// _count): they go with the shard, and count towards the epoch's
	// metrics once, even if this worker dies before the epoch's end.
	ShardMetrics func() map[string]float64
	// AfterShard, if set, is called in asynchronous mode after each shard
	// is read and before it is reported done, with the number of shards
	// this Feed has read so far (a hook for fault injection: see DieAfter).
	AfterShard func(shards int)
	// Idle, if set, is called in asynchronous mode when this worker has
	// no shard to read for now: before it waits for other workers'
	// shards, and before Epoch returns; once after each run of shards
	// read (and once in an epoch in which it reads none). It is where a
	// worker sends what it holds back and tells bounded-delay servers it
	// holds no one back. An error stops the epoch.
	Idle func(ctx context.Context, epoch int) error
	// Resume, when set, is where a synchronous worker that replaces a
	// dead one goes on (psnode.Tables.Rejoin): in epoch Resume.Epoch it
	// hands fn only the batches of its share after the first
	// Resume.Batches, which the dead worker's pushes reached; with
	// psnode.AllBatches it reads nothing of that epoch. A shard the
	// tracker has as done whose batches all come before is not read again
	// (its batches are its records over Batch, rounded up); the others
	// are read from their start, and reported done with all their
	// records, the skipped ones included.
	Resume *psnode.SyncResume
	// CacheBytes, when above 0, keeps the parsed examples of the shards
	// this worker reads, up to about that many bytes, and a later epoch
	// that hands it a kept shard reads the examples instead of the file.
	// Shards are kept whole, in the order they are first read, and only
	// those without a malformed record. A file changed during the job is
	// not noticed for the shards kept.
	CacheBytes int64
}

// Batch is one mini-batch handed to the model.
type Batch struct {
	// Epoch and Step place the batch: in synchronous mode Step counts
	// this worker's batches in the epoch from 0, the step every worker
	// pushes with PushStep; in asynchronous mode it counts too but has
	// no meaning across workers.
	Epoch, Step int
	// Examples are valid until the function returns, and are not to be
	// modified: they may be those a cache keeps (Options.CacheBytes).
	Examples []records.Example
}

// Stats are what one epoch read.
type Stats struct {
	Records int64 // records read (malformed ones excluded)
	Bad     int   // malformed records skipped
	Shards  int   // shards read
	Cached  int   // shards of Shards read from the cache (Options.CacheBytes)
	// Skipped counts the records of Records that were not handed to the
	// step function (Options.Resume), those of done shards not opened
	// again included (their count is the tracker's).
	Skipped int64
	// BadSamples are malformed records skipped in the epoch that the
	// worker had not skipped before, each with its file, line and byte
	// offset: at most MaxBadSamples over the Feed's life, for its log.
	BadSamples []*records.RecordError
}

// MaxBadSamples is how many of the malformed records it skips a worker
// reports one by one (Stats.BadSamples); Stats.Bad counts them all.
const MaxBadSamples = 10

// Feed runs a worker's epochs. It is not safe for concurrent use.
type Feed struct {
	o      Options
	plan   []tracker.Shard
	havePl bool
	recs   []records.Example
	// bad holds the offsets of the malformed records met so far, by
	// split: each counts once against Options.MaxBadRecords, however
	// many epochs skip it. nbad counts them, sampled how many of them
	// Stats.BadSamples reported.
	bad           map[split.Split]map[int64]bool
	nbad, sampled int
	shards        int // shards read so far
	skip          int // batches of the epoch not to hand over (Options.Resume)
	cache         *cache
	// replayed holds a mini-batch of examples from the cache.
	replayed []records.Example
	// reported is set once the rejoin of Options.Resume is reported.
	reported bool
}

// SetWorkers makes the next epochs split the plan among workers workers
// (the job changed its workers: psnode.Tables.Rescale), this one keeping
// its rank.
func (f *Feed) SetWorkers(workers int) error {
	if workers < 1 || f.o.Rank >= workers {
		return fmt.Errorf("feed: rank %d of %d workers", f.o.Rank, workers)
	}
	f.o.Workers = workers
	return nil
}

// New checks the options and returns a Feed.
func New(o Options) (*Feed, error) {
	var errs []error
	if o.Tracker == nil {
		errs = append(errs, errors.New("feed: no tracker"))
	}
	if o.Resolver == nil {
		errs = append(errs, errors.New("feed: no resolver"))
	}
	if o.Workers < 1 || o.Rank < 0 || o.Rank >= o.Workers {
		errs = append(errs, fmt.Errorf("feed: rank %d of %d workers", o.Rank, o.Workers))
	}
	if o.Batch < 1 {
		errs = append(errs, fmt.Errorf("feed: batch %d: need at least 1", o.Batch))
	}
	if o.MaxBadRecords < 0 {
		errs = append(errs, fmt.Errorf("feed: max bad records %d: must not be negative", o.MaxBadRecords))
	}
	if o.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("feed: cache of %d bytes: must not be negative", o.CacheBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	f := &Feed{o: o}
	if o.CacheBytes > 0 {
		f.cache = &cache{budget: o.CacheBytes}
	}
	return f, nil
}

// Bad returns the malformed records met so far, each counted once however
// many epochs skipped it.
func (f *Feed) Bad() int { return f.nbad }

// Epoch reads one epoch and calls fn for each mini-batch, in order. It
// returns what it read; an error of fn stops it and is returned.
func (f *Feed) Epoch(ctx context.Context, epoch int, fn func(context.Context, Batch) error) (Stats, error) {
	var st Stats
	var err error
	f.reportRejoin(ctx)
	if f.o.Async {
		err = f.asyncEpoch(ctx, epoch, fn, &st)
	} else {
		err = f.syncEpoch(ctx, epoch, fn, &st)
	}
	if err != nil {
		return st, fmt.Errorf("epoch %d: %w", epoch, err)
	}
	return st, nil
}

// reportRejoin tells the tracker, once and when it is an EventReporter,
// that this worker took a dead one's place in the synchronous steps
// (Options.Resume), and how long after its start. The report is for the
// job's events only: its failure is ignored.
func (f *Feed) reportRejoin(ctx context.Context) {
	r, ok := f.o.Tracker.(EventReporter)
	if f.o.Resume == nil || f.reported || !ok {
		return
	}
	f.reported = true
	where := fmt.Sprintf("at batch %d of epoch %d (the servers had the dead worker's batches before it)",
		f.o.Resume.Batches, f.o.Resume.Epoch)
	if f.o.Resume.Batches == psnode.AllBatches {
		where = fmt.Sprintf("after epoch %d (the servers had every batch of it from the dead worker)", f.o.Resume.Epoch)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = r.ReportEvent(rctx, tracker.Event{Kind: tracker.EventRejoined, Task: fmt.Sprintf("worker %d", f.o.Rank),
		Detail: where, Took: time.Since(started)})
}

// syncEpoch reads this worker's share of the plan, shards rank,
// rank+W, …, numbering the batches from 0.
func (f *Feed) syncEpoch(ctx context.Context, epoch int, fn func(context.Context, Batch) error, st *Stats) error {
	if !f.havePl {
		plan, err := f.o.Tracker.Plan(ctx)
		if err != nil {
			return err
		}
		f.plan, f.havePl = plan, true
	}
	f.skip = 0
	var done map[int64]int64
	if r := f.o.Resume; r != nil && r.Epoch == epoch {
		if r.Batches == psnode.AllBatches {
			return nil
		}
		f.skip = r.Batches
		defer func() { f.skip = 0 }()
		var err error
		if done, err = f.o.Tracker.DoneShards(ctx, epoch); err != nil {
			return err
		}
	}
	step := 0
	for i := f.o.Rank; i < len(f.plan); i += f.o.Workers {
		sh := f.plan[i]
		if n, ok := done[sh.ID]; ok {
			if b := int((n + int64(f.o.Batch) - 1) / int64(f.o.Batch)); step+b <= f.skip {
				step += b
				st.Records += n
				st.Skipped += n
				continue
			}
		}
		if err := f.shard(ctx, epoch, sh, &step, fn, st); err != nil {
			return err
		}
	}
	return nil
}

// asyncEpoch takes shards on demand until the tracker says the epoch is
// done (every shard read, by whichever worker).
func (f *Feed) asyncEpoch(ctx context.Context, epoch int, fn func(context.Context, Batch) error, st *Stats) error {
	step := 0
	idle := false
	for {
		sh, d, wait, err := f.o.Tracker.NextShard(ctx, epoch, f.o.Rank, f.o.Attempt)
		if err != nil {
			return err
		}
		if d != tracker.Given && !idle && f.o.Idle != nil {
			if err := f.o.Idle(ctx, epoch); err != nil {
				return err
			}
		}
		switch d {
		case tracker.EpochDone:
			return nil
		case tracker.Wait:
			idle = true
			// The tracker bounds the wait; the context may cut it.
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		idle = false
		if err := f.shard(ctx, epoch, sh, &step, fn, st); err != nil {
			return err
		}
	}
}

// shard reads one shard, calls the AfterShard hook (asynchronous mode)
// and reports the shard done, with its metrics (ShardMetrics).
func (f *Feed) shard(ctx context.Context, epoch int, sh tracker.Shard, step *int, fn func(context.Context, Batch) error, st *Stats) error {
	n, err := f.read(ctx, epoch, sh, step, fn, st)
	if err != nil {
		return fmt.Errorf("shard %d (%s): %w", sh.ID, sh.Split(), err)
	}
	f.shards++
	st.Shards++
	if f.o.Async && f.o.AfterShard != nil {
		f.o.AfterShard(f.shards)
	}
	var m map[string]float64
	if f.o.ShardMetrics != nil {
		m = f.o.ShardMetrics()
	}
	if err := f.o.Tracker.ShardDone(ctx, epoch, sh.ID, f.o.Rank, f.o.Attempt, n, m); err != nil {
		return fmt.Errorf("shard %d done: %w", sh.ID, err)
	}
	return nil
}

// read reads a shard's records in mini-batches and returns how many it
// read.
func (f *Feed) read(ctx context.Context, epoch int, sh tracker.Shard, step *int, fn func(context.Context, Batch) error, st *Stats) (int64, error) {
	if ex, ok := f.cache.get(sh.Split()); ok {
		return f.replay(ctx, epoch, ex, step, fn, st)
	}
	src, err := split.Open(ctx, f.o.Resolver, sh.Split(), split.ReaderOptions{})
	if err != nil {
		return 0, err
	}
	defer src.Close()
	// The budget of malformed records is this worker's, across its
	// shards; one met in an earlier epoch does not count again.
	budget := max(0, f.o.MaxBadRecords-f.nbad+len(f.bad[sh.Split()]))
	rd, err := records.NewReader(src, records.Options{Format: f.o.Format, CSVHeader: f.o.CSVHeader, MaxBadRecords: budget})
	if err != nil {
		return 0, err
	}
	defer func() {
		st.Bad += rd.Bad()
		f.noteBad(sh.Split(), src, rd, st)
	}()
	if len(f.recs) < f.o.Batch {
		f.recs = make([]records.Example, f.o.Batch)
	}
	keep := f.cache.fill(sh.Split())
	var total int64
	for {
		n := 0
		for n < f.o.Batch {
			err := rd.Next(&f.recs[n])
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return total, err
			}
			n++
		}
		// Only a shard without a malformed record is kept, so that
		// every epoch counts the bad ones the same.
		if rd.Bad() > 0 {
			keep = nil
		}
		keep.add(f.recs[:n])
		if n == 0 {
			keep.keep(sh.Split())
			return total, nil
		}
		total += int64(n)
		if err := f.batch(ctx, epoch, f.recs[:n], step, fn, st); err != nil {
			return total, err
		}
		if n < f.o.Batch {
			keep.keep(sh.Split())
			return total, nil
		}
	}
}

// noteBad notes the malformed records rd met in split s, read by src, and
// adds to st.BadSamples those not met before, with their lines, up to
// MaxBadSamples over the Feed's life.
func (f *Feed) noteBad(s split.Split, src *split.LineReader, rd *records.Reader, st *Stats) {
	if len(rd.BadOffsets()) == 0 {
		return
	}
	if f.bad == nil {
		f.bad = make(map[split.Split]map[int64]bool)
	}
	met := f.bad[s]
	if met == nil {
		met = make(map[int64]bool)
		f.bad[s] = met
	}
	for _, e := range rd.BadSamples() {
		if f.sampled < MaxBadSamples && !met[e.Offset] {
			e.Line, _ = src.LineAt(e.Offset)
			st.BadSamples = append(st.BadSamples, e)
			f.sampled++
		}
	}
	for _, off := range rd.BadOffsets() {
		if !met[off] {
			met[off] = true
			f.nbad++
		}
	}
}

// batch counts one mini-batch and hands it to fn, unless it is one to
// skip (Options.Resume).
func (f *Feed) batch(ctx context.Context, epoch int, exs []records.Example, step *int, fn func(context.Context, Batch) error, st *Stats) error {
	st.Records += int64(len(exs))
	s := *step
	*step++
	if s < f.skip {
		st.Skipped += int64(len(exs))
		return nil
	}
	return fn(ctx, Batch{Epoch: epoch, Step: s, Examples: exs})
}

// replay hands a cached shard's examples to fn in mini-batches, as read
// would have read them from its file.
func (f *Feed) replay(ctx context.Context, epoch int, ex *cached, step *int, fn func(context.Context, Batch) error, st *Stats) (int64, error) {
	st.Cached++
	// Not f.recs, whose slices the reader parses into: these are the
	// cache's.
	if len(f.replayed) < f.o.Batch {
		f.replayed = make([]records.Example, f.o.Batch)
	}
	for i := 0; i < ex.len(); i += f.o.Batch {
		n := min(f.o.Batch, ex.len()-i)
		ex.examples(i, f.replayed[:n])
		if err := f.batch(ctx, epoch, f.replayed[:n:n], step, fn, st); err != nil {
			return 0, err
		}
	}
	return int64(ex.len()), nil
}

// DieAfter returns an AfterShard hook for fault-injection tests: spec
// "RANK:N" makes worker RANK's first attempt (attempt 0) kill itself
// with SIGKILL once it has read N shards. It returns nil (no hook) when
// spec is empty or names another worker or attempt, and an error when
// spec is malformed.
func DieAfter(spec string, rank, attempt int) (func(shards int), error) {
	return faultAfter(spec, rank, attempt, func() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL) })
}

// HangAfter is DieAfter for a program hung in its own code: worker
// RANK's first attempt blocks for ever once it has read N shards, while
// its node goes on answering heartbeats.
func HangAfter(spec string, rank, attempt int) (func(shards int), error) {
	return faultAfter(spec, rank, attempt, func() { select {} })
}

// faultAfter is DieAfter with fault for SIGKILL.
func faultAfter(spec string, rank, attempt int, fault func()) (func(shards int), error) {
	if spec == "" {
		return nil, nil
	}
	r, n, ok := strings.Cut(spec, ":")
	wr, err1 := strconv.Atoi(r)
	after, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%q: want RANK:N", spec)
	}
	if attempt != 0 || wr != rank {
		return nil, nil
	}
	return func(shards int) {
		if shards >= after {
			fault()
		}
	}, nil
}
