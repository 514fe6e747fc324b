package mem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Any matches every node id in a fault rule. No node or group has this id.
const Any int32 = math.MinInt32

// InboxSize is the number of delivered messages a Transport holds for Recv.
const InboxSize = 4096

// ErrQueueFull is wrapped by the error Send returns when the receiver's
// inbox already holds InboxSize messages.
var ErrQueueFull = errors.New("mem: receiver queue full")

// Stats counts what a Network did with the messages sent through it. Every
// successful Send is counted once in Sent and ends in Dropped, Lost or one
// delivery attempt (Delivered or QueueFull), plus one more attempt when it
// was Duplicated.
type Stats struct {
	Sent       uint64 // Send calls that got as far as the network
	Delivered  uint64 // copies placed in a receiver's inbox
	Dropped    uint64 // messages dropped by a Drop, Cut, Isolate or Hook rule
	Duplicated uint64 // messages delivered twice by a Duplicate rule
	Delayed    uint64 // messages held back by a Delay rule
	Lost       uint64 // copies addressed to no listening transport, or to one closed before a delayed copy arrived
	QueueFull  uint64 // copies refused by a full inbox
}

type ruleKind int

const (
	ruleDrop ruleKind = iota
	ruleDuplicate
	ruleDelay
)

type rule struct {
	kind     ruleKind
	from, to int32
	p        float64
	d        time.Duration
}

func (r *rule) matches(from, to int32) bool {
	return (r.from == Any || r.from == from) && (r.to == Any || r.to == to)
}

// Network connects the Transports it creates. Its fault rules apply to
// every message sent through it; all random choices come from one
// *rand.Rand seeded at creation, so a run whose messages are sent in the
// same order makes the same choices.
//
// A Network is safe for concurrent use.
type Network struct {
	mu    sync.Mutex
	rng   *rand.Rand
	nodes map[string]*Transport // listening transports by address
	seq   int                   // last address number handed out
	rules []rule                // in the order they were first set
	hook  func(*transport.Message) bool
	stats Stats
}

// NewNetwork returns an empty network whose random choices are seeded
// with seed.
func NewNetwork(seed int64) *Network {
	return &Network{
		rng:   rand.New(rand.NewSource(seed)),
		nodes: make(map[string]*Transport),
	}
}

// NewTransport returns a new transport attached to the network.
func (n *Network) NewTransport() *Transport {
	return &Transport{
		net:    n,
		inbox:  make(chan *transport.Message, InboxSize),
		done:   make(chan struct{}),
		routes: make(map[int32]string),
	}
}

// setRule adds r, or replaces the rule of the same kind and endpoints.
func (n *Network) setRule(r rule) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range n.rules {
		if q := &n.rules[i]; q.kind == r.kind && q.from == r.from && q.to == r.to {
			*q = r
			return
		}
	}
	n.rules = append(n.rules, r)
}

// Drop drops messages from node from to node to with probability p
// (0 ≤ p ≤ 1). Either id may be Any. Ids are those of Meta.Sender and
// Meta.Recver. A later call for the same pair replaces the probability;
// rules for different pairs that all match a message are drawn
// independently, and any one of them drops it.
func (n *Network) Drop(from, to int32, p float64) {
	n.setRule(rule{kind: ruleDrop, from: from, to: to, p: p})
}

// Duplicate delivers messages from node from to node to twice with
// probability p. The copy is delivered right after the original (both
// after the same delay, if a Delay rule matches).
func (n *Network) Duplicate(from, to int32, p float64) {
	n.setRule(rule{kind: ruleDuplicate, from: from, to: to, p: p})
}

// Delay delivers messages from node from to node to d after they are sent,
// from a timer rather than from Send. When several Delay rules match, the
// longest applies. Delayed messages are delivered in the order they fall
// due, so messages sent with the same delay keep their order; nothing
// orders them against messages delivered without delay or with another
// delay: a later message may arrive first. A zero d removes the delay.
func (n *Network) Delay(from, to int32, d time.Duration) {
	n.setRule(rule{kind: ruleDelay, from: from, to: to, d: d})
}

