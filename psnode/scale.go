package psnode

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode/partition"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// Elastic servers: a synchronous job changes its number of servers at the
// end of an epoch, when no push is in flight (every worker's EndEpoch
// has been answered, and none pushes a step of the next epoch before the
// switch is over).
//
// Every worker calls Tables.Rescale(epoch, S') with the same S' (the
// job's tracker decides it, once per epoch). A server started to join
// (conf.PS.Joining) is admitted by the scheduler beyond the job's count
// beforehand, with empty tables. The workers then drive two phases over
// the tables' control app, each sent to every server of the old and the
// new count, each done once per (epoch, S') by a server however many
// workers ask:
//
//  1. ctlScaleMove: each server hands every key its table holds that
//     another server owns under S' parts — the values and the updater
//     state — to that server (scaleApp, answered once installed), then
//     drops it. A joining server starts its synchronous tables at epoch.
//     Once every server answered, every key is on its new owner.
//  2. ctlScaleSettle: each server takes S' as the job's count and, when
//     the tables keep replicas, makes afresh the replicas it keeps under
//     the new ring, from snapshots of their new primaries. A server whose
//     rank is S' or more is drained: its Finish returns at once and its
//     Finalize leaves the job without waiting for the others.
//
// Then each worker routes its pushes and pulls over S' servers. The keys
// move with the partitioner's rule: under "consistent", going from S to
// S+1 servers moves about 1/(S+1) of them, and back moves the same keys
// back. A key's updates do not depend on the server that applies them, so
// a job that scaled writes the model of a job that did not. The range
// partitioner cannot change its servers (each server's range is fixed),
// nor can an asynchronous or bounded-delay table (it has no point where
// nothing is in flight).
const (
	scaleApp int32 = 1<<30 - 4

	ctlScaleMove   int32 = 3
	ctlScaleSettle int32 = 4

	scaleHeaderLen = 12
)

// MaxServers and MaxWorkers bound the servers and workers of a job, as
// it scales out too (conf.MaxServers, conf.MaxWorkers).
const (
	MaxServers = conf.MaxServers
	MaxWorkers = conf.MaxWorkers
)

// ErrNotScalable is returned by Rescale (and CheckScalable) for tables
// that cannot change their servers.
var ErrNotScalable = errors.New("psnode: the job's tables cannot change their servers")

// ScaleResult is what a change of the job's servers and workers did.
type ScaleResult struct {
	From, To int // servers
	// FromWorkers and ToWorkers are the workers before and after.
	FromWorkers, ToWorkers int
	// Moved is the number of keys that changed servers, of Keys stored
	// in all (every table, before the move).
	Moved, Keys int64
	// Took is the time from the first request to the switch.
	Took time.Duration
}

// Share is the fraction of the keys that moved.
func (r ScaleResult) Share() float64 {
	if r.Keys == 0 {
		return 0
	}
	return float64(r.Moved) / float64(r.Keys)
}

// scaleRequest is the body of ctlScaleMove and ctlScaleSettle.
type scaleRequest struct {
	Epoch       int      `json:"epoch"`
	From        int      `json:"from"`
	To          int      `json:"to"`
	FromWorkers int      `json:"from_workers"`
	Workers     int      `json:"workers"`
	Tables      []string `json:"tables"`
}

// scaleAnswer is a server's answer to ctlScaleMove.
type scaleAnswer struct {
	Moved int64 `json:"moved"` // keys handed to other servers
	Held  int64 `json:"held"`  // keys held before
}

type scaleKey struct{ epoch, to, workers int }

// scaleView is a count of servers and workers.
type scaleView struct{ servers, workers int }

