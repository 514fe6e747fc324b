package psnode

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/partition"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// App ids of tables: each table is its own app, numbered from a hash of
// its name in [tableAppBase, 2^31); the checkpoint requests of a job's
// tables go over app tablesCtlApp. Programs that also run their own apps
// must keep their ids below tablesCtlApp.
const (
	tablesCtlApp int32 = 1<<30 - 1
	tableAppBase int32 = 1 << 30
)

// DefaultTableIOTimeout bounds one server's checkpoint write or model
// export, and a restore.
const DefaultTableIOTimeout = 30 * time.Minute

// TableSpec declares a table: a map from uint64 keys to Width values of
// type V on the servers, updated by Updater.
type TableSpec[V Number] struct {
	// Name names the table in checkpoints and models: 1 to 64 of
	// [a-z0-9_-], starting with a letter, unique in the job.
	Name string
	// Width is the number of values per key: 1 for a weight, d for a
	// d-dimensional embedding; 0 means 1.
	Width int
	// Updater applies pushed values on the servers (store.NewUpdater:
	// sum, sgd, adagrad, ftrl, adam; or any store.Updater). nil means
	// store.Sum: pushes are added up.
	Updater store.Updater[V]
	// Partitioner spreads keys over the servers: "hash", "consistent" or
	// "range"; "" means the node's configuration (SPINDLE_PARTITIONER).
	Partitioner string
	// MaxKey bounds the key space of the range partitioner to
	// [0, MaxKey); 0 means the node's configuration (DMLC_MAX_DIMENSION).
	MaxKey uint64
	// Init gives the initial values of a key never pushed: a pure
	// function of the key filling Width values (zero before the call),
	// the same on every node. Pulls of such a key answer them and the
	// first push applies to them (an embedding cannot start at zero).
	// nil means zeros. Keys never pushed are not stored, checkpointed or
	// exported.
	Init func(key uint64, vals []V)
	// Sync makes the table synchronous: workers push with PushStep and
	// EndEpoch, and a server applies a step once it has every worker's
	// part, adding the parts up in worker-rank order, so that runs with
	// the same data write bit-identical models (see SyncHandler).
	Sync bool

	// Bounded delay (stale synchronous parallel, see SSPHandler).
	// BoundedDelay makes workers push with PushAt and pull with PullAt;
	// a worker then runs at most Staleness steps ahead of the slowest
	// live one (0: bulk-synchronous). Exclusive with Sync.
	BoundedDelay bool
	Staleness    int
	// Compress compresses the table's pushes, pulls and their answers on
	// the wire, losslessly (delta-encoded keys and zstd; see
	// WithCompression). It is the workers' choice: servers decode what
	// they receive whatever they declared.
	Compress bool
	// DeltaKeys, when Compress is off, sends the keys of the table's
	// pushes and pulls as gaps and every other frame as it is, and the
	// servers answer the same way (WithDeltaKeys): lossless, fewer
	// bytes than plain for almost no CPU, where Compress's zstd takes
	// more bytes off for much more CPU. A worker's choice, like Compress.
	DeltaKeys bool
	// KeyCache compresses like Compress (like DeltaKeys with DeltaKeys)
	// and asks the servers to keep the key lists the workers send, which
	// the workers then refer to by a 16-byte signature instead of sending
	// them again (WithKeyCache; see keycache.go). A worker's choice too.
	KeyCache bool
	// Significance, when positive, turns on the significantly-modified
	// filter on an asynchronous or bounded-delay table: a worker pushes a
	// key's values only once one of them, with what it held back for the
	// key, reaches Significance in magnitude, and sends the rest at Idle
	// (see significance.go). A worker's choice, like Compress.
	Significance float64
	// KKT, when positive, turns on the KKT filter for L1-regularised
	// models on an asynchronous or bounded-delay table: a worker holds
	// back the values of a key whose weight its last pull read as zero
	// until they add up to KKT in magnitude (the L1 strength is the
	// natural choice), and sends them like the significance filter's.
	KKT float64
}

