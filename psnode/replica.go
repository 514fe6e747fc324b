package psnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Replicas of the servers' tables (conf.PS.Replicas = k > 0).
//
// Server rank r is the primary of partition r, the keys the partitioner
// gives it, and keeps a replica of partitions r-1, …, r-k (mod S): the
// replicas of partition p are on the k servers after p on the ring of
// server ranks. A primary applies an update — the sum of a synchronous
// step's parts, the end of a synchronous epoch, an asynchronous push —
// numbers it (seq, per table) and forwards it to each live replica, which
// applies it with the same updater: a replica holds the same values and
// updater state, bit for bit. The pushes an update completes are answered
// once every live replica acknowledged it, so an answered push is on k+1
// servers. A replica acknowledges an update on receipt and applies the
// updates of a partition in seq order.
//
// A server that dies is started again alone (job.JobSpec.Replicas); the
// new process takes over its id and, before it serves, fetches every
// partition it holds: its own from a live replica, each replica partition
// from that partition's primary (or another replica). Meanwhile the
// workers keep every request the dead process did not answer
// (customer.peerBack) and send them to the new one, which answers without
// applying again a push it finds applied: a step before the restored
// position (SyncHandler), an asynchronous push whose (worker, timestamp)
// the replica recorded. So a synchronous job writes the model of a job in
// which nothing died. Bounded-delay tables keep no replicas: the new
// process of such a table's server fails with ErrNoReplica, and its
// program asks for the whole job to start again.
//
// The messages, on app replicaApp (requests are answered once received):
//
//	meta.Head  replApply | replEnded | replSnapshot
//	meta.Body  the header, replHeaderLen bytes, little-endian:
//	           table app int32 · partition int32 · seq uint64 ·
//	           sender incarnation int64 · epoch int32 · step int32 ·
//	           worker int32 · timestamp int32
//	data       replApply: [keys uint64…] [values V…] ([lens int32…])
//	           replSnapshot's answer: [keys] [values] [updater state]
//	           [recent pushes, (worker, timestamp) int32 pairs]
//
// In an update, epoch and step are where a synchronous table is after it:
// step steps of epoch applied (replApply), or epoch over (replEnded);
// worker and timestamp name an asynchronous push (-1 otherwise). A
// snapshot's answer carries the partition's seq and position likewise.
const (
	replicaApp int32 = 1<<30 - 3

	replApply    int32 = 1
	replEnded    int32 = 2
	replSnapshot int32 = 3

	replHeaderLen = 40

	// maxEarly bounds the updates a replica keeps while it waits for an
	// earlier one (or for its snapshot).
	maxEarly = 4096
	// recentPerWorker is how many of a worker's asynchronous pushes a
	// partition remembers, to recognise one sent again.
	recentPerWorker = 256
	// snapshotTimeout bounds one fetch of a partition's state.
	snapshotTimeout = 2 * time.Minute
)

// ErrNoReplica is returned by NewTable on a server that replaced a dead
// one when it cannot restore the table from replicas: none is live, or
// the table keeps none (bounded delay). Its program should exit with
// conf.ExitRestartJob, so that the job starts again from its newest
// checkpoint.
var ErrNoReplica = errors.New("psnode: the dead server's tables cannot be restored from replicas")

// replHeader is the body of a replication message.
type replHeader struct {
	App       int32
	Part      int32
	Seq       uint64
	Inc       int64
	Epoch     int32
	Step      int32
	Worker    int32
	Timestamp int32
}

func (h replHeader) encode() []byte {
	b := make([]byte, replHeaderLen)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(h.App))
	le.PutUint32(b[4:], uint32(h.Part))
	le.PutUint64(b[8:], h.Seq)
	le.PutUint64(b[16:], uint64(h.Inc))
	le.PutUint32(b[24:], uint32(h.Epoch))
	le.PutUint32(b[28:], uint32(h.Step))
	le.PutUint32(b[32:], uint32(h.Worker))
	le.PutUint32(b[36:], uint32(h.Timestamp))
	return b
}