// scaling is a server's side of the switch.
type scaling struct {
	mu      sync.Mutex // held through a phase: one at a time
	moved   map[scaleKey]scaleAnswer
	settled map[scaleKey]bool
	// asked are the workers that asked this server to settle, by change:
	// a drained server stays until every worker has its answer (or
	// drainWait passed), as a late one's request would find it gone.
	asked    map[scaleKey]map[int32]bool
	draining bool
	// view is the counts this server last switched to: the job's at
	// first, none on a joining server. A request for the counts it has
	// already (a worker that replaced a dead one, learning them) does
	// nothing.
	view scaleView
	srv  *customer // keys handed here
	cli  *customer // answers to the keys this server hands over
}

// newScaling makes a server's side of the switch.
func newScaling(ts *Tables) (*scaling, error) {
	sc := &scaling{moved: make(map[scaleKey]scaleAnswer), settled: make(map[scaleKey]bool), asked: make(map[scaleKey]map[int32]bool)}
	if !ts.n.cfg.Joining {
		sc.view = scaleView{ts.n.NumServers(), ts.n.NumWorkers()}
	}
	var err error
	if sc.cli, err = ts.n.newCustomer(scaleApp, 0, false, func(m *transport.Message) { sc.cli.reply(m) }); err != nil {
		return nil, err
	}
	if sc.srv, err = ts.n.newCustomer(scaleApp, 0, true, ts.serveHandover); err != nil {
		return nil, err
	}
	return sc, nil
}

// CheckScalable says whether the tables declared so far can change their
// servers (ErrNotScalable, naming the table and why, when they cannot).
func (ts *Tables) CheckScalable() error {
	for _, e := range ts.list() {
		switch {
		case !e.desc.Sync:
			return fmt.Errorf("%w: table %s is not synchronous", ErrNotScalable, e.desc.Name)
		case e.desc.Partitioner == partition.KindRange:
			return fmt.Errorf("%w: table %s uses the range partitioner, whose servers' ranges are fixed (use consistent)", ErrNotScalable, e.desc.Name)
		}
	}
	return nil
}

// Rescale changes the job's servers and workers to servers and workers
// at the start of epoch, on a worker (see the top of scale.go): every
// worker of the new count and of the old calls it with the same
// arguments, after EndEpoch(epoch-1) and before any push of epoch. It
// returns at once when the counts are the job's already. A worker the
// new count leaves out is drained: its Finish returns at once and its
// Finalize leaves the job.
func (ts *Tables) Rescale(ctx context.Context, epoch, servers, workers int) (ScaleResult, error) {
	n := ts.n
	if n.Role() != transport.RoleWorker {
		return ScaleResult{}, ErrNotWorker
	}
	res := ScaleResult{From: n.NumServers(), To: servers, FromWorkers: n.NumWorkers(), ToWorkers: workers}
	if servers == res.From && workers == res.FromWorkers {
		return res, nil
	}
	if servers < 1 || servers > MaxServers || workers < 1 || workers > MaxWorkers || epoch < 0 || epoch >= MaxSyncEpochs {
		return res, fmt.Errorf("psnode: rescale to %d servers and %d workers at epoch %d: want 1..%d servers and 1..%d workers", servers, workers, epoch, MaxServers, MaxWorkers)
	}
	if err := ts.CheckScalable(); err != nil {
		return res, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, ts.opts.IOTimeout)
	defer cancel()
	body, err := json.Marshal(scaleRequest{Epoch: epoch, From: res.From, To: servers, FromWorkers: res.FromWorkers, Workers: workers, Tables: ts.names()})
	if err != nil {
		return res, err
	}
	all := max(res.From, servers)
	answers, err := ts.callEach(ctx, ctlScaleMove, body, all)
	if err != nil {
		return res, fmt.Errorf("psnode: rescale from %d to %d servers: hand the keys over: %w", res.From, servers, err)
	}
	for _, a := range answers {
		var sa scaleAnswer
		if err := json.Unmarshal(a.Body, &sa); err != nil {
			return res, fmt.Errorf("psnode: rescale: server %d's answer: %w", transport.IDRank(a.Sender), err)
		}
		res.Moved += sa.Moved
		res.Keys += sa.Held
	}
	if _, err := ts.callEach(ctx, ctlScaleSettle, body, all); err != nil {
		return res, fmt.Errorf("psnode: rescale from %d to %d servers: settle: %w", res.From, servers, err)
	}
	if servers != res.From {
		for _, e := range ts.list() {
			if e.route != nil {
				if err := e.route(servers); err != nil {
					return res, fmt.Errorf("psnode: table %s: %w", e.desc.Name, err)
				}
			}
		}
	}
	n.setView(servers, workers)
	res.Took = time.Since(began)
	n.log.WithFields(logrus.Fields{"servers": fmt.Sprintf("%d → %d", res.From, servers), "workers": fmt.Sprintf("%d → %d", res.FromWorkers, workers),
		"moved": res.Moved, "keys": res.Keys, "took": res.Took.Round(time.Millisecond).String()}).Info("job's servers and workers changed")
	if n.Rank() >= workers {
		ts.retire()
		n.log.WithField("workers", workers).Info("drained: this worker leaves the job")
	}
	return res, nil
}

