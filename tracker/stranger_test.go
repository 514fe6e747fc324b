package tracker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/spindle-ps/spindle/tracker/internal/rpc/trackerrpc"
)

// serveStrangers serves an empty State with secret "t", reading a
// connection without the secret for at most authTimeout.
func serveStrangers(t *testing.T, authTimeout time.Duration) *Service {
	t.Helper()
	svc, err := Serve(context.Background(), "127.0.0.1:0", NewState(nil, time.Now()), "t", quietLog(),
		func(o *options) { o.authTimeout = authTimeout })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

// wantClosed waits, within a guard far beyond any bound of the service,
// until the service closes c.
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the tracker kept the connection open", what)
	}
}

func dial(t *testing.T, svc *Service) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", svc.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStrangerConnections: a connection that does not make a call with
// the job secret is closed when it stays silent, stops in the middle of a
// frame, sends more than maxUnauthBytes, or makes a call with a wrong
// secret (which is answered first); callers with the secret are served
// while strangers hold every place.
func TestStrangerConnections(t *testing.T) {
	svc := serveStrangers(t, 300*time.Millisecond)

	wantClosed(t, dial(t, svc), "a silent connection")

	half := dial(t, svc)
	if _, err := half.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := half.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, half, "a frame stopped after 100 of its 1 MiB")

	// A wrong secret is answered, and the connection's next call fails.
	wrong := dial(t, svc)
	cfg := thriftConf()
	prot := newProtocol(thrift.NewTSocketFromConnConf(wrong, cfg), cfg)
	rpc := trackerrpc.NewTrackerClientProtocol(prot.frame, prot, prot)
	var te *trackerrpc.TrackerError
	if _, err := rpc.Status(context.Background(), "guess"); !errors.As(err, &te) || te.Code != codeUnauthorized {
		t.Fatalf("status with a wrong secret: %v, want the tracker's refusal", err)
	}
	if _, err := rpc.Status(context.Background(), "t"); err == nil {
		t.Fatal("a second call on the connection of a wrong secret was answered")
	}

	// A connection that made a call with the secret may then stay idle
	// for longer than a stranger is given.
	known := dial(t, svc)
	prot = newProtocol(thrift.NewTSocketFromConnConf(known, cfg), cfg)
	rpc = trackerrpc.NewTrackerClientProtocol(prot.frame, prot, prot)
	if _, err := rpc.Status(context.Background(), "t"); err != nil {
		t.Fatalf("status with the secret: %v", err)
	}
	<-time.After(3 * svc.authTimeout) // idle past a stranger's time
	if _, err := rpc.Status(context.Background(), "t"); err != nil {
		t.Fatalf("status with the secret after an idle while: %v", err)
	}

	// Strangers in every place, and more waiting: the job's own callers
	// are served, once the strangers' time is up.
	for range maxUnauthConns + 8 {
		dial(t, svc)
	}
	c := NewClient(svc.Addr(), "t")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status with the secret while strangers hold every place: %v", err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("a second call with the secret: %v", err)
	}
}

// TestStrangerBytes: a stranger is read maxUnauthBytes at most, however
// long it may take: a call whose secret is a string of 15 MiB has its
// connection closed before the string is read, unanswered, well before
// the time strangers are given.
func TestStrangerBytes(t *testing.T) {
	svc := serveStrangers(t, time.Hour)
	c := dial(t, svc)
	cfg := thriftConf()
	prot := newProtocol(thrift.NewTSocketFromConnConf(c, cfg), cfg)
	rpc := trackerrpc.NewTrackerClientProtocol(prot.frame, prot, prot)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_, err := rpc.Status(ctx, strings.Repeat("x", 15<<20))
	var te *trackerrpc.TrackerError
	if err == nil || errors.As(err, &te) || ctx.Err() != nil {
		t.Fatalf("a call with a secret of 15 MiB: %v (context: %v), want the connection closed unanswered", err, ctx.Err())
	}
}