// decodeReplHeader reads a header, refusing any other length and a
// partition, epoch or step out of range.
func decodeReplHeader(b []byte) (replHeader, error) {
	if len(b) != replHeaderLen {
		return replHeader{}, fmt.Errorf("%w: replication header of %d bytes, want %d", transport.ErrMalformed, len(b), replHeaderLen)
	}
	le := binary.LittleEndian
	h := replHeader{
		App: int32(le.Uint32(b[0:])), Part: int32(le.Uint32(b[4:])), Seq: le.Uint64(b[8:]), Inc: int64(le.Uint64(b[16:])),
		Epoch: int32(le.Uint32(b[24:])), Step: int32(le.Uint32(b[28:])), Worker: int32(le.Uint32(b[32:])), Timestamp: int32(le.Uint32(b[36:])),
	}
	if h.Part < 0 || h.Epoch < 0 || h.Step < 0 || h.Epoch >= MaxSyncEpochs || h.Step > MaxSyncSteps {
		return replHeader{}, fmt.Errorf("%w: replication header with partition %d, epoch %d, step %d", transport.ErrMalformed, h.Part, h.Epoch, h.Step)
	}
	return h, nil
}

// replicator is a server's side of replication, for all its tables: it
// serves the updates and snapshot requests of other servers and sends
// its own.
type replicator struct {
	ts  *Tables
	k   int
	srv *customer // requests from other servers
	cli *customer // answers to ours

	mu   sync.Mutex
	held map[int32][]*transport.Message // requests for tables not served yet
	// restoredAt is when this process began to restore its tables from
	// replicas (zero when it did not); reported, whether its first update
	// since was reported. Guarded by mu.
	restoredAt time.Time
	reported   bool
	// announced: EventReplicated was reported; unreplicable: a table
	// that keeps no replicas (bounded delay) is served, so it never is.
	announced, unreplicable bool
}

func newReplicator(ts *Tables) (*replicator, error) {
	n := ts.n
	rp := &replicator{ts: ts, k: n.cfg.Replicas, held: make(map[int32][]*transport.Message)}
	var err error
	if rp.cli, err = n.newCustomer(replicaApp, 0, false, func(m *transport.Message) { rp.cli.reply(m) }); err != nil {
		return nil, err
	}
	rp.cli.failOnReplace = true
	if rp.srv, err = n.newCustomer(replicaApp, 0, true, rp.serve); err != nil {
		return nil, err
	}
	return rp, nil
}

// replicating says whether n's tables keep replicas.
func replicating(n *Node) bool { return n.cfg.Replicas > 0 && n.cfg.NumServers > 1 }

// holders returns the servers after partition p on the ring that keep
// its replicas, live ones only, leaving out skip.
func (rp *replicator) holders(p int, skip int32) []int32 {
	s := rp.ts.n.NumServers()
	var out []int32
	for i := 1; i <= min(rp.k, s-1); i++ {
		id := transport.ServerID((p + i) % s)
		if id != skip && !rp.ts.n.isDead(id) {
			out = append(out, id)
		}
	}
	return out
}

// replicaParts returns the partitions server rank keeps replicas of.
func (rp *replicator) replicaParts(rank int) []int {
	s := rp.ts.n.NumServers()
	if rank >= s {
		return nil // drained by a scale-in
	}
	var out []int
	for i := 1; i <= min(rp.k, s-1); i++ {
		out = append(out, (rank-i+s)%s)
	}
	return out
}

