package zmq_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// fill writes pattern v to b: byte i is v+i%251, so that a part of a
// frame moved to another offset shows too.
func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v + byte(i%251)
	}
}

// firstNot returns the index of the first byte of b that breaks pattern
// v, or -1.
func firstNot(b []byte, v byte) int {
	for i, x := range b {
		if x != v+byte(i%251) {
			return i
		}
	}
	return -1
}

// TestLargeFramesReusableAfterSend checks the promise that lets Send skip
// the copy of large frames: a caller may overwrite its buffers as soon as
// Send returns, and the peer still receives what was sent.
func TestLargeFramesReusableAfterSend(t *testing.T) {
	forTCPAndIPC(t, func(t *testing.T, opts zmq.Options) {
		a, b := newTransport(t, opts), newTransport(t, opts)
		addr, err := b.Listen(t.Context(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Connect(t.Context(), 2, addr); err != nil {
			t.Fatal(err)
		}
		// A small frame, one just at the lending threshold and an odd-sized one
		// large enough to be received in parallel parts.
		frames := [][]byte{make([]byte, 100), make([]byte, 64<<10), make([]byte, 17<<20+5)}
		for i := range 10 {
			for j, f := range frames {
				fill(f, byte(3*i+j+1))
			}
			m := &transport.Message{Meta: transport.Meta{Sender: 1, Recver: 2, Timestamp: int32(i)}, Data: frames}
			if _, err := a.Send(t.Context(), m); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
			for _, f := range frames {
				clear(f) // the caller reuses its buffers
			}
			got := recv(t, b)
			if len(got.Data) != len(frames) {
				t.Fatalf("message %d: %d data frames, want %d", i, len(got.Data), len(frames))
			}
			for j, f := range got.Data {
				if len(f) != len(frames[j]) {
					t.Fatalf("message %d frame %d: %d bytes, want %d", i, j, len(f), len(frames[j]))
				}
				if k := firstNot(f, byte(3*i+j+1)); k >= 0 {
					t.Fatalf("message %d frame %d: byte %d is %#x, want %#x: the frame was read after Send returned, or put together wrong", i, j, k, f[k], byte(3*i+j+1)+byte(k%251))
				}
			}
		}
		if a.Stats().Lent == 0 {
			t.Fatal("no frame was sent without a copy")
		}
	})
}

// silentPeer accepts one TCP connection, reads the first byte ZeroMQ sends
// (so the connection is up) and then neither answers nor reads. It
// returns the address and a channel that yields the connection.
func silentPeer(t *testing.T) (string, net.Listener, <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	conns := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(conns)
			return
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			close(conns)
			return
		}
		conns <- c
	}()
	return l.Addr().String(), l, conns
}

func awaitConn(t *testing.T, conns <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c, ok := <-conns:
		if !ok {
			t.Fatal("the silent peer's connection failed")
		}
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("ZeroMQ did not connect to the silent peer")
	}
	return nil
}

// moveToLivePeer points a's route to id at a new transport and checks a
// large message gets there intact.
func moveToLivePeer(t *testing.T, a *zmq.Transport, id int32) {
	t.Helper()
	b := newTransport(t, zmq.Options{})
	addr, err := b.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(t.Context(), id, addr); err != nil {
		t.Fatal(err)
	}
	m := bigMessage(id)
	fill(m.Data[0], 7)
	if _, err := a.Send(t.Context(), m); err != nil {
		t.Fatalf("Send after the route moved: %v", err)
	}
	if got := recv(t, b); len(got.Data) != 1 || firstNot(got.Data[0], 7) >= 0 {
		t.Fatal("the message after the route moved arrived damaged")
	}
}

// lentToSilentPeer connects a new transport's route m.Meta.Recver to a
// silentPeer and starts a Send of m, whose result errc yields, once that
// Send has lent its frame to ZeroMQ and waits for it. breakConn closes
// the peer's connection and its listener.
func lentToSilentPeer(t *testing.T, m *transport.Message) (a *zmq.Transport, addr string, breakConn func(), errc <-chan error) {
	t.Helper()
	a = newTransport(t, zmq.Options{})
	addr, l, conns := silentPeer(t)
	if err := a.Connect(t.Context(), m.Meta.Recver, addr); err != nil {
		t.Fatal(err)
	}
	c := awaitConn(t, conns)
	ch := make(chan error, 1)
	go func() {
		_, err := a.Send(t.Context(), m)
		ch <- err
	}()
	awaitLent(t, a, ch)
	return a, addr, func() { _ = l.Close(); _ = c.Close() }, ch
}

// sendResult returns what the Send reporting to errc returned, failing
// the test if it still waits 20 s after the event named by after.
func sendResult(t *testing.T, errc <-chan error, after string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("Send still waits 20 s after %s", after)
		return nil
	}
}

// awaitLent waits until a has lent a frame to ZeroMQ, which the Send
// reporting to errc then waits to get back.
func awaitLent(t *testing.T, a *zmq.Transport, errc <-chan error) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for a.Stats().Lent == 0 {
		select {
		case err := <-errc:
			t.Fatalf("Send returned %v before the frame was lent", err)
		case <-deadline:
			t.Fatal("the frame was not lent to ZeroMQ within 20 s")
		case <-tick.C:
		}
	}
}

func bigMessage(to int32) *transport.Message {
	return &transport.Message{Meta: transport.Meta{Sender: 1, Recver: to}, Data: [][]byte{make([]byte, 4<<20)}}
}