// TablesOptions says where a job's tables are checkpointed, restored
// from and exported to. Every field may be left zero: no checkpoints, no
// restore, no model.
type TablesOptions struct {
	// Checkpoints writes the servers' checkpoint files and reads them
	// back (io/ckpt's TableStore). Servers need it to take checkpoints
	// and to restore.
	Checkpoints CheckpointStore
	// Committer commits a checkpoint once every server wrote its files
	// (a *tracker.Client); the worker that calls Checkpoint needs it.
	Committer CheckpointCommitter
	// ResumeFrom is the committed checkpoint the servers restore every
	// table from before they serve it (conf.Job.ResumeFrom); "" starts
	// from empty tables.
	ResumeFrom string
	// CheckpointInterval is when CheckpointDue says a checkpoint is due:
	// a number of epochs ("2") or a duration ("10m")
	// (conf.Job.CheckpointInterval); "" means never.
	CheckpointInterval string
	// Model writes the servers' parts of the model at Finish (io/model's
	// TableWriter); nil writes none.
	Model ModelWriter
	// IOTimeout bounds one server's checkpoint, restore or export; 0
	// means DefaultTableIOTimeout.
	IOTimeout time.Duration
	// OnEvent, when set, is told what the job's status should show of
	// this node's task ("server 2"): EventRestored, on a server that
	// replaced a dead one. It runs on a goroutine of its own, with a
	// context that bounds it.
	OnEvent func(ctx context.Context, kind, task, detail string, took time.Duration)
}

// Tables is a job's set of tables on one node: every role makes one
// right after Start, declares the same tables on it with NewTable, and
// calls Finish at the end. Servers serve the tables (restoring them
// first when the job resumes), answer checkpoint requests and write the
// model; workers push and pull through the Table handles and one of them
// asks for checkpoints. Its methods are safe for concurrent use.
type Tables struct {
	n      *Node
	opts   TablesOptions
	ctl    *SimpleApp  // nil on the scheduler
	repl   *replicator // servers whose tables keep replicas
	scale  *scaling    // servers: changes of the job's servers (scale.go)
	everyN int
	every  time.Duration

	mu      sync.Mutex
	tables  []*tableEntry // in declaration order
	byApp   map[int32]*tableEntry
	byName  map[string]*tableEntry
	lastCkp time.Time
	// retired is closed once this node is drained by a change of the
	// job's servers or workers (scale.go).
	retired    chan struct{}
	retireOnce sync.Once
	// servedCh is closed, and replaced, whenever a table starts being
	// served here (waitServed).
	servedCh chan struct{}
}

// tableEntry is a declared table; srv is set on servers, end on the
// workers of a synchronous table.
type tableEntry struct {
	desc tableDesc
	app  int32
	srv  servedTable // once restored
	// repl is srv for the replication of the table, set before it is
	// restored: updates from other servers then wait in its replicas.
	repl servedTable
	end  epochCall // synchronous tables on workers: EndEpoch
	// route, on workers, routes the table's requests over a new count of
	// servers (Rescale).
	route func(servers int) error
	idle  epochCall // workers of bounded-delay and filtered tables: Idle
	// shift is where a synchronous table's worker rejoined (Rejoin).
	shift *atomic.Pointer[syncShift]
}

// epochCall sends a table's request about an epoch and returns how to
// wait for it.
type epochCall func(ctx context.Context, epoch int) (wait func(context.Context) error, err error)

// tableDesc describes a table in a checkpoint's tables.json.
type tableDesc struct {
	Name        string `json:"name"`
	Elem        string `json:"elem"`
	Width       int    `json:"width"`
	Updater     string `json:"updater"`
	StateWidth  int    `json:"state_width"`
	Partitioner string `json:"partitioner"`
	MaxKey      uint64 `json:"max_key,string"`
	Sync        bool   `json:"sync,omitempty"`

	Staleness *int `json:"staleness,omitempty"` // bounded-delay tables
}