// forward sends an update to the live replicas of its partition and calls
// done once every one acknowledged it, or could not: a replica that died
// or was replaced meanwhile (its new process fetches a snapshot instead).
func (rp *replicator) forward(h replHeader, head int32, frames [][]byte, types []transport.DataType, done func()) {
	n := rp.ts.n
	peers := rp.holders(int(h.Part), n.ID())
	if len(peers) == 0 {
		done()
		return
	}
	h.Inc = n.Self().Incarnation
	body := h.encode()
	ts := rp.cli.newRequest(peers, nil, nil, func(err error) {
		if err != nil && n.ctx.Err() == nil {
			n.log.WithError(err).WithField("partition", h.Part).Debug("an update went to fewer replicas")
		}
		done()
	}, nil)
	for _, id := range peers {
		m := &transport.Message{Meta: transport.Meta{
			Recver: id, AppID: replicaApp, Request: true, Push: true, Head: head, Timestamp: ts,
			Body: body, DataTypes: types,
		}, Data: frames}
		ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
		err := n.send(ctx, m)
		cancel()
		if err != nil {
			rp.cli.fail(ts, err)
			return
		}
	}
}

// serve handles a request of another server: an update or a snapshot
// request for one of this server's tables. A request for a table not
// replicated here yet waits for it (takeHeld).
func (rp *replicator) serve(m *transport.Message) {
	h, err := decodeReplHeader(m.Meta.Body)
	if err != nil {
		rp.respond(m, nil, nil, nil, err)
		return
	}
	e := rp.ts.replicated(h.App)
	if e == nil {
		rp.mu.Lock()
		if len(rp.held[h.App]) < maxEarly {
			rp.held[h.App] = append(rp.held[h.App], m)
			m = nil
		}
		rp.mu.Unlock()
		if m != nil {
			rp.respond(m, nil, nil, nil, fmt.Errorf("table app %d is not served here", h.App))
		}
		return
	}
	rp.handle(e, h, m)
}

func (rp *replicator) handle(e *tableEntry, h replHeader, m *transport.Message) {
	switch m.Meta.Head {
	case replApply, replEnded:
		if inc, ok := rp.ts.n.incarnation(m.Meta.Sender); !ok || inc != h.Inc || m.Meta.Sender != transport.ServerID(int(h.Part)) {
			rp.respond(m, nil, nil, nil, fmt.Errorf("update of partition %d from node %d (incarnation %d), which is not its primary", h.Part, m.Meta.Sender, h.Inc))
			return
		}
		rp.respond(m, nil, nil, nil, e.repl.replicaUpdate(h, m))
	case replSnapshot:
		hs, frames, types, err := e.repl.replicaSnapshot(int(h.Part), m.Meta.Sender)
		rp.respond(m, hs, frames, types, err)
	default:
		rp.respond(m, nil, nil, nil, fmt.Errorf("replication request %d", m.Meta.Head))
	}
}

// takeHeld serves the requests that waited for table app, once it keeps
// replicas here.
func (rp *replicator) takeHeld(e *tableEntry) {
	rp.mu.Lock()
	held := rp.held[e.app]
	delete(rp.held, e.app)
	rp.mu.Unlock()
	for _, m := range held {
		h, _ := decodeReplHeader(m.Meta.Body) // decoded once already
		rp.handle(e, h, m)
	}
}

func (rp *replicator) respond(m *transport.Message, h []byte, frames [][]byte, types []transport.DataType, err error) {
	res := &transport.Message{Meta: transport.Meta{
		Recver: m.Meta.Sender, AppID: replicaApp, CustomerID: m.Meta.CustomerID, Timestamp: m.Meta.Timestamp,
		Push: m.Meta.Push, Head: m.Meta.Head, Body: h, DataTypes: types,
	}, Data: frames}
	if err != nil {
		res.Meta.Status, res.Meta.Body, res.Data, res.Meta.DataTypes = 1, []byte(err.Error()), nil, nil
	}
	ctx, cancel := context.WithTimeout(rp.ts.n.ctx, 30*time.Second)
	defer cancel()
	if err := rp.ts.n.send(ctx, res); err != nil && rp.ts.n.ctx.Err() == nil {
		rp.ts.n.log.WithError(err).WithField("peer", m.Meta.Sender).Debug("replication answer not sent")
	}
}

