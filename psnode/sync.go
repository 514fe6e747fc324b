package psnode

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

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
//
// A worker that dies (WatchDeaths) holds no step back: the steps it had
// sent its part of are applied with that part, as if it were alive, and
// the later ones go on with the live workers. What counts is what a
// server received, not when it learned of the death, so every server
// applies the same parts. The end of the epoch still waits for it: its
// replacement (a new process of the same rank) rejoins (Tables.Rejoin,
// the rejoin method), reads the dead worker's remaining records from the
// batch after its last one received, and pushes them in the steps it
// joined at, so that no batch is applied twice.
type SyncHandler[V Number] struct {
	store   *StoreHandler[V]
	workers int

	mu      sync.Mutex
	steps   map[int32]*syncStep[V]
	done    map[int]map[int32]*KVRequest[V] // epoch → worker → its SyncDone
	doneAt  map[int]time.Time               // epoch → when its first SyncDone came
	applied map[int]int                     // epoch → steps applied, while it runs
	ended   int                             // epochs below this are over
	pulls   heldPulls[V, syncAt]            // held until their step's turn
	// pos counts, per running epoch and worker, the worker's batches
	// received (each is applied once its step completes): where its
	// replacement goes on reading. last is the worker's last step
	// received in the running epoch (−1 for none).
	pos  map[int]map[int32]int
	last map[int]map[int32]int
	// absent are the dead workers whose replacement has not rejoined.
	absent map[int32]bool
	// joined are the replacements that rejoined in a running epoch.
	joined map[int32]syncJoin
	// incs are the incarnations of the processes that rejoined: a death
	// announced of an older one is not theirs.
	incs map[int32]int64
	// gone are the end-of-epoch requests of dead processes: they count as
	// done, but nobody waits for their answers.
	gone map[*KVRequest[V]]bool
	// repl, on a server whose tables keep replicas (replica.go), numbers
	// an applied step (replApply: steps of epoch applied after it) or an
	// ended epoch (replEnded), under mu, and returns how to forward it to
	// the replicas; the pushes it completes are answered once they have
	// it. A push sent again to a new process that restored the table is
	// answered without being applied again.
	repl func(kind int32, epoch, steps int, sum KVPairs[V]) func(done func())
}

// syncOut is what one change of the steps completed: the requests to
// answer and, with replicas, the update they wait for.
type syncOut[V Number] struct {
	fwd  func(done func())
	reqs []*KVRequest[V]
	err  error // the step could not be applied: its requests get this
}

// syncAt is what a held pull waits for: every step of epoch before step
// applied.
type syncAt struct{ epoch, step int }

// syncJoin is where a replacement joined: its batch from (of the dead
// worker's sequence) is pushed as step of epoch, the next ones as the
// steps after; it takes no part in the steps before.
type syncJoin struct{ epoch, step, from int }

type syncStep[V Number] struct {
	// reqs are the requests to answer once the step is applied, by
	// sender; nil for a dead process's part, which nobody waits for.
	reqs  map[int32]*KVRequest[V]
	parts map[int32]syncPart[V]
}

// syncPart is a worker's part of a step: a copy (requests alias receive
// buffers), and when it came.
type syncPart[V Number] struct {
	kv KVPairs[V]
	at time.Time
}