// servedTable is the server side of a table, whatever its element type.
type servedTable interface {
	// snapshot calls fn with a consistent snapshot of the table, holding
	// the table's lock: pushes wait until fn returns.
	snapshot(fn func(TableSnapshot) error) error
	// lock and unlock hold the table still for an export of every table.
	lock()
	unlock()
	snapshotLocked() TableSnapshot
	// rejoin answers a replacement worker on a synchronous table (see
	// Tables.Rejoin); ok is false for a table that is not synchronous.
	rejoin(worker int32, inc int64, r syncRejoin) (p syncPlace, ok bool, err error)
	// replicaUpdate and replicaSnapshot serve another server's
	// replication requests (replica.go).
	replicaUpdate(h replHeader, m *transport.Message) error
	replicaSnapshot(part int, from int32) (h []byte, frames [][]byte, types []transport.DataType, err error)
	// scaleOut, scaleIn and settle change the job's servers (scale.go).
	scaleOut(ctx context.Context, epoch, from, to int) (moved, held int, err error)
	rescaleSync(epoch, workers int)
	scaleIn(epoch, servers int, m *transport.Message) error
	settle(ctx context.Context) error
}

// waitServed returns, on a server that replaced a dead one, once every
// table of names is served here: it may be asked for a checkpoint or a
// rejoin while it restores them. It fails when ctx ends. Elsewhere it
// returns at once, and a table the server lacks is reported by the caller
// (a checkpoint names the table and the servers that wrote it).
func (ts *Tables) waitServed(ctx context.Context, names []string) error {
	if !ts.n.Self().IsRecovery {
		return nil
	}
	return ts.awaitTables(ctx, names)
}

// names returns the names of the tables declared so far.
func (ts *Tables) names() []string {
	var out []string
	for _, e := range ts.list() {
		out = append(out, e.desc.Name)
	}
	return out
}

// replicated returns the table of app id app once it keeps replicas
// here, nil before.
func (ts *Tables) replicated(app int32) *tableEntry {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if e := ts.byApp[app]; e != nil && e.repl != nil {
		return e
	}
	return nil
}

