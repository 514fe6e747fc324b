package psnode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
)

// sspTables declares a bounded-delay table of staleness tau on every node.
func sspTables(t *testing.T, c *cluster, tau int) map[*psnode.Node]*psnode.Table[float32] {
	t.Helper()
	out := map[*psnode.Node]*psnode.Table[float32]{}
	for _, n := range c.all() {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tab, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w", Partitioner: "range", MaxKey: 1000, BoundedDelay: true, Staleness: tau})
		if err != nil {
			t.Fatalf("%s: %v", n.Role(), err)
		}
		out[n] = tab
	}
	return out
}

// pullAsync starts a PullAt and returns a channel that gets its result.
func pullAsync(ctx context.Context, tab *psnode.Table[float32], clock psnode.Clock, keys []uint64) <-chan error {
	done := make(chan error, 1)
	var vals []float32
	ts, err := tab.PullAt(ctx, clock, keys, &vals)
	if err != nil {
		done <- err
		return done
	}
	go func() { done <- tab.Wait(ctx, ts) }()
	return done
}

// heldOnEveryServer waits until each server holds n pulls back; it fails
// the test if pull completes meanwhile.
func heldOnEveryServer(t *testing.T, ctx context.Context, c *cluster, tabs map[*psnode.Node]*psnode.Table[float32], n int, pull <-chan error) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		held := 0
		for _, s := range c.servers {
			if tabs[s].SSP().Waiting() == n {
				held++
			}
		}
		if held == len(c.servers) {
			break
		}
		select {
		case err := <-pull:
			t.Fatalf("pull completed (err %v) while it should wait for the slowest worker", err)
		case <-ctx.Done():
			t.Fatal("the servers never held the pull back")
		case <-tick.C:
		}
	}
	select {
	case err := <-pull:
		t.Fatalf("pull completed (err %v) while the servers hold it", err)
	default:
	}
}

func pushAt(t *testing.T, ctx context.Context, tab *psnode.Table[float32], clock psnode.Clock, keys []uint64) {
	t.Helper()
	vals := make([]float32, len(keys))
	for i := range vals {
		vals[i] = 1
	}
	ts, err := tab.PushAt(ctx, clock, keys, vals)
	if err == nil {
		err = tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatalf("push at %+v: %v", clock, err)
	}
}

// step is step s of epoch 0.
func step(s int) psnode.Clock { return psnode.Clock{Step: s} }

func idle(t *testing.T, ctx context.Context, tab *psnode.Table[float32], epoch int) {
	t.Helper()
	ts, err := tab.Idle(ctx, epoch)
	if err == nil {
		err = tab.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatalf("idle in epoch %d: %v", epoch, err)
	}
}

// TestBoundedDelayBlocksAtTauPlusOne: with staleness τ, the fast worker's
// pulls for steps 0..τ are answered while the slow one has done nothing;
// its pull for step τ+1 waits on every server until the slow worker
// completes a step, and then completes.
func TestBoundedDelayBlocksAtTauPlusOne(t *testing.T) {
	for _, tau := range []int{0, 2} {
		c := startCluster(t, 2, 2, 40+int64(tau), nil)
		tabs := sspTables(t, c, tau)
		ctx := ctxT(t, 20*time.Second)
		fast, slow := tabs[c.workers[0]], tabs[c.workers[1]]
		keys := []uint64{1, 999} // one on each server
		for s := 0; s <= tau; s++ {
			if err := <-pullAsync(ctx, fast, step(s), keys); err != nil {
				t.Fatalf("τ=%d: pull at step %d, %d ahead of the slowest: %v", tau, s, s, err)
			}
			pushAt(t, ctx, fast, step(s), keys)
		}
		pull := pullAsync(ctx, fast, step(tau+1), keys)
		heldOnEveryServer(t, ctx, c, tabs, 1, pull)
		pushAt(t, ctx, slow, step(0), keys[:1])
		if err := <-pull; err != nil {
			t.Fatalf("τ=%d: pull after the slowest advanced: %v", tau, err)
		}
		for _, s := range c.servers {
			if n := tabs[s].SSP().Waiting(); n != 0 {
				t.Fatalf("τ=%d: server still holds %d pulls", tau, n)
			}
		}
		c.close()
	}
}

