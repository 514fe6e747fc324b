package psnode_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
)

// counter is a synchronous table that counts batches: a worker's batch
// adds 1 to its own key on each server (3+rank on server 0, 900+rank on
// server 1, by range).
func counter(t *testing.T, n *psnode.Node) (*psnode.Tables, *psnode.Table[float64]) {
	t.Helper()
	return counterWith(t, n, psnode.TablesOptions{})
}

// counterWith is counter with the tables' options opts.
func counterWith(t *testing.T, n *psnode.Node, opts psnode.TablesOptions) (*psnode.Tables, *psnode.Table[float64]) {
	t.Helper()
	ts, err := psnode.NewTables(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := psnode.NewTable(ts, psnode.TableSpec[float64]{Name: "count", Partitioner: "range", MaxKey: 1000, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	return ts, tab
}

func batchKeys(rank int) []uint64 { return []uint64{3 + uint64(rank), 900 + uint64(rank)} }

// runBatches pushes batches [from, to) of epoch, waiting for each.
func runBatches(ctx context.Context, tab *psnode.Table[float64], rank, epoch, from, to int) error {
	for b := from; b < to; b++ {
		ts, err := tab.PushBatch(ctx, epoch, b, batchKeys(rank), []float64{1, 1})
		if err == nil {
			err = tab.Wait(ctx, ts)
		}
		if err != nil {
			return fmt.Errorf("worker %d, batch %d of epoch %d: %w", rank, b, epoch, err)
		}
	}
	return nil
}

// TestSyncWorkerRejoins kills a worker of a synchronous job mid-epoch,
// with a push of its sent but not applied: that step is applied with its
// part, the next goes on with the live worker alone, and its replacement
// rejoins after the last batch the servers received. At the end every
// batch of both workers is applied exactly once, in that epoch and the
// next.
func TestSyncWorkerRejoins(t *testing.T) {
	c := startCluster(t, 2, 2, 501, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	ctx := ctxT(t, 30*time.Second)
	type node struct {
		ts  *psnode.Tables
		tab *psnode.Table[float64]
	}
	var servers []node
	for _, s := range c.servers {
		ts, tab := counter(t, s)
		servers = append(servers, node{ts, tab})
	}
	var workers []node
	for _, w := range c.workers {
		ts, tab := counter(t, w)
		workers = append(workers, node{ts, tab})
	}
	const batches = 10
	// Both take batches 0–3 together.
	errs := make(chan error, 2)
	for i, w := range workers {
		go func() { errs <- runBatches(ctx, w.tab, c.workers[i].Rank(), 0, 0, 4) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Worker 1 sends batch 4 and the pull of the next; both servers hold
	// the pull, so they have the push, which waits for worker 0's part.
	w1 := c.workers[1]
	r1 := w1.Rank()
	if _, err := workers[1].tab.PushBatch(ctx, 0, 4, batchKeys(r1), []float64{1, 1}); err != nil {
		t.Fatal(err)
	}
	var ignored []float64
	if _, err := workers[1].tab.PullBatch(ctx, 0, 5, batchKeys(r1), &ignored); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		for s.tab.Sync().Held() != 1 {
			if ctx.Err() != nil {
				t.Fatal("the servers never held worker 1's pull")
			}
			time.Sleep(time.Millisecond) // polling a condition, with the test's deadline
		}
	}
	events, stop := c.servers[0].Subscribe()
	defer stop()
	oldID := w1.ID()
	c.net.Isolate(oldID)
	waitEvent(t, ctx, events, psnode.NodeDied, oldID)
	_ = w1.Close()
	c.net.Heal()

	// Batch 4 is applied with the part the dead worker sent; batch 5,
	// which it never sent, without it.
	r0 := c.workers[0].Rank()
	if err := runBatches(ctx, workers[0].tab, r0, 0, 4, 6); err != nil {
		t.Fatalf("a step with a dead worker: %v", err)
	}

	p := c.base
	p.Role = conf.RoleWorker
	repl := newNode(t, c.net, p, "worker1-again")
	t.Cleanup(func() { _ = repl.Close() })
	if err := repl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rts, rtab := counter(t, repl)
	res, ok, err := rts.Rejoin(ctx)
	if err != nil || !ok {
		t.Fatalf("rejoin: %v %v", ok, err)
	}
	// Batch 4 reached the servers: the replacement goes on at batch 5.
	if res != (psnode.SyncResume{Epoch: 0, Batches: 5}) {
		t.Fatalf("rejoin at %+v, want epoch 0 after 5 batches", res)
	}
	if _, err := rtab.PushBatch(ctx, 0, 4, batchKeys(r1), []float64{1, 1}); err == nil {
		t.Error("a batch the dead worker's pushes applied was accepted again")
	}
	workers[1] = node{rts, rtab}
	for i, w := range workers {
		rank, from := []int{r0, r1}[i], []int{6, 5}[i]
		go func() {
			err := runBatches(ctx, w.tab, rank, 0, from, batches)
			if err == nil {
				err = w.ts.EndEpoch(ctx, 0)
			}
			if err == nil {
				err = runBatches(ctx, w.tab, rank, 1, 0, 3)
			}
			if err == nil {
				err = w.ts.EndEpoch(ctx, 1)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var got []float64
	keys := slices.Concat(batchKeys(0), batchKeys(1))
	slices.Sort(keys)
	ts, err := rtab.Pull(ctx, keys, &got)
	if err == nil {
		err = rtab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{batches + 3, batches + 3, batches + 3, batches + 3}; !slices.Equal(got, want) {
		t.Fatalf("batches applied per worker and server %v (keys %v), want %v: each exactly once", got, keys, want)
	}
}
