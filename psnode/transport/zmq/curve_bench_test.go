package zmq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/launch"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// BenchmarkCurve measures what ZeroMQ CURVE costs the whole runtime: push
// then pull of vals float32 values over 2 servers, as BenchmarkPSNode's
// pushpull with the copy handler (24 bytes a value of goodput), with the
// nodes made by launch.NewNode as a job's are: CURVE off (--insecure), on
// (the default: large frames sealed beside CURVE), and CURVE alone for
// every frame (Options.NoSealed, as before sealed frames). With -count,
// the three alternate within one run. SPINDLE_BUSY_POLL=1 in the
// environment turns busy polling on for every node, as it would for a
// job's.
func BenchmarkCurve(b *testing.B) {
	for _, vals := range []int{10_000_000, 1_000_000, 1_000} {
		for _, curve := range []string{"off", "on", "only"} {
			b.Run(fmt.Sprintf("op=pushpull/vals=%d/servers=2/curve=%s", vals, curve), func(b *testing.B) {
				curvePushPull(b, vals, 2, curve)
			})
		}
	}
}

// curveJob starts a scheduler, servers servers with a copying KV handler
// and one worker, in this process, and returns the worker's KV client.
func curveJob(b *testing.B, servers, maxKey int, curve string) *psnode.KVWorker[float32] {
	b.Helper()
	port := nettest.FreePort(b)
	base := conf.Default().PS
	base.NumServers, base.NumWorkers = servers, 1
	base.RootURI, base.RootPort, base.NodeHost = "127.0.0.1", port, "127.0.0.1"
	base.MaxDimension = uint64(maxKey)
	base.JobSecret, base.Insecure = "bench secret", curve == "off"
	base.BusyPoll = os.Getenv(conf.EnvBusyPoll) == "1"
	lg := logrus.New()
	lg.Out = discardWriter{}
	log := logrus.NewEntry(lg)
	var nodes []*psnode.Node
	b.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	mk := func(role conf.Role, task int) *psnode.Node {
		p := base
		p.Role, p.TaskID = role, task
		var n *psnode.Node
		var err error
		if curve == "only" {
			n, err = curveOnlyNode(p, log)
		} else {
			n, err = launch.NewNode(p, log)
		}
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
		return n
	}
	mk(conf.RoleScheduler, -1)
	for r := range servers {
		mk(conf.RoleServer, r)
	}
	worker := mk(conf.RoleWorker, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	part, err := psnode.NewPartitioner("range", servers, uint64(maxKey))
	if err != nil {
		b.Fatal(err)
	}
	for r, n := range nodes[1 : 1+servers] {
		rg := part.Ranges()[r]
		if _, err := psnode.NewKVServer[float32](n, 0, copyHandler(rg.Begin, make([]float32, rg.Last-rg.Begin+1))); err != nil {
			b.Fatal(err)
		}
	}
	kv, err := psnode.NewKVWorker[float32](worker, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	return kv
}

// curveOnlyNode is launch.NewNode with Options.NoSealed: every frame goes
// through CURVE.
func curveOnlyNode(p conf.PS, log *logrus.Entry) (*psnode.Node, error) {
	c, err := zmq.DeriveCurve([]byte(p.JobSecret))
	if err != nil {
		return nil, err
	}
	tr, err := zmq.New(zmq.Options{WaterMark: p.WaterMark, Logger: log, Curve: c, NoSealed: true})
	if err != nil {
		return nil, err
	}
	n, err := psnode.New(p, tr, psnode.WithLogger(log))
	if err != nil {
		_ = tr.Close()
	}
	return n, err
}

func curvePushPull(b *testing.B, vals, servers int, curve string) {
	kv := curveJob(b, servers, vals, curve)
	keys := make([]uint64, vals)
	v := make([]float32, vals)
	for i := range keys {
		keys[i] = uint64(i)
		v[i] = float32(i)
	}
	var got []float32
	ctx := context.Background()
	op := func() {
		ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: v})
		if err == nil {
			err = kv.Wait(ctx, ts)
		}
		if err == nil {
			ts, err = kv.Pull(ctx, keys, &got, nil)
		}
		if err == nil {
			err = kv.Wait(ctx, ts)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	op() // warm up: connections, handshakes
	b.SetBytes(int64(24 * vals))
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	if got[vals-1] != float32(vals-1) {
		b.Fatalf("pulled %v for key %d", got[vals-1], vals-1)
	}
}