// fetch asks the servers from, in turn, for partition p of table app and
// returns the first answer.
func (rp *replicator) fetch(ctx context.Context, app int32, p int, from []int32) (replHeader, *transport.Message, error) {
	n := rp.ts.n
	var errs []error
	for _, id := range from {
		var got *transport.Message
		ts := rp.cli.newRequest([]int32{id}, func(_ int32, m *transport.Message) error { got = m; return nil }, nil, nil, nil)
		m := &transport.Message{Meta: transport.Meta{
			Recver: id, AppID: replicaApp, Request: true, Head: replSnapshot, Timestamp: ts,
			Body: replHeader{App: app, Part: int32(p), Inc: n.Self().Incarnation, Worker: -1, Timestamp: -1}.encode(),
		}}
		fctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
		err := n.send(fctx, m)
		if err != nil {
			rp.cli.fail(ts, err)
		}
		if err == nil {
			err = rp.cli.wait(fctx, ts)
		}
		cancel()
		if err == nil {
			var h replHeader
			if h, err = decodeReplHeader(got.Meta.Body); err == nil {
				return h, got, nil
			}
		}
		errs = append(errs, fmt.Errorf("server %d: %w", transport.IDRank(id), err))
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no live server keeps it"))
	}
	return replHeader{}, nil, fmt.Errorf("%w: partition %d: %w", ErrNoReplica, p, errors.Join(errs...))
}

// applied notes that this process applied an update; the first one after
// a restore from replicas is reported (TablesOptions.OnEvent): from then
// on the job goes on as if the dead server had not died.
func (rp *replicator) applied() {
	rp.mu.Lock()
	if rp.restoredAt.IsZero() || rp.reported {
		rp.mu.Unlock()
		return
	}
	rp.reported = true
	took := time.Since(rp.restoredAt)
	rp.mu.Unlock()
	n := rp.ts.n
	n.log.WithField("after", took.Round(time.Millisecond).String()).Info("first update applied since the restore from replicas")
	if f := rp.ts.opts.OnEvent; f != nil {
		n.goFunc(func() {
			ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
			defer cancel()
			f(ctx, EventRestored, fmt.Sprintf("server %d", n.Rank()), "restored its tables from their replicas and applied its first update", took)
		})
	}
}

// restoring notes that this process began to restore its tables from
// replicas at began (the first table's restore counts).
func (rp *replicator) restoring(began time.Time) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.restoredAt.IsZero() {
		rp.restoredAt = began
	}
}

// announce reports, once, that this server's tables keep replicas
// (EventReplicated), as a table is served; replicable is false for a
// table that keeps none, after which it is never reported. The launcher
// starts a server again alone when every server reported it.
func (rp *replicator) announce(replicable bool) {
	rp.mu.Lock()
	done := rp.announced || rp.unreplicable
	rp.announced = rp.announced || replicable
	rp.unreplicable = rp.unreplicable || !replicable
	rp.mu.Unlock()
	n, f := rp.ts.n, rp.ts.opts.OnEvent
	if done || f == nil {
		return
	}
	n.goFunc(func() {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		defer cancel()
		f(ctx, EventReplicated, fmt.Sprintf("server %d", n.Rank()), fmt.Sprintf("its tables have %d replicas", rp.k), 0)
	})
}

// EventReplicated is the kind of TablesOptions.OnEvent's report that a
// server's tables keep replicas, made once, when the first is served.
const EventReplicated = "replicated"

// EventRestored is the kind of TablesOptions.OnEvent's report of a server
// that replaced a dead one: its tables were restored from their replicas
// and it applied its first update, Took after the restore began.
const EventRestored = "restored"

// recentPushes remembers the last asynchronous pushes of each worker
// applied to a partition, by timestamp, to answer one sent again without
// applying it twice. It is not safe for concurrent use.
type recentPushes struct {
	by map[int32][]int32 // worker → timestamps, oldest first
}

func (r *recentPushes) has(worker, ts int32) bool { return slices.Contains(r.by[worker], ts) }

func (r *recentPushes) add(worker, ts int32) {
	if r.by == nil {
		r.by = make(map[int32][]int32)
	}
	l := append(r.by[worker], ts)
	if len(l) > recentPerWorker {
		l = l[len(l)-recentPerWorker:]
	}
	r.by[worker] = l
}

