package local

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// The scheduler's port is chosen by the launcher and bound by the
// scheduler's process once it has started, so another process may take
// it in between. On Linux every connection's source port and every
// listener on port 0 comes from the kernel's ephemeral range, which on a
// busy machine is where such a theft happens; a port below it is taken
// only by a process that asks for that very port. So SchedulerPort draws
// from [minPort, the range's low end).
const (
	// minPort is the lowest port drawn: below it are the ports services
	// are configured to use.
	minPort = 10000
	// portDraws bounds the ports tried before falling back to one the
	// kernel picks.
	portDraws = 16
	// portRangeFile holds the kernel's ephemeral range, "low high".
	portRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// ephemeralLow returns the low end of the kernel's ephemeral port range,
// and false when it cannot be read (not Linux) or leaves no room below.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile(portRangeFile)
	if err != nil {
		return 0, false
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= minPort+portDraws || lo > 65535 {
		return 0, false
	}
	return lo, true
}

// SchedulerPort returns a port free on this machine now: one below the
// ephemeral range (see minPort) when one of those drawn is free, else one
// the kernel picks.
func (c *Cluster) SchedulerPort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	if lo, ok := ephemeralLow(); ok {
		for range portDraws {
			port := minPort + rand.IntN(lo-minPort)
			ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(Node, fmt.Sprint(port)))
			if err == nil {
				ln.Close()
				return port, nil
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
		}
	}
	ln, err := lc.Listen(ctx, "tcp", Node+":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
