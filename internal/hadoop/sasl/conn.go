package sasl

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// MaxConnToken bounds a wrapped token that a Conn reads: well above what
// a peer honouring the client's maxbuf sends (DefaultMaxBuf), leaving
// room for a peer that wraps whole writes (a DataNode's packets, 64 KiB
// of data and their checksums by default).
const MaxConnToken = 16 << 20

// Conn is a connection whose two streams go through a security layer,
// framed as SASL frames them (RFC 4422 §3.7, Hadoop's SaslInputStream and
// SaslOutputStream): each wrapped token is sent after its length, 4 bytes
// big-endian. Writes are cut into pieces of at most RawSendSize bytes
// before wrapping. Deadlines and Close are the underlying connection's.
type Conn struct {
	net.Conn
	layer Layer
	max   int // largest piece wrapped at once

	wmu sync.Mutex
	rmu sync.Mutex
	buf []byte // the token being read
	rem []byte // unwrapped bytes not yet returned
	err error  // sticky: the stream is out of step after a failed read
}

// NewConn returns nc with l over both its streams. l must come from the
// handshake just completed on nc, and nothing else may read or write nc
// afterwards.
func NewConn(nc net.Conn, l Layer) *Conn {
	max := RawSendSize(l)
	if max <= 0 {
		max = DefaultMaxBuf
	}
	return &Conn{Conn: nc, layer: l, max: max}
}

// Write wraps b, in pieces, and sends each with its length. A failed
// Write leaves the stream unusable (the peer's sequence numbers no longer
// match): close the connection.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for off := 0; off < len(b); {
		piece := b[off:min(off+c.max, len(b))]
		tok, err := c.layer.Wrap(piece)
		if err != nil {
			return off, fmt.Errorf("sasl: wrap: %w", err)
		}
		frame := make([]byte, 4+len(tok))
		binary.BigEndian.PutUint32(frame, uint32(len(tok)))
		copy(frame[4:], tok)
		if _, err := c.Conn.Write(frame); err != nil {
			return off, err
		}
		off += len(piece)
	}
	return len(b), nil
}

// Read returns unwrapped bytes, reading and unwrapping the next token
// when none are left over. A token that is too long, malformed, or not
// the peer's (its MAC or sequence number) fails this Read and every
// later one; a timeout leaves the stream as it was, to be read again.
func (c *Conn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(b) == 0 {
		return 0, nil
	}
	for len(c.rem) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if err := c.readToken(); err != nil {
			return 0, err
		}
	}
	n := copy(b, c.rem)
	c.rem = c.rem[n:]
	return n, nil
}

// readToken reads one token into c.buf, resuming one a timeout cut
// short, and unwraps it into c.rem.
func (c *Conn) readToken() error {
	if len(c.buf) < 4 {
		if err := c.fill(4); err != nil {
			return err
		}
	}
	n := binary.BigEndian.Uint32(c.buf)
	if n > MaxConnToken {
		c.err = fmt.Errorf("sasl: wrapped token of %d bytes exceeds %d", n, MaxConnToken)
		return c.err
	}
	if err := c.fill(4 + int(n)); err != nil {
		return err
	}
	msg, err := c.layer.Unwrap(c.buf[4:])
	c.buf = c.buf[:0]
	if err != nil {
		c.err = err
		return err
	}
	c.rem = msg
	return nil
}

// fill reads until c.buf holds n bytes. An end of stream inside a token
// is io.ErrUnexpectedEOF; before one, io.EOF.
func (c *Conn) fill(n int) error {
	if cap(c.buf) < n {
		nb := make([]byte, len(c.buf), n)
		copy(nb, c.buf)
		c.buf = nb
	}
	for len(c.buf) < n {
		m, err := c.Conn.Read(c.buf[len(c.buf):n])
		c.buf = c.buf[:len(c.buf)+m]
		if err != nil {
			if err == io.EOF && len(c.buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				c.err = err
			}
			return err
		}
	}
	return nil
}
