package zmq_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// zmtpGreeting is ZMTP 3.0's greeting: signature, version 3.0, the
// security mechanism, as server or not.
func zmtpGreeting(mechanism string, asServer bool) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], mechanism)
	if asServer {
		g[32] = 1
	}
	return g
}

// longFrame is the header of a frame of n bytes, a command or a message
// followed by more.
func longFrame(n int, command bool) []byte {
	head := make([]byte, 9)
	head[0] = 0x02 // long
	if command {
		head[0] |= 0x04
	} else {
		head[0] |= 0x01 // more
	}
	binary.BigEndian.PutUint64(head[1:], uint64(n))
	return head
}

// writeAll writes each of bufs to c, the last repeat times, within 20 s.
// It returns how many bytes were written, and the error that stopped it,
// nil if all were.
func writeAll(c net.Conn, repeat int, bufs ...[]byte) (int64, error) {
	if err := c.SetWriteDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return 0, err
	}
	var written int64
	for i, b := range bufs {
		times := 1
		if i == len(bufs)-1 {
			times = repeat
		}
		for range times {
			n, err := c.Write(b)
			written += int64(n)
			if err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// floodHandshake speaks ZMTP 3.0 on c with the security mechanism
// mechanism, as server or not, and sends the first frame of its
// handshake: a command that announces announce bytes, of which it writes
// send (a multiple of 1 MiB). It returns what writeAll returns.
func floodHandshake(c net.Conn, mechanism string, asServer bool, announce, send int) (int64, error) {
	return writeAll(c, send>>20, zmtpGreeting(mechanism, asServer), longFrame(announce, true), make([]byte, 1<<20))
}

// TestHandshakeFrameBounded: a stranger who reaches a node's ports, and
// knows no key, sends the first frame of a handshake, one that announces
// a GiB: libzmq, which reads a frame whole before the mechanism sees it,
// would hold what came of it until the handshake timed out. The node
// closes the connection instead, on the CURVE route and on the sealed
// route; and a node's own connection to a peer's address, where a
// stranger listens, does the same. The job's messages go on arriving.
func TestHandshakeFrameBounded(t *testing.T) {
	job := jobCurve(t, "the job secret")
	srv := newTransport(t, zmq.Options{Curve: job})
	addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := newTransport(t, zmq.Options{Curve: job})
	if err := node.Connect(t.Context(), 1, addr); err != nil {
		t.Fatal(err)
	}
	awaitSealed(t, node, srv, 1)
	_, curvePort, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	const announce, send = 1 << 30, 256 << 20

	for name, port := range map[string]string{"CURVE": curvePort, "sealed": strconv.Itoa(int(zmq.SealedPort(srv)))} {
		t.Run(name, func(t *testing.T) {
			mechanism := "CURVE"
			if name == "sealed" {
				mechanism = "PLAIN"
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			n, err := floodHandshake(c, mechanism, false, announce, send)
			if err == nil {
				t.Fatalf("the %s route took %d bytes of a stranger's handshake frame", name, n)
			}
			t.Logf("the stranger's frame stopped after %d bytes: %v", n, err)
		})
	}

	t.Run("squatter", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		peer := newTransport(t, zmq.Options{Curve: job})
		if err := peer.Connect(t.Context(), 5, ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("the node never connected: %v", err)
		}
		defer c.Close()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		n, err := floodHandshake(c, "CURVE", true, announce, send)
		if err == nil {
			t.Fatalf("the node's connection took %d bytes of a squatter's handshake frame", n)
		}
		t.Logf("the squatter's frame stopped after %d bytes: %v", n, err)
	})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	want := pattern(1<<20, 3)
	if _, err := node.Send(ctx, bigPush(1, 7, want)); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, srv); got.Meta.Timestamp != 7 || !bytes.Equal(got.Data[0], want) {
		t.Fatal("the job's message after the strangers' did not arrive intact")
	}
}

// TestFramesOverTheBound sends data frames longer than a node takes in
// one ZeroMQ frame with CURVE, beside frames under it: pieced on the
// sealed route, and split through CURVE when that is the way (here a
// sender that seals nothing). Each message arrives whole, in order, and
// no frame of it broke the receiver's bound, or its connection would have
// been closed and the message lost.
func TestFramesOverTheBound(t *testing.T) {
	job := jobCurve(t, "the job secret")
	for _, tc := range []struct {
		name     string
		noSealed bool
	}{{"sealed route", false}, {"CURVE", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTransport(t, zmq.Options{Curve: job})
			addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			node := newTransport(t, zmq.Options{Curve: job, NoSealed: tc.noSealed})
			if err := node.Connect(t.Context(), 1, addr); err != nil {
				t.Fatal(err)
			}
			if !tc.noSealed {
				awaitSealed(t, node, srv, 1)
			}
			before := node.Stats().Sealed
			big := zmq.MaxFrame + zmq.MaxFrame/2 + 12
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			sent := []*transport.Message{
				bigPush(1, 1, pattern(big, 1), pattern(100, 2), pattern(zmq.MaxFrame, 3), pattern(2*zmq.MaxFrame+4, 4)),
				bigPush(1, 2, pattern(64, 5)),
				bigPush(1, 3, pattern(big, 6)),
			}
			for _, m := range sent {
				if _, err := node.Send(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			for _, want := range sent {
				got := recv(t, srv)
				if got.Meta.Timestamp != want.Meta.Timestamp || len(got.Data) != len(want.Data) {
					t.Fatalf("message %d of %d frames arrived where %d of %d was sent", got.Meta.Timestamp, len(got.Data), want.Meta.Timestamp, len(want.Data))
				}
				for i := range want.Data {
					if !bytes.Equal(got.Data[i], want.Data[i]) {
						t.Fatalf("message %d, frame %d arrived changed", want.Meta.Timestamp, i)
					}
				}
				got.Release()
			}
			sealed := node.Stats().Sealed - before
			if tc.noSealed && sealed != 0 || !tc.noSealed && sealed != 2 {
				t.Errorf("%d of the messages went over the sealed route", sealed)
			}
			if st := srv.Stats(); st.Malformed != 0 || st.Lost != 0 {
				t.Errorf("receiver stats %+v", st)
			}
		})
	}
}
