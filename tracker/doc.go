// Package tracker owns a job's durable state and serves it: the shards of
// every epoch and who reads them, the records counted, the metrics
// workers report, the latest checkpoint commit, the tasks' counts. It
// imports only conf and io; the supervisor that runs tasks is package
// job.
//
// # State and the tracker RPC
//
// State holds what a job must not lose: the shards of every epoch and who
// is reading them (handed out on demand, so fast workers take more; Wait
// while other workers hold shards that could come back; EpochDone when
// every shard is read), the records counted per epoch (each shard's once),
// the metrics workers report, and the processes' counts. It does no I/O;
// checkpoints are committed through the function SetCheckpointCommitter
// installs. InputPlanner cuts inputs into Shards with io/split.
//
// Serve exposes a State over the tracker RPC, an Apache Thrift service
// (IDL in internal/rpc, compact protocol, framed, bounded frames, every
// list and map no longer than what is left of its frame) whose
// every call carries the job secret, over TLS with the job's own
// certificate (WithTLS; conf.NewJobKeys makes it), which clients trust
// alone; Client is its caller, which reconnects with backoff until the
// call's context ends (ConfigClient for a task):
//
//	nextShard / shardDone      workers, asynchronous mode
//	plan                       workers, synchronous mode (shard s·W+w in step s)
//	reportMetrics              workers after each epoch (shardDone brings each shard's sums)
//	commitCheckpoint           worker 0 once every server wrote its file
//	status / kill              ps-submit, tests
//	scheduler                  nodes that lost their scheduler: its replacement's host:port
//	view                       workers before every epoch: its numbers of servers and workers
//	joinEpoch                  a worker started to join: the epoch it begins at
//	scale                      ps-submit scale: other numbers of servers and workers from an epoch on
//
// # Runs
//
// When the whole job starts again from a checkpoint, the launcher ends
// its run (EndRun), stops every process, chooses the checkpoint, and
// begins the next run (Rewind). A task is told its run
// (conf.Job.Run); its shard requests and reports and its checkpoint
// commits carry it, and those of a run that ended are refused: a call
// still on its way from a stopped process takes no shard of the new run,
// marks none done, and commits no checkpoint the new run would meet.
//
// # Elastic servers and workers
//
// A synchronous job changes its numbers of servers and workers at an
// epoch boundary (scale.go): Scale records the numbers asked for, the
// launcher starts the new servers and workers (ScaleRequests), each
// reports EventJoined once ready, and the first View of an epoch decides
// the epoch's servers and workers for every worker, each role switching
// once its own new tasks joined; a joining worker learns the epoch it
// begins at from JoinEpoch. Servers and workers a switch leaves out
// retire (Retiring) and exit 0.
package tracker
