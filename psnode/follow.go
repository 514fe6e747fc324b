package psnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// The scheduler's death.
//
// The scheduler is on no data path: pushes and pulls go from workers to
// servers directly. What needs it is registration, barriers and the
// detection of dead nodes. So when it dies the job need not stop: the
// launcher starts a new scheduler process (on another port, maybe
// another host) and records its address where nodes can ask for it (a
// SchedulerLocator: the tracker). A node that finds its scheduler gone
// (its connection lost for schedLostGrace, or no answer to heartbeats
// for the heartbeat timeout, or retransmissions to it exhausted) keeps
// working, and asks the locator until it names a scheduler, then sends
// it a rejoin: itself, its whole node table, the nodes it knows dead and
// the last round of each barrier group it was released from, signed with
// the job secret. The new scheduler, which has no table, takes the first
// rejoin's as its own (rebuild) and answers every rejoin with the table;
// a node that has it back asks again for the barrier it waits at. Rounds
// (see Barrier) make the barriers come out right: a round some nodes were
// released from before the old scheduler died is known complete from
// their rejoins, and is released to the others at once.
//
// Processes that the launcher started meanwhile register as usual, and
// take over their dead node's place as they would with the old
// scheduler (recoverLocked); a peer whose table still names the dead
// process learns of its death from the rebuilt table.
//
// A node without a locator, or whose search outlasts its RegisterTimeout,
// declares the scheduler dead as before: its barriers fail.

// SchedulerLocator tells where the job's scheduler listens now. The
// launcher starts a new scheduler process when the old one dies, on
// another port or host, and records its address; *tracker.Client
// implements this through the job's tracker.
type SchedulerLocator interface {
	// SchedulerAddr returns the scheduler's host:port, or "" while no
	// scheduler process is running.
	SchedulerAddr(ctx context.Context) (string, error)
}

// WithSchedulerLocator lets a server or worker outlive its scheduler: it
// rejoins the scheduler l names next (see the comment above
// SchedulerLocator). The node owns l and closes it in Close when it is
// an io.Closer.
func WithSchedulerLocator(l SchedulerLocator) Option {
	return func(n *Node) { n.locator = l }
}

// locateTimeout bounds one question to the locator; followPoll is the
// longest pause between two, while the scheduler is lost.
const (
	locateTimeout = 5 * time.Second
	followPoll    = 250 * time.Millisecond
)

// Replaced reports whether this scheduler took over a running job's node
// table from its nodes, its predecessor having died.
func (n *Node) Replaced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rebuilt
}

// followsLocked reports whether this node looks for a new scheduler when
// it loses its own: it has a locator and is not leaving the job. n.mu
// must be held.
func (n *Node) followsLocked() bool {
	return n.locator != nil && n.role != transport.RoleScheduler && !n.leaving
}

// loseSchedulerLocked starts the search for a replacement of a lost
// scheduler, unless one runs, and says so to the subscribers
// (SchedulerLost); silent is how long the scheduler had not been heard
// from when the heartbeat watch lost it, else 0. n.mu must be held.
func (n *Node) loseSchedulerLocked(why string, silent time.Duration) {
	if !n.schedLost.IsZero() || !n.ready {
		return
	}
	n.schedLost = n.now()
	n.log.WithField("reason", why).Warn("scheduler lost; going on, and looking for its replacement")
	n.emit(Event{Kind: SchedulerLost, Node: n.table[transport.SchedulerID], Reason: why, Silent: silent})
	if n.resend != nil {
		// What it was sent is moot; the barriers are asked for again.
		n.resendMu.Lock()
		n.resend.forget(transport.SchedulerID)
		n.resendMu.Unlock()
	}
	n.goFunc(n.followScheduler)
}

// schedulerLost reports whether a replacement scheduler is being sought.
func (n *Node) schedulerLost() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.schedLost.IsZero()
}

