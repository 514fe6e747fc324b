package tracker

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/spindle-ps/spindle/tracker/internal/rpc/trackerrpc"
)

// fuzzSecret is the job secret of the calls FuzzServeFrame decodes.
const fuzzSecret = "s"

// requestFrames returns the frame bodies of one call of each method, as
// the client encodes them.
func requestFrames(f *testing.F) [][]byte {
	cfg := thriftConf()
	var out [][]byte
	call := func(do func(ctx context.Context, c *trackerrpc.TrackerClient)) {
		sent := thrift.NewTMemoryBuffer()
		oprot := thrift.NewTCompactProtocolConf(thrift.NewTFramedTransportConf(sent, cfg), cfg)
		iprot := newProtocol(thrift.NewTMemoryBuffer(), cfg) // no answer: the call fails after sending
		do(context.Background(), trackerrpc.NewTrackerClientProtocol(sent, iprot, oprot))
		b := sent.Bytes()
		if len(b) < 4 || int(binary.BigEndian.Uint32(b)) != len(b)-4 {
			f.Fatalf("request of %d bytes is not one frame", len(b))
		}
		out = append(out, append([]byte(nil), b[4:]...))
	}
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.NextShard(ctx, fuzzSecret, 0, 1, 0, 0) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) {
		c.ShardDone(ctx, fuzzSecret, 0, 1, 1, 0, 42, 0, map[string]float64{"loss_sum": 1})
	})
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.DoneShards(ctx, fuzzSecret, 0) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.Plan(ctx, fuzzSecret) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) {
		c.ReportMetrics(ctx, fuzzSecret, 0, 1, map[string]float64{"loss_sum": 2.5, "examples_count": 10})
	})
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.Status(ctx, fuzzSecret) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.Kill(ctx, fuzzSecret, "fuzz") })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) {
		c.CommitCheckpoint(ctx, fuzzSecret, &trackerrpc.Checkpoint{N: 1, Epoch: 1, NextEpoch: 1, Partitioner: "range",
			Files: []*trackerrpc.CheckpointFile{{Name: "server-0", Bytes: 3, Sha256: "00"}}}, 0)
	})
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) {
		c.ReportEvent(ctx, fuzzSecret, EventJoined, "worker 1", "ready", 5)
	})
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.Scheduler(ctx, fuzzSecret) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.Scale(ctx, fuzzSecret, 2, 3) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.View(ctx, fuzzSecret, 1) })
	call(func(ctx context.Context, c *trackerrpc.TrackerClient) { c.JoinEpoch(ctx, fuzzSecret, 1) })
	return out
}

// FuzzServeFrame: the tracker answers or refuses any frame a caller
// sends, with or without the job secret, without panicking, and decoding
// it allocates a bounded multiple of its size: no length read from it
// sizes an allocation beyond what the frame holds.
func FuzzServeFrame(f *testing.F) {
	for _, b := range requestFrames(f) {
		f.Add(b)
	}
	cfg := thriftConf()
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 {
			return
		}
		in := thrift.NewTMemoryBuffer()
		in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
		in.Write(body)
		out := thrift.NewTCompactProtocolConf(thrift.NewTFramedTransportConf(thrift.NewTMemoryBuffer(), cfg), cfg)
		h := &handler{&Service{state: NewState(shards(3), time.Now()), secret: []byte(fuzzSecret), log: quietLog(), ctx: context.Background()}}
		proc := trackerrpc.NewTrackerProcessor(h)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = proc.Process(context.Background(), newProtocol(in, cfg), out)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20+64*uint64(len(body)) {
			t.Fatalf("a frame of %d bytes made the tracker allocate %d bytes", len(body), n)
		}
	})
}
