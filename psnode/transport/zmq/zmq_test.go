package zmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	zmq4 "github.com/pebbe/zmq4"
	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/transporttest"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// testLogger routes a transport's logs to t.Log, so that they show only
// when the test fails.
func testLogger(t testing.TB) *logrus.Entry {
	l := logrus.New()
	l.Out = tWriter{t}
	l.Level = logrus.DebugLevel
	return logrus.NewEntry(l)
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func newTransport(t testing.TB, opts zmq.Options) *zmq.Transport {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	tr, err := zmq.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Transport { return newTransport(t, zmq.Options{}) })
}

// TestConformanceBusyPoll runs the suite with busy polling on
// (Options.BusyPoll): the spinners must change nothing but timing.
func TestConformanceBusyPoll(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Transport { return newTransport(t, zmq.Options{BusyPoll: true}) })
}

func TestConformanceLocal(t *testing.T) {
	dir := t.TempDir()
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		return newTransport(t, zmq.Options{Local: true, IPCDir: dir})
	})
}

// TestReceiveLoopBringsItsProc: a receive loop, which waits in a C call
// that holds a P of the Go scheduler, adds one to GOMAXPROCS while it
// runs, one per listening transport, and Close takes it back.
func TestReceiveLoopBringsItsProc(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var trs []*zmq.Transport
	for i := range 2 {
		tr := newTransport(t, zmq.Options{}) // closed again at the end, in case
		trs = append(trs, tr)
		if got := runtime.GOMAXPROCS(0); got != before+i {
			t.Errorf("GOMAXPROCS %d with %d transports listening, want %d", got, i, before+i)
		}
		if _, err := tr.Listen(ctx, "127.0.0.1:0"); err != nil {
			t.Fatalf("Listen: %v", err)
		}
		if got := runtime.GOMAXPROCS(0); got != before+i+1 {
			t.Errorf("GOMAXPROCS %d with %d transports listening, want %d", got, i+1, before+i+1)
		}
	}
	for i, tr := range trs {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if got, want := runtime.GOMAXPROCS(0), before+len(trs)-i-1; got != want {
			t.Errorf("GOMAXPROCS %d after %d Close, want %d", got, i+1, want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    zmq.Options
		wantErr bool
	}{
		{name: "zero", opts: zmq.Options{}},
		{name: "watermark", opts: zmq.Options{WaterMark: 10, InboxSize: 10}},
		{name: "negative watermark", opts: zmq.Options{WaterMark: -1}, wantErr: true},
		{name: "negative inbox", opts: zmq.Options{InboxSize: -1}, wantErr: true},
		{name: "long ipc dir", opts: zmq.Options{Local: true, IPCDir: "/" + strings.Repeat("d", 120)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.opts.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tt.wantErr)
			}
			tr, err := zmq.New(tt.opts)
			if err == nil {
				defer tr.Close()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("New = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func recv(t *testing.T, tr transport.Transport) *transport.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := tr.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return m
}

// TestMalformedDropped sends garbage from a raw DEALER and checks that it
// is dropped and counted, and that a good message after it arrives.
func TestMalformedDropped(t *testing.T) {
	tr := newTransport(t, zmq.Options{})
	addr, err := tr.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zctx, err := zmq4.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer zctx.Term()
	raw, err := zctx.NewSocket(zmq4.DEALER)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := raw.Connect("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	goodMeta, err := transport.AppendMeta(nil, &transport.Meta{Sender: 9, Recver: 8, Timestamp: 7,
		DataTypes: []transport.DataType{transport.TypeUint64}})
	if err != nil {
		t.Fatal(err)
	}
	garbage := []struct {
		name  string
		parts []any
	}{
		{name: "not thrift", parts: []any{"garbage"}},
		{name: "empty meta", parts: []any{""}},
		{name: "truncated meta", parts: []any{goodMeta[:len(goodMeta)-1], make([]byte, 8)}},
		{name: "ragged data", parts: []any{goodMeta, make([]byte, 7)}},
		{name: "types mismatch", parts: []any{goodMeta, make([]byte, 8), make([]byte, 8)}},
		{name: "too many frames", parts: func() []any {
			p := []any{[]byte{0}}
			for range transport.MaxDataFrames + 3 {
				p = append(p, "x")
			}
			return p
		}()},
	}
	for _, g := range garbage {
		if _, err := raw.SendMessage(g.parts...); err != nil {
			t.Fatalf("send %s: %v", g.name, err)
		}
	}
	if _, err := raw.SendMessage(goodMeta, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	m := recv(t, tr)
	if m.Meta.Timestamp != 7 || len(m.Data) != 1 || len(m.Data[0]) != 16 {
		t.Fatalf("received %v, want the good message", m)
	}
	if st := tr.Stats(); st.Malformed != uint64(len(garbage)) || st.Received != 1 {
		t.Fatalf("stats %+v, want %d malformed and 1 received", st, len(garbage))
	}
}

// TestLocalAcrossTransports checks that the address a Local transport
// returns reaches it from another Local transport with the same IPCDir,
// that it is "host:port", and that "ipc://" endpoints work too.
func TestLocalAcrossTransports(t *testing.T) {
	dir := t.TempDir()
	a := newTransport(t, zmq.Options{Local: true, IPCDir: dir})
	b := newTransport(t, zmq.Options{Local: true, IPCDir: dir})
	addrB, err := b.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(addrB)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Listen = %q, want 127.0.0.1:port", addrB)
	}
	if err := a.Connect(t.Context(), 8, addrB); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8, Timestamp: 1}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b); m.Meta.Timestamp != 1 {
		t.Fatalf("received %v", m)
	}

	// A plain (TCP) transport reaches the same endpoint by its ipc URL.
	_, port, _ := net.SplitHostPort(addrB)
	c := newTransport(t, zmq.Options{})
	if err := c.Connect(t.Context(), 8, "ipc://"+dir+"/"+port+".ipc"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 10, Recver: 8, Timestamp: 2}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b); m.Meta.Timestamp != 2 {
		t.Fatalf("received %v", m)
	}
}

// TestLocalPortClaimed checks that a live Local transport's port cannot
// be listened on by another, and is free again after Close.
func TestLocalPortClaimed(t *testing.T) {
	dir := t.TempDir()
	a := newTransport(t, zmq.Options{Local: true, IPCDir: dir})
	addr, err := a.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := newTransport(t, zmq.Options{Local: true, IPCDir: dir})
	if _, err := b.Listen(t.Context(), addr); err == nil {
		t.Fatalf("a second transport listened on %s", addr)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Listen(t.Context(), addr); err != nil {
		t.Fatalf("Listen on %s after its holder closed: %v", addr, err)
	}
}

// TestLocalCloseLeavesNoFiles checks that a Local transport, with and
// without CURVE (which adds the sealed route's socket), leaves nothing in
// its IPCDir once closed: no socket file, no lock.
func TestLocalCloseLeavesNoFiles(t *testing.T) {
	for _, curve := range []bool{false, true} {
		t.Run(fmt.Sprintf("curve=%v", curve), func(t *testing.T) {
			dir := t.TempDir()
			opts := zmq.Options{Local: true, IPCDir: dir, Logger: testLogger(t)}
			if curve {
				opts.Curve = jobCurve(t, "ipc files")
			}
			tr, err := zmq.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Listen(t.Context(), "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			if names := dirNames(t, dir); len(names) == 0 {
				t.Fatalf("nothing in %s while the transport listens", dir)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Fatalf("left in %s after Close: %v", dir, names)
			}
		})
	}
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// deadAddr returns a loopback address where nobody listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestSendBlockedByWaterMark checks that a Send to a peer that never reads
// gives up at its context's deadline once the high-water mark is reached,
// and that Close then returns promptly although messages are queued.
func TestSendBlockedByWaterMark(t *testing.T) {
	tr := newTransport(t, zmq.Options{WaterMark: 5})
	if err := tr.Connect(t.Context(), 8, deadAddr(t)); err != nil {
		t.Fatal(err)
	}
	m := &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8}, Data: [][]byte{make([]byte, 1024)}}
	var err error
	sent := 0
	for ; sent < 100 && err == nil; sent++ {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err = tr.Send(ctx, m)
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after %d sends to a dead peer with WaterMark 5: %v, want context.DeadlineExceeded", sent, err)
	}

	// A Send without a deadline waits until it is cancelled.
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := tr.Send(ctx, m)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Send after cancel = %v, want context.Canceled", err)
	}

	// And one waiting when the transport closes returns ErrClosed.
	go func() {
		_, err := tr.Send(t.Context(), m)
		errc <- err
	}()
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with messages queued for a dead peer", d)
	}
	if err := <-errc; !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send blocked across Close = %v, want ErrClosed", err)
	}
}

