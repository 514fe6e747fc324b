package psnode

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/spindle-ps/spindle/psnode/transport"
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

	mu    sync.Mutex
	steps map[int32]*syncStep[V]
	done  map[int]map[int32]*KVRequest[V] // epoch → worker → its SyncDone
	err   error                           // set once a worker died
}

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
	return &SyncHandler[V]{store: store, workers: workers, steps: make(map[int32]*syncStep[V]), done: make(map[int]map[int32]*KVRequest[V])}, nil
}

// Handle is the Handler to pass to NewKVServer.
func (h *SyncHandler[V]) Handle(req *KVRequest[V], srv *KVServer[V]) {
	if !req.Push {
		h.store.Handle(req, srv)
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
	h.mu.Unlock()
	for _, a := range answers {
		if err != nil {
			_ = srv.RespondError(srv.n.ctx, a, err)
		} else {
			_ = srv.Respond(srv.n.ctx, a, KVPairs[V]{})
		}
	}
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
	sum := make(map[uint64][]V)
	var keys []uint64
	dim := h.store.dim
	for _, id := range senders {
		p := st.parts[id]
		if len(p.Vals) != len(p.Keys)*dim {
			return fmt.Errorf("worker %d pushed %d values for %d keys; the server keeps %d per key", id, len(p.Vals), len(p.Keys), dim)
		}
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
	return h.store.apply(&KVRequest[V]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[V]{Keys: keys, Vals: vals}})
}

// ErrSyncWorkerDied fails the pending and later steps of a synchronous
// job once a worker died: its part of the step will never come.
var ErrSyncWorkerDied = errors.New("psnode: a worker died: synchronous training cannot go on")

// WatchDeaths fails every pending and later synchronous step when a
// worker of n dies, so that no worker waits forever for a step that
// cannot complete. It returns when n closes.
func (h *SyncHandler[V]) WatchDeaths(n *Node, srv *KVServer[V]) {
	events, stop := n.Subscribe()
	n.goFunc(func() {
		defer stop()
		for {
			select {
			case ev := <-events:
				if ev.Kind != NodeDied || ev.Node.Role != transport.RoleWorker {
					continue
				}
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
				h.mu.Unlock()
				for _, r := range pending {
					_ = srv.RespondError(n.ctx, r, err)
				}
			case <-n.ctx.Done():
				return
			}
		}
	})
}
