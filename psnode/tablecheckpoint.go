package psnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// The checkpoint protocol. A worker (by convention rank 0, after an epoch)
// calls Tables.Checkpoint(ctx, epochs). It sends "write checkpoint n"
// (ctlCheckpoint, body {"n": n}) to every server over the tables' control
// app; each server snapshots each of its tables under the table's lock
// and writes it through its CheckpointStore, server 0 also writes
// tables.json (the tables' specs); each answers the list of its files.
// The worker checks that every server answered for every table it
// declared and asks the committer (the tracker) to commit checkpoint n:
// the manifest is written last, so a checkpoint without it is never
// loaded. In synchronous mode no step of the next epoch can be applied
// meanwhile (it needs the caller's part), so the checkpoint is the exact
// state at the epoch's end.
const (
	ctlCheckpoint int32 = 1

	// TablesFile is the name of the file in a checkpoint that describes
	// its tables (name, element type, width, updater, partitioner).
	TablesFile = "tables.json"
	// maxTablesFile bounds TablesFile when it is read back.
	maxTablesFile = 1 << 20
)

type ckptRequest struct {
	N int `json:"n"`
	// Tables are the tables the worker declared: a server writes its
	// files once it serves every one of them.
	Tables []string `json:"tables,omitempty"`
}

type ckptTableFile struct {
	Table  string `json:"table,omitempty"` // "" for TablesFile
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// serveCtl answers the control app's requests on a server.
func (ts *Tables) serveCtl(req SimpleRequest) (int32, []byte, error) {
	switch req.Head {
	case ctlRejoin:
		return ts.serveRejoin(req)
	case ctlScaleMove, ctlScaleSettle:
		return ts.serveScale(req)
	case ctlCheckpoint:
	default:
		return 0, nil, fmt.Errorf("tables: unknown request %d", req.Head)
	}
	var r ckptRequest
	if err := json.Unmarshal(req.Body, &r); err != nil || r.N < 0 {
		return 0, nil, fmt.Errorf("tables: checkpoint request %q", req.Body)
	}
	if ts.opts.Checkpoints == nil {
		return 0, nil, errors.New("tables: this server has no checkpoint store (the job has no checkpoint directory)")
	}
	ctx, cancel := context.WithTimeout(ts.n.ctx, ts.opts.IOTimeout)
	defer cancel()
	if err := ts.waitServed(ctx, r.Tables); err != nil {
		return 0, nil, fmt.Errorf("checkpoint %d: %w", r.N, err)
	}
	files, err := ts.writeCheckpoint(ctx, r.N)
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint %d: %w", r.N, err)
	}
	body, err := json.Marshal(files)
	return ctlCheckpoint, body, err
}