// NewSyncHandler makes a synchronous handler over store for a job of
// workers workers. Subscribe it to worker deaths with WatchDeaths.
func NewSyncHandler[V Number](store *StoreHandler[V], workers int) (*SyncHandler[V], error) {
	if workers < 1 {
		return nil, fmt.Errorf("psnode: synchronous handler for %d workers", workers)
	}
	store.keepPullSlots(workers == 1)
	return &SyncHandler[V]{
		store: store, workers: workers, steps: make(map[int32]*syncStep[V]),
		done: make(map[int]map[int32]*KVRequest[V]), doneAt: make(map[int]time.Time), applied: make(map[int]int),
		pos: make(map[int]map[int32]int), last: make(map[int]map[int32]int), absent: make(map[int32]bool),
		joined: make(map[int32]syncJoin), incs: make(map[int32]int64), gone: make(map[*KVRequest[V]]bool),
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
	if err := h.store.checkWidth(req); err != nil {
		// Refused at once: the step it would join could never be applied.
		_ = srv.RespondError(srv.n.ctx, req, err)
		return
	}
	epoch, step := int(req.Cmd>>syncStepBits), int(req.Cmd&MaxSyncSteps)
	h.mu.Lock()
	if step == MaxSyncSteps {
		// The replacement of a dead worker that had sent all its steps
		// says so without rejoining the steps.
		delete(h.absent, req.Sender)
		if epoch < h.ended {
			h.mu.Unlock()
			_ = srv.Respond(srv.n.ctx, req, KVPairs[V]{})
			return
		}
		d := h.done[epoch]
		if d == nil {
			d = make(map[int32]*KVRequest[V])
			h.done[epoch] = d
			h.doneAt[epoch] = time.Now()
		}
		if old := d[req.Sender]; old != nil {
			delete(h.gone, old) // replaced by its replacement's
		}
		d[req.Sender] = req
	} else {
		if h.repl != nil && (epoch < h.ended || (epoch == h.ended && step < h.applied[epoch])) && !h.absent[req.Sender] {
			// Applied before this process restored the table from its
			// replicas: the dead one applied it, but did not answer.
			h.mu.Unlock()
			_ = srv.Respond(srv.n.ctx, req, KVPairs[V]{})
			return
		}
		if err := h.memberLocked(req.Sender, epoch, step); err != nil {
			h.mu.Unlock()
			_ = srv.RespondError(srv.n.ctx, req, err)
			return
		}
		st := h.steps[req.Cmd]
		if st == nil {
			st = &syncStep[V]{reqs: make(map[int32]*KVRequest[V]), parts: make(map[int32]syncPart[V])}
			h.steps[req.Cmd] = st
		}
		if _, dup := st.reqs[req.Sender]; dup {
			if h.repl != nil {
				// Sent again to this new process while its first copy was
				// on the way: either answer will do.
				st.reqs[req.Sender] = req
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			_ = srv.RespondError(srv.n.ctx, req, fmt.Errorf("worker %d pushed step %d of epoch %d twice", req.Sender, step, epoch))
			return
		}
		st.reqs[req.Sender] = req
		st.parts[req.Sender] = syncPart[V]{kv: KVPairs[V]{Keys: slices.Clone(req.Keys), Vals: slices.Clone(req.Vals)}, at: time.Now()}
		h.receivedLocked(req.Sender, epoch, step)
	}
	answers := h.completeLocked(epoch)
	pulls := h.duePullsLocked()
	h.mu.Unlock()
	h.answer(srv, answers, pulls)
}

// memberLocked says why worker may not push step of epoch, if it may
// not: it is dead and not back, or it rejoined at a later step.
func (h *SyncHandler[V]) memberLocked(worker int32, epoch, step int) error {
	if epoch < h.ended {
		return fmt.Errorf("worker %d pushed step %d of epoch %d, which is over", worker, step, epoch)
	}
	if h.absent[worker] {
		return fmt.Errorf("worker %d pushed step %d of epoch %d after its death, without rejoining", worker, step, epoch)
	}
	if j, ok := h.joined[worker]; ok && j.epoch == epoch && step < j.step {
		return fmt.Errorf("worker %d pushed step %d of epoch %d; it rejoined at step %d", worker, step, epoch, j.step)
	}
	return nil
}

// answer sends what a change of the steps completed: the pushes of the
// applied steps (or err, if applying failed), once their replicas have
// them, and the pulls now due, at once: a pull reads the primary, whose
// state the replicas will have.
func (h *SyncHandler[V]) answer(srv *KVServer[V], outs []syncOut[V], pulls []*KVRequest[V]) {
	for _, o := range outs {
		reqs, err := o.reqs, o.err
		respond := func() {
			for _, a := range reqs {
				if err != nil {
					_ = srv.RespondError(srv.n.ctx, a, err)
				} else {
					_ = srv.Respond(srv.n.ctx, a, KVPairs[V]{})
				}
			}
		}
		if o.fwd != nil {
			o.fwd(respond)
		} else {
			respond()
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

// stepReadyLocked says whether step of epoch has the part of every
// worker that takes part in it: all but those done with the epoch, the
// dead ones not back, and replacements that joined at a later step.
func (h *SyncHandler[V]) stepReadyLocked(epoch, step int, st *syncStep[V], done map[int32]*KVRequest[V]) bool {
	in := len(st.reqs)
	for id := range done {
		if _, ok := st.reqs[id]; !ok {
			in++
		}
	}
	for id := range h.absent {
		if _, ok := st.reqs[id]; !ok && done[id] == nil {
			in++
		}
	}
	for id, j := range h.joined {
		if _, ok := st.reqs[id]; !ok && done[id] == nil && !h.absent[id] && j.epoch == epoch && step < j.step {
			in++
		}
	}
	return in >= h.workers
}

// completeLocked applies every step of epoch that has all its parts, in
// step order, and returns the requests to answer; then, if every worker
// is done with the epoch, their SyncDone requests too. h.mu must be held.
func (h *SyncHandler[V]) completeLocked(epoch int) []syncOut[V] {
	var answers []syncOut[V]
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
		step := int(cmd & MaxSyncSteps)
		if !h.stepReadyLocked(epoch, step, st, done) {
			break // steps complete in order: a later one cannot be ready
		}
		sum, err := h.applyStep(st)
		h.applied[epoch] = step + 1
		delete(h.steps, cmd)
		var o syncOut[V]
		if err != nil {
			// Its pushers learn why; the steps after it do not wait on
			// a step that can never be applied.
			o.err = fmt.Errorf("step %d of epoch %d: %w", step, epoch, err)
		} else if h.repl != nil {
			o.fwd = h.repl(replApply, epoch, step+1, sum)
		}
		for _, r := range st.reqs {
			if r != nil {
				o.reqs = append(o.reqs, r)
			}
		}
		answers = append(answers, o)
	}
	if len(done) == h.workers && !h.pendingIn(epoch) {
		var o syncOut[V]
		if h.repl != nil {
			o.fwd = h.repl(replEnded, epoch, 0, KVPairs[V]{})
		}
		for _, r := range done {
			if h.gone[r] {
				delete(h.gone, r)
				continue
			}
			o.reqs = append(o.reqs, r)
		}
		answers = append(answers, o)
		delete(h.done, epoch)
		delete(h.doneAt, epoch)
		delete(h.applied, epoch)
		delete(h.pos, epoch)
		delete(h.last, epoch)
		h.ended = max(h.ended, epoch+1)
		for id, j := range h.joined {
			if j.epoch < h.ended {
				delete(h.joined, id)
			}
		}
	}
	return answers
}

func (h *SyncHandler[V]) pendingIn(epoch int) bool {
	for cmd := range h.steps {
		if int(cmd>>syncStepBits) == epoch {
			return true
		}
	}
	return false
}

// receivedLocked notes worker's part of step of epoch. h.mu must be held.
func (h *SyncHandler[V]) receivedLocked(worker int32, epoch, step int) {
	batch := step
	if j, ok := h.joined[worker]; ok && j.epoch == epoch {
		batch = j.from + step - j.step
	}
	if h.pos[epoch] == nil {
		h.pos[epoch], h.last[epoch] = make(map[int32]int), make(map[int32]int)
	}
	h.pos[epoch][worker] = max(h.pos[epoch][worker], batch+1)
	if l, ok := h.last[epoch][worker]; !ok || step > l {
		h.last[epoch][worker] = step
	}
}

// nextLocked is the lowest step of epoch a replacement of worker may join
// at: none applied yet, and after the dead process's last part.
func (h *SyncHandler[V]) nextLocked(worker int32, epoch int) int {
	next := h.applied[epoch]
	if l, ok := h.last[epoch][worker]; ok {
		next = max(next, l+1)
	}
	return next
}

// leftLocked records that worker's process is gone: the steps it sent no
// part of go on without it until its replacement joins; what it sent is
// nobody's to answer: its parts of pending steps stay (they are applied
// with their steps), and so does its end of an epoch; its held pulls go.
// h.mu must be held.
func (h *SyncHandler[V]) leftLocked(worker int32) {
	h.absent[worker] = true
	delete(h.joined, worker)
	for _, st := range h.steps {
		if _, ok := st.reqs[worker]; ok {
			st.reqs[worker] = nil
		}
	}
	for _, d := range h.done {
		if r := d[worker]; r != nil {
			h.gone[r] = true
		}
	}
	h.pulls.take(func(syncAt) bool { return false }, func(r *KVRequest[V]) bool { return r.Sender == worker })
}

// stalledLocked returns how long the oldest part of a pending step has
// waited: after a death, how long the live workers stood still for the
// dead one. h.mu must be held.
func (h *SyncHandler[V]) stalledLocked() time.Duration {
	var oldest time.Time
	for _, st := range h.steps {
		for id, p := range st.parts {
			if st.reqs[id] == nil {
				continue // a dead process's part waits for nothing
			}
			if oldest.IsZero() || p.at.Before(oldest) {
				oldest = p.at
			}
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest).Round(time.Millisecond)
}

// completeAllLocked completes every running epoch after a change of
// who takes part in the steps. h.mu must be held.
func (h *SyncHandler[V]) completeAllLocked() []syncOut[V] {
	epochs := map[int]bool{}
	for cmd := range h.steps {
		epochs[int(cmd>>syncStepBits)] = true
	}
	for e := range h.done {
		epochs[e] = true
	}
	var answers []syncOut[V]
	for _, e := range slices.Sorted(maps.Keys(epochs)) {
		answers = append(answers, h.completeLocked(e)...)
	}
	return answers
}

// applyStep adds up the workers' parts in rank (id) order, applies the
// sums and returns them.
func (h *SyncHandler[V]) applyStep(st *syncStep[V]) (KVPairs[V], error) {
	senders := make([]int32, 0, len(st.parts))
	for id := range st.parts {
		senders = append(senders, id)
	}
	slices.Sort(senders)
	dim := h.store.dim
	parts := make([]KVPairs[V], len(senders))
	sorted := true
	for i, id := range senders {
		p := st.parts[id].kv // its width checked on arrival (Handle)
		parts[i] = p
		sorted = sorted && isStrictlySorted(p.Keys)
	}
	var sum KVPairs[V]
	if sorted {
		sum = mergeSum(parts, dim)
	} else {
		sum = hashSum(parts, dim)
	}
	return sum, h.store.apply(&KVRequest[V]{KVMeta: KVMeta{Push: true}, KVPairs: sum})
}

// restore sets where the steps are in a new process that restored the
// table from its replicas: epochs before ended are over, steps steps of
// epoch ended applied. The workers n knows dead are absent until their
// replacements rejoin.
func (h *SyncHandler[V]) restore(ended, steps int, n *Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = ended
	if steps > 0 {
		h.applied[ended] = steps
	}
	for _, id := range n.DeadNodes() {
		if r, ok := transport.IDRole(id); ok && r == transport.RoleWorker {
			h.absent[id] = true
		}
	}
}

// setWorkers makes the steps from now on wait for workers workers'
// parts (Tables.Rescale, between epochs).
func (h *SyncHandler[V]) setWorkers(workers int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.workers = workers
	h.store.keepPullSlots(workers == 1)
}

// startAt makes a table of a server that joins the job (Tables.Rescale)
// start at epoch: every epoch before it is over.
func (h *SyncHandler[V]) startAt(epoch int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = max(h.ended, epoch)
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
	if len(parts) == 2 && dim == 1 {
		return mergeTwo(parts[0], parts[1])
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

// mergeTwo is mergeSum of two parts of one value a key, the synchronous
// step of two workers: one pass without the general loop's search for
// the lowest head. A value is added to 0 as the general loop does, so
// that a -0 comes out as +0 there too.
func mergeTwo[V Number](a, b KVPairs[V]) KVPairs[V] {
	n := len(a.Keys) + len(b.Keys)
	keys, vals := make([]uint64, n), make([]V, n)
	ak, av, bk, bv := a.Keys, a.Vals[:len(a.Keys)], b.Keys, b.Vals[:len(b.Keys)]
	var zero V
	o, i, j := 0, 0, 0
	for i < len(ak) && j < len(bk) {
		switch ka, kb := ak[i], bk[j]; {
		case ka < kb:
			keys[o], vals[o] = ka, zero+av[i]
			i++
		case kb < ka:
			keys[o], vals[o] = kb, zero+bv[j]
			j++
		default:
			keys[o], vals[o] = ka, zero+av[i]+bv[j]
			i++
			j++
		}
		o++
	}
	for ; i < len(ak); i, o = i+1, o+1 {
		keys[o], vals[o] = ak[i], zero+av[i]
	}
	for ; j < len(bk); j, o = j+1, o+1 {
		keys[o], vals[o] = bk[j], zero+bv[j]
	}
	return KVPairs[V]{Keys: keys[:o:o], Vals: vals[:o:o]}
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

// ErrSyncWorkerDied is what a synchronous program reports when it cannot
// go on without a worker that died (a collective job's ring, say): its
// program exits with conf.ExitRestartJob. Tables' synchronous steps go on
// without a dead worker instead (see SyncHandler).
var ErrSyncWorkerDied = errors.New("psnode: a worker died: synchronous training cannot go on")

// WatchDeaths lets the steps go on without a worker of n once it is known
// dead: the steps it sent its part of are applied with it, the others
// wait only for the live workers until its replacement rejoins. It returns
// when n closes.
func (h *SyncHandler[V]) WatchDeaths(n *Node, srv *KVServer[V]) {
	n.onWorkerDeath(func(ev Event) {
		h.mu.Lock()
		if inc, ok := h.incs[ev.Node.ID]; ok && inc != ev.Node.Incarnation {
			h.mu.Unlock() // the death of a process its replacement outlived
			return
		}
		h.leftLocked(ev.Node.ID)
		stalled := h.stalledLocked()
		answers := h.completeAllLocked()
		pulls := h.duePullsLocked()
		h.mu.Unlock()
		n.log.WithFields(logrus.Fields{"worker": ev.Node.Rank, "reason": ev.Reason, "stalled": stalled.String()}).Warn("synchronous steps go on without a dead worker until its replacement rejoins")
		h.answer(srv, answers, pulls)
	})
}

// syncRejoin is a replacement worker's request to a server's synchronous
// table (see Tables.Rejoin): Probe asks where the dead worker was and
// forgets what it sent that is not applied; otherwise the replacement
// asks to push its batch From of Epoch as step Step and the next ones as
// the steps after.
type syncRejoin struct {
	Probe bool `json:"probe,omitempty"`
	Epoch int  `json:"epoch"`
	Step  int  `json:"step"`
	From  int  `json:"from"`
}

// syncPlace is a server's answer for one synchronous table: the lowest
// epoch not over (Ended), the lowest step of it the worker may join at
// (Next: none applied, and after the dead process's last part), the
// worker's batches of it received and whether it said it was done with
// it; Accepted answers a request to join.
type syncPlace struct {
	Ended    int  `json:"ended"`
	Next     int  `json:"next"`
	Batches  int  `json:"batches"`
	Done     bool `json:"done,omitempty"`
	Accepted bool `json:"accepted,omitempty"`
}

// rejoin answers a replacement worker's request; inc is the incarnation
// of its process. A join is accepted when Epoch is the running one and
// Step is not before Next: the worker takes part from that step on.
func (h *SyncHandler[V]) rejoin(worker int32, inc int64, r syncRejoin, srv *KVServer[V]) (syncPlace, error) {
	h.mu.Lock()
	h.incs[worker] = inc
	var p syncPlace
	if r.Probe {
		// The dead process is gone, even when its death is still on its
		// way here.
		h.leftLocked(worker)
	} else {
		if r.Epoch != h.ended {
			h.mu.Unlock()
			return p, fmt.Errorf("rejoin epoch %d: epoch %d is running", r.Epoch, h.ended)
		}
		if r.Step < 0 || r.Step >= MaxSyncSteps || r.From < 0 {
			h.mu.Unlock()
			return p, fmt.Errorf("rejoin at step %d from batch %d: out of range", r.Step, r.From)
		}
		if r.Step >= h.nextLocked(worker, r.Epoch) {
			// A later step than an earlier round's lets the steps between
			// go on without it.
			h.joined[worker] = syncJoin{epoch: r.Epoch, step: r.Step, from: r.From}
			delete(h.absent, worker)
			p.Accepted = true
		}
	}
	answers := h.completeAllLocked()
	pulls := h.duePullsLocked()
	p.Ended, p.Next = h.ended, h.nextLocked(worker, h.ended)
	p.Batches, p.Done = h.pos[h.ended][worker], h.done[h.ended][worker] != nil
	h.mu.Unlock()
	h.answer(srv, answers, pulls)
	return p, nil
}
