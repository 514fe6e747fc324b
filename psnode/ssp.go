package psnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Bounded delay (stale synchronous parallel). A worker's clock is its
// position in training, Clock{Epoch, Step}: Step counts the mini-batches
// it has begun in the epoch. It pushes the gradients of step s of epoch e
// to every server (PushAt; an empty push to a server that holds none of
// its keys), which tells each server it has completed s+1 steps of e, and
// pulls the weights of step s with PullAt, which a server answers only
// once every live worker in epoch e has completed at least s−τ steps, τ
// the table's staleness bound. A worker is thus never more than τ steps
// ahead of the slowest: at τ+1 steps ahead its pull waits. τ=0 is
// bulk-synchronous, without the bit-exactness of a synchronous table
// (TableSpec.Sync).
//
// Workers read shards on demand, so they do not take the same number of
// steps in an epoch. A worker with no shard to read says so with Idle:
// it no longer holds anyone back in that epoch, and counts as being at
// step 0 of the next one until it pushes there. A worker still in the
// previous epoch also counts as being at step 0; one already in the next
// epoch holds no one back; nor does a dead worker once its death is known.
// Epochs are ordered because none starts before every shard of the last
// is read: two live workers are never more than one epoch apart.
//
// The clock is carried in the request's command: 1 + (e mod 4)·2²⁸ + s
// for a push or a pull at step s of epoch e (0 is an untagged request,
// served at once), and −1 − (e mod 4) for Idle.
const (
	sspStepBits = 28
	// MaxSteps bounds a worker's steps in one epoch of a bounded-delay
	// table.
	MaxSteps = 1<<sspStepBits - 1
)

// Clock is a worker's position in bounded-delay training: the step (0,
// 1, … counted from the start of the epoch) of an epoch.
type Clock struct{ Epoch, Step int }

// sspCommand is the command of a push or a pull at c.
func sspCommand(c Clock) int32 { return int32(1 + (c.Epoch&3)<<sspStepBits + c.Step) }

// sspIdleCommand is the command of Idle in epoch.
func sspIdleCommand(epoch int) int32 { return int32(-1 - epoch&3) }

// sspDecode splits a bounded-delay command into the epoch (mod 4), the
// step, and whether it is an Idle; ok is false for a command no worker
// sends.
func sspDecode(cmd int32) (epoch uint8, step int64, idle, ok bool) {
	switch {
	case cmd >= 1 && cmd <= 1<<(sspStepBits+2):
		v := cmd - 1
		return uint8(v >> sspStepBits), int64(v & MaxSteps), false, true
	case cmd <= -1 && cmd >= -4:
		return uint8(-1 - cmd), 0, true, true
	}
	return 0, 0, false, false
}

// sspWorker is what a server knows of one worker's clock.
type sspWorker struct {
	epoch uint8 // mod 4
	steps int64 // steps completed in epoch
	idle  bool  // no more steps in epoch for now
	// ticked is when it last pushed (or said Idle): a worker that
	// holds others back while it pushes is slow, not stalled.
	ticked time.Time
}

// sspAhead says how many epochs (mod 4) a is ahead of b: 0, 1, or 3 for
// one behind (2 never happens between live workers).
func sspAhead(a, b uint8) uint8 { return (a - b) & 3 }

// SSPHandler applies pushes at once to a StoreHandler's table and holds
// each tagged pull until the slowest live worker is close enough (see
// PullAt).
type SSPHandler[V Number] struct {
	store     *StoreHandler[V]
	staleness int64
	workers   int

	mu      sync.Mutex
	clocks  map[int32]*sspWorker // by worker id
	dead    map[int32]bool
	waiting heldPulls[V, sspAt]
}

// sspAt is what a held pull waits for: every live worker in epoch (mod
// 4) to have completed step−τ steps.
type sspAt struct {
	epoch uint8
	step  int64
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
	return &SSPHandler[V]{store: store, staleness: int64(staleness), workers: workers, clocks: make(map[int32]*sspWorker), dead: make(map[int32]bool)}, nil
}

// mayPassLocked says whether a pull at step of epoch (mod 4) may be
// answered: every live worker has completed step−τ steps of that epoch,
// counting one in the epoch before (or not heard from yet) as at step 0.
func (h *SSPHandler[V]) mayPassLocked(epoch uint8, step int64) bool {
	need := step - h.staleness
	if need <= 0 {
		return true
	}
	known := len(h.clocks)
	for id := range h.dead {
		if h.clocks[id] == nil {
			known++
		}
	}
	if known < h.workers {
		return false // a worker not heard from yet is at step 0
	}
	for id, w := range h.clocks {
		if h.dead[id] {
			continue
		}
		switch sspAhead(w.epoch, epoch) {
		case 0:
			if !w.idle && w.steps < need {
				return false
			}
		case 3:
			return false // still in the epoch before: at step 0
		}
	}
	return true
}

// tickLocked records a push at step (or an Idle) of epoch from sender.
func (h *SSPHandler[V]) tickLocked(sender int32, epoch uint8, step int64, idle bool) {
	delete(h.dead, sender) // a worker that pushes is alive
	w := h.clocks[sender]
	if w == nil {
		w = &sspWorker{epoch: epoch}
		h.clocks[sender] = w
	}
	w.ticked = time.Now()
	switch sspAhead(epoch, w.epoch) {
	case 0:
	case 3:
		return // a late message of the epoch before: the clock is past it
	default:
		*w = sspWorker{epoch: epoch, ticked: w.ticked}
	}
	if idle {
		w.idle = true
		return
	}
	w.idle = false
	w.steps = max(w.steps, step+1)
}

