package zmq

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestRawSocket checks that the receive loop finds libzmq's socket behind
// pebbe/zmq4's, for both socket types it uses, so that the direct calls
// are what the other tests exercise, and refuses a socket of another type.
func TestRawSocket(t *testing.T) {
	zctx, err := zmq4.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer zctx.Term()
	for _, typ := range []zmq4.Type{zmq4.DEALER, zmq4.ROUTER} {
		s, err := zctx.NewSocket(typ)
		if err != nil {
			t.Fatal(err)
		}
		if rawSocket(s, typ) == nil {
			t.Errorf("no libzmq socket found behind a %v socket", typ)
		}
		other := zmq4.ROUTER
		if typ == zmq4.ROUTER {
			other = zmq4.DEALER
		}
		if rawSocket(s, other) != nil {
			t.Errorf("a %v socket was taken for a %v socket", typ, other)
		}
		_ = s.Close()
	}
}

// TestFramesIntact sends frames from empty to 8 MiB between two
// transports, changes the sender's buffers as soon as Send returns, and
// requires the receiver to get the bytes as they were when sent, through
// the receive loop's direct calls.
func TestFramesIntact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr, err := b.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx, 8, addr); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{256<<10 - 1, 256 << 10, 3<<18 + 5, 8<<20 + 4097, 0, 1}
	var want [][]byte
	for i, n := range sizes {
		buf := make([]byte, n)
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		want = append(want, bytes.Clone(buf))
		m := &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 8, Timestamp: int32(i), DataTypes: []transport.DataType{transport.TypeChar}}, Data: [][]byte{buf}}
		if _, err := a.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] ^= 0xff // the sender reuses its buffer at once
		}
	}
	for i := range sizes {
		m, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ts := m.Meta.Timestamp
		if int(ts) != i || len(m.Data) != 1 || !bytes.Equal(m.Data[0], want[ts]) {
			t.Fatalf("message %d: got timestamp %d with %d frames, first frame intact: %v", i, ts, len(m.Data), len(m.Data) == 1 && bytes.Equal(m.Data[0], want[ts]))
		}
	}
}
