package dfs

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/nettest"
)

// within runs f and returns its error, failing the test if f has not
// returned after a minute (a guard against a hang, not a measurement).
// unblock is called then, to let f end if it can.
func within(t *testing.T, what string, unblock func(), f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		unblock()
		t.Fatalf("%s did not end", what)
		return nil
	}
}

// TestDatanodeConnectionHasADeadline: the client writes its read request
// on a DataNode connection and waits for the answer before it applies a
// deadline of its own, so the connection the session dials for it comes
// with IOTimeout's: a DataNode that accepts and never answers fails the
// read rather than hanging it.
func TestDatanodeConnectionHasADeadline(t *testing.T) {
	t.Parallel()
	addr, _ := nettest.Silent(t)
	h, err := NewHDFS(HDFSOptions{Authority: "nn:8020", Namenodes: []string{"nn:8020"}, User: "u", IOTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{h: h, sem: make(chan struct{}, 1)}
	c, err := s.dialDatanode(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0, 28, 81}); err != nil { // what a read request begins with
		t.Fatal(err)
	}
	err = within(t, "a read from a DataNode that never answers", func() { c.Close() }, func() error {
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read: %v, want a timeout", err)
	}
	t.Log(err)
}

// TestTokenHandshakeIsBounded: with a delegation token this package runs
// the SASL exchange of a NameNode connection itself. The client dials
// with context.Background, so with no RPCTimeout nor context deadline
// only DialTimeout bounds a NameNode that accepts and never answers: the
// operation fails, naming it.
func TestTokenHandshakeIsBounded(t *testing.T) {
	t.Parallel()
	addr, _ := nettest.Silent(t)
	tok := hdfsToken("alice", 1)
	h, err := NewHDFS(HDFSOptions{Authority: addr, Namenodes: []string{addr}, Kerberos: true, Token: &tok,
		DialTimeout: 100 * time.Millisecond, RPCTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	err = within(t, "Stat on a NameNode that never answers the SASL exchange", func() { h.Close() }, func() error {
		_, err := h.Stat(context.Background(), "/x")
		return err
	})
	if err == nil {
		t.Fatal("Stat succeeded")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %v, want a timeout naming %s", err, addr)
	}
	t.Log(err)
}

// TestAbortReachesTokenHandshake: a NameNode connection that the client
// re-dials during a file's Read or Write (with context.Background) is
// interrupted by abort, what the file's watchdog calls when its context
// ends, while this package runs the SASL exchange on it: the dial fails
// instead of waiting for DialTimeout.
func TestAbortReachesTokenHandshake(t *testing.T) {
	t.Parallel()
	addr, accepted := nettest.Silent(t)
	tok := hdfsToken("alice", 1)
	h, err := NewHDFS(HDFSOptions{Authority: addr, Namenodes: []string{addr}, Kerberos: true, Token: &tok, DialTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{h: h, sem: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		c, err := s.dialNamenode(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	var sc net.Conn
	select {
	case sc = <-accepted:
	case err := <-errc:
		t.Fatalf("dial ended before the NameNode accepted: %v", err)
	}
	// The SASL preamble has arrived: the exchange is under way.
	if _, err := io.ReadFull(sc, make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	s.abort()
	err = within(t, "the aborted SASL exchange", func() {
		if c := s.conn.Load(); c != nil {
			(*c).Close()
		}
	}, func() error { return <-errc })
	if err == nil {
		t.Fatal("the dial succeeded")
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %v does not name %s", err, addr)
	}
	t.Log(err)
}

// TestDataKeyRefusalExplained: the client library's bare words when a
// DataNode refuses its data encryption key become an error that says
// what happened and keeps them.
func TestDataKeyRefusalExplained(t *testing.T) {
	h := &HDFS{}
	for _, raw := range []string{"rspauth not in ''", "rspauth did not match digest"} {
		err := h.mapError(&session{}, errors.New(raw))
		if msg := err.Error(); !strings.Contains(msg, "refused this client's data encryption key") || !strings.HasSuffix(msg, raw) {
			t.Errorf("%q became %q", raw, msg)
		}
	}
	if err := h.mapError(&session{}, io.ErrUnexpectedEOF); err != io.ErrUnexpectedEOF {
		t.Errorf("an unrelated error became %v", err)
	}
}

// TestShortDataIsAnError: the end of the data before the file's size is
// an error, not the end of the file.
func TestShortDataIsAnError(t *testing.T) {
	f := &hdfsFile{info: &hdfsInfo{size: 100}}
	if err := f.short(40, io.EOF); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "byte 40 of 100") {
		t.Errorf("the data ending at byte 40 of 100: %v", err)
	}
	if err := f.short(100, io.EOF); err != io.EOF {
		t.Errorf("the data ending at the file's end: %v, want io.EOF", err)
	}
}
