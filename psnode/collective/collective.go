package collective

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// Elem is what a collective moves.
type Elem interface{ ~float32 | ~float64 | ~int64 }

// Op combines values. Results are deterministic: bit-identical on every
// rank and across runs (the reduction order is fixed by rank, not by
// arrival).
type Op int

// The ops.
const (
	Sum  Op = iota
	Mean    // Sum, then divided by the group size (for int64: integer division)
	Max
	Min
)

// DefaultApp is the app id of a group whose Options.App is 0: just below
// the tables' control app (2^30-1), above the ids programs use for their
// own apps.
const DefaultApp int32 = 1<<30 - 2

// DefaultChunkBytes is the ring's pipeline chunk when Options.ChunkBytes
// is 0.
const DefaultChunkBytes = 1 << 20

// SmallBytes is the largest buffer that AllReduce, Reduce and Broadcast
// move with their latency-bound algorithms (recursive doubling, a
// binomial tree) instead of the bandwidth-bound ring and chain.
const SmallBytes = 64 << 10

// maxBuffered bounds the data bytes received from members and not yet
// consumed by this rank: the rest of the current collective and
// collectives that members ran ahead into.
const maxBuffered = 1 << 30

// Options configures a group. The zero value is the job's workers, every
// one of them.
type Options struct {
	Members    []int32 // node ids (psnode ids, e.g. transport.WorkerID(r)); nil = all workers
	App        int32   // app id for the group's messages; 0 = DefaultApp
	ChunkBytes int     // ring pipeline chunk; 0 = DefaultChunkBytes
}

// Stats is what one rank sent and received through its group: every
// message of the group's app, meta and data, as the transport counts
// them.
type Stats struct {
	BytesSent, BytesRecv int64
	MsgsSent, MsgsRecv   int64
}

// Group is a set of nodes that run collectives together. Every member
// must call the same collectives in the same order with the same lengths.
// A Group is not for concurrent use by several goroutines of one process.
type Group struct {
	n       *psnode.Node
	app     *psnode.RawApp
	rank    int
	members []transport.Node // by group rank
	rankOf  map[int32]int
	chunk   int // bytes
	copy    bool

	seq     uint64 // the running (or last) collective's number; caller's goroutine
	aborted bool   // this rank told the others it gave up; caller's goroutine

	failCtx   context.Context // cancelled with the group's first error
	failWith  context.CancelCauseFunc
	closeOnce sync.Once
	closed    chan struct{}
	watchDone chan struct{}

	mu       sync.Mutex
	err      error
	box      map[boxKey]boxed
	buffered int
	doneSeq  uint64 // messages of collectives up to this one are stale
	cur      header // the running collective, once run has set it
	notify   chan struct{}

	scratch []byte // the receive goroutine's meta buffer

	bytesSent, bytesRecv, msgsSent, msgsRecv atomic.Int64
}

type boxKey struct {
	from        int
	seq         uint64
	step, chunk uint32
}

type boxed struct {
	h    header
	data []byte
}

// MemberError reports a member of the group that died; it matches
// psnode.ErrNodeDead.
type MemberError struct {
	Rank   int            // group rank
	Node   transport.Node // its node entry: role, rank, id, host and port
	Reason string
}

func (e *MemberError) Error() string {
	return fmt.Sprintf("collective: member %d of the group, %s rank %d (node %d) on %s, is dead: %s",
		e.Rank, e.Node.Role, e.Node.Rank, e.Node.ID, e.Node.Addr(), e.Reason)
}

// Is makes errors.Is(err, psnode.ErrNodeDead) true.
func (e *MemberError) Is(target error) bool { return target == psnode.ErrNodeDead }

// AbortError reports a member that gave up the group: one of its
// collectives failed (its context ended, it received bytes it could not
// use, ...), which leaves the others unable to finish theirs.
type AbortError struct {
	Rank   int            // group rank
	Node   transport.Node // its node entry
	Reason string         // its error
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("collective: member %d of the group, %s rank %d (node %d) on %s, gave up: %s",
		e.Rank, e.Node.Role, e.Node.Rank, e.Node.ID, e.Node.Addr(), e.Reason)
}

