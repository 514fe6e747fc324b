package zmq

import (
	"slices"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// inbound joins the messages of the CURVE connections with the sealed
// frames of the sealed route (see sealed.go) and hands them on in the
// order each connection sent them. The receive loop owns it; it is not
// safe for concurrent use.
type inbound struct {
	// deliver hands a complete message on; false means the transport is
	// closing and nothing more is delivered.
	deliver func(*transport.Message) bool
	// drop reports a message dropped: malformed, or its sealed frames lost.
	drop func(id []byte, m *transport.Meta, err error)
	now  func() time.Time
	// lends picks the messages whose sealed frames open in their own
	// memory and are lent to them (lend); nil picks none.
	lends func(*transport.Meta) bool
	lend  func(*transport.Message, []*cFrame)

	queues  map[string][]*pending // by connection, while one of its messages waits
	waiting map[[16]byte]*pending // by tag: messages waiting for their sealed frames
	held    []*payload            // sealed frames waiting for their envelope, oldest first
}

// pending is a message of a connection that waits, or waits behind one
// that does.
type pending struct {
	conn     string
	m        *transport.Message
	env      *envelope // nil once the message is complete
	deadline time.Time // when it stops waiting for its sealed frames
	gone     bool      // dropped: skip it
}

// payload is what the sealed route carried for one message, on the
// sealed connection conn.
type payload struct {
	conn   string
	tag    [16]byte
	frames []*cFrame
	at     time.Time
}

func newInbound(deliver func(*transport.Message) bool, drop func([]byte, *transport.Meta, error)) *inbound {
	return &inbound{
		deliver: deliver,
		drop:    drop,
		now:     time.Now,
		queues:  make(map[string][]*pending),
		waiting: make(map[[16]byte]*pending),
	}
}

// busy reports whether anything waits, so that tick has work.
func (in *inbound) busy() bool {
	return len(in.waiting) > 0 || len(in.held) > 0
}

// message takes a message read from the CURVE connection conn, with its
// envelope when it has sealed frames (m's data frames then hold empty
// places for them). It reports false when the transport is closing.
func (in *inbound) message(conn []byte, m *transport.Message, env *envelope) bool {
	key := string(conn)
	if env != nil {
		i := slices.IndexFunc(in.held, func(p *payload) bool { return p.tag == env.tag })
		if i < 0 {
			wait := sealedWait
			for _, f := range env.frames {
				wait += time.Duration(f.length/sealedWaitRate) * time.Second
			}
			p := &pending{conn: key, m: m, env: env, deadline: in.now().Add(wait)}
			in.waiting[env.tag] = p
			in.queues[key] = append(in.queues[key], p)
			return true
		}
		p := in.held[i]
		in.held = slices.Delete(in.held, i, i+1)
		if err := in.complete(m, env, p.frames); err != nil {
			m.Release()
			in.drop(conn, &m.Meta, err)
			return true
		}
	}
	if q := in.queues[key]; len(q) > 0 {
		in.queues[key] = append(q, &pending{conn: key, m: m})
		return true
	}
	return in.deliver(m)
}

// complete opens the sealed frames into m, lent to it when lends picks
// it, and checks the whole message.
func (in *inbound) complete(m *transport.Message, env *envelope, sealed []*cFrame) error {
	inPlace := in.lends != nil && !m.Lent() && in.lends(&m.Meta)
	lent, err := env.open(m, sealed, inPlace)
	if err != nil {
		return err
	}
	if lent != nil {
		in.lend(m, lent)
	}
	return transport.CheckData(m)
}

// sealed takes the sealed frames of one message, read from the sealed
// route's connection conn. It reports false when the transport is
// closing.
func (in *inbound) sealed(conn []byte, tag [16]byte, frames []*cFrame) bool {
	p := in.waiting[tag]
	if p == nil {
		if slices.ContainsFunc(in.held, func(h *payload) bool { return h.tag == tag }) {
			closeFrames(frames) // a replay
			return true
		}
		in.held = append(in.held, &payload{conn: string(conn), tag: tag, frames: frames, at: in.now()})
		if len(in.held) > heldMax {
			in.evict()
		}
		return true
	}
	delete(in.waiting, tag)
	env := p.env
	p.env = nil
	if err := in.complete(p.m, env, frames); err != nil {
		p.gone = true
		p.m.Release()
		in.drop([]byte(p.conn), &p.m.Meta, err)
	}
	// The sealed route is first in, first out: the messages of the same
	// connection before this one that still wait have lost theirs.
	for _, e := range in.queues[p.conn] {
		if e == p {
			break
		}
		if e.env != nil && !e.gone {
			in.lose(e)
		}
	}
	return in.flush(p.conn)
}

// evict lets go of the oldest payload held of the connection that holds
// the most (the oldest of them on a tie): a connection that floods the
// route with payloads no envelope names, which only a peer with the
// route's password can, pushes out its own, not those of the others,
// whose envelopes are on their way.
func (in *inbound) evict() {
	count := make(map[string]int)
	most := ""
	for _, h := range in.held {
		count[h.conn]++
	}
	for _, h := range in.held {
		if most == "" || count[h.conn] > count[most] {
			most = h.conn
		}
	}
	i := slices.IndexFunc(in.held, func(h *payload) bool { return h.conn == most })
	closeFrames(in.held[i].frames)
	in.held = slices.Delete(in.held, i, i+1)
}

// lose drops a message whose sealed frames will not come.
func (in *inbound) lose(p *pending) {
	delete(in.waiting, p.env.tag)
	p.gone = true
	p.m.Release()
	in.drop([]byte(p.conn), &p.m.Meta, errSealedLost)
}

// flush hands on the complete messages at the head of conn's queue.
func (in *inbound) flush(conn string) bool {
	q := in.queues[conn]
	i := 0
	for ; i < len(q); i++ {
		p := q[i]
		if p.gone {
			continue
		}
		if p.env != nil {
			break
		}
		if !in.deliver(p.m) {
			return false
		}
	}
	if q = q[i:]; len(q) == 0 {
		delete(in.queues, conn)
	} else {
		in.queues[conn] = q
	}
	return true
}

// tick drops the messages that waited too long for their sealed frames
// and the sealed frames that waited too long for their envelope. It
// reports false when the transport is closing.
func (in *inbound) tick() bool {
	now := in.now()
	var conns []string
	for _, p := range in.waiting {
		if now.After(p.deadline) {
			in.lose(p)
			conns = append(conns, p.conn)
		}
	}
	for _, c := range conns {
		if !in.flush(c) {
			return false
		}
	}
	in.held = slices.DeleteFunc(in.held, func(p *payload) bool {
		if now.Sub(p.at) < heldTTL {
			return false
		}
		closeFrames(p.frames)
		return true
	})
	return true
}

// close releases the sealed frames held, and the frames lent to the
// messages that wait.
func (in *inbound) close() {
	for _, p := range in.held {
		closeFrames(p.frames)
	}
	in.held = nil
	for _, q := range in.queues {
		for _, p := range q {
			p.m.Release()
		}
	}
	in.queues = nil
}

// closeFrames closes fs, skipping nil entries.
func closeFrames(fs []*cFrame) {
	for _, f := range fs {
		if f != nil {
			f.close()
		}
	}
}
