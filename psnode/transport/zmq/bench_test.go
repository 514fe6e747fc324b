package zmq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	zmq4 "github.com/pebbe/zmq4"
	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// The benchmarks come in pairs: Raw* is a pebbe/zmq4 program with the
// same socket topology as the transport (one ROUTER per node, one DEALER
// per peer, over tcp 127.0.0.1) that does no psnode work, and Transport*
// moves the same bytes through *zmq.Transport. The difference is what the
// transport layer costs: the meta codec, the checks, the inbox hand-off.
//
// pushpull: a worker holds vals float32 values under vals uint64 keys,
// split evenly over the servers. One op is: push [keys][vals] to every
// server, wait for every server's 1-frame ack, pull [keys] from every
// server, wait for every server's [vals]. The bytes counted (SetBytes, so
// MB/s is 10^6 bytes/s) are the keys and values only, in both directions:
// 8·vals (push keys) + 4·vals (push values) + 8·vals (pull keys) +
// 4·vals (pulled values) = 24·vals. Metas, acks and ZeroMQ framing are
// not counted.
//
// rtt: a worker sends a 1-key pull [key] to one server, which answers
// [value]; one op is one round trip. ops/s, p50-µs and p99-µs come from
// per-op latencies.

func BenchmarkRaw(b *testing.B) {
	b.Run("op=pushpull/vals=1000000/servers=2", func(b *testing.B) { rawPushPull(b, 1_000_000, 2) })
	b.Run("op=rtt/keys=1", func(b *testing.B) { rawRTT(b) })
}

func BenchmarkTransport(b *testing.B) {
	b.Run("op=pushpull/vals=1000000/servers=2", func(b *testing.B) { transportPushPull(b, 1_000_000, 2) })
	b.Run("op=rtt/keys=1", func(b *testing.B) { transportRTT(b) })
}

// kvData returns the keys and values frames of each of servers shards of
// n keys.
func kvData(n, servers int) (keys, vals [][]byte) {
	for s := range servers {
		lo, hi := n*s/servers, n*(s+1)/servers
		k := make([]byte, 0, 8*(hi-lo))
		for key := lo; key < hi; key++ {
			k = binary.LittleEndian.AppendUint64(k, uint64(key))
		}
		keys = append(keys, k)
		vals = append(vals, make([]byte, 4*(hi-lo)))
	}
	return keys, vals
}

// reportLatency reports ops/s and the median and 99th percentile of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p int) float64 {
		return float64(lat[min(len(lat)-1, len(lat)*p/100)].Nanoseconds()) / 1e3
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(pct(50), "p50-µs")
	b.ReportMetric(pct(99), "p99-µs")
}

// rawNet is a set of raw ZeroMQ nodes. Like Transports, each node has its
// own context (and so its own I/O thread), a ROUTER, and a DEALER to each
// node it sends to.
type rawNet struct {
	ctxs []*zmq4.Context // [0] is the worker's
	wg   sync.WaitGroup
}

// node returns the context of a new node.
func (n *rawNet) node(b *testing.B) *zmq4.Context {
	zctx, err := zmq4.NewContext()
	if err != nil {
		b.Fatal(err)
	}
	n.ctxs = append(n.ctxs, zctx)
	return zctx
}

func rawSocket(b *testing.B, zctx *zmq4.Context, typ zmq4.Type) *zmq4.Socket {
	s, err := zctx.NewSocket(typ)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetLinger(0); err != nil {
		b.Fatal(err)
	}
	return s
}

// rawRouter returns a ROUTER bound to an ephemeral loopback port and its
// endpoint.
func rawRouter(b *testing.B, zctx *zmq4.Context) (*zmq4.Socket, string) {
	s := rawSocket(b, zctx, zmq4.ROUTER)
	if err := s.Bind("tcp://127.0.0.1:*"); err != nil {
		b.Fatal(err)
	}
	ep, err := s.GetLastEndpoint()
	if err != nil {
		b.Fatal(err)
	}
	return s, ep
}

