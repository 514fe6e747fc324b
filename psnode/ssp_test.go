package psnode_test

import (
	"context"
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
func pullAsync(ctx context.Context, tab *psnode.Table[float32], clock int, keys []uint64) <-chan error {
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

func pushAt(t *testing.T, ctx context.Context, tab *psnode.Table[float32], clock int, keys []uint64) {
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
		t.Fatalf("push at clock %d: %v", clock, err)
	}
}

// TestBoundedDelayBlocksAtTauPlusOne: with staleness τ, the fast worker's
// pulls for clocks 0..τ are answered while the slow one has done nothing;
// its pull for clock τ+1 waits on every server until the slow worker
// completes a step, and then completes.
func TestBoundedDelayBlocksAtTauPlusOne(t *testing.T) {
	for _, tau := range []int{0, 2} {
		c := startCluster(t, 2, 2, 40+int64(tau), nil)
		tabs := sspTables(t, c, tau)
		ctx := ctxT(t, 20*time.Second)
		fast, slow := tabs[c.workers[0]], tabs[c.workers[1]]
		keys := []uint64{1, 999} // one on each server
		for clock := 0; clock <= tau; clock++ {
			if err := <-pullAsync(ctx, fast, clock, keys); err != nil {
				t.Fatalf("τ=%d: pull at clock %d, %d ahead of the slowest: %v", tau, clock, clock, err)
			}
			pushAt(t, ctx, fast, clock, keys)
		}
		pull := pullAsync(ctx, fast, tau+1, keys)
		heldOnEveryServer(t, ctx, c, tabs, 1, pull)
		pushAt(t, ctx, slow, 0, keys[:1])
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
	for clock := 0; clock < 3; clock++ {
		pushAt(t, ctx, mid, clock, keys)
	}
	pushAt(t, ctx, victim, 0, keys)
	for clock := 0; clock < 2; clock++ {
		pushAt(t, ctx, fast, clock, keys)
	}
	// fast at clock 3 is 2 ahead of the victim (clock 1): held.
	pull := pullAsync(ctx, fast, 3, keys)
	heldOnEveryServer(t, ctx, c, tabs, 1, pull)
	c.net.Isolate(c.workers[2].ID())
	if err := <-pull; err != nil {
		t.Fatalf("pull after the slowest worker died: %v", err)
	}
	// A worker that said it is done holds no one back either.
	ts, err := mid.EndClock(ctx)
	if err == nil {
		err = mid.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	// fast at clock 4, mid done at clock 3: a pull for clock 5 (τ=1)
	// passes only because mid no longer counts.
	pushAt(t, ctx, fast, 2, keys)
	pushAt(t, ctx, fast, 3, keys)
	if err := <-pullAsync(ctx, fast, 5, keys); err != nil {
		t.Fatalf("pull past a finished worker: %v", err)
	}
}
