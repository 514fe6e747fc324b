package zmq_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// BenchmarkPSNode runs the same operations as BenchmarkRaw through the
// whole runtime: a scheduler, the servers and one worker, each a psnode.Node
// with its own ZeroMQ transport on 127.0.0.1, in this process. Bytes are
// counted as in BenchmarkRaw (24 per value for pushpull). These server
// handlers are measured:
//
//   - handler=copy keeps values in a flat array indexed by key, the work
//     the raw loop does, so the difference from Raw is the runtime's cost
//     (meta codec, partitioning, request tracking, customer queues);
//   - handler=sum is the built-in StoreHandler with the sum updater over
//     its server's key range, as a table of the range partitioner with a
//     bounded key space gets it: keys addressed directly (UseKeyRange);
//   - handler=sum-auto is the same without the range: the table finds
//     that its keys crowd a range and lays them out densely by itself
//     (store.Table.AutoDense), as for a server of a key space whose bound
//     nobody gave;
//   - handler=sum-hash pushes keys scattered over the whole uint64 space
//     (a hash of i for i = 1..vals, sorted), as hashed feature ids are:
//     the table places them by their order (store.Table.AutoDense).
//
// allocs/msg is every allocation in the process (worker, servers and
// scheduler together) divided by the messages of an op.
func BenchmarkPSNode(b *testing.B) {
	for _, h := range []string{"copy", "sum", "sum-auto", "sum-hash"} {
		b.Run("op=pushpull/vals=1000000/servers=2/handler="+h, func(b *testing.B) { psnodePushPull(b, 1_000_000, 2, h) })
	}
	b.Run("op=rtt/keys=1/handler=copy", func(b *testing.B) { psnodeRTT(b) })
}

// mix is the splitmix64 finalizer, a bijection of uint64: mix(i) for
// i = 1..n are n distinct keys spread evenly over the key space, as
// hashed feature ids are.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// benchJob is an in-process job over ZeroMQ.
type benchJob struct {
	nodes  []*psnode.Node
	worker *psnode.Node
	kv     *psnode.KVWorker[float32]
	trs    []*zmq.Transport                // the nodes' transports, in the order of nodes
	stores []*psnode.StoreHandler[float32] // the servers' sum stores, if any
}