// TestCloseWithUnsentMessages checks linger 0: Close returns promptly with
// large messages queued for a peer that is not there.
func TestCloseWithUnsentMessages(t *testing.T) {
	tr := newTransport(t, zmq.Options{})
	if _, err := tr.Listen(t.Context(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Connect(t.Context(), 8, deadAddr(t)); err != nil {
		t.Fatal(err)
	}
	m := &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8}, Data: [][]byte{make([]byte, 1<<20)}}
	for range 20 {
		if _, err := tr.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with unsent messages", d)
	}
}

// TestReplaceRouteWhileBlocked checks that a Send waiting for room on a
// dead peer's socket moves to the new route when Connect replaces it.
func TestReplaceRouteWhileBlocked(t *testing.T) {
	a := newTransport(t, zmq.Options{WaterMark: 1})
	b := newTransport(t, zmq.Options{})
	addrB, err := b.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(t.Context(), 8, deadAddr(t)); err != nil {
		t.Fatal(err)
	}
	m := &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8, Timestamp: 1}}
	// Fill the dead route's queue.
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err := a.Send(ctx, m)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := a.Send(ctx, &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8, Timestamp: 2}})
		errc <- err
	}()
	if err := a.Connect(t.Context(), 8, addrB); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send across the route change: %v", err)
	}
	if m := recv(t, b); m.Meta.Timestamp != 2 {
		t.Fatalf("new route received %v, want timestamp 2", m)
	}
}