// NewTables makes the table set of node n, after its Start. On a server
// it starts answering checkpoint requests at once.
func NewTables(n *Node, opts TablesOptions) (*Tables, error) {
	if !n.isReady() {
		return nil, ErrNotReady
	}
	ts := &Tables{n: n, opts: opts, byApp: make(map[int32]*tableEntry), byName: make(map[string]*tableEntry), lastCkp: time.Now(), servedCh: make(chan struct{}), retired: make(chan struct{})}
	if ts.opts.IOTimeout <= 0 {
		ts.opts.IOTimeout = DefaultTableIOTimeout
	}
	var err error
	if ts.everyN, ts.every, err = ParseCheckpointInterval(opts.CheckpointInterval); err != nil {
		return nil, err
	}
	switch n.Role() {
	case transport.RoleServer:
		ts.ctl, err = NewSimpleApp(n, tablesCtlApp, 0, ts.serveCtl)
		if err == nil && replicating(n) {
			ts.repl, err = newReplicator(ts)
		}
		if err == nil {
			ts.scale, err = newScaling(ts)
		}
	case transport.RoleWorker:
		ts.ctl, err = NewSimpleApp(n, tablesCtlApp, 0, nil)
	}
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// ParseCheckpointInterval reads a checkpoint interval: a number of epochs
// ("2") or a duration ("10m"); "" means none (both zero).
func ParseCheckpointInterval(s string) (epochs int, every time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	if k, err := strconv.Atoi(s); err == nil {
		if k < 1 {
			return 0, 0, fmt.Errorf("psnode: checkpoint interval %q: need at least 1 epoch", s)
		}
		return k, 0, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return 0, d, nil
	}
	return 0, 0, fmt.Errorf("psnode: checkpoint interval %q: want a number of epochs or a duration such as 10m", s)
}

// Node returns the node the tables live on.
func (ts *Tables) Node() *Node { return ts.n }

var tableNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// tableApp returns the app id of the table called name.
func tableApp(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return tableAppBase | int32(h.Sum32()&(1<<30-1))
}

// elemName names V's element type.
func elemName[V Number]() string {
	var v V
	if unsafe.Sizeof(v) == 4 {
		return "float32"
	}
	return "float64"
}

// Table is one table of a job, as a node sees it: on a worker, a handle
// to push and pull; on a server, the store it serves. Its methods are
// safe for concurrent use.
type Table[V Number] struct {
	ts    *Tables
	desc  tableDesc
	app   int32
	kv    *KVWorker[V]              // workers
	store *StoreHandler[V]          // servers
	srv   *KVServer[V]              // servers
	ssp   *SSPHandler[V]            // servers of a bounded-delay table
	sync  *SyncHandler[V]           // servers of a synchronous table
	repl  *tableRepl[V]             // servers whose tables keep replicas
	sig   *residuals[V]             // workers of a table with Significance
	shift atomic.Pointer[syncShift] // workers of a synchronous table that rejoined
}

// ErrNotWorker is returned by a Table's push and pull methods on a node
// that is not a worker.
var ErrNotWorker = errors.New("psnode: only workers push and pull")

// NewTable declares table spec on ts. Every role of the job must declare
// the same tables, with the same specs, right after NewTables. On a
// server it makes the table's store, restores it from
// TablesOptions.ResumeFrom when set, and serves it; on a worker it
// returns a handle for Push, Pull and Wait; on the scheduler a handle
// that does nothing.
func NewTable[V Number](ts *Tables, spec TableSpec[V]) (*Table[V], error) {
	n := ts.n
	if !tableNameRE.MatchString(spec.Name) {
		return nil, fmt.Errorf("psnode: table name %q: want 1 to 64 of [a-z0-9_-], starting with a letter", spec.Name)
	}
	if spec.Width == 0 {
		spec.Width = 1
	}
	if spec.Width < 1 || spec.Width > store.MaxDim {
		return nil, fmt.Errorf("psnode: table %s: width %d, want 1..%d", spec.Name, spec.Width, store.MaxDim)
	}
	if spec.Updater == nil {
		spec.Updater = store.Sum[V]{}
	}
	if spec.Partitioner == "" {
		spec.Partitioner = n.cfg.Partitioner
	}
	if spec.Partitioner == "" {
		spec.Partitioner = partition.KindRange
	}
	if spec.MaxKey == 0 {
		spec.MaxKey = n.cfg.MaxDimension
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"significance", spec.Significance}, {"KKT", spec.KKT}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return nil, fmt.Errorf("psnode: table %s: %s threshold %v: want a finite number >= 0", spec.Name, f.name, f.v)
		}
		if f.v > 0 && spec.Sync {
			return nil, fmt.Errorf("psnode: table %s: the %s filter needs an asynchronous or bounded-delay table, not a synchronous one", spec.Name, f.name)
		}
	}
	if spec.BoundedDelay && (spec.Sync || spec.Staleness < 0) {
		return nil, fmt.Errorf("psnode: table %s: bounded delay needs staleness >= 0 (got %d) and no Sync", spec.Name, spec.Staleness)
	}
	t := &Table[V]{ts: ts, app: tableApp(spec.Name), desc: tableDesc{
		Name: spec.Name, Elem: elemName[V](), Width: spec.Width,
		Updater: spec.Updater.Name(), StateWidth: spec.Updater.StateWidth(),
		Partitioner: spec.Partitioner, MaxKey: spec.MaxKey, Sync: spec.Sync,
	}}
	if spec.BoundedDelay {
		tau := spec.Staleness
		t.desc.Staleness = &tau
	}
	e := &tableEntry{desc: t.desc, app: t.app}
	if err := ts.add(e); err != nil {
		return nil, err
	}
	var err error
	switch n.Role() {
	case transport.RoleWorker:
		var part partition.Partitioner
		if part, err = NewPartitioner(spec.Partitioner, n.NumServers(), spec.MaxKey); err == nil {
			opts := []WorkerOption{WithPartitioner(part), withWidth(spec.Width)}
			if spec.Compress {
				opts = append(opts, WithCompression())
			} else if spec.DeltaKeys {
				opts = append(opts, WithDeltaKeys())
			}
			if spec.KeyCache {
				opts = append(opts, WithKeyCache())
			}
			t.kv, err = NewKVWorker[V](n, t.app, 0, opts...)
		}
		e.route = func(servers int) error {
			part, err := NewPartitioner(spec.Partitioner, servers, spec.MaxKey)
			if err != nil {
				return err
			}
			return t.kv.setPartitioner(part, servers)
		}
		if spec.Sync {
			e.end = t.epochCall(t.EndEpoch)
			e.shift = &t.shift
		}
		if spec.Significance > 0 || spec.KKT > 0 {
			t.sig = newResiduals[V](spec.Significance, spec.KKT, spec.Width)
		}
		switch {
		case spec.BoundedDelay:
			e.idle = t.epochCall(t.Idle) // carries what the filters held
		case t.sig != nil:
			e.idle = t.epochCall(t.flushHeld)
		}
	case transport.RoleServer:
		err = t.serve(spec, e)
	}
	if err != nil {
		ts.remove(e)
		return nil, fmt.Errorf("psnode: table %s: %w", spec.Name, err)
	}
	return t, nil
}