func discardLog() *logrus.Entry {
	l := logrus.New()
	l.Out = discardWriter{}
	return logrus.NewEntry(l)
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// startBenchJob starts a scheduler, servers (each serving app 0 with the
// named handler) and one worker, over keys [0, maxKey).
func startBenchJob(b testing.TB, servers int, maxKey uint64, handler string) *benchJob {
	b.Helper()
	base := conf.Default().PS
	base.NumServers, base.NumWorkers = servers, 1
	base.RootURI, base.RootPort = "127.0.0.1", nettest.FreePort(b)
	base.NodeHost = "127.0.0.1"
	base.MaxDimension = maxKey
	base.JobSecret = "bench"
	var trs []*zmq.Transport
	mk := func(role conf.Role, task int) *psnode.Node {
		p := base
		p.Role, p.TaskID = role, task
		tr, err := zmq.New(zmq.Options{})
		if err != nil {
			b.Fatal(err)
		}
		trs = append(trs, tr)
		n, err := psnode.New(p, tr, psnode.WithLogger(discardLog()))
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	j := &benchJob{nodes: []*psnode.Node{mk(conf.RoleScheduler, -1)}}
	for r := 0; r < servers; r++ {
		j.nodes = append(j.nodes, mk(conf.RoleServer, r))
	}
	j.worker = mk(conf.RoleWorker, 0)
	j.nodes = append(j.nodes, j.worker)
	j.trs = trs
	b.Cleanup(func() {
		for _, n := range j.nodes {
			_ = n.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(j.nodes))
	for i, n := range j.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	part, err := psnode.NewPartitioner("range", servers, maxKey)
	if err != nil {
		b.Fatal(err)
	}
	for r, n := range j.nodes[1 : 1+servers] {
		var h psnode.Handler[float32]
		switch handler {
		case "copy":
			rg := part.Ranges()[r]
			h = copyHandler(rg.Begin, make([]float32, rg.Last-rg.Begin+1))
		default:
			upd, _ := store.NewUpdater[float32]("sum", nil)
			sh, err := psnode.NewStoreHandler[float32](upd, 1)
			if err != nil {
				b.Fatal(err)
			}
			if handler == "sum" {
				rg := part.Ranges()[r]
				if dense, err := sh.UseKeyRange(rg.Begin, rg.Last); err != nil || !dense {
					b.Fatalf("UseKeyRange(%v) = %v, %v", rg, dense, err)
				}
			}
			j.stores = append(j.stores, sh)
			h = sh.Handle
		}
		if _, err := psnode.NewKVServer[float32](n, 0, h); err != nil {
			b.Fatal(err)
		}
	}
	if j.kv, err = psnode.NewKVWorker[float32](j.worker, 0, 0); err != nil {
		b.Fatal(err)
	}
	return j
}

// copyHandler stores pushed values in a flat array (key base+i at i) and
// answers pulls from it without echoing keys.
func copyHandler(base uint64, vals []float32) psnode.Handler[float32] {
	return func(req *psnode.KVRequest[float32], srv *psnode.KVServer[float32]) {
		ctx := context.Background()
		if len(req.Keys) == 0 || req.Keys[0] < base || req.Keys[len(req.Keys)-1]-base >= uint64(len(vals)) {
			_ = srv.RespondError(ctx, req, errors.New("keys outside this server's range"))
			return
		}
		lo := req.Keys[0] - base
		if req.Push {
			for i, k := range req.Keys {
				vals[k-base] = req.Vals[i]
			}
		}
		if !req.Pull {
			_ = srv.Respond(ctx, req, psnode.KVPairs[float32]{})
			return
		}
		if uint64(len(req.Keys)) == req.Keys[len(req.Keys)-1]-req.Keys[0]+1 {
			// Contiguous keys: answer from the array itself.
			_ = srv.Respond(ctx, req, psnode.KVPairs[float32]{Vals: vals[lo : lo+uint64(len(req.Keys))]})
			return
		}
		out := make([]float32, len(req.Keys))
		for i, k := range req.Keys {
			out[i] = vals[k-base]
		}
		_ = srv.Respond(ctx, req, psnode.KVPairs[float32]{Vals: out})
	}
}

func psnodePushPull(b *testing.B, vals, servers int, handler string) {
	maxKey := uint64(vals)
	keys := make([]uint64, vals)
	v := make([]float32, vals)
	for i := range keys {
		keys[i] = uint64(i)
		v[i] = float32(i)
	}
	if handler == "sum-hash" {
		maxKey = 0 // the whole uint64 space
		for i := range keys {
			keys[i] = mix(uint64(i + 1))
		}
		slices.Sort(keys)
	}
	j := startBenchJob(b, servers, maxKey, handler)
	var got []float32
	ctx := context.Background()
	op := func() {
		ts, err := j.kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: v})
		if err == nil {
			err = j.kv.Wait(ctx, ts)
		}
		if err == nil {
			ts, err = j.kv.Pull(ctx, keys, &got, nil)
		}
		if err == nil {
			err = j.kv.Wait(ctx, ts)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	op() // warm up: first inserts, connections
	for i, st := range j.stores {
		want := "dense"
		if handler == "sum-hash" {
			want = "ordered"
		}
		if got := st.Layout(); got != want {
			b.Fatalf("server %d: table layout %s, want %s", i, got, want)
		}
	}
	b.SetBytes(int64(24 * vals))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	msgs := 4 * servers // push, ack, pull, reply per server
	b.ReportMetric(float64(msgs), "msgs/op")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*msgs), "allocs/msg")
	if got[vals-1] != float32(vals-1) && handler == "copy" {
		b.Fatalf("pulled %v for key %d", got[vals-1], vals-1)
	}
}

func psnodeRTT(b *testing.B) {
	j := startBenchJob(b, 1, 1<<20, "copy")
	keys := []uint64{42}
	var got []float32
	ctx := context.Background()
	pull := func() {
		ts, err := j.kv.Pull(ctx, keys, &got, nil)
		if err == nil {
			err = j.kv.Wait(ctx, ts)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	pull()
	lat := make([]time.Duration, b.N)
	b.SetBytes(8 + 4)
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		pull()
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(2*b.N), "allocs/msg")
	reportLatency(b, lat)
}

// TestBorrowedRequests: a server's KVServer handler gets large requests
// in libzmq's own receive buffers (lent, Node.lends), and the values it
// stores and answers are right: 3,000,000 keys pushed five times into
// two sum stores (not told their ranges), then pulled, the keys of each
// server's share 12 MB and its values 6 MB, above the 4 MiB from which
// frames are lent. The worker's answers are copies: a KVWorker does not
// borrow.
func TestBorrowedRequests(t *testing.T) {
	const n, rounds = 3_000_000, 5
	j := startBenchJob(t, 2, n, "sum-hash")
	keys := make([]uint64, n)
	vals := make([]float32, n)
	for i := range keys {
		keys[i], vals[i] = uint64(i), float32(i%1000)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for range rounds {
		ts, err := j.kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: vals})
		if err == nil {
			err = j.kv.Wait(ctx, ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []float32
	ts, err := j.kv.Pull(ctx, keys, &got, nil)
	if err == nil {
		err = j.kv.Wait(ctx, ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != rounds*vals[i] {
			t.Fatalf("key %d: pulled %v, want %v", i, v, rounds*vals[i])
		}
	}
	for i, tr := range j.trs[1:3] {
		// Each push's keys and values, and the pull's keys.
		if b := tr.Stats().Borrowed; b < 2*rounds+1 {
			t.Errorf("server %d: %d frames lent, want at least %d", i, b, 2*rounds+1)
		}
	}
	if b := j.trs[3].Stats().Borrowed; b != 0 {
		t.Errorf("the worker borrowed %d frames; its answers should be copies", b)
	}
	// Every lent frame went back: the handlers returned, and the nodes
	// have stopped.
	for _, n := range j.nodes {
		_ = n.Close()
	}
	for i, tr := range j.trs {
		if out := zmq.BorrowedOut(tr); out != 0 {
			t.Errorf("node %d: %d lent frames never given back", i, out)
		}
	}
}

// TestFinalizeAnswersEveryLeave finalizes every node of a job at once,
// over and over: the scheduler answers every node's LEAVE before it
// closes, the last one's too, so that no node waits a second for an
// answer that was discarded.
func TestFinalizeAnswersEveryLeave(t *testing.T) {
	for range 10 {
		j := startBenchJob(t, 2, 100, "sum-hash")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		var wg sync.WaitGroup
		for _, n := range j.nodes {
			wg.Go(func() {
				if err := n.Finalize(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		cancel()
		for i, n := range j.nodes[1:] {
			if u := n.Stats().LeavesUnanswered; u != 0 {
				t.Fatalf("node %d: its LEAVE went unanswered", i+1)
			}
		}
	}
}
