package psnode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a job on an in-memory network.
type cluster struct {
	t       *testing.T
	net     *mem.Network
	sched   *psnode.Node
	servers []*psnode.Node
	workers []*psnode.Node
	base    conf.PS
}

// testLogger routes a node's log to t.Log, so it shows only on failure.
func testLogger(t *testing.T, name string) *logrus.Entry {
	l := logrus.New()
	l.Out = tlogWriter{t}
	l.Level = logrus.InfoLevel
	return logrus.NewEntry(l).WithField("node", name)
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func baseConfig(servers, workers int) conf.PS {
	c := conf.Default().PS
	c.NumServers, c.NumWorkers = servers, workers
	c.RootURI, c.RootPort = "scheduler", 1
	c.NodeHost = "node"
	c.JobSecret = "job-secret"
	c.HeartbeatInterval = 50 * time.Millisecond
	c.HeartbeatTimeout = 2 * time.Second
	c.RegisterTimeout = 10 * time.Second
	c.ShutdownTimeout = 5 * time.Second
	return c
}

func newNode(t *testing.T, net *mem.Network, cfg conf.PS, name string, opts ...psnode.Option) *psnode.Node {
	t.Helper()
	n, err := psnode.New(cfg, net.NewTransport(), append([]psnode.Option{psnode.WithLogger(testLogger(t, name))}, opts...)...)
	if err != nil {
		t.Fatalf("new %s: %v", name, err)
	}
	return n
}

// startCluster starts a scheduler, servers and workers and waits until
// every node has started. mod may change each node's configuration; opts
// are the servers' and workers' options.
func startCluster(t *testing.T, servers, workers int, seed int64, mod func(*conf.PS), opts ...psnode.Option) *cluster {
	t.Helper()
	c := &cluster{t: t, net: mem.NewNetwork(seed), base: baseConfig(servers, workers)}
	if mod != nil {
		mod(&c.base)
	}
	cfg := func(role conf.Role, task int) conf.PS {
		p := c.base
		p.Role, p.TaskID = role, task
		return p
	}
	c.sched = newNode(t, c.net, cfg(conf.RoleScheduler, -1), "scheduler")
	for i := 0; i < servers; i++ {
		c.servers = append(c.servers, newNode(t, c.net, cfg(conf.RoleServer, -1), fmt.Sprintf("server%d", i), opts...))
	}
	for i := 0; i < workers; i++ {
		c.workers = append(c.workers, newNode(t, c.net, cfg(conf.RoleWorker, -1), fmt.Sprintf("worker%d", i), opts...))
	}
	t.Cleanup(c.close)
	c.startAll(t, c.all())
	return c
}

func (c *cluster) all() []*psnode.Node {
	out := []*psnode.Node{c.sched}
	out = append(out, c.servers...)
	return append(out, c.workers...)
}

func (c *cluster) startAll(t *testing.T, nodes []*psnode.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := eachNode(nodes, func(n *psnode.Node) error { return n.Start(ctx) }); err != nil {
		t.Fatalf("start: %v", err)
	}
}

// eachNode runs f on every one of nodes at once and returns their errors
// joined.
func eachNode(nodes []*psnode.Node, f func(*psnode.Node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *cluster) close() {
	for _, n := range c.all() {
		_ = n.Close()
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRegistrationAssignsPsliteIDs(t *testing.T) {
	c := startCluster(t, 2, 3, 1, nil)
	if got := c.sched.ID(); got != transport.SchedulerID {
		t.Errorf("scheduler id = %d, want 1", got)
	}
	seen := map[int32]bool{}
	for _, s := range c.servers {
		id, r := s.ID(), s.Rank()
		if id != transport.ServerID(r) {
			t.Errorf("server rank %d has id %d, want %d", r, id, transport.ServerID(r))
		}
		seen[id] = true
	}
	for _, w := range c.workers {
		id, r := w.ID(), w.Rank()
		if id != transport.WorkerID(r) {
			t.Errorf("worker rank %d has id %d, want %d", r, id, transport.WorkerID(r))
		}
		seen[id] = true
	}
	for _, id := range []int32{8, 10, 9, 11, 13} {
		if !seen[id] {
			t.Errorf("no node has id %d (have %v)", id, seen)
		}
	}
	want := c.sched.Nodes()
	if len(want) != 6 {
		t.Fatalf("scheduler table has %d nodes, want 6", len(want))
	}
	for _, n := range append(c.servers, c.workers...) {
		got := n.Nodes()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("node %d table %v differs from the scheduler's %v", n.ID(), got, want)
		}
	}
}

func TestRegistrationHonoursTaskID(t *testing.T) {
	net := mem.NewNetwork(2)
	base := baseConfig(1, 3)
	var nodes []*psnode.Node
	p := base
	p.Role = conf.RoleScheduler
	nodes = append(nodes, newNode(t, net, p, "scheduler"))
	p.Role, p.TaskID = conf.RoleServer, 0
	nodes = append(nodes, newNode(t, net, p, "server"))
	for _, task := range []int{2, 0, 1} {
		p.Role, p.TaskID = conf.RoleWorker, task
		nodes = append(nodes, newNode(t, net, p, fmt.Sprintf("worker-task%d", task)))
	}
	c := &cluster{t: t, net: net}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	c.startAll(t, nodes)
	for i, task := range []int{2, 0, 1} {
		if got := nodes[2+i].Rank(); got != task {
			t.Errorf("worker with DMLC_TASK_ID=%d got rank %d", task, got)
		}
	}
}

func TestBarrierWaitsForTheWholeGroup(t *testing.T) {
	c := startCluster(t, 1, 3, 3, nil)

	// Two of three workers: the barrier must not release them.
	short := ctxT(t, 300*time.Millisecond)
	errs := make(chan error, 2)
	for _, w := range c.workers[:2] {
		go func() { errs <- w.Barrier(short, transport.WorkerGroup) }()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("barrier with a worker missing returned %v, want deadline exceeded", err)
		}
	}

	// All three: released.
	ctx := ctxT(t, 10*time.Second)
	all := make(chan error, 3)
	for _, w := range c.workers {
		go func() { all <- w.Barrier(ctx, transport.WorkerGroup) }()
	}
	for i := 0; i < 3; i++ {
		if err := <-all; err != nil {
			t.Fatalf("barrier: %v", err)
		}
	}

	// Everyone, scheduler included.
	every := make(chan error, 5)
	for _, n := range c.all() {
		go func() { every <- n.Barrier(ctx, transport.AllGroups) }()
	}
	for i := 0; i < 5; i++ {
		if err := <-every; err != nil {
			t.Fatalf("barrier over all: %v", err)
		}
	}
}

// serveSum runs a sum-aggregating KV server on every server node.
func serveSum[V psnode.Number](t *testing.T, c *cluster, dim int) []*psnode.StoreHandler[V] {
	t.Helper()
	var hs []*psnode.StoreHandler[V]
	for _, s := range c.servers {
		upd, err := store.NewUpdater[V]("sum", nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := psnode.NewStoreHandler[V](upd, dim)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := psnode.NewKVServer[V](s, 0, h.Handle); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

// pushThenPullSum has every worker push its own vector for keys, waits
// for all pushes (barrier), and checks that every worker pulls the sum.
func pushThenPullSum[V psnode.Number](t *testing.T, c *cluster, keys []uint64, dim int, rounds int, opts ...psnode.WorkerOption) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	kvw := make([]*psnode.KVWorker[V], len(c.workers))
	for i, w := range c.workers {
		var err error
		if kvw[i], err = psnode.NewKVWorker[V](w, 0, 0, opts...); err != nil {
			t.Fatal(err)
		}
	}
	vec := func(worker, round int) []V {
		v := make([]V, len(keys)*dim)
		for j := range v {
			v[j] = V(worker*1000 + j%97 + round)
		}
		return v
	}
	want := make([]V, len(keys)*dim)
	for r := 0; r < rounds; r++ {
		for i := range c.workers {
			for j, x := range vec(i, r) {
				want[j] += x
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.workers))
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				vals := vec(i, r)
				ts, err := kvw[i].Push(ctx, psnode.KVPairs[V]{Keys: keys, Vals: vals})
				// What is sent, retransmissions included, is copied by
				// the time Push returns: the buffer is the caller's again.
				clear(vals)
				if err == nil {
					err = kvw[i].Wait(ctx, ts)
				}
				if err != nil {
					errs[i] = fmt.Errorf("worker %d push round %d: %w", i, r, err)
					return
				}
			}
			if err := w.Barrier(ctx, transport.WorkerGroup); err != nil {
				errs[i] = err
				return
			}
			var got []V
			ts, err := kvw[i].Pull(ctx, keys, &got, nil)
			if err == nil {
				err = kvw[i].Wait(ctx, ts)
			}
			if err != nil {
				errs[i] = fmt.Errorf("worker %d pull: %w", i, err)
				return
			}
			if len(got) != len(want) {
				errs[i] = fmt.Errorf("worker %d pulled %d values, want %d", i, len(got), len(want))
				return
			}
			for j := range want {
				if got[j] != want[j] {
					errs[i] = fmt.Errorf("worker %d value %d (key %d) = %v, want %v", i, j, keys[j/dim], got[j], want[j])
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func spreadKeys(n int, max uint64) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i) * (max / uint64(n))
	}
	return keys
}

func TestPushPullAcrossServers(t *testing.T) {
	tests := []struct {
		name        string
		servers     int
		partitioner string
		dim         int
		f64         bool
		compress    bool
	}{
		{name: "range/float32/dim1", servers: 3, partitioner: "range", dim: 1},
		{name: "range/float64/dim4", servers: 2, partitioner: "range", dim: 4, f64: true},
		{name: "hash/float32/dim2", servers: 3, partitioner: "hash", dim: 2},
		{name: "hash/float32/dim2/compressed", servers: 3, partitioner: "hash", dim: 2, compress: true},
		{name: "range/float64/dim4/compressed", servers: 2, partitioner: "range", dim: 4, f64: true, compress: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster(t, tt.servers, 3, int64(10+i), func(p *conf.PS) {
				p.Partitioner = tt.partitioner
				p.MaxDimension = 1 << 20
			})
			keys := spreadKeys(1000, 1<<20)
			var opts []psnode.WorkerOption
			if tt.compress {
				opts = append(opts, psnode.WithCompression())
			}
			elem := 4
			if tt.f64 {
				hs := serveSum[float64](t, c, tt.dim)
				pushThenPullSum[float64](t, c, keys, tt.dim, 2, opts...)
				assertSpread(t, hs)
				elem = 8
			} else {
				hs := serveSum[float32](t, c, tt.dim)
				pushThenPullSum[float32](t, c, keys, tt.dim, 2, opts...)
				assertSpread(t, hs)
			}
			// Two pushes of keys and values and one pull of keys from
			// each worker; one pull's values back.
			sent, received := 2*len(keys)*(8+elem*tt.dim)+8*len(keys), len(keys)*elem*tt.dim
			if !tt.compress {
				assertAppBytes(t, c, 0, sent, received)
				return
			}
			// Compressed (these values repeat): under half the plain data.
			assertAppBytes(t, c, 0, 0, 0)
			for _, w := range c.workers {
				if b := w.AppBytes(0); b.Sent >= uint64(sent/2) || b.Received >= uint64(received/2) {
					t.Errorf("worker %d sent %d bytes and received %d compressed; the data alone is %d and %d", w.ID(), b.Sent, b.Received, sent, received)
				}
			}
		})
	}
}

// assertAppBytes checks app's byte counters: each worker sent at least
// minSent and received at least minReceived bytes of its data messages,
// and what the workers sent is what the servers received, and the other
// way round.
func assertAppBytes(t *testing.T, c *cluster, app int32, minSent, minReceived int) {
	t.Helper()
	sum := func(nodes []*psnode.Node) psnode.AppBytes {
		var b psnode.AppBytes
		for _, n := range nodes {
			nb := n.AppBytes(app)
			b.Sent += nb.Sent
			b.Received += nb.Received
		}
		return b
	}
	// A node counts a message it sent once Send returns, so an answer can
	// be received before its sender has counted it: wait, within a bound,
	// for the two sides to agree.
	ctx := ctxT(t, 10*time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	workers, servers := sum(c.workers), sum(c.servers)
	for workers.Sent != servers.Received || servers.Sent != workers.Received {
		select {
		case <-ctx.Done():
			t.Fatalf("app %d: workers sent %d and received %d bytes, servers received %d and sent %d", app, workers.Sent, workers.Received, servers.Received, servers.Sent)
		case <-tick.C:
		}
		workers, servers = sum(c.workers), sum(c.servers)
	}
	for _, w := range c.workers {
		if b := w.AppBytes(app); b.Sent < uint64(minSent) || b.Received < uint64(minReceived) {
			t.Errorf("worker %d: app %d sent %d bytes and received %d, want at least %d and %d", w.ID(), app, b.Sent, b.Received, minSent, minReceived)
		}
	}
	var total uint64
	for _, n := range c.all() {
		total += n.Stats().BytesSent
	}
	if total < workers.Sent+servers.Sent {
		t.Errorf("nodes sent %d bytes in all, less than the app's %d", total, workers.Sent+servers.Sent)
	}
}

// assertSpread checks that every server holds some of the keys.
func assertSpread[V psnode.Number](t *testing.T, hs []*psnode.StoreHandler[V]) {
	t.Helper()
	for i, h := range hs {
		if h.Len() == 0 {
			t.Errorf("server %d holds no keys: the partitioner did not spread the keys", i)
		}
	}
}

func TestPushPullVariableLengths(t *testing.T) {
	c := startCluster(t, 2, 2, 20, func(p *conf.PS) { p.MaxDimension = 100 })
	serveSum[float32](t, c, 1)
	ctx := ctxT(t, 20*time.Second)
	keys := []uint64{1, 7, 50, 99}
	lens := []int32{1, 3, 0, 2}
	vals := []float32{1, 2, 3, 4, 5, 6}
	for _, w := range c.workers {
		kv, err := psnode.NewKVWorker[float32](w, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: vals, Lens: lens})
		if err == nil {
			err = kv.Wait(ctx, ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	var gotLens []int32
	ts, err := kv.Pull(ctx, keys, &got, &gotLens)
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gotLens) != fmt.Sprint(lens) || fmt.Sprint(got) != fmt.Sprint([]float32{2, 4, 6, 8, 10, 12}) {
		t.Fatalf("pulled lens %v vals %v, want lens %v vals [2 4 6 8 10 12]", gotLens, got, lens)
	}
}

func TestPushRejectsUnsortedKeys(t *testing.T) {
	c := startCluster(t, 1, 1, 21, nil)
	serveSum[float32](t, c, 1)
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Push(ctxT(t, 5*time.Second), psnode.KVPairs[float32]{Keys: []uint64{5, 3}, Vals: []float32{1, 2}})
	if err == nil {
		t.Fatal("push of unsorted keys succeeded")
	}
}

func TestDeadNodeDetected(t *testing.T) {
	c := startCluster(t, 2, 2, 30, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	serveSum[float32](t, c, 1)
	events, stop := c.workers[0].Subscribe()
	defer stop()
	schedEvents, stopS := c.sched.Subscribe()
	defer stopS()

	victim := c.servers[1]
	victimID := victim.ID()
	c.net.Isolate(victimID)

	ctx := ctxT(t, 10*time.Second)
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A pull that needs the isolated server: it must fail, not hang.
	var got []float32
	ts, err := kv.Pull(ctx, []uint64{1, 1 << 63}, &got, nil)
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if !errors.Is(err, psnode.ErrNodeDead) {
		t.Fatalf("pull from a dead server: err = %v, want ErrNodeDead", err)
	}
	for _, ch := range []<-chan psnode.Event{schedEvents, events} {
		select {
		case ev := <-ch:
			if ev.Kind != psnode.NodeDied || ev.Node.ID != victimID {
				t.Fatalf("event %+v, want death of node %d", ev, victimID)
			}
		case <-ctx.Done():
			t.Fatal("no death event")
		}
	}
	if dead := c.sched.DeadNodes(); len(dead) != 1 || dead[0] != victimID {
		t.Fatalf("scheduler's dead nodes = %v, want [%d]", dead, victimID)
	}
	// The others can still synchronise: the barrier counts live nodes.
	var wg sync.WaitGroup
	errs := make([]error, 0, 4)
	var mu sync.Mutex
	for _, n := range []*psnode.Node{c.sched, c.servers[0], c.workers[0], c.workers[1]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Barrier(ctx, transport.AllGroups); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("barrier among survivors: %v", errors.Join(errs...))
	}
}

func TestRecoveredNodeTakesOverID(t *testing.T) {
	c := startCluster(t, 1, 2, 31, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	serveSum[float32](t, c, 1)
	events, stop := c.servers[0].Subscribe()
	defer stop()
	oldID := c.workers[1].ID()
	ctx := ctxT(t, 10*time.Second)
	// A recovering node joins a running job: nobody waits for it.
	repl := c.replaceWorker(t, ctx, c.servers[0], 1, -1)
	if repl.ID() != oldID {
		t.Fatalf("replacement got id %d, want the dead node's %d", repl.ID(), oldID)
	}
	if !repl.Self().IsRecovery {
		t.Error("replacement is not marked as a recovery")
	}
	waitEvent(t, ctx, events, psnode.NodeRecovered, oldID)
	pushThenPullSum[float32](t, c, []uint64{1, 2, 3}, 1, 1)
}

// TestLateReplacementFinishes: a worker dies, found by the heartbeat,
// and its new process joins as the others finish. Its first barrier
// (the end of training) meets the others' last (Finalize's); they leave,
// and its own Finalize is then released by the finalizing scheduler:
// every node's Finalize returns nil. It once waited for the scheduler
// until its shutdown bound and failed, and with it a job whose model
// the servers had written.
func TestLateReplacementFinishes(t *testing.T) {
	c := startCluster(t, 1, 2, 33, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	ctx := ctxT(t, 20*time.Second)
	repl := c.replaceWorker(t, ctx, c.sched, 1, c.workers[1].Rank())
	done := make(chan error, 3)
	for _, n := range []*psnode.Node{c.sched, c.servers[0], c.workers[0]} {
		go func() { done <- n.Finalize(ctx) }()
	}
	// The replacement's end of training, then its own Finalize.
	if err := repl.Barrier(ctx, transport.AllGroups); err != nil {
		t.Fatalf("the replacement's barrier: %v", err)
	}
	if err := repl.Finalize(ctx); err != nil {
		t.Errorf("the replacement's Finalize: %v", err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("Finalize: %v", err)
		}
	}
}

// replaceWorker makes worker i of c die, cut off until watcher hears of
// its death, and starts a new process in its place as task taskID (-1:
// any dead worker's place), which it returns once started.
func (c *cluster) replaceWorker(t *testing.T, ctx context.Context, watcher *psnode.Node, i, taskID int) *psnode.Node {
	t.Helper()
	events, stop := watcher.Subscribe()
	defer stop()
	old := c.workers[i]
	c.net.Isolate(old.ID())
	waitEvent(t, ctx, events, psnode.NodeDied, old.ID())
	_ = old.Close()
	c.net.Heal()
	p := c.base
	p.Role, p.TaskID = conf.RoleWorker, taskID
	repl := newNode(t, c.net, p, fmt.Sprintf("worker%d-again", i))
	t.Cleanup(func() { _ = repl.Close() })
	c.workers[i] = repl
	if err := repl.Start(ctx); err != nil {
		t.Fatalf("replacement start: %v", err)
	}
	return repl
}

func waitEvent(t *testing.T, ctx context.Context, ch <-chan psnode.Event, kind psnode.EventKind, id int32) psnode.Event {
	t.Helper()
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind && ev.Node.ID == id {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %v event for node %d", kind, id)
		}
	}
}

func TestResendUnderDropsAndDuplicates(t *testing.T) {
	c := startCluster(t, 2, 3, 40, func(p *conf.PS) {
		p.Resend = true
		p.ResendTimeout = 20 * time.Millisecond
		p.ResendRetries = 30
		p.MaxDimension = 1 << 16
	})
	serveSum[float32](t, c, 1)
	// 30% of every message lost, 20% duplicated, in both directions,
	// acknowledgements and heartbeats included.
	c.net.Drop(mem.Any, mem.Any, 0.3)
	c.net.Duplicate(mem.Any, mem.Any, 0.2)
	pushThenPullSum[float32](t, c, spreadKeys(200, 1<<16), 1, 5)

	var resent, dups uint64
	for _, n := range c.all() {
		s := n.Stats()
		resent += s.Resent
		dups += s.Duplicates
	}
	if resent == 0 || dups == 0 {
		t.Fatalf("resent %d, duplicates suppressed %d: the faults were not exercised", resent, dups)
	}
	t.Logf("retransmissions %d, duplicates suppressed %d, network %+v", resent, dups, c.net.Stats())
}

func TestDropMsgWithResend(t *testing.T) {
	c := startCluster(t, 1, 2, 41, func(p *conf.PS) {
		p.Resend = true
		p.ResendTimeout = 20 * time.Millisecond
		p.ResendRetries = 30
		p.DropMsg = 30
		p.DropSeed = 7
	})
	serveSum[float32](t, c, 1)
	pushThenPullSum[float32](t, c, []uint64{1, 2, 3, 4, 5}, 1, 10)
	var dropped uint64
	for _, n := range c.all() {
		dropped += n.Stats().Dropped
	}
	if dropped == 0 {
		t.Fatal("PS_DROP_MSG=30 dropped nothing")
	}
}

func TestWrongSecretIsRefused(t *testing.T) {
	net := mem.NewNetwork(50)
	base := baseConfig(1, 1)
	p := base
	p.Role = conf.RoleScheduler
	sched := newNode(t, net, p, "scheduler")
	p.Role = conf.RoleServer
	server := newNode(t, net, p, "server")
	p.Role = conf.RoleWorker
	good := newNode(t, net, p, "worker")
	p.JobSecret = "guessed"
	intruder := newNode(t, net, p, "intruder")
	nodes := []*psnode.Node{sched, server, good, intruder}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	ctx := ctxT(t, 10*time.Second)
	// The intruder registers first: it must be refused, and the job must
	// still start with the right worker.
	errc := make(chan error, 1)
	go func() { errc <- sched.Start(ctx) }()
	if err := intruder.Start(ctx); !errors.Is(err, psnode.ErrRefused) {
		t.Fatalf("intruder start: err = %v, want ErrRefused", err)
	}
	c := &cluster{t: t, net: net}
	c.startAll(t, []*psnode.Node{server, good})
	if err := <-errc; err != nil {
		t.Fatalf("scheduler start: %v", err)
	}
	if s := sched.Stats(); s.Refusals == 0 {
		t.Error("scheduler counted no refusal")
	}
	for _, n := range sched.Nodes() {
		if n.Incarnation == intruder.Self().Incarnation {
			t.Fatal("the intruder is in the node table")
		}
	}
}

func TestMessagesFromStrangersAreIgnored(t *testing.T) {
	c := startCluster(t, 1, 1, 60, nil)
	hs := serveSum[float32](t, c, 1)
	stranger := c.net.NewTransport()
	ctx := ctxT(t, 10*time.Second)
	if _, err := stranger.Listen(ctx, "stranger:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Close() })
	srv := c.servers[0].Self()
	if err := stranger.Connect(ctx, srv.ID, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	before := c.servers[0].Stats().Ignored
	keys := []uint64{42}
	vals := []float32{1e6}
	for _, sender := range []int32{99, transport.EmptyID} {
		m := &transport.Message{Meta: transport.Meta{
			Sender: sender, Recver: srv.ID, Request: true, Push: true,
			DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32},
		}, Data: [][]byte{u64bytes(keys), f32bytes(vals)}}
		if _, err := stranger.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The worker's own push goes through after the strangers' messages on
	// the same network; when it is applied, theirs have been handled.
	pushThenPullSum[float32](t, c, []uint64{42}, 1, 1)
	if got := c.servers[0].Stats().Ignored - before; got < 2 {
		t.Fatalf("server ignored %d messages from strangers, want 2", got)
	}
	if v, _ := hs[0].Get(42); len(v) != 1 || v[0] >= 1e6 {
		t.Fatalf("a stranger's push was applied: key 42 = %v", v)
	}
}

func u64bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		for j := 0; j < 8; j++ {
			b[8*i+j] = byte(x >> (8 * j))
		}
	}
	return b
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

func TestSimpleAppRequestToGroup(t *testing.T) {
	c := startCluster(t, 2, 2, 70, nil)
	for _, s := range c.servers {
		id := s.ID()
		if _, err := psnode.NewSimpleApp(s, 5, 0, func(req psnode.SimpleRequest) (int32, []byte, error) {
			if req.Head == 13 {
				return 0, nil, errors.New("unlucky head")
			}
			return req.Head + 1, append([]byte(fmt.Sprintf("server %d got ", id)), req.Body...), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	app, err := psnode.NewSimpleApp(c.workers[0], 5, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	res, err := app.Call(ctx, 1, []byte("hello"), transport.ServerGroup)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Head != 2 || string(res[1].Body) != fmt.Sprintf("server %d got hello", res[1].Sender) {
		t.Fatalf("responses %+v", res)
	}
	_, err = app.Call(ctx, 13, nil, c.servers[0].ID())
	var re *psnode.RemoteError
	if !errors.As(err, &re) || re.Message != "unlucky head" {
		t.Fatalf("error from handler: %v, want RemoteError(unlucky head)", err)
	}
}

func TestFinalizeAndCloseAreBoundedAndIdempotent(t *testing.T) {
	c := startCluster(t, 1, 2, 80, nil)
	ctx := ctxT(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, len(c.all()))
	for i, n := range c.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Finalize(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.all() {
		if err := n.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
		if err := n.Barrier(ctx, transport.AllGroups); err == nil {
			t.Error("barrier after close succeeded")
		}
	}
}

// TestPushPullAppliesUpdaters checks each built-in updater end to end: the
// weights a worker gets back from PushPull are what the same updater
// computes locally from the same gradients.
func TestPushPullAppliesUpdaters(t *testing.T) {
	for i, name := range []string{"sgd", "adagrad", "ftrl", "adam"} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, 2, 1, int64(90+i), func(p *conf.PS) { p.MaxDimension = 1 << 10 })
			const dim = 2
			for _, s := range c.servers {
				upd, err := store.NewUpdater[float64](name, nil)
				if err != nil {
					t.Fatal(err)
				}
				h, err := psnode.NewStoreHandler[float64](upd, dim)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := psnode.NewKVServer[float64](s, 0, h.Handle); err != nil {
					t.Fatal(err)
				}
			}
			kv, err := psnode.NewKVWorker[float64](c.workers[0], 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			keys := []uint64{3, 700, 1000} // on both servers
			local, err := store.NewUpdater[float64](name, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, len(keys)*dim)
			state := make([]float64, len(want)*local.StateWidth())
			ctx := ctxT(t, 10*time.Second)
			for step := 0; step < 3; step++ {
				grad := make([]float64, len(want))
				for j := range grad {
					grad[j] = float64(j+1) * 0.25 * float64(step+1)
				}
				for k := range keys {
					local.Apply(want[k*dim:(k+1)*dim], state[k*dim*local.StateWidth():(k+1)*dim*local.StateWidth()], grad[k*dim:(k+1)*dim])
				}
				var got []float64
				ts, err := kv.PushPull(ctx, psnode.KVPairs[float64]{Keys: keys, Vals: grad}, &got, nil)
				if err == nil {
					err = kv.Wait(ctx, ts)
				}
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d: server weights %v, local %v", step, got, want)
				}
			}
		})
	}
}

func TestCallbackRunsOnce(t *testing.T) {
	c := startCluster(t, 2, 1, 95, nil)
	serveSum[float32](t, c, 1)
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan error, 2)
	ctx := ctxT(t, 10*time.Second)
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: []uint64{1, 1 << 63}, Vals: []float32{1, 2}},
		psnode.WithCallback(func(err error) { calls <- err }))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Wait(ctx, ts); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-calls:
		if err != nil {
			t.Fatalf("callback got %v", err)
		}
	case <-ctx.Done():
		t.Fatal("callback not called")
	}
	if len(calls) != 0 {
		t.Fatal("callback called twice")
	}
}

// TestResendBudgetReportsPeerDead cuts a server off with heartbeats off, so
// only the resend budget can notice: the request fails with ErrNodeDead,
// the worker reports the server dead, and nothing aborts.
func TestResendBudgetReportsPeerDead(t *testing.T) {
	c := startCluster(t, 2, 1, 96, func(p *conf.PS) {
		p.Resend = true
		p.ResendTimeout = 10 * time.Millisecond
		p.ResendRetries = 3
		p.HeartbeatInterval, p.HeartbeatTimeout = 0, 0
	})
	serveSum[float32](t, c, 1)
	events, stop := c.workers[0].Subscribe()
	defer stop()
	victim := c.servers[1].ID()
	c.net.Isolate(victim)
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: []uint64{1, 1 << 63}, Vals: []float32{1, 2}})
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	var de *psnode.DeadError
	if !errors.As(err, &de) || de.ID != victim {
		t.Fatalf("push to a cut-off server: %v, want DeadError for node %d", err, victim)
	}
	waitEvent(t, ctx, events, psnode.NodeDied, victim)
	if got := c.workers[0].Stats().Resent; got < 3 {
		t.Fatalf("%d retransmissions before giving up, want the budget of 3", got)
	}
}

// TestPullValuesAreInPlaceWhenWaitReturns pulls many times through the
// hash partitioner (whose reassembly takes a while) and reads the values
// right after Wait: they must be complete, and -race must see no write
// after Wait returned.
func TestPullValuesAreInPlaceWhenWaitReturns(t *testing.T) {
	c := startCluster(t, 3, 1, 97, func(p *conf.PS) { p.Partitioner = "hash" })
	serveSum[float32](t, c, 1)
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	keys := spreadKeys(2000, 1<<40)
	vals := make([]float32, len(keys))
	for i := range vals {
		vals[i] = float32(i + 1)
	}
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: vals})
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	for round := 0; round < 100; round++ {
		got = got[:0]
		ts, err := kv.Pull(ctx, keys, &got, nil)
		// Vary when Wait comes, so that some rounds call it while the
		// answers are being put in place.
		for i := 0; i < round*20; i++ {
			runtime.Gosched()
		}
		if err == nil {
			err = kv.Wait(ctx, ts)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(keys) || got[0] != 1 || got[len(got)-1] != float32(len(keys)) {
			t.Fatalf("round %d: pulled %d values, first %v last %v", round, len(got), got[:min(1, len(got))], got[max(0, len(got)-1):])
		}
	}
}

// TestRecoveredNodeIsKnownBeforeItSends delays the scheduler's messages
// to the server, so that the server learns of a replacement worker late:
// the replacement must not be let in (its Start must not return) before
// the server knows it, or its first push would be dropped (the id still
// marked dead there) and never answered.
func TestRecoveredNodeIsKnownBeforeItSends(t *testing.T) {
	c := startCluster(t, 1, 2, 98, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	serveSum[float32](t, c, 1)
	events, stop := c.servers[0].Subscribe()
	defer stop()
	old := c.workers[1]
	oldID := old.ID()
	c.net.Isolate(oldID)
	ctx := ctxT(t, 10*time.Second)
	waitEvent(t, ctx, events, psnode.NodeDied, oldID)
	_ = old.Close()
	c.net.Heal()
	c.net.Delay(transport.SchedulerID, c.servers[0].ID(), 300*time.Millisecond)

	p := c.base
	p.Role = conf.RoleWorker
	repl := newNode(t, c.net, p, "worker1-again")
	t.Cleanup(func() { _ = repl.Close() })
	if err := repl.Start(ctx); err != nil {
		t.Fatalf("replacement start: %v", err)
	}
	kv, err := psnode.NewKVWorker[float32](repl, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	pushCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ts, err := kv.Push(pushCtx, psnode.KVPairs[float32]{Keys: []uint64{1}, Vals: []float32{1}})
	if err == nil {
		err = kv.Wait(pushCtx, ts)
	}
	if err != nil {
		t.Fatalf("the replacement's first push: %v", err)
	}
}

// TestStartWithoutServers: a job without servers (a collective job) still
// meets at the scheduler: the workers register, learn each other, hold
// barriers, and hear of a worker's death within the heartbeat timeout.
func TestStartWithoutServers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, 3, 7, nil)
	for i, w := range c.workers {
		nodes := w.Nodes()
		if len(nodes) != 4 {
			t.Fatalf("worker %d knows %d nodes, want the scheduler and 3 workers: %v", i, len(nodes), nodes)
		}
		for _, nd := range nodes {
			if nd.Role == transport.RoleServer {
				t.Errorf("worker %d knows a server: %v", i, nd)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.workers))
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Barrier(ctxT(t, 10*time.Second), transport.WorkerGroup)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("workers' barrier: %v", err)
	}
	events, stop := c.workers[0].Subscribe()
	defer stop()
	dead := c.workers[2].ID()
	_ = c.workers[2].Close()
	ctx := ctxT(t, 10*time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == psnode.NodeDied && ev.Node.ID == dead {
				return
			}
		case <-ctx.Done():
			t.Fatalf("worker 0 did not hear of worker 2's death: dead nodes %v", c.workers[0].DeadNodes())
		}
	}
}
