package zmq_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/transporttest"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

func jobCurve(t testing.TB, secret string) *zmq.Curve {
	t.Helper()
	if !zmq4.HasCurve() {
		t.Skip("libzmq without CURVE")
	}
	c, err := zmq.DeriveCurve([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDeriveCurve(t *testing.T) {
	a, b := jobCurve(t, "secret-a"), jobCurve(t, "secret-a")
	if a.ServerPublic != b.ServerPublic || a.ClientSecret != b.ClientSecret {
		t.Fatal("DeriveCurve is not a function of the secret")
	}
	c := jobCurve(t, "secret-b")
	if a.ServerPublic == c.ServerPublic || a.ClientPublic == c.ClientPublic || a.ServerPublic == a.ClientPublic {
		t.Fatal("different secrets or roles share a key")
	}
	// libzmq agrees on the public key of each secret key.
	pub, err := zmq4.AuthCurvePublic(zmq4.Z85encode(string(a.ServerSecret[:])))
	if err != nil || pub != zmq4.Z85encode(string(a.ServerPublic[:])) {
		t.Fatalf("libzmq's public key %q, err %v; derived %q", pub, err, zmq4.Z85encode(string(a.ServerPublic[:])))
	}
	if _, err := zmq.DeriveCurve(nil); err == nil {
		t.Fatal("DeriveCurve accepted an empty secret")
	}
}

func TestConformanceCurve(t *testing.T) {
	c := jobCurve(t, "conformance")
	transporttest.Run(t, func(t *testing.T) transport.Transport { return newTransport(t, zmq.Options{Curve: c}) })
}

func TestConformanceCurveLocal(t *testing.T) {
	c := jobCurve(t, "conformance")
	dir := t.TempDir()
	transporttest.Run(t, func(t *testing.T) transport.Transport {
		return newTransport(t, zmq.Options{Local: true, IPCDir: dir, Curve: c})
	})
}

// stranger is a raw DEALER in its own ZeroMQ context, set up by setup,
// connected to endpoint, with a monitor of its connection's events.
func stranger(t *testing.T, endpoint string, setup func(*zmq4.Socket) error) (*zmq4.Socket, *zmq4.Socket) {
	t.Helper()
	zctx, err := zmq4.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	s, err := zctx.NewSocket(zmq4.DEALER)
	if err != nil {
		t.Fatal(err)
	}
	mon := fmt.Sprintf("inproc://stranger-monitor-%p", s)
	if err := s.Monitor(mon, zmq4.EVENT_ALL); err != nil {
		t.Fatal(err)
	}
	m, err := zctx.NewSocket(zmq4.PAIR)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(mon); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.SetLinger(0)
		_ = m.SetLinger(0)
		_ = s.Close()
		_ = m.Close()
		_ = zctx.Term()
	})
	if err := s.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := setup(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(endpoint); err != nil {
		t.Fatal(err)
	}
	return s, m
}

// waitRefused reads the stranger's monitor until its handshake fails or
// the server drops it, and fails the test if the handshake succeeds.
func waitRefused(t *testing.T, mon *zmq4.Socket) {
	t.Helper()
	p := zmq4.NewPoller()
	p.Add(mon, zmq4.POLLIN)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		polled, err := p.Poll(time.Until(deadline))
		if err != nil {
			t.Fatal(err)
		}
		if len(polled) == 0 {
			break
		}
		ev, _, _, err := mon.RecvEvent(0)
		if err != nil {
			t.Fatal(err)
		}
		switch ev {
		case zmq4.EVENT_HANDSHAKE_SUCCEEDED:
			t.Fatal("the stranger completed the handshake")
		case zmq4.EVENT_HANDSHAKE_FAILED_AUTH, zmq4.EVENT_HANDSHAKE_FAILED_PROTOCOL,
			zmq4.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq4.EVENT_DISCONNECTED:
			t.Logf("stranger: %v", ev)
			return
		}
	}
	t.Fatal("no handshake outcome for the stranger within 20 s")
}

// TestCurveRefusesStranger: a peer that knows the port and the node ids
// but not the job secret gets no message accepted, whether it speaks
// plain ZeroMQ, holds the keys of another secret, or knows the job's
// server public key but has a key pair of its own.
func TestCurveRefusesStranger(t *testing.T) {
	job := jobCurve(t, "the job secret")
	other := jobCurve(t, "a guess")
	pub, sec, err := zmq4.NewCurveKeypair()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func(*zmq4.Socket) error
	}{
		{"plain", func(*zmq4.Socket) error { return nil }},
		{"other secret", func(s *zmq4.Socket) error {
			return s.ClientAuthCurve(zmq4.Z85encode(string(other.ServerPublic[:])),
				zmq4.Z85encode(string(other.ClientPublic[:])), zmq4.Z85encode(string(other.ClientSecret[:])))
		}},
		{"own client key", func(s *zmq4.Socket) error {
			return s.ClientAuthCurve(zmq4.Z85encode(string(job.ServerPublic[:])), pub, sec)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTransport(t, zmq.Options{Curve: job})
			addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// The stranger pushes under the id of a real node.
			s, mon := stranger(t, "tcp://"+addr, tc.setup)
			forged := &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 1, Timestamp: 666, Request: true, Push: true}}
			meta, err := transport.AppendMeta(nil, &forged.Meta)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SendBytes(meta, zmq4.DONTWAIT); err != nil {
				t.Fatal(err)
			}
			waitRefused(t, mon)

			// A node of the job is heard, and only it.
			node := newTransport(t, zmq.Options{Curve: job})
			if err := node.Connect(t.Context(), 1, addr); err != nil {
				t.Fatal(err)
			}
			if _, err := node.Send(t.Context(), &transport.Message{Meta: transport.Meta{Sender: 9, Recver: 1, Timestamp: 1}}); err != nil {
				t.Fatal(err)
			}
			if m := recv(t, srv); m.Meta.Timestamp != 1 {
				t.Fatalf("received %+v, want the node's message", m.Meta)
			}
			if st := srv.Stats(); st.Received != 1 || st.Malformed != 0 {
				t.Fatalf("stats %+v, want one message received", st)
			}
		})
	}
}