// encode writes the remembered pushes as (worker, timestamp) pairs.
func (r *recentPushes) encode() []int32 {
	var out []int32
	for _, w := range slices.Sorted(maps.Keys(r.by)) {
		for _, ts := range r.by[w] {
			out = append(out, w, ts)
		}
	}
	return out
}

// decodeRecent reads what encode wrote.
func decodeRecent(pairs []int32) (recentPushes, error) {
	var r recentPushes
	if len(pairs)%2 != 0 {
		return r, fmt.Errorf("%w: %d values of (worker, timestamp) pairs", transport.ErrMalformed, len(pairs))
	}
	for i := 0; i < len(pairs); i += 2 {
		r.add(pairs[i], pairs[i+1])
	}
	return r, nil
}

// partState is where a partition of a synchronous table is: its seq and
// position (see the header).
type partState struct {
	seq          uint64
	ended, steps int
}

// tableRepl is a table's replication on a server: its own partition's
// numbering and the replicas it keeps of others.
type tableRepl[V Number] struct {
	t  *Table[V]
	rp *replicator

	// mu orders the primary's updates: their application to the store,
	// their seq and the pushes remembered. On a synchronous table the
	// SyncHandler's lock is taken first.
	mu     sync.Mutex
	seq    uint64
	recent recentPushes

	// parts are the replicas kept here, by partition; the map is
	// replaced, never changed, when the job changes its servers (partsMu).
	partsMu  sync.Mutex
	parts    map[int]*replicaPart[V]
	newStore func(part int) (*StoreHandler[V], error)
	// restoring is set while this process restores its own partition:
	// it has no snapshot of it to give.
	restoring atomic.Bool
}

// replicaPart is a replica of another server's partition of a table.
type replicaPart[V Number] struct {
	mu     sync.Mutex
	store  *StoreHandler[V]
	state  partState
	recent recentPushes
	ready  bool                     // restored (at once, on a server that replaced none)
	early  map[uint64]replUpdate[V] // received, not yet applied: after a missing one
	broken bool                     // too many waited: an update to it was lost
}

// replUpdate is an update a replica received, kept until its turn.
type replUpdate[V Number] struct {
	h    replHeader
	kind int32
	kv   KVPairs[V]
}

// newTableRepl makes t's replication on a server: an empty replica of each
// partition it keeps, ready at once unless this process replaced a dead
// one (restore fills them).
func newTableRepl[V Number](t *Table[V], rp *replicator, newStore func(part int) (*StoreHandler[V], error)) (*tableRepl[V], error) {
	r := &tableRepl[V]{t: t, rp: rp, parts: make(map[int]*replicaPart[V]), newStore: newStore}
	restoring := t.ts.n.Self().IsRecovery
	r.restoring.Store(restoring)
	if t.ts.n.cfg.Joining {
		return r, nil // its replicas are made when it joins (Tables.Rescale)
	}
	for _, p := range rp.replicaParts(t.ts.n.Rank()) {
		st, err := newStore(p)
		if err != nil {
			return nil, err
		}
		r.parts[p] = &replicaPart[V]{store: st, ready: !restoring, early: make(map[uint64]replUpdate[V])}
	}
	return r, nil
}

// next numbers an update of this server's partition and returns its
// header. r.mu must be held.
func (r *tableRepl[V]) nextLocked(epoch, step int, worker, ts int32) replHeader {
	r.seq++
	return replHeader{App: r.t.app, Part: int32(r.t.ts.n.Rank()), Seq: r.seq, Epoch: int32(epoch), Step: int32(step), Worker: worker, Timestamp: ts}
}

// send forwards an update with its values to the replicas, then calls
// done.
func (r *tableRepl[V]) send(h replHeader, kind int32, kv KVPairs[V], done func()) {
	r.rp.applied()
	var frames [][]byte
	var types []transport.DataType
	if kind == replApply {
		frames = [][]byte{asBytes(kv.Keys), asBytes(kv.Vals)}
		types = []transport.DataType{transport.TypeUint64, typeOf[V]()}
		if kv.Lens != nil {
			frames = append(frames, asBytes(kv.Lens))
			types = append(types, transport.TypeInt32)
		}
	}
	r.rp.forward(h, kind, frames, types, done)
}