// Cut drops every message from node from to node to.
func (n *Network) Cut(from, to int32) { n.Drop(from, to, 1) }

// Isolate drops every message from or to node id.
func (n *Network) Isolate(id int32) {
	n.Cut(id, Any)
	n.Cut(Any, id)
}

// Hook installs f, which sees each message that the Drop rules let
// through to a listening transport, and drops it by returning false. f
// receives the receiver's copy, after decoding, and may modify it (to
// corrupt a message, say). It is called on
// the sending goroutine, without any lock of the network held, so it must
// be safe for concurrent use when several goroutines send. Hook(nil)
// removes the hook; a later Hook replaces an earlier one.
func (n *Network) Hook(f func(*transport.Message) bool) {
	n.mu.Lock()
	n.hook = f
	n.mu.Unlock()
}

// Heal removes every rule and the hook. Messages already delayed are still
// delivered.
func (n *Network) Heal() {
	n.mu.Lock()
	n.rules = nil
	n.hook = nil
	n.mu.Unlock()
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// fate is what the rules decided for one message.
type fate struct {
	dst   *Transport // nil when nobody listens at the address
	drop  bool
	dup   bool
	delay time.Duration
	hook  func(*transport.Message) bool
}

// decide applies the rules to a message from → to addressed to addr.
// Random draws are made in rule order, under the lock, so that they are
// reproducible.
func (n *Network) decide(from, to int32, addr string) fate {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Sent++
	f := fate{dst: n.nodes[addr], hook: n.hook}
	for i := range n.rules {
		r := &n.rules[i]
		if !r.matches(from, to) {
			continue
		}
		switch r.kind {
		case ruleDrop:
			if n.draw(r.p) {
				f.drop = true
			}
		case ruleDuplicate:
			if n.draw(r.p) {
				f.dup = true
			}
		case ruleDelay:
			f.delay = max(f.delay, r.d)
		}
	}
	return f
}

// draw reports true with probability p. Lock must be held.
func (n *Network) draw(p float64) bool {
	switch {
	case p <= 0:
		return false
	case p >= 1:
		return true
	}
	return n.rng.Float64() < p
}

func (n *Network) count(f func(*Stats)) {
	n.mu.Lock()
	f(&n.stats)
	n.mu.Unlock()
}

// Transport is an in-memory transport.Transport. Messages go through the
// real codec: Send encodes the meta with transport.AppendMeta and the
// receiver gets a meta decoded with transport.DecodeMeta and its own copy
// of the data frames, so nothing is shared between sender and receiver.
//
// Listen takes the address asked for when its port is not 0 (as a
// scheduler binds its fixed root port) and otherwise assigns one of the
// form "mem-N:1", unique within the network. Send to an address where nobody
// listens, or to a closed transport, loses the message silently, as a
// real network would; a full inbox is reported as ErrQueueFull instead.
//
// A Transport is safe for concurrent use.
type Transport struct {
	net   *Network
	inbox chan *transport.Message
	done  chan struct{}

	mu      sync.Mutex
	closed  bool
	addr    string           // "" until Listen
	routes  map[int32]string // node id → address
	delayed []pending        // delayed deliveries to this transport, by due time
	timer   *time.Timer      // armed for delayed[0]; nil until the first delay

	flushMu sync.Mutex // serialises flushDelayed
}

// pending is a delayed delivery: a message and possibly its duplicate.
type pending struct {
	due time.Time
	ms  []*transport.Message
}

var _ transport.Transport = (*Transport)(nil)

// Listen implements transport.Transport. addr must be host:port. With
// port 0, Listen assigns a new address "mem-N:1", unique within the
// network, whatever the host; with any other port, it listens at addr
// itself and fails if another open transport of the network listens
// there.
func (t *Transport) Listen(ctx context.Context, addr string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("mem: listen %q: %w", addr, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", transport.ErrClosed
	}
	if t.addr != "" {
		return "", fmt.Errorf("mem: listen %q: already listening at %s", addr, t.addr)
	}
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, port, _ := net.SplitHostPort(addr); port != "0" {
		// A fixed address, as a scheduler's DMLC_PS_ROOT_PORT is.
		if _, taken := n.nodes[addr]; taken {
			return "", fmt.Errorf("mem: listen %q: address in use", addr)
		}
		t.addr = addr
	} else {
		for {
			n.seq++
			t.addr = net.JoinHostPort("mem-"+strconv.Itoa(n.seq), "1")
			if _, taken := n.nodes[t.addr]; !taken {
				break // not already asked for as a fixed address
			}
		}
	}
	n.nodes[t.addr] = t
	return t.addr, nil
}

// Connect implements transport.Transport. No connection is made: the
// address is looked up when a message is sent, so a transport may start
// listening there later.
func (t *Transport) Connect(ctx context.Context, id int32, addr string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("mem: connect to %d at %q: %w", id, addr, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return transport.ErrClosed
	}
	t.routes[id] = addr
	return nil
}

// Disconnect implements transport.Transport.
func (t *Transport) Disconnect(id int32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return transport.ErrClosed
	}
	delete(t.routes, id)
	return nil
}

