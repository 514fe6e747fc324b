package psnode

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// customer is the receiving end of one app in a node: a bounded queue of
// messages and the goroutine that hands them to the app, plus the table
// of the app's outstanding requests.
//
// Lock order: Node.mu may be held when customer.mu is taken, never the
// reverse; a customer never calls into Node while holding mu.
type customer struct {
	n      *Node
	app    int32
	id     int32
	queue  chan *transport.Message
	handle func(*transport.Message)

	stopOnce sync.Once
	stopped  chan struct{}

	mu      sync.Mutex
	ts      int32
	pending map[int32]*request
	failed  map[int32]error
	order   []int32 // failed timestamps, oldest first

	// hold makes the customer keep each request's message to every
	// server until it answers, and wait for a dead server's replacement
	// instead of failing (see holdForReplicas). down are the servers
	// known dead and not yet replaced, with the generation of their
	// death (a late timer of an earlier death does nothing).
	hold    bool
	down    map[int32]int
	downGen int
	// failOnReplace fails the requests waiting for a peer that a new
	// process replaced: the dead one will not answer them, and the new
	// one did not receive them (replication: it fetches a snapshot).
	failOnReplace bool
}

// request is one outstanding request: the peers yet to answer and what to
// do with their answers.
type request struct {
	waiting    map[int32]bool
	completing bool // finish is running; Wait must wait for done
	err        error
	done       chan struct{}
	onReply    func(peer int32, m *transport.Message) error
	finish     func(err error) error
	callback   func(error)
	onMiss     func(peer, ts int32) error // a server misses a key list: send it (keycache.go)
	// sent holds, on a hold customer, the message to each peer yet to
	// answer, its data frames owned, to send again to a replacement.
	sent map[int32]*transport.Message
}

const (
	customerQueue = 4096
	maxFailed     = 4096
	// maxUnclaimed and maxUnclaimedBytes bound, over every app, the
	// messages a node keeps for apps it has not created yet (appGrace):
	// the bound of one app's (customerQueue) alone would let a peer that
	// names many apps fill the node's memory. One message is kept
	// whatever its size when nothing else waits.
	maxUnclaimed      = 4 * customerQueue
	maxUnclaimedBytes = 256 << 20
)