// New builds the group on a started node (after n.Start). Members that
// die make pending and later collectives fail with an error naming the
// dead member (its role, rank and host), within the node's heartbeat
// timeout. Every member should build its group right after Start: a
// message for a group not built yet waits 10 s for it.
func New(n *psnode.Node, opts Options) (*Group, error) {
	self := n.Self()
	if self.ID == transport.EmptyID {
		return nil, fmt.Errorf("collective: New before the node started: %w", psnode.ErrNotReady)
	}
	ids := opts.Members
	if ids == nil {
		for r := 0; r < n.NumWorkers(); r++ {
			ids = append(ids, transport.WorkerID(r))
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("collective: a group needs at least one member")
	}
	table := make(map[int32]transport.Node)
	for _, nd := range n.Nodes() {
		table[nd.ID] = nd
	}
	g := &Group{
		n:         n,
		rank:      -1,
		rankOf:    make(map[int32]int, len(ids)),
		chunk:     opts.ChunkBytes,
		copy:      n.Config().Resend,
		closed:    make(chan struct{}),
		watchDone: make(chan struct{}),
		box:       make(map[boxKey]boxed),
		notify:    make(chan struct{}, 1),
	}
	for i, id := range ids {
		nd, ok := table[id]
		if !ok {
			return nil, fmt.Errorf("collective: member %d: no node %d in the job's node table", i, id)
		}
		if j, dup := g.rankOf[id]; dup {
			return nil, fmt.Errorf("collective: node %d is member %d and %d", id, j, i)
		}
		g.rankOf[id] = i
		g.members = append(g.members, nd)
		if id == self.ID {
			g.rank = i
		}
	}
	if g.rank < 0 {
		return nil, fmt.Errorf("collective: this node (%s) is not a member of the group", self)
	}
	if g.chunk == 0 {
		g.chunk = DefaultChunkBytes
	}
	if g.chunk < 8 || g.chunk > transport.MaxMetaSize*4 {
		return nil, fmt.Errorf("collective: chunk of %d bytes: want 8 bytes to 64 MiB", opts.ChunkBytes)
	}
	appID := opts.App
	if appID == 0 {
		appID = DefaultApp
	}
	g.failCtx, g.failWith = context.WithCancelCause(context.Background())
	events, unsub := n.Subscribe()
	app, err := psnode.NewRawApp(n, appID, g.handle)
	if err != nil {
		unsub()
		g.failWith(nil)
		return nil, fmt.Errorf("collective: %w", err)
	}
	g.app = app
	// Deaths before the subscription are in DeadNodes; later ones come
	// as events.
	for _, id := range n.DeadNodes() {
		if r, ok := g.rankOf[id]; ok {
			g.fail(&MemberError{Rank: r, Node: g.members[r], Reason: "dead when the group was built"})
		}
	}
	go g.watch(events, unsub)
	return g, nil
}

// Close stops watching the members' liveness. The app stays registered
// on the node (psnode has no way to remove one): a new group on the same
// node needs another Options.App.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		close(g.closed)
		<-g.watchDone
		g.fail(errors.New("collective: group closed"))
	})
	return nil
}

func (g *Group) watch(events <-chan psnode.Event, unsub func()) {
	defer close(g.watchDone)
	defer unsub()
	for {
		select {
		case ev := <-events:
			if ev.Kind != psnode.NodeDied {
				continue
			}
			if r, ok := g.rankOf[ev.Node.ID]; ok {
				g.fail(&MemberError{Rank: r, Node: g.members[r], Reason: ev.Reason})
			}
		case <-g.closed:
			return
		case <-g.app.Done():
			g.fail(fmt.Errorf("collective: %w", psnode.ErrStopped))
			return
		}
	}
}