// Send implements transport.Transport. It never blocks: a message is
// placed in the receiver's inbox (or a delay timer is armed) before Send
// returns. Send refuses a message that would fail transport.CheckData.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t.mu.Lock()
	closed, addr, ok := t.closed, "", false
	if !closed {
		addr, ok = t.routes[m.Meta.Recver]
	}
	t.mu.Unlock()
	if closed {
		return 0, transport.ErrClosed
	}
	if !ok {
		return 0, fmt.Errorf("mem: send to %d: %w", m.Meta.Recver, transport.ErrUnknownPeer)
	}
	if err := transport.CheckData(m); err != nil {
		return 0, fmt.Errorf("mem: send to %d: %w", m.Meta.Recver, err)
	}
	meta, err := transport.AppendMeta(nil, &m.Meta)
	if err != nil {
		return 0, fmt.Errorf("mem: send to %d: %w", m.Meta.Recver, err)
	}
	size := len(meta) + m.DataBytes()

	n := t.net
	f := n.decide(m.Meta.Sender, m.Meta.Recver, addr)
	if f.drop {
		n.count(func(s *Stats) { s.Dropped++ })
		return size, nil
	}
	if f.dst == nil {
		n.count(func(s *Stats) { s.Lost++ })
		return size, nil
	}
	rm, err := receiverCopy(meta, m.Data)
	if err != nil {
		// AppendMeta produced something DecodeMeta refuses: a codec bug.
		panic(fmt.Sprintf("mem: codec invariant broken, meta does not round-trip: %v", err))
	}
	if f.hook != nil && !f.hook(rm) {
		n.count(func(s *Stats) { s.Dropped++ })
		return size, nil
	}
	copies := []*transport.Message{rm}
	if f.dup {
		dm, err := receiverCopy(meta, m.Data)
		if err != nil {
			panic(fmt.Sprintf("mem: codec invariant broken, meta does not round-trip: %v", err))
		}
		copies = append(copies, dm)
		n.count(func(s *Stats) { s.Duplicated++ })
	}
	if f.delay > 0 {
		n.count(func(s *Stats) { s.Delayed++ })
		f.dst.deliverAfter(f.delay, copies)
		return size, nil
	}
	for i, c := range copies {
		if err := f.dst.deliver(c); err != nil && i == 0 {
			return 0, fmt.Errorf("mem: send to %d: %w", m.Meta.Recver, err)
		}
	}
	return size, nil
}

