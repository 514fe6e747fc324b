// Package tracker owns a job's durable state and runs jobs on this
// machine.
//
// # State and the tracker RPC
//
// State holds what a job must not lose: the shards of every epoch and who
// is reading them (handed out on demand, so fast workers take more; Wait
// while other workers hold shards that could come back; EpochDone when
// every shard is read), the records counted per epoch (each shard's once),
// the metrics workers report, and the processes' counts. It does no I/O.
//
// Serve exposes a State over the tracker RPC, an Apache Thrift service
// (IDL in internal/rpc, compact protocol, framed, bounded frames) whose
// every call carries the job token; Client is its caller, which reconnects
// with backoff until the call's context ends:
//
//	nextShard / shardDone      workers, asynchronous mode
//	plan                       workers, synchronous mode (shard s·W+w in step s)
//	reportMetrics              workers after each epoch
//	commitCheckpoint           worker 0 once every server wrote its file
//	status / kill              ps-submit, tests
//
// # Running a job here
//
// RunLocal checks everything it can before a process starts (the output,
// the checkpoint directory, the inputs, which it cuts into shards with
// InputPlanner), serves the tracker RPC, and starts the scheduler, servers
// and workers as child processes of the command with the environment
// contract (DMLC_*, PS_*, SPINDLE_*; see package conf) and a fresh job
// secret. Each child runs in its own process group and dies with the
// launcher; its output is prefixed with its role and rank. A failed worker
// is restarted up to MaxAttempts, its unfinished shards handed out again.
// A failed scheduler or server, or a task that exits with
// conf.ExitRestartJob, takes the whole job back to the newest
// checkpoint whose files verify (every child stopped, then all started
// again from there, the later epochs read anew), or fails it when the job
// has no checkpoint directory. Past MaxAttempts, or when ctx is cancelled,
// every child is stopped (SIGTERM, then SIGKILL after a grace period) and
// RunLocal returns an error naming the role, rank, exit status and the
// child's last lines. When every child has exited 0 the model is committed
// (package io/model): manifest, with the tracker's account of the
// training, then _SUCCESS.
//
// # Running a job on YARN
//
// SubmitYARN runs CheckJob's checks on the client, stages ps-submit, the
// command, its shared libraries and job.json in HDFS, and submits an
// ApplicationMaster that is ps-submit itself (AMMain). RunAM, inside it,
// does what RunLocal does with containers instead of child processes:
// the same preparation of the directories (jobFiles), the same tracker
// RPC, the same environment contract with DMLC_NODE_HOST the container's
// node and DMLC_PS_ROOT_URI the scheduler's, the same restart rules, and
// the same commit of the model before it unregisters SUCCEEDED.
package tracker
