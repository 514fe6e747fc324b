package hrpc

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/nettest"
)

// TestHandshakeBoundedByDialTimeout: a server that accepts the connection
// and never answers fails the handshake of Authenticate and NewConn
// within DialTimeout when the context has no deadline of its own, with
// an error that says so (and, from Authenticate, names the server); a
// context that ends first gives its own error.
func TestHandshakeBoundedByDialTimeout(t *testing.T) {
	addr, _ := nettest.Silent(t)
	token := Options{Protocol: testProtocol, Auth: AuthToken, TokenIdentifier: []byte("id"), TokenPassword: []byte("pw")}
	authenticate := func(ctx context.Context, nc net.Conn, o Options) error {
		c, err := Authenticate(ctx, nc, o)
		if err == nil {
			c.Close()
		}
		return err
	}
	newConn := func(ctx context.Context, nc net.Conn, o Options) error {
		c, err := NewConn(ctx, nc, o)
		if err == nil {
			c.Close()
		}
		return err
	}
	tests := []struct {
		name      string
		handshake func(context.Context, net.Conn, Options) error
		ctxLimit  time.Duration // 0: context.Background
		dial      time.Duration
		want      error
		nameAddr  bool
	}{
		{"Authenticate, no context deadline", authenticate, 0, 100 * time.Millisecond, os.ErrDeadlineExceeded, true},
		{"Authenticate, earlier context deadline", authenticate, 100 * time.Millisecond, time.Hour, context.DeadlineExceeded, true},
		{"NewConn, no context deadline", newConn, 0, 100 * time.Millisecond, os.ErrDeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx := context.Background()
			if tt.ctxLimit > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxLimit)
				defer cancel()
			}
			o := token
			o.DialTimeout = tt.dial
			errc := make(chan error, 1)
			go func() { errc <- tt.handshake(ctx, nc, o) }()
			select {
			case err = <-errc:
			case <-time.After(time.Minute):
				nc.Close() // let the handshake's goroutine end
				<-errc
				t.Fatal("the handshake with a server that never answers did not end")
			}
			if err == nil {
				t.Fatal("the handshake succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want one matching %v", err, tt.want)
			}
			if tt.nameAddr && !strings.Contains(err.Error(), addr) {
				t.Errorf("err = %v does not name %s", err, addr)
			}
			t.Log(err)
		})
	}
}
