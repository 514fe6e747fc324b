package collective_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
)

// BenchmarkAllReduce runs AllReduce of float32 buffers of M bytes over N
// worker processes (a scheduler and N workers, each its own process, over
// ZeroMQ on 127.0.0.1), and in the same processes a raw ring: PUSH/PULL
// sockets of pebbe/zmq4 moving the same chunks along the same ring in
// the same order (each chunk forwarded once received), without psnode,
// headers or arithmetic. Each iteration runs one raw pass and one
// AllReduce, one after the other, so that both see the same load on a
// shared machine. Metrics:
//
//   - MB/s: the AllReduce's goodput, M bytes per op; raw-MB/s: the raw
//     ring's, M bytes per pass; vs-raw: the first over the second;
//   - sent-B/node: bytes a rank sent per AllReduce, by the group's
//     counters (the transport's count of meta and data); ring-x: that
//     over the ring's 2(N-1)/N·M.
//
// The raw ring is plain ZeroMQ, so the job runs without CURVE (as
// --insecure does): what CURVE costs is measured on its own, by
// psnode/transport/zmq's BenchmarkCurve.
//
// Times are the slowest rank's. ns/op covers both passes and the
// barriers around them. BenchmarkAllReduce/N=n/latency reports the time
// of an AllReduce of one float64 (8 bytes).
func BenchmarkAllReduce(b *testing.B) {
	sizes := []int{1 << 20, 16 << 20, 64 << 20}
	for _, n := range []int{2, 3, 4} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			j := startJob(b, n, "bench", conf.EnvHeartbeatTimeout+"=60", conf.EnvInsecure+"=1")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for _, w := range j.workers {
				if _, err := w.expect(ctx, "READY"); err != nil {
					b.Fatal(err)
				}
			}
			defer func() {
				for _, w := range j.workers {
					fmt.Fprintln(w.stdin, "quit")
				}
				for _, p := range append([]*proc{j.sched}, j.workers...) {
					if _, err := p.collect(ctx, ""); err != nil {
						b.Error(err)
					}
				}
			}()
			for _, m := range sizes {
				b.Run(fmt.Sprintf("MiB=%d", m>>20), func(b *testing.B) {
					res := j.command(ctx, b, fmt.Sprintf("allreduce %d %d", m, b.N))
					mbs := float64(m) * float64(b.N) / res.sec / 1e6
					raw := float64(m) * float64(b.N) / res.rawSec / 1e6
					perOp := res.sent / float64(b.N)
					b.ReportMetric(mbs, "MB/s")
					b.ReportMetric(raw, "raw-MB/s")
					b.ReportMetric(mbs/raw, "vs-raw")
					b.ReportMetric(perOp, "sent-B/node")
					b.ReportMetric(perOp/(2*float64(n-1)/float64(n)*float64(m)), "ring-x")
				})
			}
			b.Run("latency/bytes=8", func(b *testing.B) {
				res := j.command(ctx, b, fmt.Sprintf("latency 8 %d", b.N))
				b.ReportMetric(res.sec/float64(b.N)*1e6, "µs/op")
			})
		})
	}
}

type benchResult struct {
	sec, rawSec float64 // the slowest rank's
	sent        float64 // mean over the ranks
}

// command sends cmd to every worker and gathers their results.
func (j *job) command(ctx context.Context, b *testing.B, cmd string) benchResult {
	b.Helper()
	for _, w := range j.workers {
		if _, err := fmt.Fprintln(w.stdin, cmd); err != nil {
			b.Fatal(err)
		}
	}
	var res benchResult
	for _, w := range j.workers {
		line, err := w.expect(ctx, "RESULT")
		if err != nil {
			b.Fatal(err)
		}
		var ns, rawNs, bytes int64
		if _, err := fmt.Sscanf(line, "RESULT %d %d %d", &ns, &rawNs, &bytes); err != nil {
			b.Fatalf("%s: %q: %v", w.name, line, err)
		}
		res.sec = max(res.sec, float64(ns)/1e9)
		res.rawSec = max(res.rawSec, float64(rawNs)/1e9)
		res.sent += float64(bytes)
	}
	res.sent /= float64(len(j.workers))
	return res
}

