// Package partition decides which server owns each key of a push or pull.
//
// A worker sends keys as a sorted batch of unique uint64 values. Before
// sending, it asks a [Partitioner] to cut the batch into one [Segment] per
// server ("part"); part i of the batch goes to server i. Servers use the same
// partitioner, built from the same configuration, to check that the keys they
// receive are theirs. The mapping from key to part is therefore part of the
// wire contract: every process of a job must build its partitioner with the
// same kind, number of parts and key space.
//
// Three kinds are provided:
//
//   - [RangePartitioner] ("range") cuts the key space into contiguous ranges
//     whose sizes differ by at most one. Split returns contiguous, zero-copy
//     segments found by binary search and does not allocate when given a
//     reusable output slice.
//   - [HashPartitioner] ("hash") assigns a key to part mix(key) % parts,
//     where mix is the splitmix64 finalizer. It balances load when keys are
//     clustered, at the price of an index list per segment.
//   - "consistent" ([NewConsistent]) assigns a key to part
//     Jump(mix(key), parts), jump consistent hashing: it balances as "hash"
//     does, and a job that goes from S parts to S+1 (or back) moves only
//     the keys of part S, about 1/(S+1) of them, where "hash" moves most.
//
// # Key space
//
// A partitioner covers the key space [0, maxKey) when maxKey > 0, and the
// whole uint64 space, including math.MaxUint64, when maxKey == 0. Every key
// of the space has exactly one owner.
//
// # Usage
//
// Reuse the segment slice across batches so that steady-state splitting does
// not allocate:
//
//	p, err := partition.NewRange(numServers, 0)
//	if err != nil {
//		return err
//	}
//	var segs []partition.Segment
//	for batch := range batches {
//		segs, err = p.Split(batch.Keys, segs)
//		if err != nil {
//			return fmt.Errorf("split push: %w", err)
//		}
//		for server, seg := range segs {
//			if seg.Idx == nil {
//				send(server, batch.Keys[seg.Lo:seg.Hi])
//			} else {
//				sendGather(server, batch.Keys, seg.Idx)
//			}
//		}
//	}
//
// Partitioners are immutable after construction and safe for concurrent use;
// the segment slice passed to Split is owned by the caller.
package partition
