package psnode_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
)

// scaleKeys is the key space of the scaling tests: every worker pushes
// every key in every step, with a gradient that depends on the worker,
// the epoch, the step and the key.
const scaleKeys = 2000

func scaleBatch(rank, epoch, step int) ([]uint64, []float64) {
	keys := make([]uint64, scaleKeys)
	grads := make([]float64, scaleKeys)
	for i := range keys {
		keys[i] = uint64(i)*7919 + 1
		grads[i] = math.Sin(float64(i*13+rank*7+epoch*5+step)) / 3
	}
	return keys, grads
}

// adagradTable declares the scaling tests' table: synchronous, AdaGrad (a
// state per value that must move with the key), consistent hashing.
func adagradTable(t *testing.T, n *psnode.Node) (*psnode.Tables, *psnode.Table[float64]) {
	t.Helper()
	ts, err := psnode.NewTables(n, psnode.TablesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upd, err := store.NewUpdater[float64](store.NameAdaGrad, map[string]float64{"lr": 0.1})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := psnode.NewTable(ts, psnode.TableSpec[float64]{Name: "w", Updater: upd, Partitioner: "consistent", Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	return ts, tab
}

// scaleWorker is a worker of the scaling tests.
type scaleWorker struct {
	ts   *psnode.Tables
	tab  *psnode.Table[float64]
	rank int
}

// epoch runs steps steps of epoch on every worker and ends it.
func scaleEpoch(ctx context.Context, t *testing.T, workers []scaleWorker, epoch, steps int) {
	t.Helper()
	errs := make(chan error, len(workers))
	for _, w := range workers {
		go func() {
			errs <- func() error {
				for s := range steps {
					keys, grads := scaleBatch(w.rank, epoch, s)
					ts, err := w.tab.PushBatch(ctx, epoch, s, keys, grads)
					if err == nil {
						err = w.tab.Wait(ctx, ts)
					}
					if err != nil {
						return fmt.Errorf("worker %d, epoch %d, step %d: %w", w.rank, epoch, s, err)
					}
				}
				return w.ts.EndEpoch(ctx, epoch)
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// rescaleAll has every worker change the job's servers at epoch.
func rescaleAll(ctx context.Context, t *testing.T, workers []scaleWorker, epoch, servers int) psnode.ScaleResult {
	t.Helper()
	res := make(chan psnode.ScaleResult, len(workers))
	errs := make(chan error, len(workers))
	for _, w := range workers {
		go func() {
			r, err := w.ts.Rescale(ctx, epoch, servers, len(workers))
			res <- r
			errs <- err
		}()
	}
	var first psnode.ScaleResult
	for i := range workers {
		if err := <-errs; err != nil {
			t.Fatalf("rescale to %d servers: %v", servers, err)
		}
		if r := <-res; i == 0 {
			first = r
		}
	}
	return first
}

// pullAll reads every key through worker w.
func pullAll(ctx context.Context, t *testing.T, w scaleWorker, epoch int) []float64 {
	t.Helper()
	keys, _ := scaleBatch(0, 0, 0)
	var vals []float64
	ts, err := w.tab.PullBatch(ctx, epoch, 0, keys, &vals)
	if err == nil {
		err = w.tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// scaleJob runs three epochs of a synchronous job of 2 servers (one
// replica each) and 2 workers; with scale, it goes to 4 servers for the
// second epoch and back to 2 for the third. It returns the values read
// after the last epoch, and the two changes.
func scaleJob(t *testing.T, scale bool) ([]float64, []psnode.ScaleResult) {
	mod := func(p *conf.PS) { p.Replicas = 1 }
	c := startCluster(t, 2, 2, 611, mod)
	ctx := ctxT(t, 60*time.Second)
	var serverTables []*psnode.Tables
	for _, s := range c.servers {
		ts, _ := adagradTable(t, s)
		serverTables = append(serverTables, ts)
	}
	var workers []scaleWorker
	for _, w := range c.workers {
		ts, tab := adagradTable(t, w)
		workers = append(workers, scaleWorker{ts, tab, w.Rank()})
	}
	const steps = 3
	scaleEpoch(ctx, t, workers, 0, steps)
	var results []psnode.ScaleResult
	var joined []*psnode.Node
	if scale {
		// Both join at once: the scheduler admits them together.
		for rank := 2; rank < 4; rank++ {
			p := c.base
			p.Role, p.TaskID, p.NumServers, p.Joining = conf.RoleServer, rank, 4, true
			n := newNode(t, c.net, p, fmt.Sprintf("server%d-joins", rank))
			t.Cleanup(func() { _ = n.Close() })
			joined = append(joined, n)
		}
		if err := eachNode(joined, func(n *psnode.Node) error { return n.Start(ctx) }); err != nil {
			t.Fatal(err)
		}
		for _, n := range joined {
			rank := n.Rank()
			ts, tab := adagradTable(t, n)
			serverTables = append(serverTables, ts)
			defer func() {
				if tab.Store().Len() != 0 {
					t.Errorf("server %d still holds %d keys after it was drained", rank, tab.Store().Len())
				}
			}()
		}
		results = append(results, rescaleAll(ctx, t, workers, 1, 4))
		for _, w := range workers {
			if got := w.ts.Node().NumServers(); got != 4 {
				t.Fatalf("worker %d sees %d servers after the scale-out, want 4", w.rank, got)
			}
		}
	}
	scaleEpoch(ctx, t, workers, 1, steps)
	if scale {
		results = append(results, rescaleAll(ctx, t, workers, 2, 2))
		// The drained servers are done: Finish returns at once.
		for _, ts := range serverTables[2:] {
			if err := ts.Finish(ctx); err != nil {
				t.Fatalf("finish of a drained server: %v", err)
			}
		}
		if err := eachNode(joined, func(n *psnode.Node) error { return n.Finalize(ctx) }); err != nil {
			t.Fatalf("finalize of the drained servers: %v", err)
		}
	}
	scaleEpoch(ctx, t, workers, 2, steps)
	vals := pullAll(ctx, t, workers[0], 3)
	// Everyone finishes: the drained servers are not waited for.
	nodes := append(append([]*psnode.Node{c.sched}, c.servers...), c.workers...)
	schedTables, err := psnode.NewTables(c.sched, psnode.TablesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tables := append(serverTables[:2:2], workers[0].ts, workers[1].ts, schedTables)
	if err := eachNode(nodes, func(n *psnode.Node) error {
		for _, ts := range tables {
			if ts.Node() == n {
				return ts.Finish(ctx)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if err := eachNode(nodes, func(n *psnode.Node) error { return n.Finalize(ctx) }); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	return vals, results
}

// TestScaleOutAndBack: a synchronous job goes from 2 servers to 4 and
// back to 2 between epochs. The values and the updater state move with
// the keys, so every key ends where it would have without the changes,
// bit for bit; about half the keys move each way (consistent hashing:
// the keys of parts 2 and 3), and the drained servers hold none.
func TestScaleOutAndBack(t *testing.T) {
	want, _ := scaleJob(t, false)
	got, results := scaleJob(t, true)
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("key #%d: %v after the changes of servers, %v without", i, got[i], want[i])
		}
	}
	for i, r := range results {
		if r.Keys != scaleKeys || r.Share() < 0.45 || r.Share() > 0.55 {
			t.Errorf("change %d (%d → %d servers): moved %d of %d keys (%.3f), want about half of %d", i, r.From, r.To, r.Moved, r.Keys, r.Share(), scaleKeys)
		}
	}
	if results[0].Moved != results[1].Moved {
		t.Errorf("%d keys moved out, %d back: consistent hashing moves the same keys back", results[0].Moved, results[1].Moved)
	}
}

// TestScaleWorkersOutAndBack: a synchronous job of 2 servers goes from 2
// workers to 3 and back to 2 between epochs. Each worker adds 1 to one
// key per step: every step of every epoch waits for the part of each of
// the epoch's workers, no more, no fewer, so the key ends at the number
// of parts pushed. The worker left out is drained.
func TestScaleWorkersOutAndBack(t *testing.T) {
	c := startCluster(t, 2, 2, 612, func(p *conf.PS) { p.Replicas = 1 })
	ctx := ctxT(t, 60*time.Second)
	table := func(n *psnode.Node) (*psnode.Tables, *psnode.Table[float64]) {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tab, err := psnode.NewTable(ts, psnode.TableSpec[float64]{Name: "n", Partitioner: "consistent", Sync: true})
		if err != nil {
			t.Fatal(err)
		}
		return ts, tab
	}
	for _, s := range c.servers {
		table(s)
	}
	var workers []scaleWorker
	for _, w := range c.workers {
		ts, tab := table(w)
		workers = append(workers, scaleWorker{ts, tab, w.Rank()})
	}
	const steps = 4
	run := func(epoch int, ws []scaleWorker) {
		t.Helper()
		errs := make(chan error, len(ws))
		for _, w := range ws {
			go func() {
				errs <- func() error {
					for s := range steps {
						ts, err := w.tab.PushBatch(ctx, epoch, s, []uint64{7}, []float64{1})
						if err == nil {
							err = w.tab.Wait(ctx, ts)
						}
						if err != nil {
							return err
						}
					}
					return w.ts.EndEpoch(ctx, epoch)
				}()
			}()
		}
		for range ws {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	run(0, workers)
	p := c.base
	p.Role, p.TaskID, p.NumWorkers, p.Joining = conf.RoleWorker, 2, 3, true
	joiner := newNode(t, c.net, p, "worker2-joins")
	t.Cleanup(func() { _ = joiner.Close() })
	if err := joiner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	jts, jtab := table(joiner)
	three := append(workers, scaleWorker{jts, jtab, 2})
	rescaleWorkers := func(epoch int, ws []scaleWorker, count int) {
		t.Helper()
		errs := make(chan error, len(ws))
		for _, w := range ws {
			go func() {
				_, err := w.ts.Rescale(ctx, epoch, 2, count)
				errs <- err
			}()
		}
		for range ws {
			if err := <-errs; err != nil {
				t.Fatalf("rescale to %d workers: %v", count, err)
			}
		}
	}
	rescaleWorkers(1, three, 3)
	run(1, three)
	rescaleWorkers(2, three, 2)
	if !jts.Retired() || workers[0].ts.Retired() {
		t.Fatalf("retired: worker 2 %v, worker 0 %v; want worker 2 only", jts.Retired(), workers[0].ts.Retired())
	}
	if err := jts.Finish(ctx); err != nil {
		t.Fatalf("finish of the drained worker: %v", err)
	}
	if err := joiner.Finalize(ctx); err != nil {
		t.Fatalf("finalize of the drained worker: %v", err)
	}
	run(2, workers)
	var got []float64
	ts, err := workers[1].tab.PullBatch(ctx, 3, 0, []uint64{7}, &got)
	if err == nil {
		err = workers[1].tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := float64((2 + 3 + 2) * steps); got[0] != want {
		t.Fatalf("the key counts %v parts, want %v", got[0], want)
	}
}
