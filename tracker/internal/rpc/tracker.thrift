// The tracker RPC: what workers, ps-submit and the status page ask the
// tracker (in ps-submit for local jobs, in the ApplicationMaster on YARN).
// Every call carries the job secret; a call without the
// right secret fails with TrackerError code 1 (UNAUTHORIZED).
//
// Field ids are part of the wire contract: never renumber.

namespace go trackerrpc

struct Shard {
  1: i64 id
  2: string uri
  3: i64 start
  4: i64 length
  5: i32 epoch
  6: i64 file_size
  7: bool compressed
}

enum ShardState {
  GIVEN = 1, // here is a shard to read
  WAIT = 2,  // none free now, but the epoch is not done: ask again after wait_ms
  EPOCH_DONE = 3, // every shard of the epoch is done
}

struct NextShardReply {
  1: ShardState state
  2: optional Shard shard
  3: optional i32 wait_ms
}

struct RoleStatus {
  1: string role
  2: i32 want
  3: i32 running
  4: i32 restarts
  5: i32 succeeded
}

// Something that happened to the job's tasks (an exit, a restart, a
// recovery), as the status page lists them.
struct Event {
  1: i64 at_unix_ms
  2: string kind
  3: string task
  4: string detail
  5: i64 took_micros
}

struct JobStatus {
  1: string state
  2: i32 epoch
  3: i64 shards_done
  4: i64 shards_total
  5: map<string, double> metrics
  6: list<RoleStatus> roles
  7: string diagnostics
  8: map<i32, i64> epoch_records
  9: i32 metrics_epoch
  10: i64 started_unix_ms
  11: list<Event> events  // the newest, oldest first
  12: i32 servers         // the servers of the newest epoch decided (view)
  13: i32 servers_target  // the servers asked for (scale); servers when none is pending
  14: i32 workers         // the workers of the newest epoch decided (view)
  15: i32 workers_target  // the workers asked for (scale); workers when none is pending
  16: i32 epochs_planned  // the epochs the program trains (planEpochs); 0 when it did not say
}

// The servers and workers of an epoch (view).
struct View {
  1: i32 servers
  2: i32 workers
}

struct CheckpointFile {
  1: string name
  2: i64 bytes
  3: string sha256
}

// A checkpoint whose server files are written: the tracker commits it by
// writing its manifest last.
struct Checkpoint {
  1: i32 n
  2: i32 epoch       // epochs completed
  3: i32 next_epoch  // where training resumes
  4: string partitioner
  5: i64 max_key
  6: list<CheckpointFile> files
}

exception TrackerError {
  1: i32 code
  2: string message
}

service Tracker {
  // run is the caller's run of the job (SPINDLE_JOB_RUN): a call of an
  // earlier run, from a process stopped as the whole job started again,
  // is refused.
  NextShardReply nextShard(1: string secret, 2: i32 epoch, 3: i32 worker, 4: i32 attempt, 5: i32 run) throws (1: TrackerError err)
  // metrics are what the worker's steps added up over the shard, each
  // named with the suffix _sum or _count: they count towards the epoch's
  // metrics once, with the shard, even if the worker dies before its
  // report at the epoch's end (reportMetrics).
  void shardDone(1: string secret, 2: i32 epoch, 3: i64 shard, 4: i32 worker, 5: i32 attempt, 6: i64 records, 7: i32 run, 8: map<string, double> metrics) throws (1: TrackerError err)
  list<Shard> plan(1: string secret) throws (1: TrackerError err)
  void reportMetrics(1: string secret, 2: i32 epoch, 3: i32 worker, 4: map<string, double> metrics) throws (1: TrackerError err)
  JobStatus status(1: string secret) throws (1: TrackerError err)
  void kill(1: string secret, 2: string reason) throws (1: TrackerError err)
  void commitCheckpoint(1: string secret, 2: Checkpoint ckpt, 3: i32 run) throws (1: TrackerError err)
  // The shards of epoch reported done, each with its record count: where
  // a worker that replaces a dead one need not read again.
  map<i64, i64> doneShards(1: string secret, 2: i32 epoch) throws (1: TrackerError err)
  // Something that happened to a task, which the task itself saw (a
  // worker that replaces a dead one rejoined the steps), for the job's
  // events; took is how long it took, in microseconds.
  void reportEvent(1: string secret, 2: string kind, 3: string task, 4: string detail, 5: i64 tookMicros) throws (1: TrackerError err)
  // host:port of the scheduler's current launch, empty while none is
  // placed: where a node that lost its scheduler registers again.
  string scheduler(1: string secret) throws (1: TrackerError err)
  // Asks for the job to run with servers servers and workers workers
  // from an epoch boundary on (ps-submit scale), 0 for either leaving it
  // as it is; refused (code 2) out of bounds or before training began.
  void scale(1: string secret, 2: i32 servers, 3: i32 workers) throws (1: TrackerError err)
  // The numbers of servers and workers of epoch: the first call for an
  // epoch decides them, every later one gets the same answer (workers, at
  // every epoch boundary).
  View view(1: string secret, 2: i32 epoch) throws (1: TrackerError err)
  // The epoch a worker started to join the job (rank beyond its workers)
  // begins at: the first the job's workers include it; -1 while none
  // does (the joining worker asks until then).
  i32 joinEpoch(1: string secret, 2: i32 rank) throws (1: TrackerError err)
  // The number of epochs the job's program trains, which its workers say
  // as they start: the job's progress is measured against it.
  void planEpochs(1: string secret, 2: i32 epochs) throws (1: TrackerError err)
}
