// Package transporttest is the conformance suite that every
// transport.Transport implementation passes, after hashicorp/raft's
// transport_test.go: the same tests run against the in-memory transport
// and against ZeroMQ on loopback.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T) transport.Transport {
//			tr, err := zmq.New(zmq.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return tr
//		})
//	}
package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// waitTimeout bounds every wait for a message; it is only reached when a
// test fails.
const waitTimeout = 20 * time.Second

// The node ids the suite uses.
const (
	idA = 9  // worker rank 0
	idB = 8  // server rank 0
	idC = 10 // server rank 1
)

// Run runs the conformance suite. newTransport returns a new transport that
// has not listened yet; all transports it returns during one test must be
// able to reach each other's listen addresses. The suite listens on
// "127.0.0.1:0" and closes every transport it creates before the test
// ends (a factory may register its own Close too: Close is idempotent).
//
// The subtests run one after another, not in parallel, so that the
// goroutine leak check sees only its own transports.
func Run(t *testing.T, newTransport func(t *testing.T) transport.Transport) {
	s := &suite{newTransport: newTransport}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{name: "RoundTrip", fn: s.testRoundTrip},
		{name: "DataTypes", fn: s.testDataTypes},
		{name: "FIFO", fn: s.testFIFO},
		{name: "LargeFrame", fn: s.testLargeFrame},
		{name: "EmptyFrames", fn: s.testEmptyFrames},
		{name: "ManyToOne", fn: s.testManyToOne},
		{name: "UnknownPeer", fn: s.testUnknownPeer},
		{name: "ReplaceRoute", fn: s.testReplaceRoute},
		{name: "Disconnect", fn: s.testDisconnect},
		{name: "SendToClosedPeer", fn: s.testSendToClosedPeer},
		{name: "SendInvalid", fn: s.testSendInvalid},
		{name: "SendContext", fn: s.testSendContext},
		{name: "RecvContext", fn: s.testRecvContext},
		{name: "ListenTwice", fn: s.testListenTwice},
		{name: "Close", fn: s.testClose},
		{name: "NoGoroutineLeak", fn: s.testNoGoroutineLeak},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}

type suite struct {
	newTransport func(t *testing.T) transport.Transport
}

// open returns a new transport that the test closes when it ends.
func (s *suite) open(t *testing.T) transport.Transport {
	t.Helper()
	tr := s.newTransport(t)
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr
}

// listen returns a new listening transport and its address.
func (s *suite) listen(t *testing.T) (transport.Transport, string) {
	t.Helper()
	tr := s.open(t)
	addr, err := tr.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	return tr, addr
}

// pair returns two listening transports, a (node idA) and b (node idB),
// each connected to the other.
func (s *suite) pair(t *testing.T) (a, b transport.Transport) {
	t.Helper()
	a, addrA := s.listen(t)
	b, addrB := s.listen(t)
	connect(t, a, idB, addrB)
	connect(t, b, idA, addrA)
	return a, b
}

func connect(t *testing.T, tr transport.Transport, id int32, addr string) {
	t.Helper()
	if err := tr.Connect(t.Context(), id, addr); err != nil {
		t.Fatalf("Connect(%d, %s): %v", id, addr, err)
	}
}

func send(t testing.TB, tr transport.Transport, m *transport.Message) {
	t.Helper()
	sendSize(t, tr, m)
}

// sendSize is send, returning the bytes Send reports.
func sendSize(t testing.TB, tr transport.Transport, m *transport.Message) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	n, err := tr.Send(ctx, m)
	if err != nil {
		t.Fatalf("Send(%v): %v", m, err)
	}
	if n <= m.DataBytes() {
		t.Fatalf("Send(%v) = %d bytes, want more than the %d data bytes", m, n, m.DataBytes())
	}
	return n
}

func recv(t testing.TB, tr transport.Transport) *transport.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	m, err := tr.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return m
}

// msg returns a data message from idA to idB with timestamp ts.
func msg(ts int32, data ...[]byte) *transport.Message {
	return &transport.Message{
		Meta: transport.Meta{Sender: idA, Recver: idB, Timestamp: ts, Request: true},
		Data: data,
	}
}