// add registers e, refusing a second table of the same name or app id.
func (ts *Tables) add(e *tableEntry) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, dup := ts.byName[e.desc.Name]; dup {
		return fmt.Errorf("psnode: table %s declared twice", e.desc.Name)
	}
	if o, dup := ts.byApp[e.app]; dup {
		return fmt.Errorf("psnode: tables %s and %s hash to the same app id; rename one", o.desc.Name, e.desc.Name)
	}
	ts.byName[e.desc.Name] = e
	ts.byApp[e.app] = e
	ts.tables = append(ts.tables, e)
	return nil
}

// list returns the tables declared so far, in declaration order.
func (ts *Tables) list() []*tableEntry {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.tables)
}

func (ts *Tables) remove(e *tableEntry) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.byName, e.desc.Name)
	delete(ts.byApp, e.app)
	for i, o := range ts.tables {
		if o == e {
			ts.tables = append(ts.tables[:i], ts.tables[i+1:]...)
			break
		}
	}
}

// serve makes the server side: the store and the KV server (synchronous
// or not), whose requests wait until the store is restored — from the
// checkpoint the job resumes from, or from the replicas on a server that
// replaced a dead one — however long that takes. It makes e served.
func (t *Table[V]) serve(spec TableSpec[V], e *tableEntry) error {
	n := t.ts.n
	newStore := func(rank int) (*StoreHandler[V], error) {
		st, err := NewStoreHandler[V](spec.Updater, spec.Width)
		if err != nil {
			return nil, err
		}
		st.SetInit(spec.Init)
		if r, ok := serverKeyRange(spec.Partitioner, n.NumServers(), spec.MaxKey, rank); ok {
			dense, err := st.UseKeyRange(r.Begin, r.Last)
			if err != nil {
				return nil, err
			}
			n.log.WithFields(logrus.Fields{"table": spec.Name, "keys": r.String(), "dense": dense, "partition": rank}).Debug("server key range")
		}
		return st, nil
	}
	st, err := newStore(n.Rank())
	if err != nil {
		return err
	}
	t.store = st
	handle := st.Handle
	if rp := t.ts.repl; rp != nil {
		if t.repl, err = newTableRepl(t, rp, newStore); err != nil {
			return err
		}
		if !spec.Sync && t.desc.Staleness == nil {
			handle = t.repl.handleAsync
		}
	}
	var sh *SyncHandler[V]
	if spec.Sync {
		if sh, err = NewSyncHandler(st, n.NumWorkers()); err != nil {
			return err
		}
		if t.repl != nil {
			sh.repl = t.repl.syncUpdate
		}
		handle = sh.Handle
		t.sync = sh
	}
	var ssp *SSPHandler[V]
	if t.desc.Staleness != nil {
		if ssp, err = NewSSPHandler(st, n.NumWorkers(), *t.desc.Staleness); err != nil {
			return err
		}
		handle = ssp.Handle
		t.ssp = ssp
	}
	restored := make(chan struct{})
	t.srv, err = NewKVServer[V](n, t.app, func(req *KVRequest[V], srv *KVServer[V]) {
		select {
		case <-restored:
			handle(req, srv)
		case <-n.ctx.Done():
		}
	})
	if err != nil {
		return err
	}
	if sh != nil {
		sh.WatchDeaths(n, t.srv)
		n.watchStalls(t.desc.Name, sh.blockers)
	}
	if ssp != nil {
		ssp.WatchDeaths(n, t.srv)
		n.watchStalls(t.desc.Name, ssp.blockers)
	}
	if t.repl != nil {
		t.ts.mu.Lock()
		e.repl = servedStore[V]{t}
		t.ts.mu.Unlock()
		t.ts.repl.takeHeld(e)
	}
	switch {
	case t.repl != nil && n.Self().IsRecovery:
		began := time.Now()
		if err := t.repl.restore(); err != nil {
			return err
		}
		t.ts.repl.restoring(began)
		n.log.WithFields(logrus.Fields{"table": spec.Name, "took": time.Since(began).Round(time.Millisecond).String()}).Info("table restored from its replicas")
	case t.ts.opts.ResumeFrom != "":
		if err := t.restore(); err != nil {
			return err
		}
	}
	close(restored)
	t.ts.mu.Lock()
	e.srv = servedStore[V]{t}
	close(t.ts.servedCh)
	t.ts.servedCh = make(chan struct{})
	t.ts.mu.Unlock()
	if t.repl != nil {
		t.ts.repl.announce(t.desc.Staleness == nil)
	}
	return nil
}