// writeCheckpoint writes this server's files of checkpoint n.
func (ts *Tables) writeCheckpoint(ctx context.Context, n int) ([]ckptTableFile, error) {
	tables := ts.list()
	rank := ts.n.Rank()
	var out []ckptTableFile
	for _, e := range tables {
		if e.srv == nil {
			continue // still being declared
		}
		var f CheckpointFile
		err := e.srv.snapshot(func(s TableSnapshot) error {
			var err error
			f, err = ts.opts.Checkpoints.WriteTable(ctx, n, rank, s)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", e.desc.Name, err)
		}
		out = append(out, ckptTableFile{Table: e.desc.Name, Name: f.Name, Bytes: f.Bytes, SHA256: f.SHA256})
	}
	if rank == 0 {
		data, err := ts.describe(tables)
		if err != nil {
			return nil, err
		}
		f, err := ts.opts.Checkpoints.WriteFile(ctx, n, TablesFile, data)
		if err != nil {
			return nil, err
		}
		out = append(out, ckptTableFile{Name: f.Name, Bytes: f.Bytes, SHA256: f.SHA256})
	}
	return out, nil
}

// tablesJSON is the content of TablesFile.
type tablesJSON struct {
	Tables []tableDesc `json:"tables"`
}

func (ts *Tables) describe(tables []*tableEntry) ([]byte, error) {
	var d tablesJSON
	for _, e := range tables {
		d.Tables = append(d.Tables, e.desc)
	}
	data, err := json.MarshalIndent(d, "", "  ")
	return append(data, '\n'), err
}

// Checkpoint takes checkpoint number epochs, after epochs epochs
// completed: every server writes every table, then the committer commits
// the checkpoint; a job resumed from it starts at epoch epochs. One
// worker calls it (by convention rank 0, at the end of an epoch, when
// CheckpointDue says so); it returns once the checkpoint is committed.
func (ts *Tables) Checkpoint(ctx context.Context, epochs int) error {
	if ts.n.Role() != transport.RoleWorker {
		return fmt.Errorf("psnode: checkpoint %d: %w", epochs, ErrNotWorker)
	}
	if ts.opts.Committer == nil {
		return fmt.Errorf("psnode: checkpoint %d: no committer (TablesOptions.Committer)", epochs)
	}
	if epochs < 0 {
		return fmt.Errorf("psnode: checkpoint %d: want epochs >= 0", epochs)
	}
	body, _ := json.Marshal(ckptRequest{N: epochs, Tables: ts.names()})
	res, err := ts.callServers(ctx, ctlCheckpoint, body)
	if err != nil {
		return fmt.Errorf("psnode: checkpoint %d: %w", epochs, err)
	}
	tables := ts.list()
	c := CheckpointCommit{N: epochs, Epoch: epochs, NextEpoch: epochs}
	got := make(map[string]int) // table → servers that wrote it
	seen := make(map[int]bool)
	for _, r := range res {
		var files []ckptTableFile
		if err := json.Unmarshal(r.Body, &files); err != nil {
			return fmt.Errorf("psnode: checkpoint %d: server %d's answer: %w", epochs, r.Sender, err)
		}
		seen[transport.IDRank(r.Sender)] = true
		for _, f := range files {
			if f.Table != "" {
				got[f.Table]++
			}
			c.Files = append(c.Files, CheckpointFile{Name: f.Name, Bytes: f.Bytes, SHA256: f.SHA256})
		}
	}
	servers := ts.n.NumServers()
	if len(seen) != servers {
		return fmt.Errorf("psnode: checkpoint %d: %d of %d servers answered", epochs, len(seen), servers)
	}
	for _, e := range tables {
		if got[e.desc.Name] != servers {
			return fmt.Errorf("psnode: checkpoint %d: table %s written by %d of %d servers (declared on every server?)", epochs, e.desc.Name, got[e.desc.Name], servers)
		}
	}
	c.Partitioner, c.MaxKey = partitionerOf(tables)
	if err := ts.opts.Committer.CommitTableCheckpoint(ctx, c); err != nil {
		return fmt.Errorf("psnode: checkpoint %d: %w", epochs, err)
	}
	ts.mu.Lock()
	ts.lastCkp = time.Now()
	ts.mu.Unlock()
	return nil
}

// partitionerOf returns the partitioner the tables share, or "tables" when
// they differ (TablesFile has each table's).
func partitionerOf(tables []*tableEntry) (string, uint64) {
	if len(tables) == 0 {
		return "", 0
	}
	p, k := tables[0].desc.Partitioner, tables[0].desc.MaxKey
	for _, e := range tables[1:] {
		if e.desc.Partitioner != p || e.desc.MaxKey != k {
			return "tables", 0
		}
	}
	return p, k
}

// restore loads this server's part of the table from the checkpoint the
// job resumes from, before the table is served.
func (t *Table[V]) restore() error {
	ts := t.ts
	from := ts.opts.ResumeFrom
	if ts.opts.Checkpoints == nil {
		return fmt.Errorf("resume from %s: no checkpoint store (TablesOptions.Checkpoints)", from)
	}
	ctx, cancel := context.WithTimeout(ts.n.ctx, ts.opts.IOTimeout)
	defer cancel()
	data, err := ts.opts.Checkpoints.ReadFile(ctx, from, TablesFile, maxTablesFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resume from %s: no %s: not a checkpoint of psnode tables: %w", from, TablesFile, err)
		}
		return fmt.Errorf("resume from %s: %w", from, err)
	}
	var d tablesJSON
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("resume from %s: %s: %w", from, TablesFile, err)
	}
	var saved *tableDesc
	for i := range d.Tables {
		if d.Tables[i].Name == t.desc.Name {
			saved = &d.Tables[i]
		}
	}
	if saved == nil {
		return fmt.Errorf("resume from %s: the checkpoint has no table %s", from, t.desc.Name)
	}
	if diff := t.desc.differs(*saved); diff != "" {
		return fmt.Errorf("resume from %s: table %s was checkpointed with %s", from, t.desc.Name, diff)
	}
	w, sw := t.desc.Width, t.desc.StateWidth
	vals := make([]V, w)
	state := make([]V, w*sw)
	fw, fsw, err := ts.opts.Checkpoints.ReadTable(ctx, from, ts.n.Rank(), t.desc.Name, func(key uint64, v, s []float64) error {
		if len(v) != w || len(s) != w*sw {
			return fmt.Errorf("%d values and %d state values, want %d and %d", len(v), len(s), w, w*sw)
		}
		for i, x := range v {
			vals[i] = V(x)
		}
		for i, x := range s {
			state[i] = V(x)
		}
		return t.store.Restore(key, vals, state)
	})
	if err != nil {
		return fmt.Errorf("resume from %s: %w", from, err)
	}
	if fw != w || fsw != sw {
		return fmt.Errorf("resume from %s: table %s has %d values and %d state values per key; this server keeps %d and %d", from, t.desc.Name, fw, fsw, w, w*sw)
	}
	return nil
}

