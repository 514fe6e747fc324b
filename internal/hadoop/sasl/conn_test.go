package sasl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// frame is a token as a Conn's peer sends it: its length, then itself.
func frame(tok []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)
}

// TestConnReadsAcrossTokens: whatever the sizes of the reader's buffers
// against the sizes of the server's tokens, every byte arrives once and
// in order, including reads that span the end of one token and the start
// of the next.
func TestConnReadsAcrossTokens(t *testing.T) {
	for _, tc := range layerCases {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			l, s := testLayer(t, tc.qop, tc.cipher)
			var want, stream []byte
			for i, n := range []int{3, 1, 100, 7, 4096, 1, 64} {
				m := testMessage(i, n)
				want = append(want, m...)
				stream = append(stream, frame(s.wrap(m))...)
			}
			c := NewConn(&readOnly{r: bytes.NewReader(stream)}, l)
			var got []byte
			for i := 0; ; i++ {
				b := make([]byte, []int{5, 1, 9, 300, 2}[i%5])
				n, err := c.Read(b)
				got = append(got, b[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, differing from the %d sent", len(got), len(want))
			}
		})
	}
}

// TestConnWritesPieces: a Write is cut into pieces no longer than the
// layer's raw send size, each wrapped and framed, which the server
// unwraps back into what was written.
func TestConnWritesPieces(t *testing.T) {
	for _, tc := range layerCases {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			l, s := testLayer(t, tc.qop, tc.cipher)
			var out bytes.Buffer
			c := NewConn(&writeOnly{w: &out}, l)
			max := RawSendSize(l)
			msg := testMessage(1, 2*max+5)
			if n, err := c.Write(msg); n != len(msg) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
			if _, err := c.Write([]byte("tail")); err != nil {
				t.Fatal(err)
			}
			var got []byte
			pieces := 0
			for out.Len() > 0 {
				var n uint32
				binary.Read(&out, binary.BigEndian, &n)
				tok := out.Next(int(n))
				m, err := s.unwrap(tok)
				if err != nil {
					t.Fatalf("piece %d: %v", pieces, err)
				}
				if len(m) > max {
					t.Errorf("piece %d of %d bytes, above the raw send size %d", pieces, len(m), max)
				}
				got = append(got, m...)
				pieces++
			}
			if want := append(msg, "tail"...); !bytes.Equal(got, want) || pieces != 4 {
				t.Fatalf("the server unwrapped %d bytes in %d pieces, want %d in 4", len(got), pieces, len(want))
			}
		})
	}
}

// TestConnRefuses: a token that is too long, tampered with, or cut off
// fails the Read, and every later Read, with an error that says so; the
// tokens before it are read as sent.
func TestConnRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		bad        func(s *testServer) []byte // the stream after a good token
	}{
		{"too long", "exceeds", func(*testServer) []byte { return binary.BigEndian.AppendUint32(nil, MaxConnToken+1) }},
		{"tampered", "MAC", func(s *testServer) []byte {
			f := frame(s.wrap([]byte("second")))
			f[5] ^= 1
			return f
		}},
		{"cut off", io.ErrUnexpectedEOF.Error(), func(s *testServer) []byte {
			f := frame(s.wrap([]byte("second")))
			return f[:len(f)-1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, s := testLayer(t, QOPIntegrity, "")
			stream := append(frame(s.wrap([]byte("first"))), tc.bad(s)...)
			c := NewConn(&readOnly{r: bytes.NewReader(stream)}, l)
			b := make([]byte, 64)
			if n, err := c.Read(b); err != nil || string(b[:n]) != "first" {
				t.Fatalf("the good token: %q, %v", b[:n], err)
			}
			_, err := c.Read(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read: %v, want an error saying %q", err, tc.want)
			}
			if _, again := c.Read(b); again == nil {
				t.Fatal("a Read after the failure succeeded")
			}
		})
	}
}

// TestConnResumesAfterATimeout: a read deadline that passes inside a
// token loses nothing; the next Read goes on with the same token.
func TestConnResumesAfterATimeout(t *testing.T) {
	l, s := testLayer(t, QOPPrivacy, CipherRC4)
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := NewConn(client, l)
	f := frame(s.wrap([]byte("hello, world")))
	go server.Write(f[:7])
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	b := make([]byte, 64)
	if _, err := c.Read(b); timeoutErr(err) == nil {
		t.Fatalf("Read with half a token: %v, want a timeout", err)
	}
	go server.Write(f[7:])
	c.SetReadDeadline(time.Time{})
	if n, err := c.Read(b); err != nil || string(b[:n]) != "hello, world" {
		t.Fatalf("after the timeout: %q, %v", b[:n], err)
	}
}

// timeoutErr returns err if it is a network timeout, else nil.
func timeoutErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

// FuzzConnRead reads arbitrary bytes through a Conn after a genuine
// token: nothing panics, the genuine token reads back, and whatever
// follows it fails the read.
func FuzzConnRead(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	s := newTestServer(f, QOPIntegrity, "")
	s.wrap([]byte("genuine"))
	f.Add(frame(s.wrap([]byte("next")))[:9])
	f.Fuzz(func(t *testing.T, rest []byte) {
		l, s := testLayer(t, QOPIntegrity, "")
		stream := append(frame(s.wrap([]byte("genuine"))), rest...)
		c := NewConn(&readOnly{r: bytes.NewReader(stream)}, l)
		got, err := io.ReadAll(c)
		if !bytes.HasPrefix(got, []byte("genuine")) {
			t.Fatalf("read %q, %v: the genuine token lost", got, err)
		}
		// Without the server's keys no token after it can pass.
		if len(rest) > 0 && err == nil {
			t.Fatalf("accepted %x as %q", rest, got[len("genuine"):])
		}
	})
}

// readOnly and writeOnly are connections over a reader or a writer.
type readOnly struct {
	net.Conn
	r io.Reader
}

func (c *readOnly) Read(b []byte) (int, error) { return c.r.Read(b) }

type writeOnly struct {
	net.Conn
	w io.Writer
}

func (c *writeOnly) Write(b []byte) (int, error) { return c.w.Write(b) }
