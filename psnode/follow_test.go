package psnode_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// locator is the launcher's record of where the scheduler is, as the
// tracker keeps it.
type locator struct {
	mu   sync.Mutex
	addr string
}

func (l *locator) SchedulerAddr(context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr, nil
}

func (l *locator) set(addr string) {
	l.mu.Lock()
	l.addr = addr
	l.mu.Unlock()
}

// followCluster is a job whose servers and workers follow the scheduler
// through loc.
func followCluster(t *testing.T, servers, workers int, seed int64, loc *locator) *cluster {
	t.Helper()
	loc.set("scheduler:1")
	return startCluster(t, servers, workers, seed, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	}, psnode.WithSchedulerLocator(loc))
}

// killScheduler stops c's scheduler, as its process's death would.
func killScheduler(c *cluster, loc *locator) {
	_ = c.sched.Close()
	loc.set("")
}

// startReplacement starts a new scheduler at another address, as the
// launcher does, and returns once it has its table back from the
// running nodes.
func startReplacement(t *testing.T, ctx context.Context, c *cluster, loc *locator) {
	t.Helper()
	p := c.base
	p.Role, p.TaskID = conf.RoleScheduler, -1
	p.RootURI = "scheduler-again"
	c.sched = newNode(t, c.net, p, "scheduler-again")
	loc.set("scheduler-again:1")
	if err := c.sched.Start(ctx); err != nil {
		t.Fatalf("replacement scheduler: %v", err)
	}
	if !c.sched.Replaced() || !c.sched.Self().IsRecovery {
		t.Fatalf("replacement scheduler: Replaced %v, IsRecovery %v; want both", c.sched.Replaced(), c.sched.Self().IsRecovery)
	}
}

// barrierAll runs a barrier of group on each of nodes at once and
// returns their errors joined.
func barrierAll(ctx context.Context, group int32, nodes ...*psnode.Node) error {
	return eachNode(nodes, func(n *psnode.Node) error { return n.Barrier(ctx, group) })
}

// TestSchedulerReplacedWhileTheJobRuns: a job outlives its scheduler.
// While there is none, pushes and pulls go on; the new one rebuilds its
// table from the nodes, which take part in its barriers, watches their
// heartbeats, and ends the job.
func TestSchedulerReplacedWhileTheJobRuns(t *testing.T) {
	loc := &locator{}
	c := followCluster(t, 2, 2, 60, loc)
	serveSum[float32](t, c, 1)
	ctx := ctxT(t, 20*time.Second)
	if err := barrierAll(ctx, transport.AllGroups, c.all()...); err != nil {
		t.Fatalf("barrier before: %v", err)
	}

	killScheduler(c, loc)
	// No scheduler: the data path does not need one.
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := []uint64{7, 1 << 63} // one on each server
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: []float32{2, 3}})
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	var got []float32
	if err == nil {
		ts, err = kv.Pull(ctx, keys, &got, nil)
	}
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("push and pull without a scheduler: %v %v, want [2 3]", got, err)
	}
	startReplacement(t, ctx, c, loc)
	if got := len(c.sched.Nodes()); got != 5 {
		t.Fatalf("rebuilt table has %d nodes, want 5", got)
	}
	if err := barrierAll(ctx, transport.AllGroups, c.all()...); err != nil {
		t.Fatalf("barrier with the new scheduler: %v", err)
	}

	// It watches the nodes: a worker that stops answering is dead, and
	// the event says how long it had been silent, for a launcher to stop
	// its process.
	events, stop := c.sched.Subscribe()
	defer stop()
	victim := c.workers[1].ID()
	c.net.Isolate(victim)
	if ev := waitEvent(t, ctx, events, psnode.NodeDied, victim); ev.Silent <= 0 || !strings.HasPrefix(ev.Reason, "no heartbeat for") {
		t.Errorf("the isolated worker's death: %+v; want the heartbeat watch's, with how long it was silent", ev)
	}
	c.net.Heal()
	if err := barrierAll(ctx, transport.AllGroups, c.sched, c.servers[0], c.servers[1], c.workers[0]); err != nil {
		t.Fatalf("barrier without the dead worker: %v", err)
	}
}

// TestSchedulerReplacedMidRelease: the scheduler released some nodes
// from a barrier and died before it released the others. Its
// replacement learns from the released ones' rejoins that the round is
// complete and releases the others; the next round then needs everyone.
func TestSchedulerReplacedMidRelease(t *testing.T) {
	loc := &locator{}
	c := followCluster(t, 1, 2, 61, loc)
	ctx := ctxT(t, 20*time.Second)
	stuck := c.workers[1]
	stuckID := stuck.ID()
	// The old scheduler's release never reaches worker 1.
	c.net.Hook(func(m *transport.Message) bool {
		return !(m.Meta.Control.Cmd == transport.CmdBarrier && !m.Meta.Request && m.Meta.Recver == stuckID)
	})
	const group = transport.ServerGroup | transport.WorkerGroup
	done := make(chan error, 1)
	go func() { done <- stuck.Barrier(ctx, group) }()
	if err := barrierAll(ctx, group, c.servers[0], c.workers[0]); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("worker 1 released although its release was dropped (err %v)", err)
	default:
	}
	c.net.Heal()
	killScheduler(c, loc)
	startReplacement(t, ctx, c, loc)
	if err := <-done; err != nil {
		t.Fatalf("worker 1's barrier: %v", err)
	}
	// The next round waits for all three: one node alone is not let through.
	early, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.workers[0].Barrier(early, group); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a barrier with one of three nodes: %v, want a deadline", err)
	}
	if err := barrierAll(ctx, group, c.servers[0], c.workers[0], c.workers[1]); err != nil {
		t.Fatalf("next round: %v", err)
	}
}

