package psnode_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// memStore keeps checkpoints and models in memory: a CheckpointStore, a
// CheckpointCommitter and a ModelWriter for tests.
type memStore struct {
	mu        sync.Mutex
	files     map[string]memFile // "<n>/<name>"
	small     map[string][]byte
	commits   []psnode.CheckpointCommit
	model     map[string][]memRow // "<table>/<rank>"
	modelMeta map[string]string   // table → "elem width"
}

type memRow struct {
	key   uint64
	vals  []float64
	state []float64
}

type memFile struct {
	width, stateWidth int
	rows              []memRow
}

func newMemStore() *memStore {
	return &memStore{files: map[string]memFile{}, small: map[string][]byte{}, model: map[string][]memRow{}, modelMeta: map[string]string{}}
}

func collect(t psnode.TableSnapshot) []memRow {
	var rows []memRow
	t.Range(func(key uint64, vals, state []float64) bool {
		rows = append(rows, memRow{key, slices.Clone(vals), slices.Clone(state)})
		return true
	})
	return rows
}

func (s *memStore) WriteTable(_ context.Context, n, rank int, t psnode.TableSnapshot) (psnode.CheckpointFile, error) {
	rows := collect(t)
	if len(rows) != t.Len() {
		return psnode.CheckpointFile{}, fmt.Errorf("range yielded %d records, Len says %d", len(rows), t.Len())
	}
	name := fmt.Sprintf("%s.server-%d", t.Name(), rank)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[fmt.Sprintf("%d/%s", n, name)] = memFile{t.Width(), t.StateWidth(), rows}
	return psnode.CheckpointFile{Name: name, Bytes: int64(len(rows)), SHA256: "x"}, nil
}

func (s *memStore) WriteFile(_ context.Context, n int, name string, data []byte) (psnode.CheckpointFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.small[fmt.Sprintf("%d/%s", n, name)] = slices.Clone(data)
	return psnode.CheckpointFile{Name: name, Bytes: int64(len(data)), SHA256: "y"}, nil
}

func (s *memStore) ReadTable(_ context.Context, from string, rank int, table string, fn func(uint64, []float64, []float64) error) (int, int, error) {
	s.mu.Lock()
	f, ok := s.files[fmt.Sprintf("%s/%s.server-%d", from, table, rank)]
	s.mu.Unlock()
	if !ok {
		return 0, 0, fmt.Errorf("no file of table %s, server %d in %s: %w", table, rank, from, fs.ErrNotExist)
	}
	for _, r := range f.rows {
		if err := fn(r.key, r.vals, r.state); err != nil {
			return 0, 0, err
		}
	}
	return f.width, f.stateWidth, nil
}

func (s *memStore) ReadFile(_ context.Context, from, name string, limit int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.small[from+"/"+name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return d, nil
}

func (s *memStore) CommitTableCheckpoint(_ context.Context, c psnode.CheckpointCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, c)
	return nil
}

func (s *memStore) WriteModel(_ context.Context, rank int, tables []psnode.TableSnapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tables {
		s.model[fmt.Sprintf("%s/%d", t.Name(), rank)] = collect(t)
		s.modelMeta[t.Name()] = fmt.Sprintf("%s %d", t.Elem(), t.Width())
	}
	return nil
}

// jobTables is one node's tables of the test job.
type jobTables struct {
	ts *psnode.Tables
	w  *psnode.Table[float32]
	v  *psnode.Table[float64]
}

