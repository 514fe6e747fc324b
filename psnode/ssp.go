package psnode

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Bounded delay (stale synchronous parallel): every worker of a job keeps
// a clock, the number of steps it has completed since it started. A
// worker pushes the gradients of step c to every server (PushAt; an empty
// push to a server that holds none of its keys), which sets its clock to
// c+1 on each server, and pulls the weights of step c with PullAt, which a
// server answers only once the slowest live worker's clock is at least
// c−τ, τ the table's staleness bound. A worker is thus never more than τ
// steps ahead of the slowest: at τ+1 steps ahead its pull waits. τ=0 is
// bulk-synchronous without the bit-exactness of a synchronous table
// (TableSpec.Sync). A worker with no more steps says so with EndClock and
// no longer holds anyone back; nor does a dead worker once its death is
// known.
//
// The clock is carried in the request's command: c+1 for a push of step c
// or a pull for step c (0 is an untagged request, served at once), and
// sspDone for EndClock.
const (
	sspDone int32 = -1
	// MaxClock bounds a worker's clock.
	MaxClock = math.MaxInt32 - 1
)

// Unbounded is the staleness of an asynchronous table (TableSpec.Staleness).
const Unbounded = -1

// SSPHandler applies pushes at once to a StoreHandler's table and holds
// each tagged pull until the slowest live worker is close enough (see
// PullAt).
type SSPHandler[V Number] struct {
	store     *StoreHandler[V]
	staleness int
	workers   int

	mu      sync.Mutex
	clocks  map[int32]int64 // worker id → clock; math.MaxInt64 when done
	dead    map[int32]bool
	waiting []sspPull[V]
}

type sspPull[V Number] struct {
	req   *KVRequest[V]
	clock int64
}

// NewSSPHandler makes a bounded-delay handler over store for a job of
// workers workers and staleness bound staleness ≥ 0. Subscribe it to
// worker deaths with WatchDeaths.
func NewSSPHandler[V Number](store *StoreHandler[V], workers, staleness int) (*SSPHandler[V], error) {
	if workers < 1 {
		return nil, fmt.Errorf("psnode: bounded-delay handler for %d workers", workers)
	}
	if staleness < 0 {
		return nil, fmt.Errorf("psnode: bounded-delay handler with staleness %d, want at least 0", staleness)
	}
	return &SSPHandler[V]{store: store, staleness: staleness, workers: workers, clocks: make(map[int32]int64), dead: make(map[int32]bool)}, nil
}

// minClockLocked is the slowest live worker's clock: 0 until every
// worker has been heard from (or is dead).
func (h *SSPHandler[V]) minClockLocked() int64 {
	if len(h.clocks)+len(h.deadUnheardLocked()) < h.workers {
		return 0 // some worker has not pushed yet: it is at clock 0
	}
	lo := int64(math.MaxInt64)
	for id, c := range h.clocks {
		if !h.dead[id] {
			lo = min(lo, c)
		}
	}
	return lo
}