// receiverCopy builds the message a receiver gets: the meta decoded from
// its encoding and the data frames copied into one new buffer. Each frame
// is capped at its length, so appending to one cannot overwrite the next.
func receiverCopy(meta []byte, data [][]byte) (*transport.Message, error) {
	mm, err := transport.DecodeMeta(meta)
	if err != nil {
		return nil, err
	}
	rm := &transport.Message{Meta: mm, WireSize: len(meta)}
	for _, d := range data {
		rm.WireSize += len(d)
	}
	if len(data) == 0 {
		return rm, nil
	}
	total := 0
	for _, d := range data {
		total += len(d)
	}
	buf := make([]byte, total)
	rm.Data = make([][]byte, len(data))
	off := 0
	for i, d := range data {
		copy(buf[off:], d)
		rm.Data[i] = buf[off : off+len(d) : off+len(d)]
		off += len(d)
	}
	return rm, nil
}

// deliver places m in the inbox without blocking. It returns an error
// wrapping ErrQueueFull when the inbox is full; a closed transport loses m
// and reports no error.
func (t *Transport) deliver(m *transport.Message) error {
	select {
	case <-t.done:
		t.net.count(func(s *Stats) { s.Lost++ })
		return nil
	default:
	}
	// Counted first, so that a Recv of m sees it counted.
	t.net.count(func(s *Stats) { s.Delivered++ })
	select {
	case t.inbox <- m:
		return nil
	default:
		t.net.count(func(s *Stats) { s.Delivered--; s.QueueFull++ })
		return ErrQueueFull
	}
}

// deliverAfter delivers ms from a timer after d. Messages due at the same
// time are delivered in the order deliverAfter was called. Messages still
// pending when the transport closes are lost.
func (t *Transport) deliverAfter(d time.Duration, ms []*transport.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.net.count(func(s *Stats) { s.Lost += uint64(len(ms)) })
		return
	}
	due := time.Now().Add(d)
	i := sort.Search(len(t.delayed), func(i int) bool { return t.delayed[i].due.After(due) })
	t.delayed = slices.Insert(t.delayed, i, pending{due: due, ms: ms})
	if i > 0 {
		return // the timer is armed for an earlier message
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.flushDelayed)
	} else {
		t.timer.Reset(d)
	}
}

// flushDelayed runs from the timer: it delivers the delayed messages that
// are due, in order, and re-arms the timer for the next one.
func (t *Transport) flushDelayed() {
	// A Reset timer may fire while an earlier run is still delivering;
	// flushMu keeps the runs, and so the deliveries, in order.
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(t.delayed) && !t.delayed[n].due.After(now) {
		n++
	}
	due := slices.Clone(t.delayed[:n])
	t.delayed = slices.Delete(t.delayed, 0, n)
	if len(t.delayed) > 0 && !t.closed {
		t.timer.Reset(t.delayed[0].due.Sub(now))
	}
	t.mu.Unlock()
	for _, p := range due {
		for _, m := range p.ms {
			// Nobody to report a full inbox to: deliver counts it.
			_ = t.deliver(m)
		}
	}
}

// Pending returns the number of messages waiting in the inbox.
func (t *Transport) Pending() int { return len(t.inbox) }

// Recv implements transport.Transport.
func (t *Transport) Recv(ctx context.Context) (*transport.Message, error) {
	select {
	case <-t.done:
		return nil, transport.ErrClosed
	default:
	}
	select {
	case m := <-t.inbox:
		return m, nil
	case <-t.done:
		return nil, transport.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close implements transport.Transport. It stops listening, stops the
// timers of messages delayed on their way to t, and discards its inbox.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	if t.timer != nil {
		t.timer.Stop()
	}
	lost := 0
	for _, p := range t.delayed {
		lost += len(p.ms)
	}
	t.delayed = nil
	addr := t.addr
	t.mu.Unlock()

	n := t.net
	n.mu.Lock()
	if addr != "" && n.nodes[addr] == t {
		delete(n.nodes, addr)
	}
	n.stats.Lost += uint64(lost)
	n.mu.Unlock()
	return nil
}
