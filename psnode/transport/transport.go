package transport

import (
	"context"
	"errors"
	"time"
)

// ErrClosed is returned by every method of a Transport after Close.
var ErrClosed = errors.New("transport: closed")

// ErrUnknownPeer is returned by Send for a receiver that was never
// connected (or was disconnected).
var ErrUnknownPeer = errors.New("transport: unknown peer")

// Transport moves messages between the nodes of a job. It is the van of
// ps-lite: every node listens on one address and opens one outbound
// connection per peer it sends to.
//
// Methods are safe for concurrent use. Send does not block on the peer's
// progress beyond what ctx allows. The messages Recv returns are owned by
// the caller; their data frames may be the receive buffers themselves
// (no copy is made).
type Transport interface {
	// Listen binds addr ("host:port"; port 0 picks a free port) and returns
	// the bound address as "host:port". It is called once.
	Listen(ctx context.Context, addr string) (string, error)

	// Connect makes (or replaces) the route to node id at addr. Messages to
	// id sent after Connect returns use the new route.
	Connect(ctx context.Context, id int32, addr string) error

	// Disconnect forgets the route to id; unknown ids are ignored.
	Disconnect(id int32) error

	// Send queues m for m.Meta.Recver and returns the bytes queued (meta
	// plus data). It fails with ErrUnknownPeer when no route exists, and
	// with an error wrapping ErrMalformed for a message that fails
	// CheckData or whose meta exceeds a limit. A successful Send does not
	// mean the peer received the message. m is not retained: the caller
	// may reuse it and its buffers once Send returns.
	Send(ctx context.Context, m *Message) (int, error)

	// Recv returns the next message received, blocking until one arrives,
	// ctx is done (ctx.Err()) or the transport is closed (ErrClosed).
	// Malformed input from a peer is dropped, never returned.
	Recv(ctx context.Context) (*Message, error)

	// Close releases the transport's sockets and goroutines, discarding
	// queued messages. It is idempotent and returns once everything is
	// released.
	Close() error
}

// ConnWatcher is a Transport that knows whether its route to a node has a
// connection. A node whose process ended loses its connections at once,
// which tells the scheduler more quickly than missing heartbeats.
type ConnWatcher interface {
	// Down reports since when the route to id has been without the
	// connection it had; ok is false while it has one, before it first
	// had one, and when there is no route to id. It never blocks.
	Down(id int32) (since time.Time, ok bool)
}

// Drainer is implemented by a transport whose Close can wait for the
// messages it still holds to be sent: after Drain(linger), Close waits for
// them at most linger, rather than discarding them (a node's last words,
// such as the scheduler's answer to the last node that leaves).
type Drainer interface {
	Drain(linger time.Duration)
}
