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
// psnode/launch which does both), and then:
//
//	n, err := psnode.New(cfg.PS, tr, psnode.WithLogger(log))
//	err = n.Start(ctx)             // register, learn the node table, barrier
//	// servers: psnode.NewKVServer(n, app, handler)
//	// workers: w, _ := psnode.NewKVWorker[float32](n, app, 0)
//	//          ts, _ := w.Push(ctx, kv); err = w.Wait(ctx, ts)
//	err = n.Finalize(ctx)          // barrier, then Close
//
// Apps are created after Start. A message that arrives for an app not
// created yet waits for it, up to 10 s; after that a request is answered
// with an error naming the missing app, so that its sender does not hang.
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
// scheduler declares a node dead after PS_HEARTBEAT_TIMEOUT without one and
// tells every node; barriers stop waiting for it. Requests
// waiting on a dead node complete with an error wrapping ErrNodeDead.
// Subscribe reports deaths and recoveries. A new process may take over a
// dead node's id (recovery) by registering with the same role (and rank);
// the scheduler gives it the node table only once every live node has
// acknowledged the new entry, so that none drops its first messages or
// answers the dead process instead. A recovering node's Start skips the
// start barrier: the job is already running.
//
// # Security
//
// Every node proves it knows the job secret with an HMAC over its
// registration, and the scheduler signs the node table it sends back. The
// scheduler refuses a node that cannot prove it, and nodes ignore messages
// from senders that are not in the table.
//
// # Shutdown
//
// Finalize runs a barrier over all live nodes, then Close. Close is
// idempotent and bounded: it stops the timers (heartbeats, resend), stops
// the apps after they drain their queues, closes the transport (sockets
// with linger 0) and waits for every goroutine; outstanding requests fail
// with ErrStopped.
package psnode