// declare makes the test job's two tables on every node of c: w, one
// float32 weight per key with AdaGrad, hash-partitioned; v, a 3-wide
// float64 embedding summing pushes, range-partitioned over [0, 1000).
func declare(t *testing.T, c *cluster, st *memStore, resume string, sync bool) map[*psnode.Node]jobTables {
	t.Helper()
	out := map[*psnode.Node]jobTables{}
	for _, n := range c.all() {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{Checkpoints: st, Committer: st, Model: st, ResumeFrom: resume, CheckpointInterval: "2"})
		if err != nil {
			t.Fatal(err)
		}
		ada, _ := store.NewUpdater[float32]("adagrad", map[string]float64{"lr": 0.5})
		w, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w", Updater: ada, Partitioner: "hash", Sync: sync})
		if err != nil {
			t.Fatalf("%s: table w: %v", n.Role(), err)
		}
		v, err := psnode.NewTable(ts, psnode.TableSpec[float64]{Name: "v", Width: 3, Partitioner: "range", MaxKey: 1000, Sync: sync})
		if err != nil {
			t.Fatalf("%s: table v: %v", n.Role(), err)
		}
		out[n] = jobTables{ts, w, v}
	}
	return out
}

func wait(ctx context.Context, ts int32, err error, wait func(context.Context, int32) error) error {
	if err != nil {
		return err
	}
	return wait(ctx, ts)
}