// Handle is the Handler to pass to NewKVServer.
func (h *SSPHandler[V]) Handle(req *KVRequest[V], srv *KVServer[V]) {
	if req.Cmd == 0 {
		h.store.Handle(req, srv)
		return
	}
	epoch, step, idle, ok := sspDecode(req.Cmd)
	if !ok || (idle && !req.Push) {
		_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("bounded-delay request with command %d", req.Cmd))
		return
	}
	if req.Push {
		h.mu.Lock()
		h.tickLocked(req.Sender, epoch, step, idle)
		h.mu.Unlock()
		h.store.Handle(req, srv)
		h.release(srv)
		return
	}
	h.mu.Lock()
	if h.mayPassLocked(epoch, step) {
		h.mu.Unlock()
		h.store.Handle(req, srv)
		return
	}
	h.waiting.hold(req, sspAt{epoch: epoch, step: step})
	h.mu.Unlock()
}

// release answers the waiting pulls the workers' clocks now allow.
func (h *SSPHandler[V]) release(srv *KVServer[V]) {
	h.mu.Lock()
	if len(h.waiting) == 0 {
		h.mu.Unlock()
		return
	}
	ready := h.waiting.take(
		func(at sspAt) bool { return h.mayPassLocked(at.epoch, at.step) },
		func(r *KVRequest[V]) bool { return h.dead[r.Sender] }, // nobody to answer
	)
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
	n.onWorkerDeath(func(ev Event) {
		h.mu.Lock()
		h.dead[ev.Node.ID] = true
		h.mu.Unlock()
		h.release(srv)
	})
}

// onWorkerDeath calls f, on a goroutine of n's, for every worker whose
// death n learns of, until n closes.
func (n *Node) onWorkerDeath(f func(Event)) {
	events, stop := n.Subscribe()
	n.goFunc(func() {
		defer stop()
		for {
			select {
			case ev := <-events:
				if ev.Kind == NodeDied && ev.Node.Role == transport.RoleWorker {
					f(ev)
				}
			case <-n.ctx.Done():
				return
			}
		}
	})
}

// checkSSP checks that t is a bounded-delay table on a worker and c a
// clock it can carry.
func (t *Table[V]) checkSSP(c Clock) error {
	if t.kv == nil {
		return ErrNotWorker
	}
	if t.desc.Staleness == nil {
		return fmt.Errorf("psnode: table %s has no bounded delay (TableSpec.BoundedDelay)", t.desc.Name)
	}
	if c.Epoch < 0 || c.Step < 0 || c.Step >= MaxSteps {
		return fmt.Errorf("psnode: table %s: clock %+v out of range (epoch ≥ 0, step in [0, %d))", t.desc.Name, c, MaxSteps)
	}
	return nil
}

// PushAt pushes a bounded-delay table's values of step c to every server
// and completes the step. Keys and values are as for Push.
func (t *Table[V]) PushAt(ctx context.Context, c Clock, keys []uint64, vals []V) (int32, error) {
	if err := t.checkSSP(c); err != nil {
		return 0, err
	}
	if err := t.check(keys, vals); err != nil {
		return 0, err
	}
	if t.sig != nil {
		keys, vals = t.sig.filter(keys, vals)
	}
	return t.kv.Push(ctx, KVPairs[V]{Keys: keys, Vals: vals}, WithCmd(sspCommand(c)), ToAllServers())
}

// PullAt pulls the values of keys for step c of a bounded-delay table:
// the servers answer once every live worker in c's epoch has completed
// at least c.Step−Staleness steps of it. Bound the Wait with a context: a
// worker that stops pushing without Idle holds the others back until its
// death is known.
func (t *Table[V]) PullAt(ctx context.Context, c Clock, keys []uint64, vals *[]V) (int32, error) {
	if err := t.checkSSP(c); err != nil {
		return 0, err
	}
	return t.kv.Pull(ctx, keys, vals, nil, t.watchPull(keys, vals, WithCmd(sspCommand(c)))...)
}

// Idle says this worker has no more steps in epoch for now (no shard to
// read): it holds no one back in that epoch until it pushes again, and
// counts as being at step 0 of the next epoch. It carries what the
// significantly-modified filter held back, if any.
func (t *Table[V]) Idle(ctx context.Context, epoch int) (int32, error) {
	if err := t.checkSSP(Clock{Epoch: epoch}); err != nil {
		return 0, err
	}
	var kv KVPairs[V]
	if t.sig != nil {
		kv.Keys, kv.Vals = t.sig.drain()
	}
	return t.kv.Push(ctx, kv, WithCmd(sspIdleCommand(epoch)), ToAllServers())
}

// Bytes returns the bytes on the wire of this table's pushes, pulls and
// their answers, as this node sent and received them.
func (t *Table[V]) Bytes() AppBytes { return t.ts.n.AppBytes(t.app) }

// SSP returns a bounded-delay table's handler on a server, nil elsewhere.
func (t *Table[V]) SSP() *SSPHandler[V] { return t.ssp }