// fail records the group's first error: the running collective and all
// later ones return it.
func (g *Group) fail(err error) {
	g.mu.Lock()
	first := g.err == nil
	if first {
		g.err = err
	}
	g.mu.Unlock()
	if first {
		g.failWith(err)
	}
}

func (g *Group) failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// member names group rank r for errors.
func (g *Group) member(r int) string {
	nd := g.members[r]
	return fmt.Sprintf("member %d (%s rank %d, node %d on %s)", r, nd.Role, nd.Rank, nd.ID, nd.Addr())
}

// handle receives one message of the group's app, on the app's goroutine.
// It never blocks: the message waits in the box for the collective that
// takes it.
func (g *Group) handle(m *transport.Message) {
	from, ok := g.rankOf[m.Meta.Sender]
	if !ok {
		return // not a member: ignored
	}
	var err error
	g.scratch, err = transport.AppendMeta(g.scratch[:0], &m.Meta)
	if err == nil {
		g.bytesRecv.Add(int64(len(g.scratch) + m.DataBytes()))
	}
	g.msgsRecv.Add(1)
	h, data, err := decode(m)
	if err != nil {
		g.fail(fmt.Errorf("collective: %s sent a %w", g.member(from), err))
		return
	}
	if h.kind == kindAbort {
		g.fail(&AbortError{Rank: from, Node: g.members[from], Reason: strings.ToValidUTF8(string(data), "?")})
		return
	}
	g.mu.Lock()
	if h.seq <= g.doneSeq || g.err != nil {
		g.mu.Unlock()
		return // a collective that is over
	}
	k := boxKey{from: from, seq: h.seq, step: h.step, chunk: h.chunk}
	if _, dup := g.box[k]; dup {
		g.mu.Unlock()
		return
	}
	g.box[k] = boxed{h: h, data: data}
	g.buffered += len(data)
	over := g.buffered > maxBuffered
	var mismatch error
	if h.seq == g.cur.seq {
		mismatch = g.mismatch(from, h, g.cur)
	}
	g.mu.Unlock()
	if mismatch != nil {
		g.fail(mismatch)
	}
	if over {
		g.fail(fmt.Errorf("collective: members sent more than %d bytes that this rank has not taken yet (last from %s): collectives called out of step", maxBuffered, g.member(from)))
	}
	select {
	case g.notify <- struct{}{}:
	default:
	}
}

// Rank is this node's position in the group, 0..Size()-1.
func (g *Group) Rank() int { return g.rank }

// Size is the number of members.
func (g *Group) Size() int { return len(g.members) }

// Members returns the members' node entries, by group rank.
func (g *Group) Members() []transport.Node { return append([]transport.Node(nil), g.members...) }

// Shard returns the half-open range [lo, hi) of n elements that rank owns
// in ReduceScatter and AllGather: n split into Size() contiguous parts,
// the first n%Size() parts one element longer.
func (g *Group) Shard(n, rank int) (lo, hi int) { return shard(n, len(g.members), rank) }

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
func (g *Group) Stats() Stats {
	return Stats{
		BytesSent: g.bytesSent.Load(),
		BytesRecv: g.bytesRecv.Load(),
		MsgsSent:  g.msgsSent.Load(),
		MsgsRecv:  g.msgsRecv.Load(),
	}
}

// call is one running collective.
type call struct {
	g   *Group
	ctx context.Context
	h   header // step and chunk vary
}