// deadUnheardLocked lists the dead workers that never pushed.
func (h *SSPHandler[V]) deadUnheardLocked() []int32 {
	var out []int32
	for id := range h.dead {
		if _, ok := h.clocks[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// Handle is the Handler to pass to NewKVServer.
func (h *SSPHandler[V]) Handle(req *KVRequest[V], srv *KVServer[V]) {
	if req.Push {
		if req.Cmd != 0 {
			h.mu.Lock()
			c := int64(req.Cmd)
			if req.Cmd == sspDone {
				c = math.MaxInt64
			}
			if c < 0 {
				h.mu.Unlock()
				_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("bounded-delay push with command %d", req.Cmd))
				return
			}
			delete(h.dead, req.Sender) // a worker that pushes is alive
			h.clocks[req.Sender] = max(h.clocks[req.Sender], c)
			h.mu.Unlock()
		}
		h.store.Handle(req, srv)
		h.release(srv)
		return
	}
	if req.Cmd <= 0 {
		h.store.Handle(req, srv)
		return
	}
	clock := int64(req.Cmd) - 1
	h.mu.Lock()
	if clock-int64(h.staleness) <= h.minClockLocked() {
		h.mu.Unlock()
		h.store.Handle(req, srv)
		return
	}
	// The request aliases the receive buffer: keep a copy.
	cp := &KVRequest[V]{KVMeta: req.KVMeta, KVPairs: KVPairs[V]{Keys: slices.Clone(req.Keys), Vals: slices.Clone(req.Vals), Lens: slices.Clone(req.Lens)}}
	h.waiting = append(h.waiting, sspPull[V]{req: cp, clock: clock})
	h.mu.Unlock()
}

// release answers the waiting pulls the slowest worker's clock now allows.
func (h *SSPHandler[V]) release(srv *KVServer[V]) {
	h.mu.Lock()
	if len(h.waiting) == 0 {
		h.mu.Unlock()
		return
	}
	lo := h.minClockLocked()
	var ready []*KVRequest[V]
	keep := h.waiting[:0]
	for _, p := range h.waiting {
		switch {
		case h.dead[p.req.Sender]:
			// Nobody to answer.
		case p.clock-int64(h.staleness) <= lo:
			ready = append(ready, p.req)
		default:
			keep = append(keep, p)
		}
	}
	clear(h.waiting[len(keep):])
	h.waiting = keep
	h.mu.Unlock()
	for _, r := range ready {
		h.store.Handle(r, srv)
	}
}

// Waiting returns the number of pulls held back, for tests and metrics.
func (h *SSPHandler[V]) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// WatchDeaths stops counting a worker of n once it is known dead, so that
// it holds no one back, and answers what its death lets through. It
// returns when n closes.
func (h *SSPHandler[V]) WatchDeaths(n *Node, srv *KVServer[V]) {
	events, stop := n.Subscribe()
	n.goFunc(func() {
		defer stop()
		for {
			select {
			case ev := <-events:
				if ev.Kind != NodeDied || ev.Node.Role != transport.RoleWorker {
					continue
				}
				h.mu.Lock()
				h.dead[ev.Node.ID] = true
				h.mu.Unlock()
				h.release(srv)
			case <-n.ctx.Done():
				return
			}
		}
	})
}

// sspCmd is the command of a bounded-delay request at clock.
func (t *Table[V]) sspCmd(clock int) (int32, error) {
	if t.kv == nil {
		return 0, ErrNotWorker
	}
	if t.desc.Staleness == nil {
		return 0, fmt.Errorf("psnode: table %s has no bounded delay (TableSpec.BoundedDelay)", t.desc.Name)
	}
	if clock < 0 || clock >= MaxClock {
		return 0, fmt.Errorf("psnode: table %s: clock %d out of [0, %d)", t.desc.Name, clock, MaxClock)
	}
	return int32(clock + 1), nil
}

// PushAt pushes a bounded-delay table's values of step clock (0, 1, …
// counted from the worker's start), to every server, and advances this
// worker's clock to clock+1. Keys and values are as for Push.
func (t *Table[V]) PushAt(ctx context.Context, clock int, keys []uint64, vals []V) (int32, error) {
	cmd, err := t.sspCmd(clock)
	if err != nil {
		return 0, err
	}
	if err := t.check(keys, vals); err != nil {
		return 0, err
	}
	return t.kv.Push(ctx, KVPairs[V]{Keys: keys, Vals: vals}, WithCmd(cmd), ToAllServers())
}

// PullAt pulls the values of keys for step clock of a bounded-delay
// table: the servers answer once the slowest live worker has completed
// at least clock−Staleness steps. Bound the Wait with a context: a
// worker that stops pushing without EndClock holds the others back until
// its death is known.
func (t *Table[V]) PullAt(ctx context.Context, clock int, keys []uint64, vals *[]V) (int32, error) {
	cmd, err := t.sspCmd(clock)
	if err != nil {
		return 0, err
	}
	return t.kv.Pull(ctx, keys, vals, nil, WithCmd(cmd))
}

// EndClock says this worker has no more steps for a bounded-delay table:
// it no longer holds the others back.
func (t *Table[V]) EndClock(ctx context.Context) (int32, error) {
	if _, err := t.sspCmd(0); err != nil {
		return 0, err
	}
	return t.kv.Push(ctx, KVPairs[V]{}, WithCmd(sspDone), ToAllServers())
}

// SSP returns a bounded-delay table's handler on a server, nil elsewhere.
func (t *Table[V]) SSP() *SSPHandler[V] { return t.ssp }