func TestConnectBadAddress(t *testing.T) {
	tr := newTransport(t, zmq.Options{})
	for _, addr := range []string{"nohost", "127.0.0.1:0", "127.0.0.1:99999", "tcp://"} {
		if err := tr.Connect(t.Context(), 8, addr); err == nil {
			t.Errorf("Connect(%q) succeeded", addr)
		}
	}
	if _, err := tr.Listen(t.Context(), "256.1.1.1:0"); err == nil {
		t.Error("Listen on an invalid host succeeded")
	}
	// A failed Listen leaves the transport able to listen.
	if _, err := tr.Listen(t.Context(), "127.0.0.1:0"); err != nil {
		t.Fatalf("Listen after a failed Listen: %v", err)
	}
}

// TestListenOnHostName binds a host name, as a node does with the
// NodeManager's host in DMLC_NODE_HOST: ZeroMQ binds only addresses and
// interface names, so the name is resolved, and peers reach the node by
// the name it advertises.
func TestListenOnHostName(t *testing.T) {
	srv := newTransport(t, zmq.Options{})
	addr, err := srv.Listen(t.Context(), "localhost:0")
	if err != nil {
		t.Fatalf("Listen(localhost:0): %v", err)
	}
	if host, _, _ := net.SplitHostPort(addr); host != "localhost" {
		t.Fatalf("Listen = %q, want the name advertised", addr)
	}
	cli := newTransport(t, zmq.Options{})
	if err := cli.Connect(t.Context(), 8, addr); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8, Timestamp: 3}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, srv); m.Meta.Timestamp != 3 {
		t.Fatalf("received %v", m)
	}

	bad := newTransport(t, zmq.Options{})
	if _, err := bad.Listen(t.Context(), "no-such-host.invalid:0"); err == nil || !strings.Contains(err.Error(), "no-such-host.invalid") {
		t.Fatalf("Listen on an unknown host = %v, want an error naming it", err)
	}
}