// Name returns the table's name.
func (t *Table[V]) Name() string { return t.desc.Name }

// Width returns the number of values per key.
func (t *Table[V]) Width() int { return t.desc.Width }

// Store returns the table's store on a server, nil elsewhere.
func (t *Table[V]) Store() *StoreHandler[V] { return t.store }

// Worker returns the table's KV worker on a worker (for PushPull and the
// other calls of KVWorker), nil elsewhere.
func (t *Table[V]) Worker() *KVWorker[V] { return t.kv }

// check verifies a push's shape and the role.
func (t *Table[V]) check(keys []uint64, vals []V) error {
	if t.kv == nil {
		return ErrNotWorker
	}
	if len(vals) != len(keys)*t.desc.Width {
		return fmt.Errorf("psnode: table %s: %d values for %d keys, want %d per key", t.desc.Name, len(vals), len(keys), t.desc.Width)
	}
	return nil
}

// Push sends Width values per key (keys sorted ascending and unique) to
// the servers, which apply them with the table's updater, and returns the
// request's timestamp for Wait. The slices may be reused once Push
// returns (what is sent is copied by then). A synchronous table takes
// PushStep instead.
func (t *Table[V]) Push(ctx context.Context, keys []uint64, vals []V, opts ...CallOption) (int32, error) {
	if err := t.check(keys, vals); err != nil {
		return 0, err
	}
	if t.desc.Sync {
		return 0, fmt.Errorf("psnode: table %s is synchronous: push with PushStep", t.desc.Name)
	}
	if t.desc.Staleness != nil {
		return 0, fmt.Errorf("psnode: table %s has bounded delay: push with PushAt", t.desc.Name)
	}
	if t.sig != nil {
		keys, vals = t.sig.filter(keys, vals)
	}
	return t.kv.Push(ctx, KVPairs[V]{Keys: keys, Vals: vals}, opts...)
}

// PushStep pushes a synchronous table's values of step (0, 1, …) of
// epoch; the push completes once every worker's part of the step is
// applied (or a worker said it is done with the epoch: EndEpoch). A
// worker with nothing to push for a step pushes no keys.
func (t *Table[V]) PushStep(ctx context.Context, epoch, step int, keys []uint64, vals []V) (int32, error) {
	if err := t.check(keys, vals); err != nil {
		return 0, err
	}
	if !t.desc.Sync {
		return 0, fmt.Errorf("psnode: table %s is not synchronous: push with Push", t.desc.Name)
	}
	step, err := t.wireStep(epoch, step)
	if err != nil {
		return 0, err
	}
	cmd, err := SyncStep(epoch, step)
	if err != nil {
		return 0, err
	}
	return t.kv.Push(ctx, KVPairs[V]{Keys: keys, Vals: vals}, WithCmd(cmd), ToAllServers())
}

// PushBatch pushes the values of a worker's mini-batch, step of epoch
// as the feed numbers them, the way the table's consistency asks:
// PushStep on a synchronous table, PushAt on a bounded-delay one, Push
// on an asynchronous one. With PullBatch, a training loop runs in every
// mode unchanged.
func (t *Table[V]) PushBatch(ctx context.Context, epoch, step int, keys []uint64, vals []V) (int32, error) {
	switch {
	case t.desc.Sync:
		return t.PushStep(ctx, epoch, step, keys, vals)
	case t.desc.Staleness != nil:
		return t.PushAt(ctx, Clock{Epoch: epoch, Step: step}, keys, vals)
	}
	return t.Push(ctx, keys, vals)
}