// handleAsync is an asynchronous table's handler on a server with
// replicas: a push is applied, numbered and forwarded, and answered once
// the replicas have it; one applied already (sent again to a new process)
// is answered without being applied twice.
func (r *tableRepl[V]) handleAsync(req *KVRequest[V], srv *KVServer[V]) {
	st := r.t.store
	if !req.Push {
		st.Handle(req, srv)
		return
	}
	ctx := srv.n.ctx
	r.mu.Lock()
	again := r.recent.has(req.Sender, req.Timestamp)
	var h replHeader
	if !again {
		if err := st.apply(req); err != nil {
			r.mu.Unlock()
			_ = srv.RespondError(ctx, req, err)
			return
		}
		r.recent.add(req.Sender, req.Timestamp)
		h = r.nextLocked(0, 0, req.Sender, req.Timestamp)
	}
	r.mu.Unlock()
	var res KVPairs[V]
	if req.Pull {
		var err error
		if res, err = st.read(req.Keys, req.Lens != nil); err != nil {
			_ = srv.RespondError(ctx, req, err)
			return
		}
	}
	answer := func() { _ = srv.Respond(ctx, req, res) }
	if again {
		answer()
		return
	}
	r.send(h, replApply, req.KVPairs, answer)
}

// syncUpdate is the SyncHandler's hook (under its lock): it numbers an
// applied step (kind replApply, steps applied of epoch after it) or an
// ended epoch (replEnded) and returns how to forward it.
func (r *tableRepl[V]) syncUpdate(kind int32, epoch, steps int, sum KVPairs[V]) func(done func()) {
	r.mu.Lock()
	h := r.nextLocked(epoch, steps, -1, -1)
	r.mu.Unlock()
	return func(done func()) { r.send(h, kind, sum, done) }
}

// part returns the replica of partition p kept here, nil for none.
func (r *tableRepl[V]) part(p int) *replicaPart[V] {
	r.partsMu.Lock()
	defer r.partsMu.Unlock()
	return r.parts[p]
}

// allParts returns the replicas kept here.
func (r *tableRepl[V]) allParts() map[int]*replicaPart[V] {
	r.partsMu.Lock()
	defer r.partsMu.Unlock()
	return r.parts
}