// newCustomer registers a customer for app with the node. For a request
// handler (server side of an app) id is ignored and requests of app are
// routed to it; otherwise responses addressed to (app, id) are.
func (n *Node) newCustomer(app, id int32, serveRequests bool, handle func(*transport.Message)) (*customer, error) {
	// Timestamps start at a random point, so that a late answer to a
	// request of an earlier process with the same id (which this process
	// replaced) cannot be taken for an answer to one of ours.
	var seed [4]byte
	_, _ = crand.Read(seed[:])
	c := &customer{
		ts:      int32(binary.LittleEndian.Uint32(seed[:]) >> 2),
		n:       n,
		app:     app,
		id:      id,
		queue:   make(chan *transport.Message, customerQueue),
		handle:  handle,
		stopped: make(chan struct{}),
		pending: make(map[int32]*request),
		failed:  make(map[int32]error),
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if serveRequests {
		if _, dup := n.handlers[app]; dup {
			return nil, fmt.Errorf("psnode: app %d already has a request handler", app)
		}
		n.handlers[app] = c
	} else {
		k := custKey{app, id}
		if _, dup := n.customers[k]; dup {
			return nil, fmt.Errorf("psnode: app %d already has customer %d", app, id)
		}
		n.customers[k] = c
	}
	if !n.goFunc(c.run) {
		return nil, ErrStopped
	}
	// Hand over what arrived before the app existed; the queue has room
	// for it, as unclaimed messages are bounded by its size.
	k := unclaimedKey{request: serveRequests, app: app, cust: id}
	if serveRequests {
		k.cust = 0
	}
	for _, u := range n.unclaimed[k] {
		n.heldMsgs--
		n.heldBytes -= u.m.DataBytes()
		c.queue <- u.m
	}
	delete(n.unclaimed, k)
	return c, nil
}

// expireUnclaimedLocked drops messages that waited appGrace for an app
// that never came, answering requests with an error so that the sender
// does not wait in vain. n.mu must be held.
func (n *Node) expireUnclaimedLocked(now time.Time) []*transport.Message {
	var out []*transport.Message
	for k, list := range n.unclaimed {
		i := 0
		for i < len(list) && now.Sub(list[i].at) > appGrace {
			m := list[i].m
			i++
			n.heldMsgs--
			n.heldBytes -= m.DataBytes()
			n.log.WithField("msg", m.String()).Warn("message for an app this node does not run dropped")
			if r := n.noAppReply(m, ""); r != nil {
				out = append(out, r)
			}
		}
		if i == len(list) {
			delete(n.unclaimed, k)
		} else {
			n.unclaimed[k] = list[i:]
		}
	}
	return out
}

func (c *customer) run() {
	for {
		select {
		case m := <-c.queue:
			c.take(m)
		case <-c.stopped:
			// Drain what was already queued, then stop.
			for {
				select {
				case m := <-c.queue:
					c.take(m)
				default:
					return
				}
			}
		}
	}
}

// take handles m, then gives back what the transport lent it: a lent
// message reaches only a handler that borrows it (Node.lends), which keeps
// nothing of it past its return.
func (c *customer) take(m *transport.Message) {
	defer m.Release()
	c.handle(m)
}

func (c *customer) stop() { c.stopOnce.Do(func() { close(c.stopped) }) }

// unclaimedKey names the app a message waits for: the request handler of
// app, or customer cust of app for a response.
type unclaimedKey struct {
	request   bool
	app, cust int32
}

type unclaimedMsg struct {
	m  *transport.Message
	at time.Time
}

// appGrace is how long a message for an app that this node has not
// created yet is kept: an app made right after Start may be a moment late
// for a peer that was released from the start barrier first.
const appGrace = 10 * time.Second

func keyOf(m *transport.Message) unclaimedKey {
	if m.Meta.Request {
		return unclaimedKey{request: true, app: m.Meta.AppID}
	}
	return unclaimedKey{app: m.Meta.AppID, cust: m.Meta.CustomerID}
}

// holdLocked keeps m, a message for an app this node has not created,
// until the app comes (NewApp) or appGrace passes, within the bounds of
// one app's messages and of all apps'. A message beyond them is dropped;
// for a request, holdLocked returns the error reply that tells its sender
// at once. n.mu must be held.
func (n *Node) holdLocked(m *transport.Message) *transport.Message {
	k, size := keyOf(m), m.DataBytes()
	if len(n.unclaimed[k]) < customerQueue && n.heldMsgs < maxUnclaimed &&
		(n.heldMsgs == 0 || n.heldBytes+size <= maxUnclaimedBytes) {
		m.Own() // kept for later
		n.unclaimed[k] = append(n.unclaimed[k], unclaimedMsg{m: m, at: n.now()})
		n.heldMsgs++
		n.heldBytes += size
		return nil
	}
	n.log.WithField("msg", m.String()).Warn("message for an app this node does not run dropped: too many wait for apps")
	return n.noAppReply(m, fmt.Sprintf("; %d messages of %d bytes already wait for apps this node does not run", n.heldMsgs, n.heldBytes))
}

// noApp is what noAppReply's error says of the app it names.
const noApp = "runs no app"

// noAppReply is the error reply to m, a request for an app this node
// does not run (more saying why it was dropped); nil when m is a response.
func (n *Node) noAppReply(m *transport.Message, more string) *transport.Message {
	if !m.Meta.Request {
		return nil
	}
	return &transport.Message{Meta: transport.Meta{
		Recver:     m.Meta.Sender,
		AppID:      m.Meta.AppID,
		CustomerID: m.Meta.CustomerID,
		Timestamp:  m.Meta.Timestamp,
		Push:       m.Meta.Push,
		Pull:       m.Meta.Pull,
		SimpleApp:  m.Meta.SimpleApp,
		Status:     1,
		Body:       []byte(fmt.Sprintf("node %d %s %d%s", n.me.ID, noApp, m.Meta.AppID, more)),
	}}
}

// dispatch routes a data message to its app's queue; it blocks while the
// queue is full (back-pressure on the sender), until the node stops. A
// message for an app not created yet waits for it (holdLocked). It
// reports whether a queue took it.
func (n *Node) dispatch(m *transport.Message) bool {
	n.mu.Lock()
	var c *customer
	if m.Meta.Request {
		c = n.handlers[m.Meta.AppID]
	} else {
		c = n.customers[custKey{m.Meta.AppID, m.Meta.CustomerID}]
	}
	if c == nil {
		reply := n.holdLocked(m)
		n.mu.Unlock()
		if reply != nil {
			n.sendAll([]*transport.Message{reply})
		}
		return false
	}
	n.mu.Unlock()
	select {
	case c.queue <- m:
		return true
	case <-c.stopped:
	case <-n.ctx.Done():
	}
	return false
}

// newRequest registers a request to peers and returns its timestamp.
func (c *customer) newRequest(peers []int32, onReply func(int32, *transport.Message) error, finish func(error) error, cb func(error), onMiss func(peer, ts int32) error) int32 {
	r := &request{waiting: make(map[int32]bool, len(peers)), done: make(chan struct{}), onReply: onReply, finish: finish, callback: cb, onMiss: onMiss}
	for _, p := range peers {
		r.waiting[p] = true
	}
	c.mu.Lock()
	c.ts++
	if c.ts < 0 {
		c.ts = 1
	}
	ts := c.ts
	c.pending[ts] = r
	c.mu.Unlock()
	if len(peers) == 0 {
		c.complete(ts, r, nil)
	}
	return ts
}

// reply processes one peer's answer to request ts, and the answers that
// ride on it (Meta.Acks: empty answers without error, to pushes). It runs
// on the customer's goroutine.
func (c *customer) reply(m *transport.Message) {
	c.answer(m.Meta.Timestamp, m.Meta.Sender, m)
	for _, ts := range m.Meta.Acks {
		c.answer(ts, m.Meta.Sender, nil)
	}
}

// answer processes peer's answer to request ts: m, or an empty answer
// without error when m is nil.
func (c *customer) answer(ts, peer int32, m *transport.Message) {
	c.mu.Lock()
	r := c.pending[ts]
	if r == nil || r.completing || !r.waiting[peer] {
		c.mu.Unlock()
		return // late, duplicate or unknown
	}
	var err error
	if m != nil && m.Meta.Status == statusKeyMiss && r.onMiss != nil {
		c.mu.Unlock()
		// The server misses a key list: it gets the request again with
		// the list written out, and its answer to that one counts.
		if err = r.onMiss(peer, ts); err == nil {
			return
		}
		c.mu.Lock()
	}
	delete(r.waiting, peer)
	delete(r.sent, peer)
	left := len(r.waiting)
	c.mu.Unlock()
	switch {
	case err != nil: // the miss could not be answered
	case m == nil && r.onReply != nil:
		err = fmt.Errorf("psnode: %w: peer %d acknowledged request %d, which waits for its values", transport.ErrMalformed, peer, ts)
	case m == nil:
	case m.Meta.Status != 0:
		err = &RemoteError{Peer: peer, Message: string(m.Meta.Body)}
	case r.onReply != nil:
		err = r.onReply(peer, m)
	}
	c.mu.Lock()
	if err != nil && r.err == nil {
		r.err = err
	}
	c.mu.Unlock()
	if left == 0 {
		c.complete(ts, r, nil)
	}
}

// complete finishes request ts once, recording err if it is the first.
// The request stays in the pending table until its finish function (which
// fills the caller's slices) has run, so that a Wait cannot return before.
func (c *customer) complete(ts int32, r *request, err error) {
	c.mu.Lock()
	if c.pending[ts] != r || r.completing {
		c.mu.Unlock()
		return
	}
	r.completing = true
	if err != nil && r.err == nil {
		r.err = err
	}
	err = r.err
	c.mu.Unlock()
	if r.finish != nil {
		if ferr := r.finish(err); err == nil {
			err = ferr
		}
	}
	c.mu.Lock()
	delete(c.pending, ts)
	r.err = err
	if err != nil {
		c.failed[ts] = err
		c.order = append(c.order, ts)
		if len(c.order) > maxFailed {
			delete(c.failed, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	close(r.done)
	if r.callback != nil {
		r.callback(err)
	}
}

// peerDead fails every request still waiting for peer. A hold customer
// keeps the requests whose message to peer it holds instead: they go to
// peer's replacement (peerBack), and fail with err only when none comes
// within replacementWait. It may be called with Node.mu held.
func (c *customer) peerDead(peer int32, err error) {
	c.mu.Lock()
	var hit []int32
	held := 0
	for ts, r := range c.pending {
		if !r.waiting[peer] {
			continue
		}
		if c.hold && r.sent[peer] != nil {
			held++
			continue
		}
		hit = append(hit, ts)
	}
	if role, _ := transport.IDRole(peer); c.hold && role == transport.RoleServer {
		c.downGen++
		if c.down == nil {
			c.down = make(map[int32]int)
		}
		gen := c.downGen
		c.down[peer] = gen
		c.n.goFunc(func() {
			t := time.NewTimer(replacementWait)
			defer t.Stop()
			select {
			case <-t.C:
				c.giveUp(peer, gen, err)
			case <-c.n.ctx.Done():
			}
		})
		if held > 0 {
			c.n.log.WithFields(logrus.Fields{"peer": peer, "requests": held, "app": c.app}).Warn("requests wait for the dead server's replacement")
		}
	}
	c.mu.Unlock()
	for _, ts := range hit {
		c.mu.Lock()
		r := c.pending[ts]
		c.mu.Unlock()
		if r != nil {
			// Not inline: completion runs callbacks, which may call
			// into the node whose lock the caller may hold.
			ts, r := ts, r
			c.n.goFunc(func() { c.complete(ts, r, err) })
		}
	}
}

// replacementWait bounds how long a hold customer's requests wait for a
// dead server's replacement before they fail with its death.
const replacementWait = 5 * time.Minute

// holdForReplicas turns on what a KV worker needs when its servers keep
// replicas: each request's messages are kept (keep) until their server
// answers, a dead server's requests wait for its replacement, which gets
// them again (peerBack), and requests made meanwhile are held for it.
func (c *customer) holdForReplicas() { c.hold = true }

// keep records the messages of request ts, to send them again to a
// server's replacement, and returns those to send now: all but those to a
// server that is down, which its replacement gets (peerBack). Their data
// frames are copied, since the caller may reuse its buffers once the send
// returns, unless owned says that every frame of msgs is the request's
// own (built for it, as a split by index or compression builds them),
// which nothing else changes. A customer that does not hold keeps
// nothing.
func (c *customer) keep(ts int32, owned bool, msgs ...*transport.Message) []*transport.Message {
	if !c.hold {
		return msgs
	}
	cps := make([]*transport.Message, len(msgs))
	for i, m := range msgs {
		if owned { // as ownedCopy, without copying the frames' bytes
			cps[i] = &transport.Message{Meta: m.Meta, Data: slices.Clone(m.Data), WireSize: m.WireSize}
		} else {
			cps[i] = ownedCopy(m)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.pending[ts]
	now := msgs[:0:0]
	for i, m := range msgs {
		if r != nil && r.waiting[m.Meta.Recver] {
			if r.sent == nil {
				r.sent = make(map[int32]*transport.Message, len(msgs))
			}
			r.sent[m.Meta.Recver] = cps[i]
		}
		if _, down := c.down[m.Meta.Recver]; !down {
			now = append(now, m)
		}
	}
	return now
}

// peerBack sends a hold customer's outstanding messages to peer again, in
// the order of their requests: a new process took over peer's id, and
// what the dead one received but did not answer is lost with it. A
// server answers a message it already applied without applying it again
// (see SyncHandler and replica.go). It may be called with Node.mu held.
func (c *customer) peerBack(peer int32) {
	if c.failOnReplace {
		c.failWaiting(peer, fmt.Errorf("psnode: node %d was replaced by a new process", peer))
		return
	}
	if !c.hold {
		return
	}
	c.mu.Lock()
	delete(c.down, peer)
	var tss []int32
	for ts, r := range c.pending {
		if r.waiting[peer] && r.sent[peer] != nil && !r.completing {
			tss = append(tss, ts)
		}
	}
	slices.Sort(tss) // oldest first
	out := make([]*transport.Message, 0, len(tss))
	for _, ts := range tss {
		cp := *c.pending[ts].sent[peer]
		out = append(out, &cp)
	}
	c.mu.Unlock()
	if len(out) == 0 {
		return
	}
	c.n.log.WithFields(logrus.Fields{"peer": peer, "requests": len(out), "app": c.app}).Info("requests sent again to the dead server's replacement")
	c.n.goFunc(func() {
		for _, m := range out {
			ctx, cancel := context.WithTimeout(c.n.ctx, 30*time.Second)
			err := c.n.send(ctx, m)
			cancel()
			if err != nil {
				c.fail(m.Meta.Timestamp, err)
			}
		}
	})
}

// giveUp fails the requests waiting for peer when it is still down since
// the death of generation gen: no replacement came in time.
func (c *customer) giveUp(peer int32, gen int, err error) {
	c.mu.Lock()
	if g, ok := c.down[peer]; !ok || g != gen {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.failWaiting(peer, fmt.Errorf("no replacement within %v: %w", replacementWait, err))
}

// failWaiting fails every request waiting for peer with err, off the
// caller's goroutine (completions run callbacks, which may call into the
// node whose lock the caller may hold).
func (c *customer) failWaiting(peer int32, err error) {
	c.mu.Lock()
	var hit []int32
	for ts, r := range c.pending {
		if r.waiting[peer] {
			hit = append(hit, ts)
		}
	}
	c.mu.Unlock()
	if len(hit) == 0 {
		return
	}
	c.n.goFunc(func() {
		for _, ts := range hit {
			c.fail(ts, err)
		}
	})
}

// failAll fails every outstanding request with err (at Close).
func (c *customer) failAll(err error) {
	c.mu.Lock()
	reqs := make(map[int32]*request, len(c.pending))
	for ts, r := range c.pending {
		reqs[ts] = r
	}
	c.mu.Unlock()
	for ts, r := range reqs {
		c.complete(ts, r, err)
	}
}

// wait blocks until request ts completes and returns its error. A
// timestamp that is not outstanding has completed: its error is returned
// if it failed recently, nil otherwise.
func (c *customer) wait(ctx context.Context, ts int32) error {
	c.mu.Lock()
	r := c.pending[ts]
	if r == nil {
		err := c.failed[ts]
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("psnode: wait for request %d: %w", ts, ctx.Err())
	case <-c.n.ctx.Done():
		select {
		case <-r.done:
			return r.err
		default:
			return ErrStopped
		}
	}
}

// fail completes request ts with err (a send failed).
func (c *customer) fail(ts int32, err error) {
	c.mu.Lock()
	r := c.pending[ts]
	c.mu.Unlock()
	if r != nil {
		c.complete(ts, r, err)
	}
}
