package psnode

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Synchronous training: in every step each worker pushes its gradients to
// every server (ToAllServers; an empty push when it has none for that
// server), and a server applies a step once it has every worker's part,
// adding the parts up in worker-rank order so the result does not depend
// on arrival order; then it answers all of them. A worker that has no more
// data in an epoch says so once (SyncDone) and counts as an empty part in
// the epoch's remaining steps; the answer to SyncDone comes when every
// worker is done with the epoch, so it doubles as an epoch barrier.
//
// A pull may carry a step too (Table.PullStep): the server holds it until
// every earlier step of the epoch is applied, so a worker can send the
// pull of step s+1 before it pushes step s and still read exactly the
// weights after step s, as if it had waited for the push.
//
// The step is carried in the request's command: epoch<<20 | step.
const (
	syncStepBits = 20
	// MaxSyncEpochs and MaxSyncSteps bound what a command can carry.
	MaxSyncEpochs = 1 << (31 - syncStepBits)
	MaxSyncSteps  = 1<<syncStepBits - 1 // the last value means "done"
)

// SyncStep is the command of a worker's push for step of epoch.
func SyncStep(epoch, step int) (int32, error) {
	if epoch < 0 || epoch >= MaxSyncEpochs || step < 0 || step >= MaxSyncSteps {
		return 0, fmt.Errorf("psnode: synchronous step %d of epoch %d: at most %d epochs of %d steps", step, epoch, MaxSyncEpochs, MaxSyncSteps)
	}
	return int32(epoch<<syncStepBits | step), nil
}

// SyncDone is the command of a worker's empty push saying it has no more
// steps in epoch.
func SyncDone(epoch int) (int32, error) {
	if epoch < 0 || epoch >= MaxSyncEpochs {
		return 0, fmt.Errorf("psnode: synchronous epoch %d: at most %d epochs", epoch, MaxSyncEpochs)
	}
	return int32(epoch<<syncStepBits | MaxSyncSteps), nil
}

// SyncHandler applies pushes in synchronous steps (see SyncStep) to a
// StoreHandler's table, and answers pulls at once from it.
type SyncHandler[V Number] struct {
	store   *StoreHandler[V]
	workers int

	mu      sync.Mutex
	steps   map[int32]*syncStep[V]
	done    map[int]map[int32]*KVRequest[V] // epoch → worker → its SyncDone
	applied map[int]int                     // epoch → steps applied, while it runs
	ended   int                             // epochs below this are over
	pulls   heldPulls[V, syncAt]            // held until their step's turn
	err     error                           // set once a worker died
}

// syncAt is what a held pull waits for: every step of epoch before step
// applied.
type syncAt struct{ epoch, step int }

type syncStep[V Number] struct {
	reqs  map[int32]*KVRequest[V]
	parts map[int32]KVPairs[V] // copies: requests alias receive buffers
}

// NewSyncHandler makes a synchronous handler over store for a job of
// workers workers. Subscribe it to worker deaths with WatchDeaths.
func NewSyncHandler[V Number](store *StoreHandler[V], workers int) (*SyncHandler[V], error) {
	if workers < 1 {
		return nil, fmt.Errorf("psnode: synchronous handler for %d workers", workers)
	}
	return &SyncHandler[V]{
		store: store, workers: workers, steps: make(map[int32]*syncStep[V]),
		done: make(map[int]map[int32]*KVRequest[V]), applied: make(map[int]int),
	}, nil
}