// retire marks this node drained by a scale-in: Finish returns at once
// and Finalize leaves without the final barrier.
func (ts *Tables) retire() {
	ts.retireOnce.Do(func() {
		ts.n.mu.Lock()
		ts.n.retired = true
		ts.n.mu.Unlock()
		close(ts.retired)
	})
}

// Retired says whether this node was drained by a change of the job's
// servers or workers (Rescale): it takes no more part in the job.
func (ts *Tables) Retired() bool {
	select {
	case <-ts.retired:
		return true
	default:
		return false
	}
}

// callEach sends a control request to servers 0..count-1 and waits for
// every answer.
func (ts *Tables) callEach(ctx context.Context, head int32, body []byte, count int) ([]SimpleResponse, error) {
	var stamps []int32
	for r := range count {
		t, err := ts.ctl.Request(ctx, head, body, transport.ServerID(r))
		if err != nil {
			return nil, fmt.Errorf("server %d: %w", r, err)
		}
		stamps = append(stamps, t)
	}
	var out []SimpleResponse
	var errs []error
	for _, t := range stamps {
		res, err := ts.ctl.Wait(ctx, t)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, res...)
	}
	return out, errors.Join(errs...)
}

// serveScale answers a worker's ctlScaleMove or ctlScaleSettle on a
// server, once per (epoch, servers, workers).
func (ts *Tables) serveScale(req SimpleRequest) (int32, []byte, error) {
	var r scaleRequest
	if err := json.Unmarshal(req.Body, &r); err != nil || r.To < 1 || r.To > MaxServers || r.From < 1 || r.From > MaxServers ||
		r.Workers < 1 || r.Workers > MaxWorkers || r.FromWorkers < 1 || r.FromWorkers > MaxWorkers || r.Epoch < 0 || r.Epoch >= MaxSyncEpochs {
		return 0, nil, fmt.Errorf("tables: rescale request %q", req.Body)
	}
	sc, n := ts.scale, ts.n
	sc.mu.Lock()
	defer sc.mu.Unlock()
	key := scaleKey{r.Epoch, r.To, r.Workers}
	if _, ok := sc.moved[key]; !ok && sc.view == (scaleView{r.To, r.Workers}) {
		return req.Head, []byte("{}"), nil // the counts already: nothing changes
	}
	ctx, cancel := context.WithTimeout(n.ctx, ts.opts.IOTimeout)
	defer cancel()
	if err := ts.awaitTables(ctx, r.Tables); err != nil {
		return 0, nil, fmt.Errorf("rescale: %w", err)
	}
	if req.Head == ctlScaleMove {
		if a, ok := sc.moved[key]; ok {
			body, err := json.Marshal(a)
			return req.Head, body, err
		}
		var a scaleAnswer
		for _, e := range ts.list() {
			e.srv.rescaleSync(r.Epoch, r.Workers)
			if r.From == r.To {
				continue
			}
			moved, held, err := e.srv.scaleOut(ctx, r.Epoch, r.From, r.To)
			if err != nil {
				return 0, nil, fmt.Errorf("rescale to %d servers: table %s: %w", r.To, e.desc.Name, err)
			}
			a.Moved += int64(moved)
			a.Held += int64(held)
		}
		sc.moved[key] = a
		n.log.WithFields(logrus.Fields{"servers": r.To, "workers": r.Workers, "moved": a.Moved, "held": a.Held}).Info("ready for a change of servers and workers")
		body, err := json.Marshal(a)
		return req.Head, body, err
	}
	if _, ok := sc.moved[key]; !ok {
		return 0, nil, fmt.Errorf("rescale to %d servers at epoch %d: settle before the keys moved", r.To, r.Epoch)
	}
	if !sc.settled[key] {
		n.setView(r.To, r.Workers)
		if r.From != r.To {
			for _, e := range ts.list() {
				if err := e.srv.settle(ctx); err != nil {
					return 0, nil, fmt.Errorf("rescale to %d servers: table %s: replicas: %w", r.To, e.desc.Name, err)
				}
			}
		}
		sc.settled[key], sc.view = true, scaleView{r.To, r.Workers}
	}
	if n.Rank() >= r.To {
		ts.drainLocked(key, req.Sender, max(r.FromWorkers, r.Workers))
	}
	return req.Head, nil, nil
}