// PullBatch pulls the values of a worker's mini-batch, step of epoch:
// PullStep on a synchronous table, PullAt on a bounded-delay one, Pull
// on an asynchronous one.
func (t *Table[V]) PullBatch(ctx context.Context, epoch, step int, keys []uint64, vals *[]V) (int32, error) {
	switch {
	case t.desc.Sync:
		return t.PullStep(ctx, epoch, step, keys, vals)
	case t.desc.Staleness != nil:
		return t.PullAt(ctx, Clock{Epoch: epoch, Step: step}, keys, vals)
	}
	return t.Pull(ctx, keys, vals)
}

// PullStep pulls a synchronous table's values of keys for step of
// epoch into *vals: a server answers once every earlier step of the epoch
// is applied there. So the pull of step s+1 may go out before this
// worker pushes step s, and still reads exactly the weights after step
// s.
func (t *Table[V]) PullStep(ctx context.Context, epoch, step int, keys []uint64, vals *[]V) (int32, error) {
	if t.kv == nil {
		return 0, ErrNotWorker
	}
	if !t.desc.Sync {
		return 0, fmt.Errorf("psnode: table %s is not synchronous: pull with Pull", t.desc.Name)
	}
	step, err := t.wireStep(epoch, step)
	if err != nil {
		return 0, err
	}
	cmd, err := SyncStep(epoch, step)
	if err != nil {
		return 0, err
	}
	return t.kv.Pull(ctx, keys, vals, nil, t.watchPull(keys, vals, WithCmd(cmd))...)
}

// EndEpoch says this worker has no more steps in epoch of a synchronous
// table; the request completes when every worker has said so, which
// makes it an epoch barrier of the table. With several synchronous
// tables, use Tables.EndEpoch, which ends the epoch of all of them at
// once: waiting for one table's end before sending the next table's
// deadlocks with a worker that still has steps to push.
func (t *Table[V]) EndEpoch(ctx context.Context, epoch int) (int32, error) {
	if t.kv == nil {
		return 0, ErrNotWorker
	}
	if !t.desc.Sync {
		return 0, fmt.Errorf("psnode: table %s is not synchronous", t.desc.Name)
	}
	cmd, err := SyncDone(epoch)
	if err != nil {
		return 0, err
	}
	return t.kv.Push(ctx, KVPairs[V]{}, WithCmd(cmd), ToAllServers())
}

// Pull fetches the Width values of each of keys (sorted ascending and
// unique) into *vals, reusing its capacity; keys never pushed read as
// zero. *vals is filled when Wait returns without error; keys may be
// reused once Pull returns.
func (t *Table[V]) Pull(ctx context.Context, keys []uint64, vals *[]V, opts ...CallOption) (int32, error) {
	if t.kv == nil {
		return 0, ErrNotWorker
	}
	return t.kv.Pull(ctx, keys, vals, nil, t.watchPull(keys, vals, opts...)...)
}

// Wait blocks until request ts completes and returns its error (see
// KVWorker.Wait).
func (t *Table[V]) Wait(ctx context.Context, ts int32) error {
	if t.kv == nil {
		return ErrNotWorker
	}
	err := t.kv.Wait(ctx, ts)
	var re *RemoteError
	if errors.As(err, &re) && strings.Contains(re.Message, noApp) {
		// The app is the table's: name it, not its number.
		return fmt.Errorf("psnode: table %s: server %d does not serve it: every role must declare the table alike (%w)", t.desc.Name, transport.IDRank(re.Peer), err)
	}
	return err
}

// Finish ends training on every role: a barrier over every node (no
// worker pushes after it), then each server writes its part of every
// table through TablesOptions.Model. Call it once, then Node.Finalize.
//
// A server or worker drained by a scale-in (Rescale) returns from Finish
// at once, without writing anything: its keys are on the other servers.
func (ts *Tables) Finish(ctx context.Context) error {
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	retired := ts.retiredCh()
	go func() {
		select {
		case <-retired:
			cancel()
		case <-bctx.Done():
		}
	}()
	err := ts.n.Barrier(bctx, transport.AllGroups)
	select {
	case <-retired:
		return nil
	default:
	}
	if err != nil {
		return err
	}
	if ts.repl != nil {
		b := ts.n.AppBytes(replicaApp)
		ts.n.log.WithFields(logrus.Fields{"sent_bytes": b.Sent, "received_bytes": b.Received, "replicas": ts.repl.k}).Info("replication traffic")
	}
	if ts.n.Role() != transport.RoleServer || ts.opts.Model == nil {
		return nil
	}
	ectx, ecancel := context.WithTimeout(ctx, ts.opts.IOTimeout)
	defer ecancel()
	return ts.export(ectx)
}

