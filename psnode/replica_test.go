package psnode_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// The tables of counter (rejoin_test.go) with three servers: a worker's
// batch adds 1 to its own key on each (3+rank, 400+rank and 900+rank, by
// range).
func batchKeys3(rank int) []uint64 {
	return []uint64{3 + uint64(rank), 400 + uint64(rank), 900 + uint64(rank)}
}

var ones3 = []float64{1, 1, 1}

// TestSyncServerReplacedFromReplicas: of three servers that keep one
// replica each, server 1 dies after it applied a step whose pushes it
// did not answer, because the step's update never reached its replica
// (the replacement must apply the step), or because the replica's
// acknowledgement never came back (the replacement must not apply it
// again); a worker's part of the next step has reached it too. Its
// replacement restores the table from the replicas and the workers send
// it what the dead process did not answer: every batch of both workers is
// applied exactly once on every server.
func TestSyncServerReplacedFromReplicas(t *testing.T) {
	for _, tt := range []struct {
		name string
		lost func(m *transport.Message, victim int32) bool
	}{
		{"update_lost", func(m *transport.Message, victim int32) bool { return m.Meta.Sender == victim && m.Meta.Request }},
		{"acknowledgement_lost", func(m *transport.Message, victim int32) bool { return m.Meta.Recver == victim && !m.Meta.Request }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replacedServer(t, func(m *transport.Message, victim int32) bool {
				return m.Meta.AppID == psnode.ReplicaApp && tt.lost(m, victim)
			})
		})
	}
}

func replacedServer(t *testing.T, lost func(m *transport.Message, victim int32) bool) {
	c := startCluster(t, 3, 2, 503, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
		p.Replicas = 1
	})
	ctx := ctxT(t, 30*time.Second)
	var victim *psnode.Node
	for _, s := range c.servers {
		counter(t, s)
		if s.Rank() == 1 {
			victim = s
		}
	}
	type worker struct {
		ts   *psnode.Tables
		tab  *psnode.Table[float64]
		rank int
	}
	var workers []worker
	for _, w := range c.workers {
		ts, tab := counter(t, w)
		workers = append(workers, worker{ts, tab, w.Rank()})
	}
	run := func(epoch, from, to int) {
		t.Helper()
		errs := make(chan error, len(workers))
		for _, w := range workers {
			go func() {
				errs <- runBatches3(ctx, w.tab, w.rank, epoch, from, to)
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	run(0, 0, 4)

	// Server 1's updates to its replica (server 2), or their
	// acknowledgements, are lost from now on.
	c.net.Hook(func(m *transport.Message) bool { return !lost(m, victim.ID()) })
	var pushes []int32
	for _, w := range workers {
		ts, err := w.tab.PushBatch(ctx, 0, 4, batchKeys3(w.rank), ones3)
		if err != nil {
			t.Fatal(err)
		}
		pushes = append(pushes, ts)
	}
	// A pull of step 5 is answered once step 4 is applied everywhere.
	var vals []float64
	w0 := workers[0]
	ts, err := w0.tab.PullBatch(ctx, 0, 5, batchKeys3(w0.rank), &vals)
	if err == nil {
		err = w0.tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatalf("pull of step 5: %v", err)
	}
	// Worker 0's part of step 5 reaches the dead-to-be server too.
	p5, err := w0.tab.PushBatch(ctx, 0, 5, batchKeys3(w0.rank), ones3)
	if err != nil {
		t.Fatal(err)
	}
	pushes = append(pushes, p5)

	kill(t, ctx, c, victim)
	counter(t, replace(t, ctx, c, 1))

	w1 := workers[1]
	p5, err = w1.tab.PushBatch(ctx, 0, 5, batchKeys3(w1.rank), ones3)
	if err != nil {
		t.Fatal(err)
	}
	pushes = append(pushes, p5)
	for i, ts := range pushes {
		w := workers[min(i, 1)]
		if i == 2 {
			w = workers[0]
		}
		if err := w.tab.Wait(ctx, ts); err != nil {
			t.Fatalf("a push outstanding when server 1 died: %v", err)
		}
	}
	run(0, 6, 10)
	errs := make(chan error, 2)
	for _, w := range workers {
		go func() { errs <- w.ts.EndEpoch(ctx, 0) }()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	run(1, 0, 3)

	keys := slices.Concat(batchKeys3(0), batchKeys3(1))
	slices.Sort(keys)
	var got []float64
	ts, err = w0.tab.Pull(ctx, keys, &got)
	if err == nil {
		err = w0.tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Repeat([]float64{13}, len(keys))
	if !slices.Equal(got, want) {
		t.Fatalf("batches applied per worker and server %v (keys %v), want %v: each exactly once", got, keys, want)
	}
}

// runBatches3 is runBatches with batchKeys3.
func runBatches3(ctx context.Context, tab *psnode.Table[float64], rank, epoch, from, to int) error {
	for b := from; b < to; b++ {
		ts, err := tab.PushBatch(ctx, epoch, b, batchKeys3(rank), ones3)
		if err == nil {
			err = tab.Wait(ctx, ts)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestCheckpointWaitsForAReplacedServer: a checkpoint asked for while a
// server whose tables have replicas is dead waits for its replacement,
// which writes its part with the values it restored, and is committed.
func TestCheckpointWaitsForAReplacedServer(t *testing.T) {
	c := startCluster(t, 3, 1, 504, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
		p.Replicas = 1
	})
	ctx := ctxT(t, 30*time.Second)
	st := newMemStore()
	opts := psnode.TablesOptions{Checkpoints: st, Committer: st}
	var victim *psnode.Node
	for _, s := range c.servers {
		counterWith(t, s, opts)
		if s.Rank() == 1 {
			victim = s
		}
	}
	w := c.workers[0]
	wts, wtab := counterWith(t, w, opts)
	if err := runBatches3(ctx, wtab, w.Rank(), 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := wts.EndEpoch(ctx, 0); err != nil {
		t.Fatal(err)
	}

	kill(t, ctx, c, victim)
	done := make(chan error, 1)
	go func() { done <- wts.Checkpoint(ctx, 1) }()
	counterWith(t, replace(t, ctx, c, 1), opts)
	if err := <-done; err != nil {
		t.Fatalf("checkpoint across a server's replacement: %v", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.commits) != 1 {
		t.Fatalf("%d checkpoints committed, want 1", len(st.commits))
	}
	f, ok := st.files["1/count.server-1"]
	if !ok || len(f.rows) != 1 || f.rows[0].key != 400+uint64(w.Rank()) || f.rows[0].vals[0] != 5 {
		t.Fatalf("the replacement's part of checkpoint 1: %+v (%v), want key %d at 5", f.rows, ok, 400+w.Rank())
	}
}

// kill cuts node n off, waits until a worker knows it dead, and closes it.
func kill(t *testing.T, ctx context.Context, c *cluster, n *psnode.Node) {
	t.Helper()
	events, stop := c.workers[0].Subscribe()
	defer stop()
	c.net.Isolate(n.ID())
	waitEvent(t, ctx, events, psnode.NodeDied, n.ID())
	_ = n.Close()
	c.net.Heal()
}

// replace starts a new process of server rank, which takes over the dead
// one's id.
func replace(t *testing.T, ctx context.Context, c *cluster, rank int) *psnode.Node {
	t.Helper()
	p := c.base
	p.Role, p.TaskID = conf.RoleServer, rank
	n := newNode(t, c.net, p, fmt.Sprintf("server%d-again", rank))
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}