// drainWait bounds how long a drained server waits for every worker's
// request to settle before it leaves; drainGrace is how long it lets the
// last answer go before it does.
const (
	drainWait  = 30 * time.Second
	drainGrace = 200 * time.Millisecond
)

// drainLocked notes that worker asked a drained server to settle for
// change key, and has the server leave the job once each of the workers
// of the change asked, or drainWait after the first. ts.scale.mu must be
// held.
func (ts *Tables) drainLocked(key scaleKey, worker int32, workers int) {
	sc, n := ts.scale, ts.n
	if sc.asked[key] == nil {
		sc.asked[key] = make(map[int32]bool)
	}
	sc.asked[key][worker] = true
	leave := func() {
		ts.retire()
		n.log.WithField("servers", key.to).Info("drained: this server leaves the job")
	}
	if !sc.draining {
		sc.draining = true
		time.AfterFunc(drainWait, leave)
	}
	if len(sc.asked[key]) >= workers {
		time.AfterFunc(drainGrace, leave)
	}
}

// retiredCh is closed once this node is drained.
func (ts *Tables) retiredCh() <-chan struct{} { return ts.retired }

// awaitTables returns once every table of names is served here, or fails
// when ctx ends.
func (ts *Tables) awaitTables(ctx context.Context, names []string) error {
	for {
		ts.mu.Lock()
		ch := ts.servedCh
		var missing []string
		for _, name := range names {
			if e := ts.byName[name]; e == nil || e.srv == nil {
				missing = append(missing, name)
			}
		}
		ts.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("tables %v not served here: %w", missing, ctx.Err())
		}
	}
}

// handoverHeader is the body of a scaleApp request: the table's app, the
// epoch and the new count of servers.
type handoverHeader struct {
	App, Epoch, To int32
}

func (h handoverHeader) encode() []byte {
	b := make([]byte, scaleHeaderLen)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(h.App))
	le.PutUint32(b[4:], uint32(h.Epoch))
	le.PutUint32(b[8:], uint32(h.To))
	return b
}

// decodeHandoverHeader reads a header, refusing any other length and an
// epoch or count out of range.
func decodeHandoverHeader(b []byte) (handoverHeader, error) {
	if len(b) != scaleHeaderLen {
		return handoverHeader{}, fmt.Errorf("%w: handover header of %d bytes, want %d", transport.ErrMalformed, len(b), scaleHeaderLen)
	}
	le := binary.LittleEndian
	h := handoverHeader{App: int32(le.Uint32(b[0:])), Epoch: int32(le.Uint32(b[4:])), To: int32(le.Uint32(b[8:]))}
	if h.Epoch < 0 || h.Epoch >= MaxSyncEpochs || h.To < 1 || h.To > MaxServers {
		return handoverHeader{}, fmt.Errorf("%w: handover header with epoch %d, %d servers", transport.ErrMalformed, h.Epoch, h.To)
	}
	return h, nil
}

