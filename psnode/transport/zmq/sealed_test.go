package zmq_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// pattern is n bytes of float32 values that are easy to find on the wire.
func pattern(n int, seed float32) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(seed+float32(i)))
	}
	return b
}

func bigPush(recver int32, ts int32, data ...[]byte) *transport.Message {
	types := make([]transport.DataType, len(data))
	for i := range types {
		types[i] = transport.TypeFloat32
	}
	return &transport.Message{
		Meta: transport.Meta{Sender: 9, Recver: recver, Timestamp: ts, Request: true, Push: true, DataTypes: types},
		Data: data,
	}
}

// awaitSealed sends large messages from node to srv, its peer id, until
// one goes over the sealed route, which node learns of once srv has
// answered its question, receiving each. It fails after 20 s.
func awaitSealed(t *testing.T, node, srv *zmq.Transport, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := pattern(256<<10, 7)
	for i := int32(0); node.Stats().Sealed == 0; i++ {
		if _, err := node.Send(ctx, bigPush(id, i, b)); err != nil {
			t.Fatalf("no message went over the sealed route: %v", err)
		}
		if m := recv(t, srv); !bytes.Equal(m.Data[0], b) {
			t.Fatal("a large message arrived changed")
		}
	}
}

// sealedPair is a CURVE transport listening and another connected to it
// as peer 1, each route through a recording proxy when tapped.
func sealedPair(t *testing.T, opts zmq.Options, tapped bool) (srv, node *zmq.Transport, curveTap, sealedTap *tap) {
	t.Helper()
	srv = newTransport(t, opts)
	addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tapped {
		if zmq.SealedPort(srv) == 0 {
			t.Fatal("a CURVE transport has no sealed route")
		}
		sealedTap = newTap(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(zmq.SealedPort(srv)))))
		zmq.AdvertiseSealed(srv, uint16(sealedTap.ln.Addr().(*net.TCPAddr).Port))
		curveTap = newTap(t, addr)
		addr = curveTap.ln.Addr().String()
	}
	node = newTransport(t, opts)
	if err := node.Connect(t.Context(), 1, addr); err != nil {
		t.Fatal(err)
	}
	return srv, node, curveTap, sealedTap
}

// TestSealedHidesData sends large frames, sealed beside CURVE, through
// recording proxies on both routes: they arrive intact, and neither proxy
// saw a sample of them; only the sealed route carried their bulk.
func TestSealedHidesData(t *testing.T) {
	job := jobCurve(t, "the job secret")
	srv, node, curveTap, sealedTap := sealedPair(t, zmq.Options{Curve: job}, true)
	awaitSealed(t, node, srv, 1)
	// The messages that waited for the sealed route went through CURVE,
	// and the tap holds them: a message's bytes are recorded before they
	// reach the receiver.
	curveBefore := len(curveTap.bytes())
	before := node.Stats().Sealed
	keys, vals := pattern(5<<20+124, 0.25), pattern(300<<10, 0.5)
	small := pattern(100, 0.75)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := node.Send(ctx, bigPush(1, 100, keys, small, vals)); err != nil {
		t.Fatal(err)
	}
	got := recv(t, srv)
	if got.Meta.Timestamp != 100 || len(got.Data) != 3 || !bytes.Equal(got.Data[0], keys) ||
		!bytes.Equal(got.Data[1], small) || !bytes.Equal(got.Data[2], vals) {
		t.Fatal("the message arrived changed")
	}
	if node.Stats().Sealed != before+1 {
		t.Fatalf("sealed messages %d, want %d", node.Stats().Sealed, before+1)
	}
	sealedWire, curveWire := sealedTap.bytes(), curveTap.bytes()
	if len(sealedWire) < len(keys)+len(vals) {
		t.Fatalf("the sealed route carried %d bytes, fewer than the large frames", len(sealedWire))
	}
	if n := len(curveWire) - curveBefore; n >= len(keys) {
		t.Fatalf("the CURVE route carried %d bytes of the message: the large frames went there too", n)
	}
	for name, wire := range map[string][]byte{"sealed": sealedWire, "CURVE": curveWire} {
		for what, b := range map[string][]byte{"keys": keys[4096:4160], "values": vals[:64], "small frame": small[:64]} {
			if bytes.Contains(wire, b) {
				t.Errorf("%s in plaintext on the %s route", what, name)
			}
		}
	}
}