func rawDealer(b *testing.B, zctx *zmq4.Context, endpoint string) *zmq4.Socket {
	s := rawSocket(b, zctx, zmq4.DEALER)
	if err := s.Connect(endpoint); err != nil {
		b.Fatal(err)
	}
	return s
}

// server starts a raw server node that answers a 2-frame push
// [keys][vals] with a 1-byte ack, keeping vals, and a 1-frame pull [keys]
// with the kept vals (initially store). It returns the server's ROUTER
// endpoint; the server exits when close terminates its context.
func (n *rawNet) server(b *testing.B, workerEndpoint string, store []byte) string {
	zctx := n.node(b)
	router, ep := rawRouter(b, zctx)
	dealer := rawDealer(b, zctx, workerEndpoint)
	n.wg.Go(func() {
		defer dealer.Close()
		defer router.Close()
		ack := []byte{1}
		for {
			parts, err := router.RecvMessageBytes(0)
			if err != nil {
				return // ETERM: the benchmark is over
			}
			reply := store
			if len(parts) == 3 {
				store, reply = parts[2], ack
			}
			if _, err := dealer.SendBytes(reply, 0); err != nil {
				return
			}
		}
	})
	return ep
}

// close terminates every context once the caller has closed the worker's
// sockets; the servers see ETERM and close theirs.
func (n *rawNet) close() {
	for _, c := range n.ctxs {
		_ = c.Term()
	}
	n.wg.Wait()
}