// epochCall wraps a table's request about an epoch.
func (t *Table[V]) epochCall(req func(context.Context, int) (int32, error)) epochCall {
	return func(ctx context.Context, epoch int) (func(context.Context) error, error) {
		ts, err := req(ctx, epoch)
		return func(ctx context.Context) error { return t.Wait(ctx, ts) }, err
	}
}

// EndEpoch says this worker has no more steps in epoch, on every
// synchronous table at once (see Table.EndEpoch), and waits until every
// worker has said so. Call it on workers only.
func (ts *Tables) EndEpoch(ctx context.Context, epoch int) error {
	return ts.onEvery(ctx, epoch, "end of epoch", func(e *tableEntry) epochCall { return e.end })
}

// Idle says this worker has no step to take in epoch for now, on every
// bounded-delay table at once (see Table.Idle), sends what the
// significance and KKT filters of the other tables held back, and waits
// until every server has it all. Call it on workers only.
func (ts *Tables) Idle(ctx context.Context, epoch int) error {
	return ts.onEvery(ctx, epoch, "idle in epoch", func(e *tableEntry) epochCall { return e.idle })
}

// onEvery sends the epoch call pick gives of every table that has one,
// then waits for them all.
func (ts *Tables) onEvery(ctx context.Context, epoch int, what string, pick func(*tableEntry) epochCall) error {
	if ts.n.Role() != transport.RoleWorker {
		return ErrNotWorker
	}
	tables := ts.list()
	var waits []func(context.Context) error
	for _, e := range tables {
		call := pick(e)
		if call == nil {
			continue
		}
		w, err := call(ctx, epoch)
		if err != nil {
			return fmt.Errorf("psnode: table %s: %s %d: %w", e.desc.Name, what, epoch, err)
		}
		waits = append(waits, w)
	}
	var errs []error
	for _, w := range waits {
		if err := w(ctx); err != nil {
			errs = append(errs, fmt.Errorf("psnode: %s %d: %w", what, epoch, err))
		}
	}
	return errors.Join(errs...)
}

// Bytes returns the bytes on the wire of every table's pushes, pulls and
// their answers (Table.Bytes), as this node sent and received them.
func (ts *Tables) Bytes() AppBytes {
	tables := ts.list()
	var sum AppBytes
	for _, e := range tables {
		b := ts.n.AppBytes(e.app)
		sum.Sent += b.Sent
		sum.Received += b.Received
	}
	return sum
}

// CheckpointDue reports whether a checkpoint is due after epochs epochs
// completed, by TablesOptions.CheckpointInterval: every N epochs, or once
// the duration has passed since the last one (or since NewTables).
func (ts *Tables) CheckpointDue(epochs int) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return (ts.everyN > 0 && epochs%ts.everyN == 0) || (ts.every > 0 && time.Since(ts.lastCkp) >= ts.every)
}

// serverKeyRange returns the keys that server rank of servers holds under
// the named partitioner over [0, maxKey), when they form one range: under
// the range partitioner, or the hash partitioner with one server. A key
// space of 0 (unbounded) has none.
func serverKeyRange(kind string, servers int, maxKey uint64, rank int) (partition.Range, bool) {
	if maxKey == 0 || rank < 0 || rank >= servers {
		return partition.Range{}, false
	}
	if servers == 1 {
		return partition.Range{Begin: 0, Last: maxKey - 1}, true
	}
	part, err := NewPartitioner(kind, servers, maxKey)
	if err != nil {
		return partition.Range{}, false
	}
	rs := part.Ranges()
	if rank >= len(rs) {
		return partition.Range{}, false
	}
	return rs[rank], true
}
