// Package psnode is Spindle's parameter-server runtime: what ps-lite does
// for C++ programs, in Go, with contexts, errors instead of aborts, and
// liveness on by default.
//
// # Roles and ids
//
// A job has one scheduler, S servers and W workers, each a process with a
// Node. Ids follow ps-lite: the scheduler is 1, server rank r is 8+2r,
// worker rank r is 9+2r, and the groups 1 (scheduler), 2 (servers) and 4
// (workers) combine as a bitmask. A node's rank is its DMLC_TASK_ID when
// the launcher sets one; otherwise the scheduler ranks the nodes of a role
// by (host, port), a stable order.
//
// # Usage
//
// A program builds its configuration with conf.FromEnv, a transport (the
// ZeroMQ one in production: package psnode/transport/zmq, or
// psnode/launch which does both), and then declares its tables:
//
//	n, err := psnode.New(cfg.PS, tr, psnode.WithLogger(log))
//	err = n.Start(ctx)             // register, learn the node table, barrier
//	ts, err := psnode.NewTables(n, psnode.TablesOptions{
//		Checkpoints: ckpt.NewTableStore(res, cfg.Job.CheckpointDir),
//		Committer:   trackerClient,
//		ResumeFrom:  cfg.Job.ResumeFrom,
//		Model:       modelWriter, // model.NewTableWriter(res, cfg.Job.Output, model.PartText)
//	})
//	w, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w", Width: 1, Updater: upd, Sync: true})
//	// workers: id, _ := w.Pull(ctx, keys, &vals); err = w.Wait(ctx, id)
//	//          id, _ = w.PushStep(ctx, epoch, step, keys, grads); err = w.Wait(ctx, id)
//	//          err = ts.EndEpoch(ctx, epoch)
//	//          rank 0: err = ts.Checkpoint(ctx, epoch+1)
//	err = ts.Finish(ctx)           // barrier; servers write the model
//	err = n.Finalize(ctx)          // barrier, then Close
//
// Below the tables are the layers they are built of, for programs that
// want them: KV apps (NewKVServer with a StoreHandler, a SyncHandler or
// any Handler; NewKVWorker with Push, Pull and Wait) and simple apps
// (NewSimpleApp). Apps are created after Start. A message that arrives
// for an app not created yet waits for it, up to 10 s; after that a
// request is answered with an error naming the missing app, so that its
// sender does not hang. A node keeps at most 4096 such messages per app,
// 16384 and 256 MiB over all apps (one message whatever its size); a
// request beyond is answered with the error at once.
//
// A Handler gets a request's keys and values in the receive buffers, not
// copies, and must copy what it keeps past its return. Over ZeroMQ the
// large ones (4 MiB and more) are libzmq's own memory, lent to the node
// (transport.Message.Lend) and given back when the handler returns, as
// ps-lite's handlers get ZeroMQ's buffers: the copy into Go memory was a
// quarter of a 10M-key push. Every other message, and a request to any
// app but a KVServer, is the node's own memory.
//
// A KVServer's answer to a push is empty: it says the push is applied.
// One given while the server handles a request waits to ride on its next
// message to the same worker (transport.Meta.Acks), at most until the
// worker's next request has been handled, the server's queue runs empty,
// or eight requests later: under load a worker's push and the pull it
// sends next are answered in one message.
//
// A RawApp sends and receives messages of a protocol of the program's
// own, neither request/response nor key-value: package psnode/collective
// builds its collectives (AllReduce and the others, among workers or any
// nodes) on one, by default app 2^30-2.
//
// # Tables
//
// A table maps uint64 keys to Width values of type float32 or float64
// (TableSpec), kept on the servers in a store.Table and updated by an
// updater (sum, SGD, AdaGrad, FTRL, Adam, or the program's own
// store.Updater). Every role declares the job's tables, with the same
// specs, right after Start; each table is its own app (an id hashed from
// its name, at or above 2^30; the tables' control app is 2^30-1: a
// program's own apps stay below), spread over the servers by its own
// partitioner (hash, or range over [0, MaxKey)). Keys never pushed read
// as zero, or as TableSpec.Init gives them. A server that knows its keys
// form one range (the range partitioner with a MaxKey, or a single
// server) keeps them in a dense store.Table, addressed by key without
// hashing, when the range's values and state fit in DenseMaxBytes.
//
// A synchronous table (TableSpec.Sync) aggregates steps: every worker
// pushes its part of step s of an epoch (PushStep, to every server, empty
// when it has nothing for one), a server applies the step once it has
// every worker's part, adding them up in worker-rank order so that runs
// on the same data write bit-identical models, and a worker's
// Tables.EndEpoch counts as an empty part in the epoch's remaining steps
// and returns when every worker ended the epoch. PullStep pulls for a
// step: a server answers it once every earlier step is applied, so a
// worker may send the pull of step s+1 before it pushes step s and read
// exactly the weights after step s. Each table keeps its own
// steps; Tables.EndEpoch ends all of them at once (ending one and waiting
// before the next deadlocks with a worker still pushing steps of the
// other). A worker's death holds no step back: the parts it sent are
// applied with their steps, and once it is known dead the later steps go
// on with the live workers. The end of the epoch waits for its
// replacement, a new process of the same rank, which calls Tables.Rejoin:
// it goes on in the running epoch after the last of the dead worker's
// batches the servers received, joining the steps at one no server has
// applied yet (see rejoin.go for the protocol). So no batch is applied
// twice, and no other process starts again.
//
// Replicas (conf.PS.Replicas = k, SPINDLE_REPLICAS): each server keeps a
// copy of the tables of the k servers before it on the ring of ranks. A
// server applies an update (a synchronous step's sum, an epoch's end, an
// asynchronous push), forwards it to its replicas, and answers the pushes
// it completes once they acknowledged it. A new process that takes over a
// dead server's id restores its tables from the replicas before it
// serves, and the workers, which keep every request until its server
// answers, send it what the dead process had not answered; a push it
// finds applied is answered without being applied again. So a
// synchronous job loses nothing to a server's death (see replica.go).
// Bounded-delay tables keep no replicas.
//
// The scheduler's death stops nothing either: it is on no data path. A
// node made WithSchedulerLocator (feed.StartNode does, with the job's
// tracker) that loses its scheduler goes on working, asks the locator
// where the launcher started the next one, and rejoins it with its node
// table and the rounds of its barriers; the new scheduler rebuilds its
// table from the first rejoin, and releases at once a barrier round that
// some nodes were released from before the old one died (see follow.go).
//
// A bounded-delay table (TableSpec.BoundedDelay, stale synchronous
// parallel) applies pushes at once but lets no worker run more than
// TableSpec.Staleness steps ahead of the slowest live one: a worker pushes
// step s of epoch e with PushAt (to every server) and pulls with PullAt,
// which a server holds until every live worker in epoch e has completed
// s−Staleness steps. Workers read shards on demand and take different
// numbers of steps; one with no shard left says Idle and then holds no
// one back in that epoch. Staleness 0 is bulk-synchronous without the
// bit-exactness of a synchronous table; an asynchronous table (neither)
// has no bound.
//
// Traffic: a node counts the bytes every message takes on the wire
// (Stats.BytesSent and BytesReceived; AppBytes, Table.Bytes and
// Tables.Bytes for a table's pushes, pulls and answers). A table with
// TableSpec.Compress (a KV worker made WithCompression) sends its keys
// delta-encoded and its data frames zstd-compressed, losslessly; the
// message says so in its meta, and a server answers a compressed request
// compressed, so servers need no setting. TableSpec.DeltaKeys
// (WithDeltaKeys) sends the keys as gaps too but nothing through zstd:
// fewer bytes for almost no CPU. TableSpec.KeyCache
// (WithKeyCache) also has the servers keep the key lists a worker sends,
// which it then refers to by signature; a miss makes it send the list
// again. On an asynchronous or
// bounded-delay table, TableSpec.Significance θ holds back the values of
// a push until a key's sum reaches θ, TableSpec.KKT λ those of a key whose
// weight was last pulled as zero until they reach λ, and Idle sends what
// is held.
//
// # Checkpoints, restore and the model
//
// psnode owns them; the bytes go through interfaces that io implements
// (CheckpointStore: io/ckpt's TableStore; ModelWriter: io/model's
// TableWriter), and the commit through CheckpointCommitter
// (*tracker.Client). The types they exchange are aliases of unnamed
// types, so that neither side imports the other.
//
// Checkpoint n: one worker (rank 0, at an epoch's end) calls
// Tables.Checkpoint(ctx, n). It asks every server, over the tables'
// control app, to write checkpoint n; each server snapshots each of its
// tables in turn under the table's lock (pushes to that table wait) and
// writes it, in ascending key order with the updater's state, as
// <checkpoint-dir>/<n>/<table>.server-<rank>; server 0 also writes
// tables.json, the tables' specs. Once every server answered with a file
// for every table, the worker asks the committer to commit: the tracker
// writes the checkpoint's manifest last, so an interrupted checkpoint is
// never loaded. In synchronous mode nothing of the next epoch is applied
// meanwhile (its steps need the caller's parts), so the checkpoint is the
// exact state at the epoch's end and a job resumed from it trains on to
// the same model as one never stopped.
//
// Restore: when the launcher resumes a job it names the checkpoint in
// conf.Job.ResumeFrom; a server's NewTable then loads its part of the
// table (verified whole before the first record is used) before it
// serves the table, and refuses a checkpoint whose tables.json records
// another element type, width, updater or partitioner for it, or lacks
// the table. Workers start at conf.Job.ResumeEpoch.
//
// The model: Tables.Finish runs a barrier over every node (no worker
// pushes after it); then each server writes its part of every table
// through the ModelWriter. The launcher writes the model's manifest and
// _SUCCESS once every task exited 0 (see io/model for the layout).
//
// # Message lifecycle
//
// Send stamps the sender id and, with PS_RESEND=1, a 64-bit signature; the
// transport carries [meta][data…]. The receive goroutine drops messages
// from nodes that are not in the table, drops PS_DROP_MSG percent of data
// messages on purpose, acknowledges signed messages and suppresses
// duplicates, handles control messages itself and queues data messages for
// their app's goroutine. Unacknowledged messages are retransmitted with
// backoff; when the retry budget runs out the peer is reported dead —
// the process never aborts.
//
// # Liveness
//
// Nodes send heartbeats to the scheduler (every second by default); the
// scheduler declares a node dead after PS_HEARTBEAT_TIMEOUT without one, or
// sooner, a second after its connection to the node broke and could not
// be made again (a transport.ConnWatcher tells: a process that ended
// closes its connections at once), and tells every node; barriers stop
// waiting for it. Requests
// waiting on a dead node complete with an error wrapping ErrNodeDead.
// Subscribe reports deaths and recoveries. A new process may take over a
// dead node's id (recovery) by registering with the same role (and rank);
// the scheduler gives it the node table only once every live node has
// acknowledged the new entry, so that none drops its first messages or
// answers the dead process instead; the data messages that reach the new
// process before its table are kept until the table comes. A recovering
// node's Start skips the start barrier: the job is already running.
//
// # Security
//
// Every node proves it knows the job secret with an HMAC over its
// registration, and the scheduler signs the node table it sends back. The
// scheduler refuses a node that cannot prove it, and nodes ignore messages
// from senders that are not in the table. Under launch (package
// psnode/launch), every ZeroMQ connection also uses CURVE with keys
// derived from the secret (zmq.Options.Curve): a process without the
// secret can neither connect to a node nor read its traffic. The secret
// reaches a task in its keys file (SPINDLE_JOB_KEYS, mode 0600), not in
// its environment; SPINDLE_INSECURE=1 (ps-submit --insecure) turns CURVE
// off, for benchmarking.
//
// # Busy polling
//
// SPINDLE_BUSY_POLL=1 (conf.PS.BusyPoll, zmq.Options.BusyPoll; off by
// default) starts, once per process, one spinner thread per processor in
// Linux's idle scheduling class (package psnode/internal/awake). They
// spin for 2 ms after every message the process sends or receives, and
// sleep otherwise: a processor that goes idle between two messages can
// take tens of microseconds to wake for the next one, in virtual machines
// above all, and a spinner keeps it from going idle while giving way to
// any thread that wakes there. The time they spin shows as the
// process's CPU time; leave it off where jobs share machines under CPU
// shares or quotas (YARN with cgroups), which count it as work.
// BENCHMARKS.md measures when it pays and when it costs.
//
// # Shutdown
//
// Finalize runs a barrier over all live nodes, then Close. Close is
// idempotent and bounded: it stops the timers (heartbeats, resend), stops
// the apps after they drain their queues, closes the transport (sockets
// with linger 0) and waits for every goroutine; outstanding requests fail
// with ErrStopped.
package psnode