// followScheduler asks the locator for the scheduler until a scheduler
// answers this node's rejoin with its table, and sends each named one a
// rejoin. After RegisterTimeout it declares the scheduler dead.
func (n *Node) followScheduler() {
	deadline := time.NewTimer(n.cfg.RegisterTimeout)
	defer deadline.Stop()
	backoff := 50 * time.Millisecond
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-deadline.C:
			if n.schedulerLost() {
				n.markDead(transport.SchedulerID, fmt.Sprintf("lost, and no replacement scheduler took this node back within %v", n.cfg.RegisterTimeout))
			}
			return
		case <-retry.C:
		}
		if !n.schedulerLost() {
			return
		}
		if n.rerouteScheduler() {
			n.sendAll([]*transport.Message{n.rejoinMessage()})
		}
		backoff = min(2*backoff, followPoll)
		retry.Reset(backoff)
	}
}

// rerouteScheduler asks the locator where the scheduler is and points
// the route to it there when that changed. It reports whether a
// scheduler is named.
func (n *Node) rerouteScheduler() bool {
	ctx, cancel := context.WithTimeout(n.ctx, locateTimeout)
	defer cancel()
	addr, err := n.locator.SchedulerAddr(ctx)
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.WithError(err).Debug("cannot ask where the scheduler is")
		}
		return false
	}
	if addr == "" {
		return false
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		n.log.WithField("addr", addr).Warn("the scheduler's address given is not host:port; ignored")
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == n.schedAddr {
		return true
	}
	if err := n.tr.Connect(n.ctx, transport.SchedulerID, addr); err != nil {
		n.log.WithError(err).WithField("addr", addr).Warn("cannot connect to the scheduler")
		return false
	}
	n.log.WithFields(logrus.Fields{"was": n.schedAddr, "now": addr}).Info("the scheduler moved")
	n.schedAddr = addr
	return true
}

// rejoinMessage is this node's rejoin: itself, then the rest of its
// table, with its rounds and the nodes it knows dead in the body.
func (n *Node) rejoinMessage() *transport.Message {
	n.mu.Lock()
	nodes := []transport.Node{n.me}
	for _, nd := range n.tableLocked() {
		if nd.ID != n.me.ID {
			nodes = append(nodes, nd)
		}
	}
	rj := rejoinState{rounds: n.rounds}
	for id := range n.dead {
		rj.dead = append(rj.dead, id)
	}
	n.mu.Unlock()
	body := rj.encode()
	nonce := n.nonce()
	return &transport.Message{Meta: transport.Meta{
		Recver: transport.SchedulerID,
		Body:   body,
		Control: transport.Control{
			Cmd:   transport.CmdAddNode,
			Nodes: nodes,
			Nonce: nonce,
			Auth:  n.mac(authRejoin, nodes, nonce, body),
		},
	}}
}

// schedulerBackLocked notes a table from the scheduler: heartbeats count
// from now and, when the scheduler was lost, its replacement has taken
// this node back: the barriers it waits at are asked for again. It
// returns the messages to send. n.mu must be held.
func (n *Node) schedulerBackLocked() []*transport.Message {
	n.lastSeen[transport.SchedulerID] = n.now()
	if n.schedLost.IsZero() {
		return nil
	}
	n.log.WithField("took", n.now().Sub(n.schedLost).Round(time.Millisecond)).Info("rejoined the replacement scheduler")
	n.schedLost = time.Time{}
	var out []*transport.Message
	for g, w := range n.barrierWait {
		out = append(out, barrierRequest(g, w.round))
	}
	return out
}

// rejoinState is what a rejoin carries besides the nodes: the rounds of
// each barrier group (Node.rounds) and the ids of the nodes its sender
// knows dead.
type rejoinState struct {
	rounds [transport.AllGroups + 1]int32
	dead   []int32
}