// Handle is the Handler to pass to NewKVServer.
func (h *SyncHandler[V]) Handle(req *KVRequest[V], srv *KVServer[V]) {
	if !req.Push {
		h.pull(req, srv)
		return
	}
	if req.Cmd < 0 {
		_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("synchronous push with command %d", req.Cmd))
		return
	}
	epoch, step := int(req.Cmd>>syncStepBits), int(req.Cmd&MaxSyncSteps)
	h.mu.Lock()
	if h.err != nil {
		err := h.err
		h.mu.Unlock()
		_ = srv.RespondError(srv.n.ctx, req, err)
		return
	}
	if step == MaxSyncSteps {
		d := h.done[epoch]
		if d == nil {
			d = make(map[int32]*KVRequest[V])
			h.done[epoch] = d
		}
		d[req.Sender] = req
	} else {
		st := h.steps[req.Cmd]
		if st == nil {
			st = &syncStep[V]{reqs: make(map[int32]*KVRequest[V]), parts: make(map[int32]KVPairs[V])}
			h.steps[req.Cmd] = st
		}
		if _, dup := st.reqs[req.Sender]; dup {
			h.mu.Unlock()
			_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("worker %d pushed step %d of epoch %d twice", req.Sender, step, epoch))
			return
		}
		st.reqs[req.Sender] = req
		st.parts[req.Sender] = KVPairs[V]{Keys: slices.Clone(req.Keys), Vals: slices.Clone(req.Vals)}
	}
	answers, err := h.completeLocked(epoch)
	pulls := h.duePullsLocked()
	h.mu.Unlock()
	for _, a := range answers {
		if err != nil {
			_ = srv.RespondError(srv.n.ctx, a, err)
		} else {
			_ = srv.Respond(srv.n.ctx, a, KVPairs[V]{})
		}
	}
	for _, r := range pulls {
		h.store.Handle(r, srv)
	}
}

// pull answers a pull, at once unless it carries a step whose earlier
// steps are not all applied yet.
func (h *SyncHandler[V]) pull(req *KVRequest[V], srv *KVServer[V]) {
	if req.Cmd == 0 {
		h.store.Handle(req, srv)
		return
	}
	epoch, step := int(req.Cmd>>syncStepBits), int(req.Cmd&MaxSyncSteps)
	if req.Cmd < 0 || step == MaxSyncSteps {
		_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("synchronous pull with command %d", req.Cmd))
		return
	}
	h.mu.Lock()
	if err := h.err; err != nil {
		h.mu.Unlock()
		_ = srv.RespondError(srv.n.ctx, req, err)
		return
	}
	if h.stepDueLocked(epoch, step) {
		h.mu.Unlock()
		h.store.Handle(req, srv)
		return
	}
	h.pulls.hold(req, syncAt{epoch, step})
	h.mu.Unlock()
}

// Held returns the number of pulls held back, for tests and metrics.
func (h *SyncHandler[V]) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pulls)
}

// stepDueLocked says whether every step of epoch before step is applied.
func (h *SyncHandler[V]) stepDueLocked(epoch, step int) bool {
	return epoch < h.ended || h.applied[epoch] >= step
}

// duePullsLocked takes the held pulls whose steps are now due.
func (h *SyncHandler[V]) duePullsLocked() []*KVRequest[V] {
	return h.pulls.take(func(at syncAt) bool { return h.stepDueLocked(at.epoch, at.step) }, nil)
}

// completeLocked applies every step of epoch that has all its parts, in
// step order, and returns the requests to answer; then, if every worker
// is done with the epoch, their SyncDone requests too. h.mu must be held.
func (h *SyncHandler[V]) completeLocked(epoch int) ([]*KVRequest[V], error) {
	var answers []*KVRequest[V]
	done := h.done[epoch]
	var cmds []int32
	for cmd := range h.steps {
		if int(cmd>>syncStepBits) == epoch {
			cmds = append(cmds, cmd)
		}
	}
	slices.Sort(cmds)
	for _, cmd := range cmds {
		st := h.steps[cmd]
		if len(st.reqs)+len(done) < h.workers {
			break // steps complete in order: a later one cannot be ready
		}
		if err := h.applyStep(st); err != nil {
			return answers, err
		}
		h.applied[epoch] = int(cmd&MaxSyncSteps) + 1
		delete(h.steps, cmd)
		for _, r := range st.reqs {
			answers = append(answers, r)
		}
	}
	if len(done) == h.workers && !h.pendingIn(epoch) {
		for _, r := range done {
			answers = append(answers, r)
		}
		delete(h.done, epoch)
		delete(h.applied, epoch)
		h.ended = max(h.ended, epoch+1)
	}
	return answers, nil
}

func (h *SyncHandler[V]) pendingIn(epoch int) bool {
	for cmd := range h.steps {
		if int(cmd>>syncStepBits) == epoch {
			return true
		}
	}
	return false
}