// differs names what makes a checkpointed table d unusable for e, or "".
func (e tableDesc) differs(d tableDesc) string {
	var diffs []string
	if d.Elem != e.Elem {
		diffs = append(diffs, fmt.Sprintf("element type %s (now %s)", d.Elem, e.Elem))
	}
	if d.Width != e.Width {
		diffs = append(diffs, fmt.Sprintf("width %d (now %d)", d.Width, e.Width))
	}
	if d.Updater != e.Updater || d.StateWidth != e.StateWidth {
		diffs = append(diffs, fmt.Sprintf("updater %s (now %s)", d.Updater, e.Updater))
	}
	if d.Partitioner != e.Partitioner || d.MaxKey != e.MaxKey {
		diffs = append(diffs, fmt.Sprintf("partitioner %s over %d keys (now %s over %d)", d.Partitioner, d.MaxKey, e.Partitioner, e.MaxKey))
	}
	return strings.Join(diffs, ", ")
}

// export writes this server's part of every table, holding every table
// still (after Finish's barrier nothing pushes anyway).
func (ts *Tables) export(ctx context.Context) error {
	tables := ts.list()
	var snaps []TableSnapshot
	for _, e := range tables {
		if e.srv == nil {
			continue
		}
		e.srv.lock()
		defer e.srv.unlock()
		snaps = append(snaps, e.srv.snapshotLocked())
	}
	if err := ts.opts.Model.WriteModel(ctx, ts.n.Rank(), snaps); err != nil {
		return fmt.Errorf("psnode: write the model: %w", err)
	}
	return nil
}

// servedStore is a table's servedTable.
type servedStore[V Number] struct{ t *Table[V] }

func (s servedStore[V]) lock()   { s.t.store.mu.Lock() }
func (s servedStore[V]) unlock() { s.t.store.mu.Unlock() }

func (s servedStore[V]) snapshot(fn func(TableSnapshot) error) error {
	s.lock()
	defer s.unlock()
	return fn(s.snapshotLocked())
}

func (s servedStore[V]) rejoin(worker int32, inc int64, r syncRejoin) (syncPlace, bool, error) {
	if s.t.sync == nil {
		return syncPlace{}, false, nil
	}
	p, err := s.t.sync.rejoin(worker, inc, r, s.t.srv)
	return p, true, err
}

func (s servedStore[V]) replicaUpdate(h replHeader, m *transport.Message) error {
	if s.t.repl == nil {
		return fmt.Errorf("table %s keeps no replicas here", s.t.desc.Name)
	}
	return s.t.repl.replicaUpdate(h, m)
}

func (s servedStore[V]) replicaSnapshot(part int, from int32) ([]byte, [][]byte, []transport.DataType, error) {
	if s.t.repl == nil {
		return nil, nil, nil, fmt.Errorf("table %s keeps no replicas here", s.t.desc.Name)
	}
	return s.t.repl.replicaSnapshot(part, from)
}

// snapshotLocked returns the table's snapshot; the store's lock must be
// held while it is used.
func (s servedStore[V]) scaleOut(ctx context.Context, epoch, from, to int) (int, int, error) {
	return s.t.scaleOut(ctx, epoch, from, to)
}

func (s servedStore[V]) scaleIn(epoch, servers int, m *transport.Message) error {
	return s.t.scaleIn(epoch, servers, m)
}

func (s servedStore[V]) settle(ctx context.Context) error { return s.t.settle(ctx) }

func (s servedStore[V]) rescaleSync(epoch, workers int) { s.t.rescaleSync(epoch, workers) }

func (s servedStore[V]) snapshotLocked() TableSnapshot {
	return &snapshot[V]{desc: s.t.desc, h: s.t.store}
}

// snapshot is a TableSnapshot of a StoreHandler whose lock is held.
type snapshot[V Number] struct {
	desc tableDesc
	h    *StoreHandler[V]
	keys []uint64
}

func (s *snapshot[V]) Name() string    { return s.desc.Name }
func (s *snapshot[V]) Elem() string    { return s.desc.Elem }
func (s *snapshot[V]) Width() int      { return s.desc.Width }
func (s *snapshot[V]) StateWidth() int { return s.desc.StateWidth }
func (s *snapshot[V]) Len() int        { return s.h.table.Len() }

func (s *snapshot[V]) Range(yield func(key uint64, vals, state []float64) bool) {
	if s.keys == nil {
		s.keys = s.h.table.SortedKeys()
	}
	t := s.h.table
	vals := make([]float64, s.desc.Width)
	state := make([]float64, s.desc.Width*s.desc.StateWidth)
	for _, k := range s.keys {
		slot, _ := t.Lookup(k)
		for i, v := range t.Vals(slot) {
			vals[i] = float64(v)
		}
		for i, v := range t.State(slot) {
			state[i] = float64(v)
		}
		if !yield(k, vals, state) {
			return
		}
	}
}
