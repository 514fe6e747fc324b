package collective

import (
	"context"
	"errors"

	"github.com/spindle-ps/spindle/psnode"
)

// Elem is what a collective moves.
type Elem interface{ ~float32 | ~float64 | ~int64 }

// Op combines values. Results are deterministic: bit-identical on every
// rank and across runs (the reduction order is fixed by rank, not by
// arrival).
type Op int

const (
	Sum  Op = iota
	Mean    // Sum, then divided by the group size (for int64: integer division)
	Max
	Min
)

// Options configures a group. The zero value is the job's workers, every
// one of them.
type Options struct {
	Members    []int32 // node ids (psnode ids, e.g. transport.WorkerID(r)); nil = all workers
	App        int32   // app id for the group's messages; 0 = a fixed default reserved for collectives
	ChunkBytes int     // ring pipeline chunk; 0 = a sensible default (1 MiB)
}

// Stats is what one rank sent and received through its group.
type Stats struct {
	BytesSent, BytesRecv int64 // payload bytes on the wire (message data and headers)
	MsgsSent, MsgsRecv   int64
}

// Group is a set of nodes that run collectives together. Every member
// must call the same collectives in the same order with the same lengths.
// A Group is not for concurrent use by several goroutines of one process.
type Group struct {
	n     *psnode.Node
	rank  int
	size  int
	stats Stats
}

var errUnimplemented = errors.New("collective: not implemented yet")

// New builds the group on a started node (after n.Start).
func New(n *psnode.Node, opts Options) (*Group, error) { return nil, errUnimplemented }

// Rank is this node's position in the group, 0..Size()-1.
func (g *Group) Rank() int { return g.rank }

// Size is the number of members.
func (g *Group) Size() int { return g.size }

// Shard returns the half-open range [lo, hi) of n elements that rank owns
// in ReduceScatter and AllGather: n split into Size() contiguous parts,
// the first n%Size() parts one element longer.
func (g *Group) Shard(n, rank int) (lo, hi int) { return shard(n, g.size, rank) }

func shard(n, size, rank int) (lo, hi int) {
	q, r := n/size, n%size
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// Stats reports what this rank sent and received through the group.
func (g *Group) Stats() Stats { return g.stats }

// AllReduce reduces buf over the group in place.
func AllReduce[T Elem](ctx context.Context, g *Group, buf []T, op Op) error { return errUnimplemented }

// Broadcast copies root's buf to every rank's buf.
func Broadcast[T Elem](ctx context.Context, g *Group, buf []T, root int) error {
	return errUnimplemented
}

// Reduce leaves the reduction in root's buf.
func Reduce[T Elem](ctx context.Context, g *Group, buf []T, op Op, root int) error {
	return errUnimplemented
}

// ReduceScatter leaves rank r's shard reduced in buf[Shard(len(buf), r)].
func ReduceScatter[T Elem](ctx context.Context, g *Group, buf []T, op Op) error {
	return errUnimplemented
}

// AllGather gathers every rank's shard into every rank's buf.
func AllGather[T Elem](ctx context.Context, g *Group, buf []T) error { return errUnimplemented }

// Barrier returns when every member has called it.
func Barrier(ctx context.Context, g *Group) error { return errUnimplemented }