// tap is a TCP proxy on loopback that records the bytes a client sends
// to a server.
type tap struct {
	ln   net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
	wg   sync.WaitGroup
}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln}
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
		p.wg.Wait()
	})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, u)
			cmu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, u) }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(u, io.TeeReader(c, p)) }()
		}
	}()
	return p
}

func (p *tap) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.Write(b)
}

func (p *tap) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.seen.Bytes())
}

// TestCurveHidesData sends a push (a key list and a float pattern) between
// two nodes through a recording proxy: with CURVE the recorded bytes hold
// neither, without it they hold both.
func TestCurveHidesData(t *testing.T) {
	job := jobCurve(t, "the job secret")
	keys := make([]byte, 8*64)
	for i := range 64 {
		binary.LittleEndian.PutUint64(keys[8*i:], uint64(1000003*i+17))
	}
	vals := make([]byte, 4*256)
	for i := range 256 {
		binary.LittleEndian.PutUint32(vals[4*i:], math.Float32bits(0.123456+float32(i)))
	}
	for _, tc := range []struct {
		name      string
		curve     *zmq.Curve
		plaintext bool
	}{{"curve", job, false}, {"insecure", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTransport(t, zmq.Options{Curve: tc.curve})
			addr, err := srv.Listen(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p := newTap(t, addr)
			node := newTransport(t, zmq.Options{Curve: tc.curve})
			if err := node.Connect(t.Context(), 1, p.ln.Addr().String()); err != nil {
				t.Fatal(err)
			}
			m := &transport.Message{
				Meta: transport.Meta{Sender: 9, Recver: 1, Timestamp: 5, Request: true, Push: true,
					DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32}},
				Data: [][]byte{keys, vals},
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if _, err := node.Send(ctx, m); err != nil {
				t.Fatal(err)
			}
			got := recv(t, srv)
			if len(got.Data) != 2 || !bytes.Equal(got.Data[0], keys) || !bytes.Equal(got.Data[1], vals) {
				t.Fatal("the push arrived changed")
			}
			wire := p.bytes()
			if len(wire) < len(keys)+len(vals) {
				t.Fatalf("the proxy saw %d bytes, fewer than the message", len(wire))
			}
			for name, b := range map[string][]byte{"keys": keys[:64], "values": vals[:64]} {
				if bytes.Contains(wire, b) != tc.plaintext {
					t.Errorf("%s in plaintext on the wire: %v, want %v", name, !tc.plaintext, tc.plaintext)
				}
			}
		})
	}
}