// TestSealedKeepsOrder sends small and large messages in turn, and a large
// one of several frames: they arrive in the order sent, each intact, over
// TCP and over ipc.
func TestSealedKeepsOrder(t *testing.T) {
	job := jobCurve(t, "the job secret")
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			opts := zmq.Options{Curve: job}
			if local {
				opts.Local, opts.IPCDir = true, t.TempDir()
			}
			srv, node, _, _ := sealedPair(t, opts, false)
			awaitSealed(t, node, srv, 1)
			before := node.Stats().Sealed
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var sent []*transport.Message
			for i := range int32(24) {
				var m *transport.Message
				switch i % 3 {
				case 0:
					m = bigPush(1, i, pattern(64, float32(i)))
				case 1:
					m = bigPush(1, i, pattern(64<<10+4*int(i), float32(i)))
				default:
					m = bigPush(1, i, pattern(3<<20+4*int(i), float32(i)), pattern(8, 1), pattern(1<<20, float32(-i)))
				}
				if _, err := node.Send(ctx, m); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, m)
			}
			for _, want := range sent {
				got := recv(t, srv)
				if got.Meta.Timestamp != want.Meta.Timestamp {
					t.Fatalf("message %d arrived where %d was sent", got.Meta.Timestamp, want.Meta.Timestamp)
				}
				for i := range want.Data {
					if !bytes.Equal(got.Data[i], want.Data[i]) {
						t.Fatalf("message %d, frame %d arrived changed", want.Meta.Timestamp, i)
					}
				}
			}
			if n := node.Stats().Sealed - before; n != 16 {
				t.Errorf("%d of the 16 large messages went over the sealed route", n)
			}
		})
	}
}

// TestSealedRouteStranger: the sealed route, which has no ZeroMQ
// cipher, admits only the job's nodes. A stranger that knows its port
// but not the job secret is refused in the handshake, whether it speaks
// plain ZeroMQ or PLAIN with a guessed password; and it cannot have the
// node hold what it sends: the frames of a message that never ends,
// which libzmq would keep without bound on an open route, meet a closed
// connection. The job's large messages go on arriving sealed.
func TestSealedRouteStranger(t *testing.T) {
	job := jobCurve(t, "the job secret")
	srv, node, _, _ := sealedPair(t, zmq.Options{Curve: job}, false)
	awaitSealed(t, node, srv, 1)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(zmq.SealedPort(srv))))
	for _, tc := range []struct {
		name  string
		setup func(*zmq4.Socket) error
		auth  bool // refused by the ZAP handler, not by ZeroMQ's handshake
	}{
		{"plain", func(*zmq4.Socket) error { return nil }, false},
		{"guessed password", func(s *zmq4.Socket) error { return s.ClientAuthPlain("spindle", "a guess") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Stats().Refused
			s, mon := stranger(t, "tcp://"+addr, tc.setup)
			// What the stranger sends goes nowhere; a socket whose
			// connection was refused may not even take it (EAGAIN), and
			// must not block the test.
			_, _ = s.SendMessageDontwait(bytes.Repeat([]byte{1}, 16), pattern(1<<16+16, 1))
			waitRefused(t, mon)
			if got := srv.Stats().Refused; tc.auth && got == before {
				t.Fatal("the transport did not count the refused connection")
			}
		})
	}

	const frame, frames = 64 << 20, 24
	if n, err := floodZMTP(addr, frame, frames); err == nil {
		t.Fatalf("the sealed route took %d bytes of a never-ending message from a stranger", n)
	} else {
		t.Logf("the stranger's flood stopped after %d bytes: %v", n, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	before := srv.Stats()
	want := pattern(1<<20, 3)
	if _, err := node.Send(ctx, bigPush(1, 7, want)); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, srv); got.Meta.Timestamp != 7 || !bytes.Equal(got.Data[0], want) {
		t.Fatal("the job's message after the strangers' did not arrive intact")
	}
	if st := srv.Stats(); st.Received != before.Received+1 || st.Malformed != 0 || st.Lost != 0 {
		t.Fatalf("stats %+v, want the job's messages alone", st)
	}
}

