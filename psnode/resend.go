package psnode

import (
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// resender keeps what acknowledged delivery needs: the messages sent and
// not yet acknowledged, and the signatures recently received, to drop
// duplicates. It is not safe for concurrent use; Node guards it with
// resendMu.
//
// Memory is bounded: the outgoing table holds at most maxPending messages
// (Send fails beyond), and the seen set forgets a signature once no
// retransmission of it can still arrive (after window) or when it holds
// maxSeen entries, oldest first.
type resender struct {
	timeout time.Duration
	retries int
	window  time.Duration

	pending map[uint64]*outgoing

	seen     map[uint64]struct{}
	seenRing []seenEntry // FIFO of seen, oldest at seenHead
	seenHead int
	seenLen  int
}

type outgoing struct {
	msg     *transport.Message
	due     time.Time
	retries int
}

type seenEntry struct {
	sig uint64
	at  time.Time
}

const (
	maxPending = 1 << 16
	maxSeen    = 1 << 20
)

func newResender(timeout time.Duration, retries int) *resender {
	// A retransmission can arrive up to the sum of all backoffs after
	// the first send: timeout × (1 + 2 + … + (retries+1)).
	window := timeout * time.Duration((retries+1)*(retries+2)/2+1)
	return &resender{
		timeout:  timeout,
		retries:  retries,
		window:   window,
		pending:  make(map[uint64]*outgoing),
		seen:     make(map[uint64]struct{}),
		seenRing: make([]seenEntry, 1024),
	}
}

// track records an outgoing signed message. It keeps a copy of the data
// frames: they may alias buffers the sender reuses once the send returns.
func (r *resender) track(m *transport.Message, now time.Time) bool {
	if len(r.pending) >= maxPending {
		return false
	}
	r.pending[m.Meta.MsgSig] = &outgoing{msg: ownedCopy(m), due: now.Add(r.timeout)}
	return true
}

// ownedCopy returns a copy of m whose data frames are its own, in one
// buffer: m's may alias buffers its sender reuses once the send returns.
func ownedCopy(m *transport.Message) *transport.Message {
	cp := transport.Message{Meta: m.Meta, WireSize: m.WireSize} // not m's lease, if it has one
	buf := make([]byte, 0, m.DataBytes())
	cp.Data = make([][]byte, len(m.Data))
	for i, d := range m.Data {
		buf = append(buf, d...)
		cp.Data[i] = buf[len(buf)-len(d) : len(buf) : len(buf)]
	}
	return &cp
}

// ack forgets an acknowledged message.
func (r *resender) ack(sig uint64) { delete(r.pending, sig) }

// forget drops every pending message to peer id.
func (r *resender) forget(id int32) {
	for sig, o := range r.pending {
		if o.msg.Meta.Recver == id {
			delete(r.pending, sig)
		}
	}
}

// duplicate records sig as received and reports whether it was seen
// before.
func (r *resender) duplicate(sig uint64, now time.Time) bool {
	r.expire(now)
	if _, ok := r.seen[sig]; ok {
		return true
	}
	if r.seenLen == maxSeen {
		r.evictOldest()
	}
	if r.seenLen == len(r.seenRing) {
		r.growRing()
	}
	r.seenRing[(r.seenHead+r.seenLen)%len(r.seenRing)] = seenEntry{sig: sig, at: now}
	r.seenLen++
	r.seen[sig] = struct{}{}
	return false
}

func (r *resender) expire(now time.Time) {
	for r.seenLen > 0 && now.Sub(r.seenRing[r.seenHead].at) > r.window {
		r.evictOldest()
	}
}

func (r *resender) evictOldest() {
	delete(r.seen, r.seenRing[r.seenHead].sig)
	r.seenHead = (r.seenHead + 1) % len(r.seenRing)
	r.seenLen--
}

func (r *resender) growRing() {
	ring := make([]seenEntry, 2*len(r.seenRing))
	for i := 0; i < r.seenLen; i++ {
		ring[i] = r.seenRing[(r.seenHead+i)%len(r.seenRing)]
	}
	r.seenRing, r.seenHead = ring, 0
}

// due returns the messages whose acknowledgement is overdue and still
// within the retry budget, rescheduled with backoff, and the peers whose
// budget ran out (their messages are dropped).
func (r *resender) due(now time.Time) (resend []*transport.Message, exhausted []int32) {
	for sig, o := range r.pending {
		if now.Before(o.due) {
			continue
		}
		if o.retries >= r.retries {
			delete(r.pending, sig)
			exhausted = append(exhausted, o.msg.Meta.Recver)
			continue
		}
		o.retries++
		o.due = now.Add(r.timeout * time.Duration(o.retries+1))
		resend = append(resend, o.msg)
	}
	return resend, exhausted
}

// size returns the numbers of pending and remembered signatures.
func (r *resender) size() (pending, seen int) { return len(r.pending), r.seenLen }
