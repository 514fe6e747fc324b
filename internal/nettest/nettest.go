// Package nettest holds the network peers of tests: a loopback server
// whose connections a test's function handles, and one that accepts and
// never answers, like a server stuck in a long pause. Everything they
// start ends with the test.
package nettest

import (
	"net"
	"sync"
	"testing"

	"github.com/spindle-ps/spindle/internal/freeport"
)

// Serve listens on a loopback port and calls handle, in a goroutine of
// its own, with every connection it accepts. When the test ends it stops
// listening, closes every connection and waits for the handlers. It
// returns the address ("127.0.0.1:port").
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handlers sync.WaitGroup
	var conns []net.Conn // the accept loop's until it ends
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			handlers.Go(func() { handle(c) })
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-accepting
		for _, c := range conns {
			c.Close()
		}
		handlers.Wait()
	})
	return l.Addr().String()
}

// Silent is a server that accepts connections and never reads from
// them nor answers: what a client sends waits in the kernel's buffers.
// The connections it accepts are also sent on the channel, as long as it
// has room (16), for a test that reads them itself.
func Silent(t testing.TB) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	ch := make(chan net.Conn, 16)
	addr = Serve(t, func(c net.Conn) {
		select {
		case ch <- c:
		default:
		}
	})
	return addr, ch
}

// FreePort returns a loopback port free now, for a server a test starts
// later, in this process or another: one that no connection's source port
// can take in between (see internal/freeport).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Pick(t.Context(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}