// floodZMTP speaks ZMTP 3.0 to addr with the NULL mechanism, as any
// ZeroMQ DEALER without security would, and sends frames frames of frame
// bytes each, all flagged as followed by more, so that they make one
// message that never ends. It returns how many bytes were written, and
// the error that stopped it, nil if all were.
func floodZMTP(addr string, frame, frames int) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ready := []byte("\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER")
	hello := append([]byte{0x04, byte(len(ready))}, ready...)
	written, err := writeAll(c, 1, zmtpGreeting("NULL", false), hello)
	if err != nil {
		return written, err
	}
	n, err := writeAll(c, frames, append(longFrame(frame, false), make([]byte, frame)...))
	return written + n, err
}

// TestSealedRouteJunk: a connection that may open the sealed route (it
// has the password) but sends payloads no envelope names, and a message
// that is no payload at all, never reaches Recv; the job's messages go on
// arriving, each the next one.
func TestSealedRouteJunk(t *testing.T) {
	job := jobCurve(t, "the job secret")
	srv, node, _, _ := sealedPair(t, zmq.Options{Curve: job}, false)
	awaitSealed(t, node, srv, 1)
	s, _ := stranger(t, "tcp://127.0.0.1:"+strconv.Itoa(int(zmq.SealedPort(srv))), func(s *zmq4.Socket) error {
		return s.ClientAuthPlain("spindle", zmq.SealedPassword(job))
	})
	for i := range 100 {
		tag := bytes.Repeat([]byte{byte(i)}, 16)
		if _, err := s.SendMessage(tag, pattern(1<<16+16, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SendMessage("not a tag"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// A message sent after the junk is the next one received.
	want := pattern(1<<20, 3)
	for srv.Stats().Malformed == 0 {
		// The last message is dropped as malformed; until then the job's
		// messages go on arriving, each the next one.
		m := bigPush(1, 7, want)
		if _, err := node.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, srv); got.Meta.Timestamp != 7 || !bytes.Equal(got.Data[0], want) {
			t.Fatal("a payload no envelope named reached Recv")
		}
	}
}

// TestSealedRouteAfterPeerRestart: the peer's process is replaced by one
// listening at the same address, whose sealed route is elsewhere. The
// sender's connection comes back by itself; it asks again, and large
// frames go sealed to the new process.
func TestSealedRouteAfterPeerRestart(t *testing.T) {
	job := jobCurve(t, "the job secret")
	old, err := zmq.New(zmq.Options{Curve: job, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := old.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := newTransport(t, zmq.Options{Curve: job})
	if err := node.Connect(t.Context(), 1, addr); err != nil {
		t.Fatal(err)
	}
	awaitSealed(t, node, old, 1)
	oldPort := zmq.SealedPort(old)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	srv := newTransport(t, zmq.Options{Curve: job})
	if _, err := srv.Listen(t.Context(), addr); err != nil {
		t.Fatal(err)
	}
	if zmq.SealedPort(srv) == oldPort {
		t.Skip("the new process's sealed route took the old one's port")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// What is sent while the peer dies may be lost, as on any ZeroMQ
	// connection (the node layer resends): small messages go until the
	// new process has one. From then on none is lost.
	for k := int32(-1); ; k-- {
		if _, err := node.Send(ctx, bigPush(1, k, []byte("one."))); err != nil {
			t.Fatal(err)
		}
		wait, stop := context.WithTimeout(ctx, 200*time.Millisecond)
		m, err := srv.Recv(wait)
		stop()
		if err == nil {
			m.Release()
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the new process heard nothing from the node")
		}
	}
	before := node.Stats().Sealed
	b := pattern(256<<10, 5)
	for i := int32(0); node.Stats().Sealed == before; i++ {
		if _, err := node.Send(ctx, bigPush(1, i, b)); err != nil {
			t.Fatalf("no large frame went sealed to the new process: %v", err)
		}
		m := recv(t, srv)
		for m.Meta.Timestamp < 0 { // a small message sent before
			m.Release()
			m = recv(t, srv)
		}
		if m.Meta.Timestamp != i || !bytes.Equal(m.Data[0], b) {
			t.Fatalf("message %d arrived as %d (%d bytes)", i, m.Meta.Timestamp, len(m.Data[0]))
		}
	}
}
