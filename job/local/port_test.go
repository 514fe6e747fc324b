package local

import (
	"context"
	"net"
	"strconv"
	"testing"
)

// TestSchedulerPortBelowEphemeralRange: the scheduler's port is one no
// connection's source port or listener on port 0 can take before the
// scheduler binds it, and it is free. A port held by a listener is not
// handed out.
func TestSchedulerPortBelowEphemeralRange(t *testing.T) {
	lo, ok := ephemeralLow()
	if !ok {
		t.Skipf("no ephemeral port range with room below it in %s", portRangeFile)
	}
	c := New(Config{Log: quietLog()})
	held := map[int]net.Listener{}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 20 {
		port, err := c.SchedulerPort(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if port < minPort || port >= lo {
			t.Fatalf("port %d, want one in [%d, %d): below the ephemeral range %s starts", port, minPort, lo, portRangeFile)
		}
		if _, dup := held[port]; dup {
			t.Fatalf("port %d handed out while a listener holds it", port)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(Node, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d handed out is not free: %v", port, err)
		}
		held[port] = ln
	}
}