// handover sends keys of a table to server to and waits until it has
// installed them.
func (ts *Tables) handover(ctx context.Context, to int32, h handoverHeader, frames [][]byte, types []transport.DataType) error {
	n, c := ts.n, ts.scale.cli
	t := c.newRequest([]int32{to}, nil, nil, nil, nil)
	m := &transport.Message{Meta: transport.Meta{
		Recver: to, AppID: scaleApp, Request: true, Push: true, Timestamp: t,
		Body: h.encode(), DataTypes: types,
	}, Data: frames}
	if err := n.send(ctx, m); err != nil {
		c.fail(t, err)
		return err
	}
	return c.wait(ctx, t)
}

// serveHandover installs keys another server handed over, once the table
// is served here (a joining server may declare it after the first keys
// come).
func (ts *Tables) serveHandover(m *transport.Message) {
	n := ts.n
	err := func() error {
		if r, ok := transport.IDRole(m.Meta.Sender); !ok || r != transport.RoleServer {
			return fmt.Errorf("keys handed over by node %d, not a server", m.Meta.Sender)
		}
		h, err := decodeHandoverHeader(m.Meta.Body)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(n.ctx, ts.opts.IOTimeout)
		defer cancel()
		e, err := ts.awaitApp(ctx, h.App)
		if err != nil {
			return err
		}
		return e.srv.scaleIn(int(h.Epoch), int(h.To), m)
	}()
	res := &transport.Message{Meta: transport.Meta{
		Recver: m.Meta.Sender, AppID: scaleApp, CustomerID: m.Meta.CustomerID, Timestamp: m.Meta.Timestamp, Push: true,
	}}
	if err != nil {
		res.Meta.Status, res.Meta.Body = 1, []byte(err.Error())
	}
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	if err := n.send(ctx, res); err != nil && n.ctx.Err() == nil {
		n.log.WithError(err).WithField("peer", m.Meta.Sender).Debug("handover answer not sent")
	}
}

// awaitApp returns the table of app id app once it is served here.
func (ts *Tables) awaitApp(ctx context.Context, app int32) (*tableEntry, error) {
	for {
		ts.mu.Lock()
		ch, e := ts.servedCh, ts.byApp[app]
		ts.mu.Unlock()
		if e != nil && e.srv != nil {
			return e, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("keys handed over for table app %d, not served here: %w", app, ctx.Err())
		}
	}
}

// rescaleSync makes a synchronous table count workers workers from epoch
// on (a joining server's starts there).
func (t *Table[V]) rescaleSync(epoch, workers int) {
	if t.sync != nil {
		t.sync.startAt(epoch)
		t.sync.setWorkers(workers)
	}
}

// scalePartitioner is the table's partitioner over servers parts.
func (t *Table[V]) scalePartitioner(servers int) (partition.Partitioner, error) {
	if t.desc.Partitioner == partition.KindRange {
		return nil, fmt.Errorf("%w: table %s uses the range partitioner", ErrNotScalable, t.desc.Name)
	}
	return NewPartitioner(t.desc.Partitioner, servers, t.desc.MaxKey)
}

// handoverGroup is the keys a server hands to one other.
type handoverGroup[V Number] struct {
	keys        []uint64
	vals, state []V
}