// replicaUpdate applies an update to the replica of its partition, in seq
// order: one ahead of a missing one waits for it (a replica still being
// restored waits for its snapshot).
func (r *tableRepl[V]) replicaUpdate(h replHeader, m *transport.Message) error {
	p := r.part(int(h.Part))
	if p == nil {
		return fmt.Errorf("server %d keeps no replica of partition %d of table %s", r.t.ts.n.Rank(), h.Part, r.t.desc.Name)
	}
	kind := m.Meta.Head
	var kv KVPairs[V]
	if kind == replApply {
		if err := decodeRequest(m, &kv); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.Seq <= p.state.seq && p.ready {
		return nil // had already
	}
	if len(p.early) >= maxEarly {
		if !p.broken {
			p.broken = true
			r.t.ts.n.log.WithFields(logrus.Fields{"table": r.t.desc.Name, "partition": h.Part, "seq": p.state.seq}).Error("replica stopped: an update to it was lost")
		}
		return nil
	}
	p.early[h.Seq] = replUpdate[V]{h: h, kind: kind, kv: kv}
	return r.drainLocked(p)
}

// drainLocked applies the updates that are next in seq order. p.mu must
// be held.
func (r *tableRepl[V]) drainLocked(p *replicaPart[V]) error {
	if !p.ready {
		return nil
	}
	for {
		u, ok := p.early[p.state.seq+1]
		if !ok {
			for s := range p.early {
				if s <= p.state.seq {
					delete(p.early, s)
				}
			}
			return nil
		}
		delete(p.early, p.state.seq+1)
		p.state.seq++
		switch u.kind {
		case replEnded:
			p.state.ended, p.state.steps = int(u.h.Epoch)+1, 0
		case replApply:
			if err := p.store.apply(&KVRequest[V]{KVMeta: KVMeta{Push: true}, KVPairs: u.kv}); err != nil {
				return fmt.Errorf("replica of partition %d: %w", u.h.Part, err)
			}
			if u.h.Worker >= 0 {
				p.recent.add(u.h.Worker, u.h.Timestamp)
			} else {
				p.state.ended, p.state.steps = int(u.h.Epoch), int(u.h.Step)
			}
		}
	}
}

// replicaSnapshot answers the state of partition part held here: this
// server's own, or a replica it keeps.
//
// The partition's new primary asks for its replica when it replaced a dead
// one: the updates the dead process sent that wait for a missing one are
// dropped, as the new one numbers its own from the snapshot's seq on.
func (r *tableRepl[V]) replicaSnapshot(part int, from int32) ([]byte, [][]byte, []transport.DataType, error) {
	t := r.t
	if t.desc.Staleness != nil {
		return nil, nil, nil, fmt.Errorf("table %s has bounded delay: it keeps no replicas", t.desc.Name)
	}
	var st *StoreHandler[V]
	var ps partState
	var recent recentPushes
	if part == t.ts.n.Rank() {
		if r.restoring.Load() {
			return nil, nil, nil, fmt.Errorf("server %d is restoring partition %d of table %s itself", t.ts.n.Rank(), part, t.desc.Name)
		}
		if t.sync != nil {
			t.sync.mu.Lock()
			defer t.sync.mu.Unlock()
			ps.ended, ps.steps = t.sync.ended, t.sync.applied[t.sync.ended]
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		st, ps.seq, recent = t.store, r.seq, r.recent
	} else {
		p := r.part(part)
		if p == nil {
			return nil, nil, nil, fmt.Errorf("server %d keeps no replica of partition %d of table %s", t.ts.n.Rank(), part, t.desc.Name)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.ready || p.broken {
			return nil, nil, nil, fmt.Errorf("server %d's replica of partition %d of table %s is not usable", t.ts.n.Rank(), part, t.desc.Name)
		}
		st, ps, recent = p.store, p.state, p.recent
		if from == transport.ServerID(part) {
			clear(p.early)
		}
	}
	var keys []uint64
	var vals, state []V
	err := st.Snapshot(func(records int, all func(yield func(key uint64, vals, state []V) bool)) error {
		keys = make([]uint64, 0, records)
		vals = make([]V, 0, records*st.dim)
		state = make([]V, 0, records*st.dim*st.StateWidth())
		all(func(k uint64, v, s []V) bool {
			keys = append(keys, k)
			vals = append(vals, v...)
			state = append(state, s...)
			return true
		})
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if st.vtab.Len() > 0 {
		return nil, nil, nil, fmt.Errorf("table %s holds keys of varying lengths, which snapshots leave out", t.desc.Name)
	}
	h := replHeader{App: t.app, Part: int32(part), Seq: ps.seq, Epoch: int32(ps.ended), Step: int32(ps.steps), Worker: -1, Timestamp: -1}
	return h.encode(), [][]byte{asBytes(keys), asBytes(vals), asBytes(state), asBytes(recent.encode())},
		[]transport.DataType{transport.TypeUint64, typeOf[V](), typeOf[V](), transport.TypeInt32}, nil
}

// installSnapshot loads a snapshot's answer into st, returning its recent pushes.
func installSnapshot[V Number](st *StoreHandler[V], m *transport.Message) (recentPushes, error) {
	if len(m.Data) != 4 {
		return recentPushes{}, fmt.Errorf("%w: snapshot of %d frames, want 4", transport.ErrMalformed, len(m.Data))
	}
	keys, err := fromBytes[uint64](m.Data[0])
	if err != nil {
		return recentPushes{}, err
	}
	vals, err := fromBytes[V](m.Data[1])
	if err != nil {
		return recentPushes{}, err
	}
	state, err := fromBytes[V](m.Data[2])
	if err != nil {
		return recentPushes{}, err
	}
	pairs, err := fromBytes[int32](m.Data[3])
	if err != nil {
		return recentPushes{}, err
	}
	recent, err := decodeRecent(pairs)
	if err != nil {
		return recentPushes{}, err
	}
	return recent, st.RestoreAll(keys, vals, state)
}

// restore fills, on a server that replaced a dead one, the table's
// partition from a live replica and each replica it keeps from its
// partition's primary (or another replica), before the table is served.
func (r *tableRepl[V]) restore() error {
	t := r.t
	n := t.ts.n
	if t.desc.Staleness != nil {
		return fmt.Errorf("%w: table %s has bounded delay, which keeps no replicas", ErrNoReplica, t.desc.Name)
	}
	ctx, cancel := context.WithTimeout(n.ctx, t.ts.opts.IOTimeout)
	defer cancel()
	rank := n.Rank()
	h, m, err := r.rp.fetch(ctx, t.app, rank, r.rp.holders(rank, n.ID()))
	if err != nil {
		return err
	}
	recent, err := installSnapshot(t.store, m)
	if err != nil {
		return fmt.Errorf("%w: table %s: %w", ErrNoReplica, t.desc.Name, err)
	}
	r.mu.Lock()
	r.seq, r.recent = h.Seq, recent
	r.mu.Unlock()
	r.restoring.Store(false)
	if t.sync != nil {
		t.sync.restore(int(h.Epoch), int(h.Step), n)
	}
	for part, p := range r.allParts() {
		from := []int32{transport.ServerID(part)}
		if n.isDead(from[0]) {
			from = nil
		}
		from = append(from, r.rp.holders(part, n.ID())...)
		h, m, err := r.rp.fetch(ctx, t.app, part, from)
		if err != nil {
			return err
		}
		p.mu.Lock()
		recent, err := installSnapshot(p.store, m)
		if err == nil {
			p.recent, p.state, p.ready = recent, partState{seq: h.Seq, ended: int(h.Epoch), steps: int(h.Step)}, true
			err = r.drainLocked(p)
		}
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: table %s: %w", ErrNoReplica, t.desc.Name, err)
		}
	}
	return nil
}

// callServers sends a request of the tables' control app to every server
// and returns their answers. When the servers keep replicas (on a worker,
// replicating tells from the configuration) and one of them is dead, it
// waits for its replacement, at most replacementWait, and asks again: a
// checkpoint or a rejoin then goes through a server's death as pushes do.
// The requests it sends are idempotent.
func (ts *Tables) callServers(ctx context.Context, head int32, body []byte) ([]SimpleResponse, error) {
	n := ts.n
	for tries := 0; ; tries++ {
		res, err := ts.ctl.Call(ctx, head, body, transport.ServerGroup)
		if err == nil && len(res) == n.NumServers() {
			return res, nil
		}
		if !replicating(n) || tries == 2 || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("%d of %d servers answered", len(res), n.NumServers())
			}
			return res, err
		}
		var dead *DeadError
		if err != nil && !(errors.As(err, &dead) && dead.Role == transport.RoleServer) {
			return nil, err
		}
		n.log.WithError(err).Warn("a server is dead: waiting for its replacement to ask again")
		if err := n.awaitServers(ctx, replacementWait); err != nil {
			return nil, err
		}
	}
}

// awaitServers returns once no server is dead, or fails after wait.
func (n *Node) awaitServers(ctx context.Context, wait time.Duration) error {
	events, stop := n.Subscribe()
	defer stop()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		dead := 0
		for _, id := range n.DeadNodes() {
			if r, ok := transport.IDRole(id); ok && r == transport.RoleServer {
				dead++
			}
		}
		if dead == 0 {
			return nil
		}
		select {
		case <-events:
		case <-timer.C:
			return fmt.Errorf("psnode: %d server(s) dead and not replaced within %v", dead, wait)
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return ErrStopped
		}
	}
}