func rawPushPull(b *testing.B, vals, servers int) {
	n := &rawNet{}
	wctx := n.node(b)
	worker, workerEP := rawRouter(b, wctx)
	keys, values := kvData(vals, servers)
	dealers := make([]*zmq4.Socket, servers)
	for i := range servers {
		dealers[i] = rawDealer(b, wctx, n.server(b, workerEP, nil))
	}
	defer func() {
		for _, d := range dealers {
			_ = d.Close()
		}
		_ = worker.Close()
		n.close()
	}()
	recvAll := func(wantLen int) {
		for range servers {
			parts, err := worker.RecvMessageBytes(0)
			if err != nil {
				b.Fatal(err)
			}
			if len(parts) != 2 || (wantLen >= 0 && len(parts[1]) != wantLen) {
				b.Fatalf("worker received %d frames", len(parts))
			}
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(24 * vals))
	b.ResetTimer()
	for range b.N {
		for i, d := range dealers {
			if _, err := d.SendBytes(keys[i], zmq4.SNDMORE); err != nil {
				b.Fatal(err)
			}
			if _, err := d.SendBytes(values[i], 0); err != nil {
				b.Fatal(err)
			}
		}
		recvAll(1)
		for i, d := range dealers {
			if _, err := d.SendBytes(keys[i], 0); err != nil {
				b.Fatal(err)
			}
		}
		recvAll(-1)
	}
	b.StopTimer()
	b.ReportMetric(float64(4*servers), "msgs/op")
}

func rawRTT(b *testing.B) {
	n := &rawNet{}
	wctx := n.node(b)
	worker, workerEP := rawRouter(b, wctx)
	dealer := rawDealer(b, wctx, n.server(b, workerEP, make([]byte, 4)))
	defer func() {
		_ = dealer.Close()
		_ = worker.Close()
		n.close()
	}()
	key := binary.LittleEndian.AppendUint64(nil, 42)
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.SetBytes(8 + 4)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := dealer.SendBytes(key, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := worker.RecvMessageBytes(0); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// benchTransport returns a listening *zmq.Transport with a discard logger.
func benchTransport(b *testing.B) (*zmq.Transport, string) {
	l := logrus.New()
	l.Out = io.Discard
	tr, err := zmq.New(zmq.Options{Logger: logrus.NewEntry(l)})
	if err != nil {
		b.Fatal(err)
	}
	addr, err := tr.Listen(b.Context(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return tr, addr
}

const benchWorker = 9

// transportServer starts a KV-like server on tr: it answers a push with an
// empty response, keeping the values frame, and a pull with the kept
// values (initially store). It returns when tr is closed.
func transportServer(ctx context.Context, wg *sync.WaitGroup, tr *zmq.Transport, id int32, store []byte, errc chan<- error) {
	wg.Go(func() {
		for {
			m, err := tr.Recv(ctx)
			if errors.Is(err, transport.ErrClosed) {
				return
			}
			if err != nil {
				errc <- err
				return
			}
			resp := &transport.Message{Meta: transport.Meta{
				Sender: id, Recver: m.Meta.Sender, Timestamp: m.Meta.Timestamp,
				Push: m.Meta.Push, Pull: m.Meta.Pull,
			}}
			if m.Meta.Push {
				store = m.Data[1]
			} else {
				resp.Meta.DataTypes = []transport.DataType{transport.TypeFloat32}
				resp.Data = [][]byte{store}
			}
			if _, err := tr.Send(ctx, resp); err != nil && !errors.Is(err, transport.ErrClosed) {
				errc <- err
				return
			}
		}
	})
}

// transportCluster is a worker transport connected to servers server
// transports, each served by transportServer.
type transportCluster struct {
	worker  *zmq.Transport
	servers []*zmq.Transport
	wg      sync.WaitGroup
	errc    chan error
}

func newTransportCluster(b *testing.B, servers int, store []byte) *transportCluster {
	c := &transportCluster{errc: make(chan error, servers)}
	var workerAddr string
	c.worker, workerAddr = benchTransport(b)
	for i := range servers {
		id := transport.ServerID(i)
		s, addr := benchTransport(b)
		c.servers = append(c.servers, s)
		if err := c.worker.Connect(b.Context(), id, addr); err != nil {
			b.Fatal(err)
		}
		if err := s.Connect(b.Context(), benchWorker, workerAddr); err != nil {
			b.Fatal(err)
		}
		transportServer(b.Context(), &c.wg, s, id, store, c.errc)
	}
	return c
}

func (c *transportCluster) close(b *testing.B) {
	for _, s := range c.servers {
		_ = s.Close()
	}
	c.wg.Wait()
	_ = c.worker.Close()
	close(c.errc)
	for err := range c.errc {
		b.Error(err)
	}
}

func transportPushPull(b *testing.B, vals, servers int) {
	c := newTransportCluster(b, servers, nil)
	defer c.close(b)
	keys, values := kvData(vals, servers)
	ctx := b.Context()
	recvAll := func() {
		for range servers {
			if _, err := c.worker.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(24 * vals))
	b.ResetTimer()
	for i := range b.N {
		for s := range servers {
			m := &transport.Message{
				Meta: transport.Meta{Sender: benchWorker, Recver: transport.ServerID(s), Timestamp: int32(i),
					Request: true, Push: true,
					DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32}},
				Data: [][]byte{keys[s], values[s]},
			}
			if _, err := c.worker.Send(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		recvAll()
		for s := range servers {
			m := &transport.Message{
				Meta: transport.Meta{Sender: benchWorker, Recver: transport.ServerID(s), Timestamp: int32(i),
					Request: true, Pull: true, DataTypes: []transport.DataType{transport.TypeUint64}},
				Data: [][]byte{keys[s]},
			}
			if _, err := c.worker.Send(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		recvAll()
	}
	b.StopTimer()
	b.ReportMetric(float64(4*servers), "msgs/op")
}

func transportRTT(b *testing.B) {
	c := newTransportCluster(b, 1, make([]byte, 4))
	defer c.close(b)
	ctx := b.Context()
	m := &transport.Message{
		Meta: transport.Meta{Sender: benchWorker, Recver: transport.ServerID(0), Request: true, Pull: true,
			DataTypes: []transport.DataType{transport.TypeUint64}},
		Data: [][]byte{binary.LittleEndian.AppendUint64(nil, 42)},
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.SetBytes(8 + 4)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		m.Meta.Timestamp = int32(i)
		if _, err := c.worker.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
		if _, err := c.worker.Recv(ctx); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	reportLatency(b, lat)
}