// scaleOut hands the keys this server holds that another owns under to
// servers to their owners, with their values and updater state, and
// drops them; it returns how many moved, and how many it held under from
// servers (not counting those handed to it meanwhile).
func (t *Table[V]) scaleOut(ctx context.Context, epoch, from, to int) (moved, held int, err error) {
	n := t.ts.n
	part, err := t.scalePartitioner(to)
	if err != nil {
		return 0, 0, err
	}
	old, err := t.scalePartitioner(from)
	if err != nil {
		return 0, 0, err
	}
	me := n.Rank()
	owner := func(p partition.Partitioner, k uint64) int {
		o, err := p.Owner(k)
		if err != nil {
			return -1
		}
		return o
	}
	groups := make(map[int]*handoverGroup[V])
	t.store.Range(func(k uint64, v, s []V) bool {
		if owner(old, k) == me {
			held++
		}
		o := owner(part, k)
		if o == me {
			return true
		}
		g := groups[o]
		if g == nil {
			g = &handoverGroup[V]{}
			groups[o] = g
		}
		g.keys = append(g.keys, k)
		g.vals = append(g.vals, v...)
		g.state = append(g.state, s...)
		return true
	})
	if g := groups[-1]; g != nil {
		return 0, held, fmt.Errorf("key %d is outside the table's key space", g.keys[0])
	}
	h := handoverHeader{App: t.app, Epoch: int32(epoch), To: int32(to)}
	types := []transport.DataType{transport.TypeUint64, typeOf[V](), typeOf[V]()}
	for _, o := range slices.Sorted(maps.Keys(groups)) {
		g := groups[o]
		if err := t.ts.handover(ctx, transport.ServerID(o), h, [][]byte{asBytes(g.keys), asBytes(g.vals), asBytes(g.state)}, types); err != nil {
			return moved, held, fmt.Errorf("hand %d keys to server %d: %w", len(g.keys), o, err)
		}
		moved += len(g.keys)
	}
	return moved, held, t.store.Retain(func(k uint64) bool { return owner(part, k) == me })
}

// scaleIn installs keys handed over for a change to servers at epoch,
// refusing any this server does not own under it.
func (t *Table[V]) scaleIn(epoch, servers int, m *transport.Message) error {
	if len(m.Data) != 3 {
		return fmt.Errorf("%w: handover of %d frames, want 3", transport.ErrMalformed, len(m.Data))
	}
	keys, err := fromBytes[uint64](m.Data[0])
	if err != nil {
		return err
	}
	vals, err := fromBytes[V](m.Data[1])
	if err != nil {
		return err
	}
	state, err := fromBytes[V](m.Data[2])
	if err != nil {
		return err
	}
	part, err := t.scalePartitioner(servers)
	if err != nil {
		return err
	}
	me := t.ts.n.Rank()
	for _, k := range keys {
		if o, err := part.Owner(k); err != nil || o != me {
			return fmt.Errorf("key %d handed over is not server %d's under %d servers", k, me, servers)
		}
	}
	if t.sync != nil {
		t.sync.startAt(epoch)
	}
	return t.store.RestoreAll(keys, vals, state)
}

// settle makes afresh, once the job has its new count of servers, the
// replicas this server keeps: from snapshots of their primaries.
func (t *Table[V]) settle(ctx context.Context) error {
	r := t.repl
	if r == nil {
		return nil
	}
	parts := make(map[int]*replicaPart[V])
	for _, p := range r.rp.replicaParts(t.ts.n.Rank()) {
		st, err := r.newStore(p)
		if err != nil {
			return err
		}
		h, m, err := r.rp.fetch(ctx, t.app, p, []int32{transport.ServerID(p)})
		if err != nil {
			return err
		}
		recent, err := installSnapshot(st, m)
		if err != nil {
			return err
		}
		parts[p] = &replicaPart[V]{
			store: st, recent: recent, ready: true, early: make(map[uint64]replUpdate[V]),
			state: partState{seq: h.Seq, ended: int(h.Epoch), steps: int(h.Step)},
		}
	}
	r.partsMu.Lock()
	r.parts = parts
	r.partsMu.Unlock()
	return nil
}