// TestLargeFrameToSilentPeer checks that a Send whose large frame a
// connected peer never takes gives up at its context's deadline, and that
// the route then works again once it points at a live peer.
func TestLargeFrameToSilentPeer(t *testing.T) {
	a := newTransport(t, zmq.Options{})
	addr, _, conns := silentPeer(t)
	if err := a.Connect(t.Context(), 8, addr); err != nil {
		t.Fatal(err)
	}
	awaitConn(t, conns)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := a.Send(ctx, bigMessage(8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send to a silent peer = %v, want the context's deadline", err)
	}
	if n := a.Stats().Lent; n != 1 {
		t.Fatalf("Lent = %d, want 1", n)
	}

	moveToLivePeer(t, a, 8)
}

// TestLargeFramePeerGone checks that a Send without a deadline, whose
// large frame waits on a connection that then dies and cannot be made
// again, returns rather than waiting for ever, and that the route works
// again once it points at a live peer.
func TestLargeFramePeerGone(t *testing.T) {
	a, _, breakConn, errc := lentToSilentPeer(t, bigMessage(8))
	breakConn()
	// The message is lost with the connection, as ZeroMQ loses one it was
	// writing; a successful Send never meant delivery.
	if err := sendResult(t, errc, "its peer went away"); err != nil {
		t.Fatalf("Send to a peer whose connection broke = %v, want nil", err)
	}

	moveToLivePeer(t, a, 8)
}

// TestLargeFrameSurvivesReconnect checks that a message whose frame waits
// on a connection that breaks is written once ZeroMQ reconnects, when the
// peer is back at the same address within the grace period, rather than
// dropped.
func TestLargeFrameSurvivesReconnect(t *testing.T) {
	m := bigMessage(8)
	fill(m.Data[0], 5)
	a, addr, breakConn, errc := lentToSilentPeer(t, m)
	breakConn()
	// A live peer takes the address over; ZeroMQ reconnects to it.
	b := newTransport(t, zmq.Options{})
	if _, err := b.Listen(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	if err := sendResult(t, errc, "its peer came back"); err != nil {
		t.Fatalf("Send across a reconnect: %v", err)
	}
	if got := recv(t, b); len(got.Data) != 1 || firstNot(got.Data[0], 5) >= 0 {
		t.Fatal("the message written after the reconnect arrived damaged")
	}
	if n := a.Stats().Lent; n != 1 {
		t.Fatalf("Lent = %d, want 1: the message was not the lent one", n)
	}
}

// TestBorrowedFrames: with a lender, the large frames of the messages it
// picks arrive as libzmq's buffers, lent: intact, counted, nil once
// released, or copied by Own and still intact after the release; small
// frames and the messages it does not pick come as copies. Over TCP and
// ipc, plain and with CURVE (whose large frames go sealed once the route
// is known: those the lender picks are opened in libzmq's buffers and
// lent, the others opened into Go memory).
func TestBorrowedFrames(t *testing.T) {
	forTCPAndIPC(t, func(t *testing.T, opts zmq.Options) {
		for _, curve := range []bool{false, true} {
			o := opts
			if curve {
				o.Curve = jobCurve(t, "secret")
			}
			a, b := newTransport(t, o), newTransport(t, o)
			b.SetLender(func(m *transport.Meta) bool { return m.Head == 1 })
			addr, err := b.Listen(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Connect(t.Context(), 2, addr); err != nil {
				t.Fatal(err)
			}
			if curve {
				// The large messages below go sealed, once a has learnt
				// the route.
				awaitSealed(t, a, b, 2)
			}
			sealedBefore := a.Stats().Sealed
			big := make([]byte, 5<<20+3)
			for i, head := range []int32{1, 0, 1} {
				fill(big, byte(i+1))
				m := &transport.Message{Meta: transport.Meta{Sender: 1, Recver: 2, Head: head, Timestamp: int32(i)}, Data: [][]byte{make([]byte, 10), big}}
				if _, err := a.Send(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				got, err := b.Recv(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if k := firstNot(got.Data[1], byte(i+1)); k >= 0 || len(got.Data[1]) != len(big) {
					t.Fatalf("message %d: the large frame differs at byte %d", i, k)
				}
				wantLent := head == 1
				if got.Lent() != wantLent {
					t.Fatalf("message %d (head %d, CURVE %v): lent %v, want %v", i, head, curve, got.Lent(), wantLent)
				}
				if !wantLent {
					continue
				}
				if i == 0 {
					got.Release()
					if got.Data[1] != nil || got.Data[0] == nil || got.Lent() {
						t.Errorf("after Release: frames of %d and %d bytes, lent %v; want the lent one gone", len(got.Data[0]), len(got.Data[1]), got.Lent())
					}
					got.Release() // again: nothing
					continue
				}
				got.Own()
				got.Release() // nothing to give back any more
				if k := firstNot(got.Data[1], byte(i+1)); k >= 0 || got.Lent() {
					t.Errorf("message %d: after Own and Release the frame differs at byte %d (lent %v)", i, k, got.Lent())
				}
			}
			if n := b.Stats().Borrowed; n != 2 {
				t.Errorf("CURVE %v: Borrowed = %d, want 2", curve, n)
			}
			if n := a.Stats().Sealed - sealedBefore; curve && n != 3 {
				t.Errorf("%d of the 3 large messages went sealed", n)
			}
			if out := zmq.BorrowedOut(b); out != 0 {
				t.Errorf("%d lent frames not given back after Release and Own", out)
			}
		}
	})
}
