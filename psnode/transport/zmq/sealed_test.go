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

// awaitSealed sends large messages from node to srv until one goes over
// the sealed route, which node learns of once srv has answered its
// question, receiving each. It fails after 20 s.
func awaitSealed(t *testing.T, node, srv *zmq.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := pattern(256<<10, 7)
	for i := int32(0); node.Stats().Sealed == 0; i++ {
		if _, err := node.Send(ctx, bigPush(1, i, b)); err != nil {
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
	awaitSealed(t, node, srv)
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
	if len(curveWire) >= len(keys) {
		t.Fatalf("the CURVE route carried %d bytes: the large frames went there too", len(curveWire))
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
			awaitSealed(t, node, srv)
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

// TestSealedRouteStranger connects a plain DEALER to the sealed route and
// sends what a stranger could: payloads under made-up tags, and bytes of
// no form at all. Nothing reaches Recv, and the job's messages still do.
func TestSealedRouteStranger(t *testing.T) {
	job := jobCurve(t, "the job secret")
	srv, node, _, _ := sealedPair(t, zmq.Options{Curve: job}, false)
	awaitSealed(t, node, srv)
	zctx, err := zmq4.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer zctx.Term()
	s, err := zctx.NewSocket(zmq4.DEALER)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetLinger(0)
	if err := s.Connect("tcp://127.0.0.1:" + strconv.Itoa(int(zmq.SealedPort(srv)))); err != nil {
		t.Fatal(err)
	}
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
	// A message sent after the stranger's is the next one received.
	want := pattern(1<<20, 3)
	for srv.Stats().Malformed == 0 {
		// The stranger's last message is dropped as malformed; until then
		// the job's messages go on arriving, each the next one.
		m := bigPush(1, 7, want)
		if _, err := node.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, srv); got.Meta.Timestamp != 7 || !bytes.Equal(got.Data[0], want) {
			t.Fatal("a stranger's payload reached Recv")
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
	awaitSealed(t, node, old)
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
	before := node.Stats().Sealed
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := pattern(256<<10, 5)
	for i := int32(0); node.Stats().Sealed == before; i++ {
		if _, err := node.Send(ctx, bigPush(1, i, b)); err != nil {
			t.Fatalf("no large frame went sealed to the new process: %v", err)
		}
		if m := recv(t, srv); m.Meta.Timestamp != i || !bytes.Equal(m.Data[0], b) {
			t.Fatalf("message %d arrived as %d (%d bytes)", i, m.Meta.Timestamp, len(m.Data[0]))
		}
	}
}
