// Package freeport picks a TCP port that is free now, for a server that
// binds it later, often in another process, so that another process may
// take it in between. On Linux every connection's source port and every
// listener on port 0 comes from the kernel's ephemeral range, which on a
// busy machine is where such a theft happens; a port below it is taken
// only by a process that asks for that very port. So Pick draws from
// [MinPort, the range's low end).
package freeport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

const (
	// MinPort is the lowest port drawn: below it are the ports services
	// are configured to use.
	MinPort = 10000
	// draws bounds the ports tried before falling back to one the kernel
	// picks.
	draws = 16
	// RangeFile holds the kernel's ephemeral range, "low high".
	RangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// EphemeralLow returns the low end of the kernel's ephemeral port range,
// and false when it cannot be read (not Linux) or leaves no room below.
func EphemeralLow() (int, bool) {
	b, err := os.ReadFile(RangeFile)
	if err != nil {
		return 0, false
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= MinPort+draws || lo > 65535 {
		return 0, false
	}
	return lo, true
}

// Pick returns a port of host free now: one below the ephemeral range
// when one of those drawn is free, else one the kernel picks.
func Pick(ctx context.Context, host string) (int, error) {
	var lc net.ListenConfig
	if lo, ok := EphemeralLow(); ok {
		for range draws {
			port := MinPort + rand.IntN(lo-MinPort)
			ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, fmt.Sprint(port)))
			if err == nil {
				ln.Close()
				return port, nil
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
		}
	}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
