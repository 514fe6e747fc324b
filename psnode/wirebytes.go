package psnode

import (
	"sync"
	"sync/atomic"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Byte accounting: every message sent counts the bytes the transport
// queued for it (meta plus data frames), every message received the bytes
// it took on the wire (transport.Message.WireSize), whatever becomes of it
// afterwards (acknowledgements, heartbeats, retransmissions, duplicates
// and messages dropped on purpose all count). Data messages also count
// towards their app, so that a table's traffic can be told from the rest.

// wireBytes holds a node's byte counters; its methods are safe for
// concurrent use and take no lock on the paths that count.
type wireBytes struct {
	sent, received        atomic.Uint64
	fromServers, fromWork atomic.Uint64
	apps                  sync.Map // app id → *appCounters
}

// AppBytes counts the bytes of one app's data messages (a table's pushes,
// pulls and their answers) on the wire, as one node sent and received
// them.
type AppBytes struct {
	Sent, Received uint64
}

type appCounters struct{ sent, received atomic.Uint64 }

func (b *wireBytes) app(id int32) *appCounters {
	if c, ok := b.apps.Load(id); ok {
		return c.(*appCounters)
	}
	c, _ := b.apps.LoadOrStore(id, &appCounters{})
	return c.(*appCounters)
}

// countSent records a message of size bytes sent.
func (b *wireBytes) countSent(m *transport.Message, size int) {
	b.sent.Add(uint64(size))
	if m.Meta.Control.Cmd == transport.CmdNone {
		b.app(m.Meta.AppID).sent.Add(uint64(size))
	}
}

// countReceived records a message received, by its size on the wire.
func (b *wireBytes) countReceived(m *transport.Message) {
	size := uint64(m.WireSize)
	b.received.Add(size)
	if r, ok := transport.IDRole(m.Meta.Sender); ok {
		switch r {
		case transport.RoleServer:
			b.fromServers.Add(size)
		case transport.RoleWorker:
			b.fromWork.Add(size)
		}
	}
	if m.Meta.Control.Cmd == transport.CmdNone {
		b.app(m.Meta.AppID).received.Add(size)
	}
}

// fill copies the totals into s.
func (b *wireBytes) fill(s *Stats) {
	s.BytesSent, s.BytesReceived = b.sent.Load(), b.received.Load()
	s.BytesFromServers, s.BytesFromWorkers = b.fromServers.Load(), b.fromWork.Load()
}

// AppBytes returns the bytes on the wire of app's data messages that this
// node sent and received (for a table: Table.Bytes).
func (n *Node) AppBytes(app int32) AppBytes {
	c := n.bytes.app(app)
	return AppBytes{Sent: c.sent.Load(), Received: c.received.Load()}
}