// applyStep adds up the workers' parts in rank (id) order and applies the
// sums.
func (h *SyncHandler[V]) applyStep(st *syncStep[V]) error {
	senders := make([]int32, 0, len(st.parts))
	for id := range st.parts {
		senders = append(senders, id)
	}
	slices.Sort(senders)
	dim := h.store.dim
	parts := make([]KVPairs[V], len(senders))
	sorted := true
	for i, id := range senders {
		p := st.parts[id]
		if len(p.Vals) != len(p.Keys)*dim {
			return fmt.Errorf("worker %d pushed %d values for %d keys; the server keeps %d per key", id, len(p.Vals), len(p.Keys), dim)
		}
		parts[i] = p
		sorted = sorted && isStrictlySorted(p.Keys)
	}
	var sum KVPairs[V]
	if sorted {
		sum = mergeSum(parts, dim)
	} else {
		sum = hashSum(parts, dim)
	}
	return h.store.apply(&KVRequest[V]{KVMeta: KVMeta{Push: true}, KVPairs: sum})
}

func isStrictlySorted(keys []uint64) bool {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return false
		}
	}
	return true
}

// mergeSum adds up parts whose keys are sorted and unique by merging
// them: each key's values are added in the parts' order, so the sums do
// not depend on which part arrived first.
func mergeSum[V Number](parts []KVPairs[V], dim int) KVPairs[V] {
	if len(parts) == 1 {
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p.Keys)
	}
	out := KVPairs[V]{Keys: make([]uint64, 0, n), Vals: make([]V, 0, n*dim)}
	head := make([]int, len(parts))
	for {
		lo, any := uint64(0), false
		for i, p := range parts {
			if head[i] < len(p.Keys) && (!any || p.Keys[head[i]] < lo) {
				lo, any = p.Keys[head[i]], true
			}
		}
		if !any {
			return out
		}
		out.Keys = append(out.Keys, lo)
		at := len(out.Vals)
		for range dim {
			out.Vals = append(out.Vals, 0)
		}
		acc := out.Vals[at:]
		for i, p := range parts {
			if head[i] < len(p.Keys) && p.Keys[head[i]] == lo {
				for j, v := range p.Vals[head[i]*dim : (head[i]+1)*dim] {
					acc[j] += v
				}
				head[i]++
			}
		}
	}
}

// hashSum is mergeSum for parts whose keys are in any order.
func hashSum[V Number](parts []KVPairs[V], dim int) KVPairs[V] {
	sum := make(map[uint64][]V)
	var keys []uint64
	for _, p := range parts {
		for i, k := range p.Keys {
			acc := sum[k]
			if acc == nil {
				acc = make([]V, dim)
				sum[k] = acc
				keys = append(keys, k)
			}
			for j := 0; j < dim; j++ {
				acc[j] += p.Vals[i*dim+j]
			}
		}
	}
	slices.Sort(keys)
	vals := make([]V, 0, len(keys)*dim)
	for _, k := range keys {
		vals = append(vals, sum[k]...)
	}
	return KVPairs[V]{Keys: keys, Vals: vals}
}

// ErrSyncWorkerDied fails the pending and later steps of a synchronous
// job once a worker died: its part of the step will never come.
var ErrSyncWorkerDied = errors.New("psnode: a worker died: synchronous training cannot go on")

// WatchDeaths fails every pending and later synchronous step when a
// worker of n dies, so that no worker waits forever for a step that
// cannot complete. It returns when n closes.
func (h *SyncHandler[V]) WatchDeaths(n *Node, srv *KVServer[V]) {
	n.onWorkerDeath(func(ev Event) {
		err := fmt.Errorf("%w: worker rank %d: %s", ErrSyncWorkerDied, ev.Node.Rank, ev.Reason)
		h.mu.Lock()
		if h.err == nil {
			h.err = err
		}
		var pending []*KVRequest[V]
		for cmd, st := range h.steps {
			for _, r := range st.reqs {
				pending = append(pending, r)
			}
			delete(h.steps, cmd)
		}
		for e, d := range h.done {
			for _, r := range d {
				pending = append(pending, r)
			}
			delete(h.done, e)
		}
		pending = append(pending, h.pulls.take(func(syncAt) bool { return true }, nil)...)
		h.mu.Unlock()
		for _, r := range pending {
			_ = srv.RespondError(n.ctx, r, err)
		}
	})
}