// A rejoin's body:
//
//	0            4*(AllGroups+1)      +4                 +4*count
//	| rounds, int32 LE each | count, uint32 LE | dead ids, int32 LE each |
//
// maxRejoinDead bounds the count; a round is -1 (not known) to
// maxRejoinRound, so that a scheduler raising its rounds to a rejoin's
// never brings one near the wrap of an int32.
const (
	rejoinRoundsLen = 4 * int(transport.AllGroups+1)
	maxRejoinDead   = 1 << 16
	maxRejoinRound  = 1 << 30
)

func (rj rejoinState) encode() []byte {
	b := make([]byte, 0, rejoinRoundsLen+4+4*len(rj.dead))
	for _, r := range rj.rounds {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rj.dead)))
	for _, id := range rj.dead {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return b
}

var errRejoinBody = errors.New("psnode: malformed rejoin")

func decodeRejoin(b []byte) (rejoinState, error) {
	var rj rejoinState
	if len(b) < rejoinRoundsLen+4 {
		return rj, fmt.Errorf("%w: %d bytes, want at least %d", errRejoinBody, len(b), rejoinRoundsLen+4)
	}
	for g := range rj.rounds {
		rj.rounds[g] = int32(binary.LittleEndian.Uint32(b[4*g:]))
		if r := rj.rounds[g]; r < -1 || r > maxRejoinRound {
			return rj, fmt.Errorf("%w: round %d of barrier group %d", errRejoinBody, r, g)
		}
	}
	count := binary.LittleEndian.Uint32(b[rejoinRoundsLen:])
	rest := b[rejoinRoundsLen+4:]
	if count > maxRejoinDead || uint64(len(rest)) != 4*uint64(count) {
		return rj, fmt.Errorf("%w: %d dead ids in %d bytes", errRejoinBody, count, len(rest))
	}
	rj.dead = make([]int32, count)
	for i := range rj.dead {
		rj.dead[i] = int32(binary.LittleEndian.Uint32(rest[4*i:]))
	}
	return rj, nil
}

// checkRejoinNodes checks a rejoin's nodes against the job's shape: the
// sender (a server or worker) first, every id that of its role and rank,
// no id twice.
func (n *Node) checkRejoinNodes(nodes []transport.Node) error {
	// A job that scaled out has servers beyond its configured count.
	if len(nodes) == 0 || len(nodes) > 1+MaxServers+MaxWorkers {
		return fmt.Errorf("%d nodes for a job of at most %d servers and %d workers", len(nodes), MaxServers, MaxWorkers)
	}
	if r := nodes[0].Role; r != transport.RoleServer && r != transport.RoleWorker {
		return fmt.Errorf("a %s cannot rejoin", r)
	}
	seen := make(map[int32]bool, len(nodes))
	for _, nd := range nodes {
		var want int32
		switch nd.Role {
		case transport.RoleScheduler:
			want = transport.SchedulerID
		case transport.RoleServer:
			if nd.Rank < 0 || nd.Rank >= MaxServers {
				return fmt.Errorf("server rank %d is out of range: a job has at most %d servers", nd.Rank, MaxServers)
			}
			want = transport.ServerID(int(nd.Rank))
		case transport.RoleWorker:
			if nd.Rank < 0 || nd.Rank >= MaxWorkers {
				return fmt.Errorf("worker rank %d is out of range: a job has at most %d workers", nd.Rank, MaxWorkers)
			}
			want = transport.WorkerID(int(nd.Rank))
		default:
			return fmt.Errorf("node %d has no role", nd.ID)
		}
		if nd.ID != want || seen[nd.ID] {
			return fmt.Errorf("node id %d for %s rank %d (twice, or not its id)", nd.ID, nd.Role, nd.Rank)
		}
		seen[nd.ID] = true
	}
	return nil
}