// TestNodeWithoutLocatorDeclaresTheSchedulerDead: without a locator a
// node's barriers fail once the scheduler is gone, as before.
func TestNodeWithoutLocatorDeclaresTheSchedulerDead(t *testing.T) {
	c := startCluster(t, 1, 1, 62, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 200 * time.Millisecond
	})
	ctx := ctxT(t, 10*time.Second)
	events, stop := c.workers[0].Subscribe()
	defer stop()
	_ = c.sched.Close()
	waitEvent(t, ctx, events, psnode.NodeDied, transport.SchedulerID)
	if err := c.workers[0].Barrier(ctx, transport.ServerGroup|transport.WorkerGroup); !errors.Is(err, psnode.ErrNodeDead) {
		t.Fatalf("barrier without a scheduler: %v, want ErrNodeDead", err)
	}
}

// TestNodeReplacedWhileTheSchedulerIsDown: a worker dies while the job
// has no scheduler, and the launcher starts it again. Its new process
// registers with the new scheduler as with the old; the others, whose
// tables still name the dead process, learn of its death and of the new
// one from the rebuilt table, and work with it.
func TestNodeReplacedWhileTheSchedulerIsDown(t *testing.T) {
	loc := &locator{}
	c := followCluster(t, 1, 2, 63, loc)
	serveSum[float32](t, c, 1)
	ctx := ctxT(t, 20*time.Second)
	events, stop := c.servers[0].Subscribe()
	defer stop()
	killScheduler(c, loc)
	old := c.workers[1]
	oldID, oldRank := old.ID(), old.Rank()
	_ = old.Close()

	p := c.base
	p.Role, p.TaskID = conf.RoleWorker, oldRank // as the launcher sets DMLC_TASK_ID
	repl := newNode(t, c.net, p, "worker1-again", psnode.WithSchedulerLocator(loc))
	t.Cleanup(func() { _ = repl.Close() })
	c.workers[1] = repl
	started := make(chan error, 1)
	go func() { started <- repl.Start(ctx) }() // it finds the new scheduler through loc
	startReplacement(t, ctx, c, loc)
	if err := <-started; err != nil {
		t.Fatalf("the worker's new process: %v", err)
	}
	if repl.ID() != oldID || !repl.Self().IsRecovery {
		t.Fatalf("the worker's new process has id %d (recovery %v), want the dead one's %d", repl.ID(), repl.Self().IsRecovery, oldID)
	}
	waitEvent(t, ctx, events, psnode.NodeDied, oldID)
	waitEvent(t, ctx, events, psnode.NodeRecovered, oldID)
	pushThenPullSum[float32](t, c, []uint64{1, 2, 3}, 1, 1)
}

// TestTamperedRejoinIsRefused: a rejoin altered on the wire (here its
// barrier rounds, which would release barriers early) fails its
// authentication and is refused; the node's next, intact rejoin is
// taken, and the barriers keep their meaning.
func TestTamperedRejoinIsRefused(t *testing.T) {
	loc := &locator{}
	c := followCluster(t, 1, 2, 64, loc)
	ctx := ctxT(t, 20*time.Second)
	var tampered atomic.Int32
	c.net.Hook(func(m *transport.Message) bool {
		if m.Meta.Control.Cmd == transport.CmdAddNode && len(m.Meta.Body) > 4*int(transport.AllGroups) && tampered.Load() == 0 {
			m.Meta.Body[4*transport.AllGroups] = 100 // the round of the barrier of all groups
			tampered.Add(1)
		}
		return true
	})
	killScheduler(c, loc)
	startReplacement(t, ctx, c, loc)
	if tampered.Load() == 0 {
		t.Fatal("no rejoin went by")
	}
	early, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.workers[0].Barrier(early, transport.AllGroups); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a barrier with one of four nodes: %v, want a deadline", err)
	}
	if err := barrierAll(ctx, transport.AllGroups, c.all()...); err != nil {
		t.Fatalf("barrier with the new scheduler: %v", err)
	}
	// Every node rejoined: the tampered rejoin, sent before its node's
	// intact one, was handled before it. (The replacement starts on the
	// first node's rejoin, which need not be the tampered one.)
	if s := c.sched.Stats(); s.Refusals == 0 {
		t.Error("the tampered rejoin was not refused")
	}
}