// benchChild serves the benchmark's commands on stdin.
func benchChild(ctx context.Context, n *psnode.Node, g *collective.Group) error {
	r, err := newRawRing(ctx, g)
	if err != nil {
		return err
	}
	defer r.close()
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 1 && f[0] == "quit" {
			return nil
		}
		if len(f) != 3 {
			return fmt.Errorf("bad command %q", in.Text())
		}
		m, err1 := strconv.Atoi(f[1])
		iters, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad command %q", in.Text())
		}
		var took, rawTook time.Duration
		var sent int64
		switch f[0] {
		case "allreduce":
			buf := make([]float32, m/4)
			for i := range buf {
				buf[i] = float32(i % 100)
			}
			for range iters {
				if err := collective.Barrier(ctx, g); err != nil {
					return err
				}
				start := time.Now()
				if _, err := r.pass(m); err != nil {
					return err
				}
				rawTook += time.Since(start)
				if err := collective.Barrier(ctx, g); err != nil {
					return err
				}
				before := g.Stats().BytesSent
				start = time.Now()
				if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
					return err
				}
				took += time.Since(start)
				sent += g.Stats().BytesSent - before
			}
		case "latency":
			buf := make([]float64, m/8)
			if err := collective.Barrier(ctx, g); err != nil {
				return err
			}
			start := time.Now()
			for range iters {
				if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
					return err
				}
			}
			took = time.Since(start)
		default:
			return fmt.Errorf("bad command %q", in.Text())
		}
		fmt.Printf("RESULT %d %d %d\n", took.Nanoseconds(), rawTook.Nanoseconds(), sent)
	}
	if err := in.Err(); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// rawRing is the benchmark's baseline: a PULL socket bound by each rank
// and a PUSH socket to the next rank's, nothing else.
type rawRing struct {
	g          *collective.Group
	ctx        *zmq4.Context
	pull, push *zmq4.Socket
	buf        []byte
}

func newRawRing(ctx context.Context, g *collective.Group) (*rawRing, error) {
	zc, err := zmq4.NewContext()
	if err != nil {
		return nil, err
	}
	r := &rawRing{g: g, ctx: zc}
	fail := func(err error) (*rawRing, error) {
		r.close()
		return nil, err
	}
	if r.pull, err = zc.NewSocket(zmq4.PULL); err != nil {
		return fail(err)
	}
	if r.push, err = zc.NewSocket(zmq4.PUSH); err != nil {
		return fail(err)
	}
	for _, s := range []*zmq4.Socket{r.pull, r.push} {
		if err := s.SetLinger(0); err != nil {
			return fail(err)
		}
	}
	if err := r.pull.SetRcvtimeo(60 * time.Second); err != nil {
		return fail(err)
	}
	if err := r.pull.Bind("tcp://127.0.0.1:*"); err != nil {
		return fail(err)
	}
	ep, err := r.pull.GetLastEndpoint()
	if err != nil {
		return fail(err)
	}
	port, err := strconv.ParseInt(ep[strings.LastIndexByte(ep, ':')+1:], 10, 64)
	if err != nil {
		return fail(err)
	}
	// Learn the ports through the group itself.
	ports := make([]int64, g.Size())
	ports[g.Rank()] = port
	if err := collective.AllGather(ctx, g, ports); err != nil {
		return fail(err)
	}
	next := (g.Rank() + 1) % g.Size()
	if err := r.push.Connect(fmt.Sprintf("tcp://127.0.0.1:%d", ports[next])); err != nil {
		return fail(err)
	}
	return r, nil
}

func (r *rawRing) close() {
	for _, s := range []*zmq4.Socket{r.pull, r.push} {
		if s != nil {
			_ = s.Close()
		}
	}
	_ = r.ctx.Term()
}

// pass moves the ring AllReduce's traffic for m bytes: 2(N-1) steps, at
// step k rank r sending segment (r-k-1) mod N in chunks of
// DefaultChunkBytes and forwarding each chunk it receives once it has
// it, with a copy into the buffer in place of the arithmetic. It returns
// the bytes sent.
func (r *rawRing) pass(m int) (int64, error) {
	n, rank := r.g.Size(), r.g.Rank()
	if len(r.buf) != m {
		r.buf = make([]byte, m)
	}
	const ce = collective.DefaultChunkBytes
	seg := func(step int) (int, int) {
		s := ((rank-step-1)%n + n) % n
		lo, hi := r.g.Shard(m/4, s)
		return lo * 4, hi * 4
	}
	var sent int64
	send := func(b []byte) error {
		k, err := r.push.SendBytes(b, 0)
		sent += int64(k)
		return err
	}
	lo, hi := seg(0)
	for a := lo; a < hi; a += ce {
		if err := send(r.buf[a:min(hi, a+ce)]); err != nil {
			return sent, err
		}
	}
	last := 2*n - 3
	for step := 0; step <= last; step++ {
		lo, hi := seg(step + 1)
		for a := lo; a < hi; a += ce {
			d, err := r.pull.RecvBytes(0)
			if err != nil {
				return sent, fmt.Errorf("raw ring: %w", err)
			}
			copy(r.buf[a:min(hi, a+ce)], d)
			if step < last {
				if err := send(r.buf[a:min(hi, a+ce)]); err != nil {
					return sent, err
				}
			}
		}
	}
	return sent, nil
}
