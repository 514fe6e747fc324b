package freeport

import (
	"context"
	"net"
	"strconv"
	"testing"
)

// TestPickBelowEphemeralRange: the port is one no connection's source
// port or listener on port 0 can take before its server binds it, and it
// is free. A port held by a listener is not handed out.
func TestPickBelowEphemeralRange(t *testing.T) {
	lo, ok := EphemeralLow()
	if !ok {
		t.Skipf("no ephemeral port range with room below it in %s", RangeFile)
	}
	held := map[int]net.Listener{}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 20 {
		port, err := Pick(context.Background(), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port < MinPort || port >= lo {
			t.Fatalf("port %d, want one in [%d, %d): below the ephemeral range %s starts", port, MinPort, lo, RangeFile)
		}
		if _, dup := held[port]; dup {
			t.Fatalf("port %d handed out while a listener holds it", port)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d handed out is not free: %v", port, err)
		}
		held[port] = ln
	}
}