// TestDownWhenPeerGone checks what the scheduler reads to find dead nodes
// early: a route whose peer went away reports since when it is down, and
// a route with a live connection, or a new route, reports nothing.
func TestDownWhenPeerGone(t *testing.T) {
	a, b := newTransport(t, zmq.Options{}), newTransport(t, zmq.Options{})
	addr, err := b.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, down := a.Down(2); down {
		t.Fatal("Down without a route reports down")
	}
	if err := a.Connect(t.Context(), 2, addr); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 1, Recver: 2}}); err != nil {
		t.Fatal(err)
	}
	recv(t, b) // the connection is up
	if _, down := a.Down(2); down {
		t.Fatal("Down reports down with the connection up")
	}
	before := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		since, down := a.Down(2)
		if down {
			if since.Before(before) || since.After(time.Now()) {
				t.Fatalf("down since %v, outside [%v, now]", since, before)
			}
			break
		}
		select {
		case <-deadline:
			t.Fatal("the route is not down 20 s after its peer closed")
		case <-tick.C:
		}
	}
	c := newTransport(t, zmq.Options{})
	cAddr, err := c.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(t.Context(), 2, cAddr); err != nil {
		t.Fatal(err)
	}
	if _, down := a.Down(2); down {
		t.Fatal("a new route reports the old one's loss")
	}
}

// TestRouteReplacedAfterPeerClosed replaces a route, again and again, just
// after its peer closed, while libzmq may still be reporting the broken
// connection to the route's monitor: messages on the new route must get
// through every time (libzmq's I/O thread, which all routes share, would
// hang sending that report to a monitor already gone).
func TestRouteReplacedAfterPeerClosed(t *testing.T) {
	forTCPAndIPC(t, func(t *testing.T, opts zmq.Options) {
		a := newTransport(t, opts)
		for i := range 100 {
			b := newTransport(t, opts)
			addr, err := b.Listen(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Connect(t.Context(), 2, addr); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 1, Recver: 2, Timestamp: int32(i)}}); err != nil {
				t.Fatal(err)
			}
			if m := recv(t, b); m.Meta.Timestamp != int32(i) {
				t.Fatalf("round %d: received timestamp %d", i, m.Meta.Timestamp)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// forTCPAndIPC runs test as two subtests, over TCP and over ipc endpoints
// (Options.Local).
func forTCPAndIPC(t *testing.T, test func(t *testing.T, opts zmq.Options)) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			opts := zmq.Options{Local: local}
			if local {
				opts.IPCDir = t.TempDir()
			}
			test(t, opts)
		})
	}
}

// TestRouteToAPortNotBoundYet: a route made before its peer binds (a node
// that starts a moment before the scheduler) tries again soon, every
// 10 ms at first rather than libzmq's 100 ms, backing off to 100 ms, and
// its message arrives once the peer listens.
func TestRouteToAPortNotBoundYet(t *testing.T) {
	a := newTransport(t, zmq.Options{})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nettest.FreePort(t)))
	if err := a.Connect(t.Context(), 2, addr); err != nil {
		t.Fatal(err)
	}
	first, most, err := zmq.ReconnectIntervals(a, 2)
	if err != nil {
		t.Fatal(err)
	}
	if first != 10*time.Millisecond || most != 100*time.Millisecond {
		t.Errorf("reconnection every %v, backing off to %v; want 10ms and 100ms", first, most)
	}
	if _, err := a.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 1, Recver: 2, Timestamp: 7}}); err != nil {
		t.Fatal(err)
	}
	b := newTransport(t, zmq.Options{})
	if _, err := b.Listen(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b); m.Meta.Timestamp != 7 {
		t.Fatalf("received timestamp %d, want 7", m.Meta.Timestamp)
	}
}
