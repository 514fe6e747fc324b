// Package feed is the data loop of a worker: it reads the job's input
// shards, cut into mini-batches, and hands each batch to the model's
// function with its epoch and step.
//
// In synchronous mode a worker reads its share of the tracker's plan
// (shards rank, rank+W, rank+2W, …, in order) and numbers its batches
// 0, 1, 2, … in each epoch: step s of every worker makes one synchronous
// step of the tables. In asynchronous mode it takes shards from the
// tracker on demand until the epoch is done, whoever reads them. Either
// way every shard read is reported done to the tracker.
//
// Pipeline runs the model's side of each batch so that communication
// overlaps computing: it starts a batch (keys, pulls) as it comes and
// finishes it (wait, compute, push) a few batches later, with a bounded
// number of pushes in flight. In asynchronous mode Options.Idle tells the
// model when the worker has no shard to read for now, the moment to flush
// the pipeline and, on bounded-delay tables, to say so (Tables.Idle).
//
// Malformed records are skipped and counted within one budget per
// worker, across its shards (Options.MaxBadRecords); a record met again
// in a later epoch counts once. The first ones a worker skips are
// reported with their file, line and byte offset (Stats.BadSamples).
//
// With Options.CacheBytes a worker keeps the parsed examples of the
// shards it read, whole shards within that budget, and a later epoch
// that hands it a kept shard replays its examples in the same
// mini-batches instead of reading and parsing the file again. The
// tracker hands a worker asking for a shard one it read the epoch before
// first, so that asynchronous workers find theirs.
//
// StartTask gives a task's program what it has of its job (Task): the
// configuration, the file systems, the node (StartNode) and the
// tracker's client, and Task.Tables its table set. ReadAll reads a
// held-out set into memory, TablesOptions builds the
// psnode.TablesOptions of a job from its configuration, and ExitStatus
// says what a worker program exits with (conf.ExitRestartJob when a
// synchronous worker died, for the launcher to restart the job;
// conf.ExitBadInput for a malformed record it could not skip, for the
// launcher to end the job).
//
// A worker's loop:
//
//	fd, err := feed.New(feed.Options{
//		Tracker: tc, Resolver: res,
//		Rank: n.Rank(), Workers: n.NumWorkers(), Attempt: cfg.PS.NumAttempt,
//		Format: records.FormatLibSVM, Batch: 100, Async: false,
//	})
//	if err != nil {
//		return err
//	}
//	for epoch := cfg.Job.ResumeEpoch; epoch < epochs; epoch++ {
//		st, err := fd.Epoch(ctx, epoch, func(ctx context.Context, b feed.Batch) error {
//			// pull, compute the gradient of b.Examples, PushStep(ctx, b.Epoch, b.Step, …)
//			return nil
//		})
//		if err != nil {
//			return err
//		}
//		// report st.Records and st.Bad; in synchronous mode, EndEpoch
//	}
package feed