// TestBoundedDelayAcrossEpochs: workers take different numbers of steps
// in an epoch. One with no shard left (Idle) holds no one back in that
// epoch, and counts as being at step 0 of the next until it pushes there.
func TestBoundedDelayAcrossEpochs(t *testing.T) {
	c := startCluster(t, 2, 2, 47, nil)
	tabs := sspTables(t, c, 1)
	ctx := ctxT(t, 20*time.Second)
	a, b := tabs[c.workers[0]], tabs[c.workers[1]]
	keys := []uint64{1, 999}
	for s := 0; s < 3; s++ {
		pushAt(t, ctx, a, step(s), keys)
	}
	pushAt(t, ctx, b, step(0), keys)
	// a at step 3 of epoch 0 is 2 ahead of b: held until b is idle.
	pull := pullAsync(ctx, a, step(3), keys)
	heldOnEveryServer(t, ctx, c, tabs, 1, pull)
	idle(t, ctx, b, 0)
	if err := <-pull; err != nil {
		t.Fatalf("pull after the slower worker ran out of shards: %v", err)
	}
	// Epoch 1: a runs ahead; b, idle in epoch 0, is at step 0 of epoch 1.
	idle(t, ctx, a, 0)
	for s := 0; s < 2; s++ {
		if err := <-pullAsync(ctx, a, psnode.Clock{Epoch: 1, Step: s}, keys); err != nil {
			t.Fatalf("pull at step %d of epoch 1: %v", s, err)
		}
		pushAt(t, ctx, a, psnode.Clock{Epoch: 1, Step: s}, keys)
	}
	pull = pullAsync(ctx, a, psnode.Clock{Epoch: 1, Step: 2}, keys)
	heldOnEveryServer(t, ctx, c, tabs, 1, pull)
	pushAt(t, ctx, b, psnode.Clock{Epoch: 1, Step: 0}, keys)
	if err := <-pull; err != nil {
		t.Fatalf("pull after the other worker began epoch 1: %v", err)
	}
	// A worker already in the next epoch holds no one back: b, still in
	// epoch 1, may run ahead of nothing but itself.
	idle(t, ctx, a, 1)
	pushAt(t, ctx, a, psnode.Clock{Epoch: 2, Step: 0}, keys)
	for s := 1; s < 5; s++ {
		if err := <-pullAsync(ctx, b, psnode.Clock{Epoch: 1, Step: s}, keys); err != nil {
			t.Fatalf("b's pull at step %d of epoch 1 with a in epoch 2: %v", s, err)
		}
		pushAt(t, ctx, b, psnode.Clock{Epoch: 1, Step: s}, keys)
	}
}

// TestBoundedDelayDeadWorkerReleases: a pull held back by a worker that
// then dies completes once the servers learn of the death.
func TestBoundedDelayDeadWorkerReleases(t *testing.T) {
	c := startCluster(t, 2, 3, 45, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	tabs := sspTables(t, c, 1)
	ctx := ctxT(t, 20*time.Second)
	fast, mid, victim := tabs[c.workers[0]], tabs[c.workers[1]], tabs[c.workers[2]]
	keys := []uint64{1, 999}
	for s := 0; s < 3; s++ {
		pushAt(t, ctx, mid, step(s), keys)
	}
	pushAt(t, ctx, victim, step(0), keys)
	for s := 0; s < 2; s++ {
		pushAt(t, ctx, fast, step(s), keys)
	}
	// fast at step 3 is 2 ahead of the victim (1 step done): held.
	pull := pullAsync(ctx, fast, step(3), keys)
	heldOnEveryServer(t, ctx, c, tabs, 1, pull)
	c.net.Isolate(c.workers[2].ID())
	if err := <-pull; err != nil {
		t.Fatalf("pull after the slowest worker died: %v", err)
	}
}

// TestBatchCallsInEveryMode: PushBatch and PullBatch train the same loop
// on a synchronous, a bounded-delay and an asynchronous table, and
// Tables.EndEpoch and Tables.Idle end an epoch in the modes that need it.
// Two workers push 1 for each key in each of their batches (3 and 2);
// afterwards every key reads 5.
func TestBatchCallsInEveryMode(t *testing.T) {
	for _, mode := range []string{"sync", "bounded", "async"} {
		t.Run(mode, func(t *testing.T) {
			c := startCluster(t, 2, 2, 48, nil)
			ctx := ctxT(t, 20*time.Second)
			tabs := map[*psnode.Node]*psnode.Table[float32]{}
			sets := map[*psnode.Node]*psnode.Tables{}
			for _, n := range c.all() {
				ts, err := psnode.NewTables(n, psnode.TablesOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tab, err := psnode.NewTable(ts, psnode.TableSpec[float32]{
					Name: "w", Partitioner: "range", MaxKey: 1000,
					Sync: mode == "sync", BoundedDelay: mode == "bounded", Staleness: 1,
				})
				if err != nil {
					t.Fatal(err)
				}
				tabs[n], sets[n] = tab, ts
			}
			keys := []uint64{1, 999}
			errs := make(chan error, 2)
			for i, w := range c.workers {
				go func() {
					errs <- func() error {
						tab := tabs[w]
						for s := 0; s < 3-i; s++ {
							var vals []float32
							ts, err := tab.PullBatch(ctx, 0, s, keys, &vals)
							if err == nil {
								err = tab.Wait(ctx, ts)
							}
							if err != nil {
								return fmt.Errorf("worker %d pull of batch %d: %w", i, s, err)
							}
							if ts, err = tab.PushBatch(ctx, 0, s, keys, []float32{1, 1}); err == nil {
								err = tab.Wait(ctx, ts)
							}
							if err != nil {
								return fmt.Errorf("worker %d push of batch %d: %w", i, s, err)
							}
						}
						if err := sets[w].Idle(ctx, 0); err != nil {
							return err
						}
						return sets[w].EndEpoch(ctx, 0)
					}()
				}()
			}
			for range c.workers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			var got []float32
			tab := tabs[c.workers[0]]
			ts, err := tab.Pull(ctx, keys, &got)
			if err == nil {
				err = tab.Wait(ctx, ts)
			}
			if err != nil || got[0] != 5 || got[1] != 5 {
				t.Fatalf("after both workers: %v, %v; want [5 5]", got, err)
			}
		})
	}
}