// onRejoin handles a node's rejoin at the scheduler: a replacement
// scheduler rebuilds its table from the first; every rejoin raises the
// barrier rounds to the node's and is answered with the table.
func (n *Node) onRejoin(m *transport.Message) {
	c := &m.Meta.Control
	if len(c.Nodes) == 0 {
		return
	}
	reg := c.Nodes[0]
	log := n.log.WithFields(logrus.Fields{"peer": reg.Addr(), "peer_role": reg.Role.String()})
	if !n.verify(authRejoin, c, m.Meta.Body) {
		log.Warn("rejoin refused: the node does not prove knowledge of the job secret")
		n.refuse(reg, "rejoin not authenticated: wrong or missing job secret (SPINDLE_JOB_SECRET)")
		return
	}
	rj, err := decodeRejoin(m.Meta.Body)
	if err == nil {
		err = n.checkRejoinNodes(c.Nodes)
	}
	if err != nil {
		log.WithError(err).Warn("rejoin refused")
		n.refuse(reg, "rejoin refused: "+err.Error())
		return
	}
	n.mu.Lock()
	var pending []transport.Node
	if !n.ready {
		pending = n.rebuildLocked(c.Nodes, rj)
	}
	var out []*transport.Message
	for g, r := range rj.rounds {
		if g > 0 && r > n.rounds[g] {
			n.rounds[g] = r
			out = append(out, n.releaseStaleLocked(int32(g))...)
		}
	}
	more, why := n.recoverLocked(reg)
	n.mu.Unlock()
	n.sendAll(append(out, more...))
	if why != "" {
		log.Warn("rejoin refused: " + why)
		n.refuse(reg, why)
	}
	for _, p := range pending {
		n.registerRunning(p)
	}
}

// rebuildLocked makes a replacement scheduler's table from a rejoin: its
// nodes, the dead ones marked so, heartbeats counted from now. It returns
// the registrations that came before, to be handled as in a running job.
// n.mu must be held.
func (n *Node) rebuildLocked(nodes []transport.Node, rj rejoinState) []transport.Node {
	now := n.now()
	for _, nd := range nodes {
		if nd.Role == transport.RoleScheduler {
			continue
		}
		n.table[nd.ID] = nd
		n.lastSeen[nd.ID] = now
		if err := n.tr.Connect(n.ctx, nd.ID, nd.Addr()); err != nil {
			n.log.WithError(err).WithField("peer", nd.Addr()).Error("connect to node failed")
		}
	}
	for _, id := range rj.dead {
		if _, ok := n.table[id]; ok && id != transport.SchedulerID {
			n.dead[id] = "dead before the scheduler was replaced"
			delete(n.lastSeen, id)
		}
	}
	for g := range n.rounds {
		n.rounds[g] = max(n.rounds[g], rj.rounds[g])
	}
	// Past the start barrier, nodes do not wait for this one there.
	n.me.IsRecovery = n.rounds[transport.AllGroups] > 0
	n.table[transport.SchedulerID] = n.me
	n.rebuilt = true
	n.ready = true
	close(n.readyCh)
	var pending []transport.Node
	for _, r := range n.regs {
		pending = append(pending, r)
	}
	clear(n.regs)
	n.log.WithFields(logrus.Fields{"nodes": len(n.table) - 1, "dead": len(rj.dead)}).Info("node table rebuilt from a running node: this scheduler replaces a dead one")
	return pending
}

// registerRunning admits reg into the running job (recoverLocked), or
// refuses it.
func (n *Node) registerRunning(reg transport.Node) {
	n.mu.Lock()
	out, why := n.recoverLocked(reg)
	n.mu.Unlock()
	if why != "" {
		n.log.WithFields(logrus.Fields{"peer": reg.Addr(), "peer_role": reg.Role.String()}).Warn("registration refused: " + why)
		n.refuse(reg, why)
		return
	}
	n.sendAll(out)
}

// closeLocator closes the locator when it is an io.Closer.
func (n *Node) closeLocator() {
	if c, ok := n.locator.(io.Closer); ok {
		if err := c.Close(); err != nil {
			n.log.WithError(err).Debug("closing the scheduler locator")
		}
	}
}