func checkEqual(t *testing.T, got, want *transport.Message) {
	t.Helper()
	if !reflect.DeepEqual(got.Meta, want.Meta) {
		t.Fatalf("received meta\n %+v\nwant\n %+v", got.Meta, want.Meta)
	}
	if len(got.Data) != len(want.Data) {
		t.Fatalf("received %d data frames, want %d", len(got.Data), len(want.Data))
	}
	for i := range want.Data {
		if !bytes.Equal(got.Data[i], want.Data[i]) {
			t.Fatalf("data frame %d: received %d bytes %x…, want %d bytes %x…", i,
				len(got.Data[i]), got.Data[i][:min(16, len(got.Data[i]))],
				len(want.Data[i]), want.Data[i][:min(16, len(want.Data[i]))])
		}
	}
}

func uint64s(vs ...uint64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func float32s(vs ...float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func int32s(vs ...int32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func (s *suite) testRoundTrip(t *testing.T) {
	a, b := s.pair(t)
	want := &transport.Message{
		Meta: transport.Meta{
			Sender: idA, Recver: idB, AppID: 1, CustomerID: 2, Timestamp: 3,
			Request: true, Push: true, Pull: true, Head: 4, Body: []byte("body"),
			Priority: 5, MsgSig: 0xabcdef, Status: 0, Filters: 6,
			DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32, transport.TypeInt32},
			Control: transport.Control{
				Cmd: transport.CmdAddNode, BarrierGroup: transport.AllGroups, Nonce: 7, Auth: []byte{1, 2},
				Nodes: []transport.Node{{Role: transport.RoleServer, ID: idB, Host: "127.0.0.1", Port: 1234, Rank: 0, Incarnation: 99}},
			},
		},
		Data: [][]byte{uint64s(1, 5, 1<<40, math.MaxUint64), float32s(0.5, -1, 3.25, 1e9), int32s(1, 1, 1, 1)},
	}
	size := sendSize(t, a, want)
	got := recv(t, b)
	checkEqual(t, got, want)
	// Both ends count the same bytes on the wire.
	if got.WireSize != size {
		t.Errorf("received message's WireSize %d, Send reported %d", got.WireSize, size)
	}

	// And back: the reply travels b → a on its own connection.
	reply := &transport.Message{Meta: transport.Meta{Sender: idB, Recver: idA, Timestamp: 3}}
	send(t, b, reply)
	checkEqual(t, recv(t, a), reply)
}

func (s *suite) testDataTypes(t *testing.T) {
	a, b := s.pair(t)
	tests := []struct {
		name  string
		types []transport.DataType
		data  [][]byte
	}{
		{name: "char", types: []transport.DataType{transport.TypeChar}, data: [][]byte{[]byte("abc")}},
		{name: "float64 int16", types: []transport.DataType{transport.TypeFloat64, transport.TypeInt16}, data: [][]byte{make([]byte, 16), {1, 0, 2, 0}}},
		{name: "other", types: []transport.DataType{transport.TypeOther}, data: [][]byte{{1, 2, 3, 4, 5}}},
		{name: "untyped", data: [][]byte{{9}, {8, 7}}},
		{name: "every type", types: []transport.DataType{
			transport.TypeInt8, transport.TypeUint8, transport.TypeUint16, transport.TypeUint32,
			transport.TypeInt64, transport.TypeUint64, transport.TypeFloat32,
		}, data: [][]byte{{1}, {2}, {3, 0}, {4, 0, 0, 0}, make([]byte, 8), make([]byte, 8), make([]byte, 4)}},
	}
	for i, tt := range tests {
		m := msg(int32(i), tt.data...)
		m.Meta.DataTypes = tt.types
		send(t, a, m)
		got := recv(t, b)
		t.Run(tt.name, func(t *testing.T) { checkEqual(t, got, m) })
	}
}

func (s *suite) testFIFO(t *testing.T) {
	a, b := s.pair(t)
	const n = 1000
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for i := range n {
			if _, err := a.Send(ctx, msg(int32(i), int32s(int32(i)))); err != nil {
				errc <- fmt.Errorf("Send %d: %w", i, err)
				return
			}
		}
		errc <- nil
	}()
	for i := range n {
		m := recv(t, b)
		if m.Meta.Timestamp != int32(i) || !bytes.Equal(m.Data[0], int32s(int32(i))) {
			t.Fatalf("message %d arrived with timestamp %d", i, m.Meta.Timestamp)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testLargeFrame(t *testing.T) {
	a, b := s.pair(t)
	big := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(big)
	want := msg(1, big, uint64s(42))
	want.Meta.DataTypes = []transport.DataType{transport.TypeUint64, transport.TypeUint64}
	send(t, a, want)
	checkEqual(t, recv(t, b), want)
}

func (s *suite) testEmptyFrames(t *testing.T) {
	a, b := s.pair(t)
	send(t, a, msg(1, []byte{}, nil, []byte{7}))
	m := recv(t, b)
	if len(m.Data) != 3 || len(m.Data[0]) != 0 || len(m.Data[1]) != 0 || !bytes.Equal(m.Data[2], []byte{7}) {
		t.Fatalf("received data frames %q, want [\"\" \"\" \"\\a\"]", m.Data)
	}
	send(t, a, msg(2))
	if m := recv(t, b); m.Meta.Timestamp != 2 || len(m.Data) != 0 {
		t.Fatalf("received %v, want timestamp 2 and no data frames", m)
	}
}

// testManyToOne sends from several transports at once, and from several
// goroutines on each, to one receiver, and checks that every message
// arrives and that each goroutine's messages keep their order.
func (s *suite) testManyToOne(t *testing.T) {
	const (
		senders    = 4
		goroutines = 3
		perG       = 200
	)
	recvr, addr := s.listen(t)
	var wg sync.WaitGroup
	errc := make(chan error, senders*goroutines)
	for i := range senders {
		tr := s.open(t)
		connect(t, tr, idB, addr)
		for g := range goroutines {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				for k := range perG {
					m := &transport.Message{
						Meta: transport.Meta{Sender: int32(100 + i), Recver: idB, Head: int32(g), Timestamp: int32(k)},
						Data: [][]byte{uint64s(uint64(k))},
					}
					if _, err := tr.Send(ctx, m); err != nil {
						errc <- fmt.Errorf("sender %d goroutine %d: Send %d: %w", i, g, k, err)
						return
					}
				}
			})
		}
	}
	next := make(map[[2]int32]int32)
	for range senders * goroutines * perG {
		m := recv(t, recvr)
		key := [2]int32{m.Meta.Sender, m.Meta.Head}
		if m.Meta.Timestamp != next[key] {
			t.Fatalf("from sender %d goroutine %d: got message %d, want %d", key[0], key[1], m.Meta.Timestamp, next[key])
		}
		next[key]++
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func (s *suite) testUnknownPeer(t *testing.T) {
	a, _ := s.pair(t)
	m := msg(1)
	m.Meta.Recver = 12345
	if _, err := a.Send(t.Context(), m); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("Send to an unconnected id = %v, want ErrUnknownPeer", err)
	}
}

// testReplaceRoute restarts node idB on a new address: Connect to the new
// address replaces the route, and later messages go there.
func (s *suite) testReplaceRoute(t *testing.T) {
	a, b1 := s.pair(t)
	send(t, a, msg(1))
	if m := recv(t, b1); m.Meta.Timestamp != 1 {
		t.Fatalf("first incarnation received %v", m)
	}
	b2, addr2 := s.listen(t)
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	connect(t, a, idB, addr2)
	for i := int32(2); i < 5; i++ {
		send(t, a, msg(i))
	}
	for i := int32(2); i < 5; i++ {
		if m := recv(t, b2); m.Meta.Timestamp != i {
			t.Fatalf("second incarnation received timestamp %d, want %d", m.Meta.Timestamp, i)
		}
	}
}

func (s *suite) testDisconnect(t *testing.T) {
	a, _ := s.listen(t)
	b, addrB := s.listen(t)
	connect(t, a, idB, addrB)
	send(t, a, msg(1))
	recv(t, b)
	if err := a.Disconnect(idB); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if _, err := a.Send(t.Context(), msg(2)); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("Send after Disconnect = %v, want ErrUnknownPeer", err)
	}
	if err := a.Disconnect(4242); err != nil {
		t.Fatalf("Disconnect of an unknown id: %v", err)
	}
	connect(t, a, idB, addrB)
	send(t, a, msg(3))
	if m := recv(t, b); m.Meta.Timestamp != 3 {
		t.Fatalf("after reconnecting received %v, want timestamp 3", m)
	}
}

// testSendToClosedPeer checks that a message to a peer that has gone away
// is lost without an error, as on a real network.
func (s *suite) testSendToClosedPeer(t *testing.T) {
	a, b := s.pair(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	for i := range 10 {
		if _, err := a.Send(ctx, msg(int32(i))); err != nil {
			t.Fatalf("Send to a closed peer: %v", err)
		}
	}
}

func (s *suite) testSendInvalid(t *testing.T) {
	a, _ := s.pair(t)
	tests := []struct {
		name string
		m    *transport.Message
	}{
		{name: "too many frames", m: msg(1, make([][]byte, transport.MaxDataFrames+1)...)},
		{name: "types mismatch", m: func() *transport.Message {
			m := msg(2, []byte{1})
			m.Meta.DataTypes = []transport.DataType{transport.TypeUint8, transport.TypeUint8}
			return m
		}()},
		{name: "ragged frame", m: func() *transport.Message {
			m := msg(3, []byte{1, 2, 3})
			m.Meta.DataTypes = []transport.DataType{transport.TypeUint64}
			return m
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := a.Send(t.Context(), tt.m); !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("Send = %v, want an error wrapping ErrMalformed", err)
			}
		})
	}
}

func (s *suite) testSendContext(t *testing.T) {
	a, _ := s.pair(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Send(ctx, msg(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with a cancelled context = %v, want context.Canceled", err)
	}
}

func (s *suite) testRecvContext(t *testing.T) {
	_, b := s.pair(t)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv with a cancelled context = %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv past its deadline = %v, want context.DeadlineExceeded", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Recv(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("blocked Recv after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Recv did not return after its context was cancelled")
	}
}

func (s *suite) testListenTwice(t *testing.T) {
	tr, _ := s.listen(t)
	if _, err := tr.Listen(t.Context(), "127.0.0.1:0"); err == nil {
		t.Fatal("a second Listen succeeded")
	}
}

func (s *suite) testClose(t *testing.T) {
	t.Run("unused", func(t *testing.T) {
		tr := s.newTransport(t)
		if err := tr.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := tr.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
	t.Run("in use", func(t *testing.T) {
		a, b := s.pair(t)
		send(t, a, msg(1))
		send(t, a, msg(2)) // left unreceived: Close discards it

		// Receive until Close: message 1, perhaps message 2, then ErrClosed.
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			var err error
			for err == nil {
				_, err = b.Recv(ctx)
			}
			errc <- err
		}()
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-errc; !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Recv blocked across Close = %v, want ErrClosed", err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}

		ctx := t.Context()
		if _, err := b.Recv(ctx); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Recv after Close = %v, want ErrClosed", err)
		}
		reply := &transport.Message{Meta: transport.Meta{Sender: idB, Recver: idA}}
		if _, err := b.Send(ctx, reply); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Send after Close = %v, want ErrClosed", err)
		}
		if err := b.Connect(ctx, idC, "127.0.0.1:1"); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Connect after Close = %v, want ErrClosed", err)
		}
		if err := b.Disconnect(idA); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Disconnect after Close = %v, want ErrClosed", err)
		}
		if _, err := b.Listen(ctx, "127.0.0.1:0"); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Listen after Close = %v, want ErrClosed", err)
		}
	})
}

// testNoGoroutineLeak checks that Close leaves no goroutine behind, even
// with a Recv blocked and messages in flight.
func (s *suite) testNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var a, b transport.Transport
	t.Run("traffic", func(t *testing.T) {
		a, b = s.pair(t)
		send(t, a, msg(1, uint64s(1)))
		recv(t, b)
		send(t, b, &transport.Message{Meta: transport.Meta{Sender: idB, Recver: idA}})
		recv(t, a)
		for i := range 10 {
			send(t, a, msg(int32(i)))
		}
		errc := make(chan error, 1)
		go func() {
			_, err := a.Recv(context.Background())
			errc <- err
		}()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Recv blocked across Close = %v, want ErrClosed", err)
		}
		// b is closed by the subtest's cleanup.
	})
	goleak.VerifyNone(t, ignore)
}