// finish runs Finish on every node at once (it is a barrier).
func finish(t *testing.T, ctx context.Context, tabs map[*psnode.Node]jobTables) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(tabs))
	for _, jt := range tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- jt.ts.Finish(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestTablesCheckpointRestoreExport pushes to two tables of different
// widths, element types and partitioners, checkpoints them, restores a
// new job from the checkpoint and exports the model: the restored job
// pulls what the first one held, and the model holds every key once, in
// ascending order per part, with the values the workers pull.
func TestTablesCheckpointRestoreExport(t *testing.T) {
	st := newMemStore()
	ctx := ctxT(t, 30*time.Second)
	keys := []uint64{1, 7, 300, 512, 999}
	pulled := func(tabs map[*psnode.Node]jobTables, w *psnode.Node) ([]float32, []float64) {
		t.Helper()
		jt := tabs[w]
		var wv []float32
		var vv []float64
		ts, err := jt.w.Pull(ctx, keys, &wv)
		if err := wait(ctx, ts, err, jt.w.Wait); err != nil {
			t.Fatal(err)
		}
		ts, err = jt.v.Pull(ctx, keys, &vv)
		if err := wait(ctx, ts, err, jt.v.Wait); err != nil {
			t.Fatal(err)
		}
		return wv, vv
	}

	c := startCluster(t, 2, 2, 300, nil)
	tabs := declare(t, c, st, "", false)
	// v's servers hold [0, 500) and [500, 1000): their stores address
	// keys directly; w's keys are hashed over all servers.
	for _, s := range c.servers {
		if !tabs[s].v.Store().Dense() || tabs[s].w.Store().Dense() {
			t.Fatalf("server %d: v dense %v, w dense %v; want true, false", s.Rank(), tabs[s].v.Store().Dense(), tabs[s].w.Store().Dense())
		}
	}
	for i, w := range c.workers {
		jt := tabs[w]
		g := []float32{1, -1, 2, -2, float32(i + 1)}
		ts, err := jt.w.Push(ctx, keys, g)
		if err := wait(ctx, ts, err, jt.w.Wait); err != nil {
			t.Fatal(err)
		}
		var e []float64
		for k := range keys {
			e = append(e, float64(k), float64(i), 0.5)
		}
		ts, err = jt.v.Push(ctx, keys, e)
		if err := wait(ctx, ts, err, jt.v.Wait); err != nil {
			t.Fatal(err)
		}
	}
	w0, v0 := pulled(tabs, c.workers[0])
	if got := tabs[c.workers[0]].ts.CheckpointDue(1); got {
		t.Errorf("CheckpointDue(1) with interval 2 = true")
	}
	if !tabs[c.workers[0]].ts.CheckpointDue(2) {
		t.Errorf("CheckpointDue(2) with interval 2 = false")
	}
	if err := tabs[c.workers[0]].ts.Checkpoint(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if len(st.commits) != 1 {
		t.Fatalf("%d commits, want 1", len(st.commits))
	}
	cm := st.commits[0]
	var names []string
	for _, f := range cm.Files {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	want := "tables.json v.server-0 v.server-1 w.server-0 w.server-1"
	if got := strings.Join(names, " "); got != want || cm.N != 2 || cm.NextEpoch != 2 || cm.Partitioner != "tables" {
		t.Errorf("commit %+v with files %s; want checkpoint 2 of %s, partitioner \"tables\"", cm, got, want)
	}
	// Every key is in the checkpoint once, in ascending order per file.
	for _, tbl := range []string{"w", "v"} {
		n := 0
		for r := 0; r < 2; r++ {
			f := st.files[fmt.Sprintf("2/%s.server-%d", tbl, r)]
			if !slices.IsSortedFunc(f.rows, func(a, b memRow) int { return int(a.key) - int(b.key) }) {
				t.Errorf("table %s server %d: records not in key order", tbl, r)
			}
			n += len(f.rows)
		}
		if n != len(keys) {
			t.Errorf("table %s: %d records in the checkpoint, want %d", tbl, n, len(keys))
		}
	}
	c.close()

	// A new job resumes from checkpoint 2: the same values, updater state
	// included (AdaGrad's next step depends on it).
	c2 := startCluster(t, 2, 2, 301, nil)
	tabs2 := declare(t, c2, st, "2", false)
	w1, v1 := pulled(tabs2, c2.workers[1])
	if fmt.Sprint(w1) != fmt.Sprint(w0) || fmt.Sprint(v1) != fmt.Sprint(v0) {
		t.Fatalf("restored job pulls w %v v %v; the checkpointed one pulled w %v v %v", w1, v1, w0, v0)
	}
	finish(t, ctx, tabs2)
	for _, tbl := range []string{"w", "v"} {
		var got []uint64
		for r := 0; r < 2; r++ {
			rows := st.model[fmt.Sprintf("%s/%d", tbl, r)]
			for i, row := range rows {
				if i > 0 && row.key <= rows[i-1].key {
					t.Errorf("model of %s, part %d: key %d after %d", tbl, r, row.key, rows[i-1].key)
				}
				got = append(got, row.key)
			}
		}
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(keys) {
			t.Errorf("model of %s holds keys %v, want %v", tbl, got, keys)
		}
	}
	if st.modelMeta["w"] != "float32 1" || st.modelMeta["v"] != "float64 3" {
		t.Errorf("model tables %v", st.modelMeta)
	}
}

// TestTablesSyncPerTable: two synchronous tables, steps pushed by two
// workers with different step counts; each table applies a step once both
// parts (or an EndEpoch) are in, so both workers pull the same sums.
func TestTablesSyncPerTable(t *testing.T) {
	st := newMemStore()
	ctx := ctxT(t, 30*time.Second)
	c := startCluster(t, 2, 2, 302, nil)
	tabs := declare(t, c, st, "", true)
	keys := []uint64{3, 900}
	steps := []int{3, 1}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	got := make([]string, 2)
	for i, w := range c.workers {
		jt := tabs[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				if _, err := jt.v.Push(ctx, keys, make([]float64, 6)); err == nil {
					return errors.New("Push on a synchronous table accepted")
				}
				for s := 0; s < steps[i]; s++ {
					ts, err := jt.v.PushStep(ctx, 0, s, keys, []float64{1, 1, 1, 2, 2, 2})
					if err := wait(ctx, ts, err, jt.v.Wait); err != nil {
						return fmt.Errorf("v step %d: %w", s, err)
					}
					// w has nothing to push in this step: an empty part.
					ts, err = jt.w.PushStep(ctx, 0, s, nil, nil)
					if err := wait(ctx, ts, err, jt.w.Wait); err != nil {
						return fmt.Errorf("w step %d: %w", s, err)
					}
				}
				// Both tables' epoch ends at once: ending v first and
				// waiting would deadlock with worker 0, which still pushes
				// w's steps after v's.
				if err := jt.ts.EndEpoch(ctx, 0); err != nil {
					return err
				}
				var vals []float64
				ts, err := jt.v.Pull(ctx, keys, &vals)
				if err := wait(ctx, ts, err, jt.v.Wait); err != nil {
					return err
				}
				got[i] = fmt.Sprint(vals)
				return nil
			}()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Four steps' worth of parts: 3 from worker 0, 1 from worker 1.
	for i, g := range got {
		if g != "[4 4 4 8 8 8]" {
			t.Errorf("worker %d pulled %s after the epoch, want [4 4 4 8 8 8]", i, g)
		}
	}
}

func TestTablesErrors(t *testing.T) {
	st := newMemStore()
	ctx := ctxT(t, 30*time.Second)
	c := startCluster(t, 1, 1, 303, nil)
	tabs := declare(t, c, st, "", false)
	w := c.workers[0]
	ts := tabs[w].ts
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"bad name", func() error {
			_, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "W eights"})
			return err
		}(), `table name "W eights"`},
		{"declared twice", func() error {
			_, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w"})
			return err
		}(), "table w declared twice"},
		{"wrong width", func() error {
			_, err := tabs[w].v.Push(ctx, []uint64{1}, []float64{1})
			return err
		}(), "1 values for 1 keys, want 3 per key"},
		{"step on an async table", func() error {
			_, err := tabs[w].v.PushStep(ctx, 0, 0, nil, nil)
			return err
		}(), "not synchronous"},
		{"server pushes", func() error {
			_, err := tabs[c.servers[0]].w.Push(ctx, nil, nil)
			return err
		}(), psnode.ErrNotWorker.Error()},
		{"checkpoint of a table the servers lack", func() error {
			if _, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "worker-only"}); err != nil {
				return err
			}
			return ts.Checkpoint(ctx, 1)
		}(), "table worker-only written by 0 of 1 servers"},
		{"bad interval", func() error {
			_, err := psnode.NewTables(w, psnode.TablesOptions{CheckpointInterval: "0"})
			return err
		}(), `checkpoint interval "0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", tt.err, tt.want)
			}
		})
	}
}

// TestTablesRestoreRefusesAnotherSpec: a job that declares a table with
// another width or updater than its checkpoint fails to restore it,
// naming the table and the difference.
func TestTablesRestoreRefusesAnotherSpec(t *testing.T) {
	st := newMemStore()
	ctx := ctxT(t, 30*time.Second)
	c := startCluster(t, 1, 1, 304, nil)
	tabs := declare(t, c, st, "", false)
	if err := tabs[c.workers[0]].ts.Checkpoint(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.close()
	c2 := startCluster(t, 1, 1, 305, nil)
	ts, err := psnode.NewTables(c2.servers[0], psnode.TablesOptions{Checkpoints: st, ResumeFrom: "1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w", Width: 2, Partitioner: "hash"})
	if err == nil || !strings.Contains(err.Error(), "table w was checkpointed with width 1 (now 2), updater adagrad (now sum)") {
		t.Errorf("restore with another width and updater: %v", err)
	}
	_, err = psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "u"})
	if err == nil || !strings.Contains(err.Error(), "the checkpoint has no table u") {
		t.Errorf("restore of a table the checkpoint lacks: %v", err)
	}
}

// TestTablesInit: keys never pushed read as the table's Init values, the
// first push applies to them, and only pushed keys are stored.
func TestTablesInit(t *testing.T) {
	st := newMemStore()
	ctx := ctxT(t, 30*time.Second)
	c := startCluster(t, 1, 1, 306, nil)
	var emb *psnode.Table[float32]
	for _, n := range c.all() {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{Checkpoints: st, Committer: st})
		if err != nil {
			t.Fatal(err)
		}
		e, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "e", Width: 2, Init: func(k uint64, v []float32) { v[0], v[1] = float32(k), 1 }})
		if err != nil {
			t.Fatal(err)
		}
		if n == c.workers[0] {
			emb = e
		}
		if n == c.servers[0] {
			defer func() {
				if got := e.Store().Len(); got != 1 {
					t.Errorf("server stores %d keys, want only the pushed one", got)
				}
			}()
		}
	}
	pull := func(keys ...uint64) string {
		var v []float32
		ts, err := emb.Pull(ctx, keys, &v)
		if err := wait(ctx, ts, err, emb.Wait); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(v)
	}
	if got := pull(5, 9); got != "[5 1 9 1]" {
		t.Errorf("pull of keys never pushed: %s, want their init values [5 1 9 1]", got)
	}
	ts, err := emb.Push(ctx, []uint64{5}, []float32{1, 1})
	if err := wait(ctx, ts, err, emb.Wait); err != nil {
		t.Fatal(err)
	}
	if got := pull(5, 9); got != "[6 2 9 1]" {
		t.Errorf("pull after a push to key 5: %s, want [6 2 9 1]", got)
	}
}

// TestTablesDeclaredOtherwise: a worker that declares a table with
// another width or element type than the servers', or one they do not
// declare, gets an error naming the table and the difference from its
// pulls and its synchronous pushes, rather than values of the wrong shape
// or a step that never completes. (The last waits for the servers'
// grace for tables declared late, 10 s, so the test runs in parallel.)
func TestTablesDeclaredOtherwise(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 30*time.Second)
	c := startCluster(t, 2, 1, 305, nil)
	var w, x *psnode.Table[float32]
	var e *psnode.Table[float64]
	for _, n := range c.all() {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := psnode.TableSpec[float32]{Name: "w", Partitioner: "hash", Sync: true}
		if n.Role() != transport.RoleWorker {
			// The servers' w has 1 value a key, e float32 values.
			if _, err = psnode.NewTable(ts, spec); err == nil {
				spec.Name = "e"
				_, err = psnode.NewTable(ts, spec)
			}
		} else {
			spec.Width = 2
			if w, err = psnode.NewTable(ts, spec); err == nil {
				e, err = psnode.NewTable(ts, psnode.TableSpec[float64]{Name: "e", Partitioner: "hash", Sync: true})
			}
			if err == nil {
				x, err = psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "x", Partitioner: "hash"})
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	keys := []uint64{1, 2, 3, 4, 5, 6}
	var vals []float32
	ts, err := w.Pull(ctx, keys, &vals)
	if err = wait(ctx, ts, err, w.Wait); err == nil || !strings.Contains(err.Error(), "where the table has 2 per key: every role must declare the table alike") {
		t.Errorf("pull from servers of another width: %v (%d values for %d keys)", err, len(vals), len(keys))
	}
	ts, err = w.PushStep(ctx, 0, 0, keys, make([]float32, 2*len(keys)))
	if err = wait(ctx, ts, err, w.Wait); err == nil || !strings.Contains(err.Error(), ": the server keeps 1 per key") {
		t.Errorf("synchronous push to servers of another width: %v", err)
	}
	var vals64 []float64
	ts, err = e.Pull(ctx, keys, &vals64)
	if err = wait(ctx, ts, err, e.Wait); err == nil || !strings.Contains(err.Error(), "values of float32 for a table of float64: every role must declare the table alike") {
		t.Errorf("pull from servers of another element type: %v (%d values for %d keys)", err, len(vals64), len(keys))
	}
	ts, err = e.PushStep(ctx, 0, 0, keys, make([]float64, len(keys)))
	if err = wait(ctx, ts, err, e.Wait); err == nil || !strings.Contains(err.Error(), "values of float64 for a table of float32: every role must declare the table alike") {
		t.Errorf("synchronous push to servers of another element type: %v", err)
	}
	ts, err = x.Pull(ctx, keys, &vals)
	if err = wait(ctx, ts, err, x.Wait); err == nil || !strings.Contains(err.Error(), "psnode: table x: server ") ||
		!strings.Contains(err.Error(), "does not serve it: every role must declare the table alike") {
		t.Errorf("pull of a table no server declares: %v", err)
	}
}