// run numbers a collective, runs f and records its failure: a collective
// that failed on one rank leaves the others out of step, so the group
// returns that error from then on.
func (g *Group) run(ctx context.Context, k kind, et elemType, op Op, count int, f func(c *call) error) error {
	if err := g.failed(); err != nil {
		g.abort(ctx, err)
		return err
	}
	g.seq++
	c := &call{g: g, h: header{kind: k, elem: et, op: op, seq: g.seq, count: uint64(count)}}
	// A member that runs another collective under this number may send
	// to steps this rank never waits for: compare what came already, and
	// (in handle) what comes while this one runs.
	g.mu.Lock()
	g.cur = c.h
	var mismatch error
	for k, b := range g.box {
		if k.seq == c.h.seq && mismatch == nil {
			mismatch = g.mismatch(k.from, b.h, c.h)
		}
	}
	g.mu.Unlock()
	if mismatch != nil {
		g.fail(mismatch)
		g.abort(ctx, mismatch)
		return mismatch
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(g.failCtx, func() { cancel(context.Cause(g.failCtx)) })
	defer stop()
	c.ctx = ctx
	err := f(c)
	if err != nil {
		if gerr := g.failed(); gerr != nil {
			err = gerr // the cause: a dead member, a bad message
		} else {
			err = fmt.Errorf("collective: %s: %w", c.h.describe(), err)
			g.fail(err)
		}
		g.abort(ctx, err)
		return err
	}
	g.mu.Lock()
	g.doneSeq = g.seq
	for k, b := range g.box {
		if k.seq <= g.seq {
			delete(g.box, k)
			g.buffered -= len(b.data)
		}
	}
	g.mu.Unlock()
	return nil
}

// abort tells the other members, once, that this rank gave up the group
// because of err, so that they fail now rather than wait for it: unless
// err came from them (a member died, or gave up first). It tries for at
// most a second per member.
func (g *Group) abort(ctx context.Context, err error) {
	var dead *MemberError
	var gaveUp *AbortError
	if g.aborted || errors.As(err, &dead) || errors.As(err, &gaveUp) || errors.Is(err, psnode.ErrStopped) {
		return
	}
	g.aborted = true
	reason := err.Error()
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	h := header{kind: kindAbort, elem: elemNone, seq: max(g.seq, 1)}
	ctx = context.WithoutCancel(ctx)
	for r, nd := range g.members {
		if r == g.rank {
			continue
		}
		m := &transport.Message{
			Meta: transport.Meta{Recver: nd.ID, Body: h.appendTo(nil), DataTypes: []transport.DataType{transport.TypeChar}},
			Data: [][]byte{[]byte(reason)},
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		if n, err := g.app.Send(sctx, m); err == nil {
			g.bytesSent.Add(int64(n))
			g.msgsSent.Add(1)
		}
		cancel()
	}
}

// send sends data (step, chunk) of the collective to group rank to.
func (c *call) send(to int, step, chunk uint32, data []byte) error {
	h := c.h
	h.step, h.chunk = step, chunk
	m := &transport.Message{Meta: transport.Meta{
		Recver: c.g.members[to].ID,
		Body:   h.appendTo(make([]byte, 0, headerLen)),
	}}
	if len(data) > 0 {
		if c.g.copy {
			data = append([]byte(nil), data...)
		}
		m.Data = [][]byte{data}
		m.Meta.DataTypes = []transport.DataType{h.elem.dataType()}
	}
	n, err := c.g.app.Send(c.ctx, m)
	if err != nil {
		return fmt.Errorf("send to %s: %w", c.g.member(to), err)
	}
	c.g.bytesSent.Add(int64(n))
	c.g.msgsSent.Add(1)
	return nil
}

// recv waits for data (step, chunk) of the collective from group rank
// from, which must hold want elements.
func (c *call) recv(from int, step, chunk uint32, want int) ([]byte, error) {
	g := c.g
	k := boxKey{from: from, seq: c.h.seq, step: step, chunk: chunk}
	for {
		g.mu.Lock()
		b, ok := g.box[k]
		if ok {
			delete(g.box, k)
			g.buffered -= len(b.data)
		}
		err := g.err
		g.mu.Unlock()
		if ok {
			h := b.h
			if err := g.mismatch(from, h, c.h); err != nil {
				return nil, err
			}
			if got := len(b.data) / max(1, h.elem.size()); got != want {
				return nil, fmt.Errorf("%s sent %d elements in step %d chunk %d, want %d", g.member(from), got, step, chunk, want)
			}
			return b.data, nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-g.notify:
		case <-c.ctx.Done():
			if err := g.failed(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("waiting for %s: %w", g.member(from), context.Cause(c.ctx))
		case <-g.app.Done():
			return nil, psnode.ErrStopped
		}
	}
}

// mismatch compares the header of a message from member from with the
// collective this rank runs under the same number.
func (g *Group) mismatch(from int, h, cur header) error {
	if h.kind == cur.kind && h.elem == cur.elem && h.op == cur.op && h.count == cur.count {
		return nil
	}
	return fmt.Errorf("collective: %s runs %s where this rank runs %s: members must call the same collectives in the same order",
		g.member(from), h.describe(), cur.describe())
}

func checkOp(op Op) error {
	if !op.valid() {
		return fmt.Errorf("collective: unknown op %d", int(op))
	}
	return nil
}

func (g *Group) checkRoot(root int) error {
	if root < 0 || root >= len(g.members) {
		return fmt.Errorf("collective: root %d outside the group of %d", root, len(g.members))
	}
	return nil
}

// AllReduce reduces buf over the group in place: afterwards every rank
// holds the same result.
func AllReduce[T Elem](ctx context.Context, g *Group, buf []T, op Op) error {
	if err := checkOp(op); err != nil {
		return err
	}
	return g.run(ctx, kindAllReduce, elemOf[T](), op, len(buf), func(c *call) error {
		if smallPath[T](len(buf)) {
			return doubling(c, buf, op)
		}
		return ring(c, buf, op, 0, 2*g.Size()-3)
	})
}

// Broadcast copies root's buf to every rank's buf (same length
// everywhere).
func Broadcast[T Elem](ctx context.Context, g *Group, buf []T, root int) error {
	if err := g.checkRoot(root); err != nil {
		return err
	}
	return g.run(ctx, kindBroadcast, elemOf[T](), Sum, len(buf), func(c *call) error {
		if smallPath[T](len(buf)) {
			return binomialBroadcast(c, buf, root)
		}
		return chainBroadcast(c, buf, root)
	})
}

// Reduce leaves the reduction in root's buf; other ranks' buf contents
// afterwards are unspecified.
func Reduce[T Elem](ctx context.Context, g *Group, buf []T, op Op, root int) error {
	if err := checkOp(op); err != nil {
		return err
	}
	if err := g.checkRoot(root); err != nil {
		return err
	}
	return g.run(ctx, kindReduce, elemOf[T](), op, len(buf), func(c *call) error {
		if smallPath[T](len(buf)) {
			return doubling(c, buf, op)
		}
		if err := ring(c, buf, op, 0, g.Size()-2); err != nil {
			return err
		}
		return gather(c, buf, root)
	})
}

// ReduceScatter reduces buf over the group; afterwards rank r's
// buf[Shard(len(buf), r)] holds the reduced values of that shard (the
// rest of buf is unspecified).
func ReduceScatter[T Elem](ctx context.Context, g *Group, buf []T, op Op) error {
	if err := checkOp(op); err != nil {
		return err
	}
	return g.run(ctx, kindReduceScatter, elemOf[T](), op, len(buf), func(c *call) error {
		return ring(c, buf, op, 0, g.Size()-2)
	})
}

// AllGather: each rank r contributes buf[Shard(len(buf), r)]; afterwards
// every rank's buf holds all shards.
func AllGather[T Elem](ctx context.Context, g *Group, buf []T) error {
	return g.run(ctx, kindAllGather, elemOf[T](), Sum, len(buf), func(c *call) error {
		return ring(c, buf, Sum, g.Size()-1, 2*g.Size()-3)
	})
}

// Barrier returns when every member has called it.
func Barrier(ctx context.Context, g *Group) error {
	return g.run(ctx, kindBarrier, elemNone, Sum, 0, func(c *call) error {
		return doubling[int64](c, nil, Sum)
	})
}
