// Package collective runs collective operations among a group of psnode
// nodes: AllReduce, Broadcast, Reduce, ReduceScatter, AllGather and
// Barrier, on float32, float64 and int64 buffers (and types defined on
// them), with Sum, Mean, Max and Min. It is what dense, data-parallel
// training needs where a parameter server would double the traffic.
//
// # Usage
//
//	n, err := launch.Start(ctx, os.LookupEnv, os.Environ(), log) // servers may be 0
//	g, err := collective.New(n, collective.Options{})            // every worker, by rank
//	defer g.Close()
//	err = collective.AllReduce(ctx, g, grads, collective.Mean)    // grads []float32
//	err = collective.Broadcast(ctx, g, params, 0)                 // rank 0's params everywhere
//	// ZeRO style: each rank updates only its shard
//	err = collective.ReduceScatter(ctx, g, grads, collective.Sum)
//	lo, hi := g.Shard(len(grads), g.Rank())                       // grads[lo:hi] is reduced
//	err = collective.AllGather(ctx, g, params)                    // params[lo:hi] was ours
//
// Every member calls the same collectives in the same order with buffers
// of the same length and type; a member that calls something else makes
// the group fail with an error naming it (when the messages show it: a
// different collective, type, op or length under the same number). A
// Group is not for concurrent use; groups on different apps
// (Options.App) are independent, so a program may run several, for
// example one of every worker and one of a subset (Options.Members, any
// nodes of the job, ranked in the order given).
//
// # Transport
//
// A group is an app of the node (psnode.RawApp, app DefaultApp unless
// Options.App says otherwise): its messages travel over the node's own
// transport (the job's ZeroMQ sockets), with the node's liveness and, when
// the job turns it on, its acknowledged delivery. A message is a fixed
// 28-byte header in Meta.Body (version, collective, element type, op, the
// collective's number in the group, step, chunk, element count) and at
// most one data frame of little-endian elements. The decoder bounds every
// length (the header exactly, one frame, a whole number of elements, no
// more than the announced count, an abort's reason at most 1 KiB) and
// refuses unknown collectives, types and ops; the receiver then checks
// that the message is the one it expects (the same collective, type, op
// and length, the exact number of elements of that step's chunk). A
// malformed message fails the group with an error naming its sender;
// nothing a peer sends makes this package panic. Messages wait, keyed by
// (sender, number, step, chunk), until the collective asks for them, so
// arrival order does not matter; at most 1 GiB of them is kept (each
// message counting 64 bytes more than its data), beyond which the group
// fails.
//
// # Algorithms
//
// AllReduce of more than SmallBytes is a ring: a reduce-scatter (N-1
// steps; at step k rank r sends segment r-k-1 to rank r+1 and combines
// segment r-k-2 from rank r-1 into its own) followed by an all-gather (N-1
// steps passing the reduced segments on), segment s being Shard(n, s).
// Segments travel in chunks of Options.ChunkBytes (1 MiB by default), and
// each chunk is sent on as soon as it has been received and combined, so
// that a large buffer streams round the ring instead of moving segment by
// segment. Each rank sends 2(N-1)/N of the buffer, plus 28 header bytes and
// psnode's meta per chunk. ReduceScatter and AllGather are the two halves
// of the ring, for every size. Smaller AllReduces use recursive doubling
// (log2 N exchanges of the whole buffer, plus one step before and after for
// the ranks beyond the largest power of two). Broadcast of more than
// SmallBytes streams the buffer in chunks along the chain root, root+1,
// ...; smaller ones follow a binomial tree. Reduce is the ring's
// reduce-scatter followed by the shards' gathering at the root (recursive
// doubling when small). Barrier is recursive doubling without data.
//
// # Determinism
//
// Results are bit-identical on every rank and from run to run, whatever
// order messages arrive in: every combination's operands and their order
// are fixed by rank. In the ring, segment s is reduced in ring order
// starting after its owner: x[s+1], then x[s+2], ..., then x[s] (indices
// mod N), each partial result the left operand. That order differs from
// segment to segment, so a floating-point sum over the ring may differ in
// the last bits from one summed in rank order 0, 1, ..., N-1, or from the
// recursive doubling that smaller buffers take; but it is the same in
// every run, and after the all-gather every rank holds the same bits. In
// recursive doubling both partners of an exchange compute lower-rank
// operand op higher-rank operand, so they hold the same bits after every
// step. Mean is the sum divided by N once, at the end (integer division
// for integers). Max and Min follow Go's max and min (a NaN wins).
//
// # Failure
//
// The group watches the node's liveness events. When a member dies (the
// scheduler declares it dead after the heartbeat timeout, or the node's
// retransmissions give up on it), the pending collective and every later
// one return a *MemberError naming it (group rank, role, rank, node id,
// host and port), which matches psnode.ErrNodeDead; a job that must go on
// restarts from its checkpoint, as a synchronous parameter-server job
// does. A rank that saw the death passes it on to every member, the dead
// one included: a process declared dead that is alive after all (starved
// of CPU, cut off for a while) hears of it so, since the scheduler tells
// only the live nodes. Every wait is bounded by the caller's context. A rank whose
// collective fails on its own (its context ended, a bad message, a
// mismatched collective) tells the others, which fail at once with an
// *AbortError naming it rather than wait for their deadlines. After any
// failure the members are out of step: the group returns its first error
// from then on.
package collective
