package psnode

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Domain-separation labels of the authenticated messages.
const (
	authRegister = "spindle/register/v1"
	authTable    = "spindle/table/v1"
	authRejoin   = "spindle/rejoin/v1"
)

// mac authenticates a node list, and body when it is not empty, under the
// job secret: HMAC-SHA256(secret, label ‖ nonce ‖ for each node: role,
// id, rank, port, incarnation, recovery flag, host length, host ‖ body
// length, body). It returns nil when the job has no secret.
func (n *Node) mac(label string, nodes []transport.Node, nonce int64, body []byte) []byte {
	if len(n.secret) == 0 {
		return nil
	}
	h := hmac.New(sha256.New, n.secret)
	h.Write([]byte(label))
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(nonce))
	for _, nd := range nodes {
		put(uint64(nd.Role))
		put(uint64(uint32(nd.ID)))
		put(uint64(uint32(nd.Rank)))
		put(uint64(uint32(nd.Port)))
		put(uint64(nd.Incarnation))
		if nd.IsRecovery {
			put(1)
		} else {
			put(0)
		}
		put(uint64(len(nd.Host)))
		h.Write([]byte(nd.Host))
	}
	if len(body) > 0 {
		put(uint64(len(body)))
		h.Write(body)
	}
	return h.Sum(nil)
}

// verify checks the authentication of a control message whose signed
// extra bytes, if any, are body.
func (n *Node) verify(label string, c *transport.Control, body []byte) bool {
	if len(n.secret) == 0 {
		return true
	}
	return hmac.Equal(c.Auth, n.mac(label, c.Nodes, c.Nonce, body))
}

// tableMessage builds the authenticated node-table message for node to.
func (n *Node) tableMessage(to int32, nodes []transport.Node) *transport.Message {
	nonce := n.nonce()
	return &transport.Message{Meta: transport.Meta{
		Recver: to,
		Control: transport.Control{
			Cmd:   transport.CmdAddNode,
			Nodes: nodes,
			Nonce: nonce,
			Auth:  n.mac(authTable, nodes, nonce, nil),
		},
	}}
}

// onRegister handles a registration at the scheduler.
func (n *Node) onRegister(m *transport.Message) {
	c := &m.Meta.Control
	if len(m.Meta.Body) > 0 {
		n.onRejoin(m)
		return
	}
	if len(c.Nodes) != 1 {
		return
	}
	reg := c.Nodes[0]
	log := n.log.WithFields(logrus.Fields{"peer": reg.Addr(), "peer_role": reg.Role.String()})
	if !n.verify(authRegister, c, nil) {
		log.Warn("registration refused: the node does not prove knowledge of the job secret")
		n.refuse(reg, "registration not authenticated: wrong or missing job secret (SPINDLE_JOB_SECRET)")
		return
	}
	if reg.Role != transport.RoleServer && reg.Role != transport.RoleWorker {
		n.refuse(reg, fmt.Sprintf("role %s cannot register", reg.Role))
		return
	}
	limit := n.cfg.NumWorkers
	if reg.Role == transport.RoleServer {
		limit = n.cfg.NumServers
	}
	n.mu.Lock()
	if n.ready && (reg.Role == transport.RoleServer && reg.Rank < MaxServers || reg.Role == transport.RoleWorker && reg.Rank < MaxWorkers) {
		// A running job admits a server or worker beyond its count: one
		// that joins for a scale-out (Tables.Rescale).
		n.mu.Unlock()
		n.registerRunning(reg)
		return
	}
	if reg.Rank >= int32(limit) {
		n.mu.Unlock()
		n.refuse(reg, fmt.Sprintf("rank %d is out of range: the job has %d %ss", reg.Rank, limit, reg.Role))
		return
	}
	if n.ready {
		n.mu.Unlock()
		n.registerRunning(reg)
		return
	}
	// Before the job starts: remember the registration; a process that
	// registers again (a retry, or a restart holding the same rank)
	// replaces its earlier entry.
	for inc, r := range n.regs {
		if inc != reg.Incarnation && reg.Rank >= 0 && r.Role == reg.Role && r.Rank == reg.Rank {
			delete(n.regs, inc)
		}
	}
	n.regs[reg.Incarnation] = reg
	if len(n.regs) < n.cfg.NumWorkers+n.cfg.NumServers {
		n.mu.Unlock()
		log.Debug("node registered")
		return
	}
	nodes, err := n.assignLocked()
	if err != nil {
		n.mu.Unlock()
		n.log.WithError(err).Error("cannot assign ranks")
		return
	}
	var out []*transport.Message
	for _, nd := range nodes {
		n.table[nd.ID] = nd
		n.lastSeen[nd.ID] = n.now()
	}
	all := n.tableLocked()
	for _, nd := range nodes {
		if err := n.tr.Connect(n.ctx, nd.ID, nd.Addr()); err != nil {
			n.log.WithError(err).WithField("peer", nd.Addr()).Error("connect to node failed")
		}
		out = append(out, n.tableMessage(nd.ID, all))
	}
	n.ready = true
	close(n.readyCh)
	n.mu.Unlock()
	n.log.WithField("nodes", len(nodes)).Info("all nodes registered")
	n.sendAll(out)
}

// assignLocked gives ranks and ids to the registered nodes: a node that
// asked for a rank (DMLC_TASK_ID) gets it; the others take the free ranks
// in the order of (host, port). n.mu must be held.
func (n *Node) assignLocked() ([]transport.Node, error) {
	var nodes []transport.Node
	for _, role := range []transport.Role{transport.RoleServer, transport.RoleWorker} {
		count := n.cfg.NumWorkers
		if role == transport.RoleServer {
			count = n.cfg.NumServers
		}
		taken := make([]bool, count)
		var fixed, free []transport.Node
		for _, r := range n.regs {
			if r.Role != role {
				continue
			}
			if r.Rank >= 0 && !taken[r.Rank] {
				taken[r.Rank] = true
				fixed = append(fixed, r)
			} else {
				r.Rank = -1
				free = append(free, r)
			}
		}
		sort.Slice(free, func(i, j int) bool {
			a, b := free[i], free[j]
			if a.Host != b.Host {
				return a.Host < b.Host
			}
			if a.Port != b.Port {
				return a.Port < b.Port
			}
			return a.Incarnation < b.Incarnation
		})
		next := 0
		for i := range free {
			for next < count && taken[next] {
				next++
			}
			if next >= count {
				return nil, fmt.Errorf("psnode: more %ss registered than the %d configured", role, count)
			}
			free[i].Rank = int32(next)
			taken[next] = true
		}
		for _, r := range append(fixed, free...) {
			if role == transport.RoleServer {
				r.ID = transport.ServerID(int(r.Rank))
			} else {
				r.ID = transport.WorkerID(int(r.Rank))
			}
			nodes = append(nodes, r)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}

// tableLocked returns the node table sorted by id. n.mu must be held.
func (n *Node) tableLocked() []transport.Node {
	all := make([]transport.Node, 0, len(n.table))
	for _, nd := range n.table {
		all = append(all, nd)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all
}

// recoverLocked lets a new process take over a node's id once the job
// runs: the node of the requested rank, or else the lowest-ranked dead
// node of the role. It returns the messages to send, or the reason for a
// refusal. n.mu must be held.
func (n *Node) recoverLocked(reg transport.Node) ([]*transport.Message, string) {
	for _, nd := range n.table {
		if nd.Incarnation == reg.Incarnation {
			if _, waiting := n.admitting[nd.ID]; waiting {
				return nil, "" // its table comes once every peer knows it
			}
			// A repeated registration: send the table again.
			return []*transport.Message{n.tableMessage(nd.ID, n.tableLocked())}, ""
		}
	}
	var slot *transport.Node
	for _, nd := range n.tableLocked() {
		if nd.Role != reg.Role {
			continue
		}
		_, dead := n.dead[nd.ID]
		if reg.Rank >= 0 && nd.Rank == reg.Rank {
			slot = &nd
			break
		}
		if reg.Rank < 0 && dead {
			slot = &nd
			break
		}
	}
	joins := false
	switch {
	case slot == nil && reg.Role == transport.RoleServer && reg.Rank >= 0:
		// A server that joins for a scale-out: a new rank.
		slot, joins = &transport.Node{Role: reg.Role, ID: transport.ServerID(int(reg.Rank)), Rank: reg.Rank}, true
	case slot == nil && reg.Role == transport.RoleWorker && reg.Rank >= 0:
		slot, joins = &transport.Node{Role: reg.Role, ID: transport.WorkerID(int(reg.Rank)), Rank: reg.Rank}, true
	case slot == nil:
		return nil, fmt.Sprintf("no dead %s to replace: the job already has all its nodes", reg.Role)
	case n.left[slot.ID]:
		// The rank of a node drained by a scale-in, joining again.
		joins = true
		delete(n.left, slot.ID)
	}
	var out []*transport.Message
	if _, dead := n.dead[slot.ID]; !dead && !joins {
		out = append(out, n.markReplacedLocked(slot.ID, "replaced by a new process of the same rank")...)
	}
	nd := reg
	nd.ID, nd.Rank, nd.IsRecovery = slot.ID, slot.Rank, !joins
	n.table[nd.ID] = nd
	delete(n.dead, nd.ID)
	n.lastSeen[nd.ID] = n.now()
	if err := n.tr.Connect(n.ctx, nd.ID, nd.Addr()); err != nil {
		n.log.WithError(err).WithField("peer", nd.Addr()).Error("connect to recovered node failed")
	}
	// Every live peer learns of the new process first, and acknowledges;
	// only then does the new process get its table and start sending.
	// Otherwise a peer could drop its first messages (the id still marked
	// dead there) or answer them at the dead process's address.
	waiting := make(map[int32]int64)
	for _, id := range n.groupMembers(transport.ServerGroup | transport.WorkerGroup) {
		// A peer being admitted itself gets the whole table, with this
		// one, when it is; until then it takes no update (it would ignore
		// one without itself, and never acknowledge it).
		if _, admitting := n.admitting[id]; id != nd.ID && !admitting {
			m := n.tableMessage(id, []transport.Node{nd})
			m.Meta.Request = true // acknowledge, please
			out = append(out, m)
			waiting[id] = m.Meta.Control.Nonce
		}
	}
	n.admitting[nd.ID] = waiting
	out = append(out, n.admitIfReadyLocked(nd.ID)...)
	n.emit(Event{Kind: NodeRecovered, Node: nd})
	n.log.WithFields(logrus.Fields{"peer": nd.Addr(), "id": nd.ID}).Info("node recovered")
	return out, ""
}

// admitIfReadyLocked sends a recovering node its table once no peer's
// acknowledgement of the update is outstanding. n.mu must be held.
func (n *Node) admitIfReadyLocked(id int32) []*transport.Message {
	waiting, ok := n.admitting[id]
	if !ok || len(waiting) > 0 {
		return nil
	}
	delete(n.admitting, id)
	return []*transport.Message{n.tableMessage(id, n.tableLocked())}
}

// onTableAck notes a peer's acknowledgement of the table update of nonce
// at the scheduler, admitting the recovering node that waited only for
// it. The nonce tells the updates apart: with two nodes admitted at once,
// a peer's acknowledgement of the first says nothing of the second, still
// on its way.
func (n *Node) onTableAck(from int32, nonce int64) {
	n.mu.Lock()
	if _, known := n.table[from]; !known {
		n.mu.Unlock()
		return
	}
	var out []*transport.Message
	for id, waiting := range n.admitting {
		if sent, ok := waiting[from]; ok && sent == nonce {
			delete(waiting, from)
			out = append(out, n.admitIfReadyLocked(id)...)
		}
	}
	n.mu.Unlock()
	n.sendAll(out)
}

// refuse tells a registering node it is not admitted. The route to it
// uses a temporary negative id, one per address, kept for later retries.
func (n *Node) refuse(reg transport.Node, reason string) {
	n.mu.Lock()
	n.stats.Refusals++
	id, ok := n.tempRoutes[reg.Addr()]
	if !ok {
		if len(n.tempRoutes) >= 1024 {
			n.mu.Unlock()
			return
		}
		id = -1 - int32(len(n.tempRoutes))
		n.tempRoutes[reg.Addr()] = id
		if err := n.tr.Connect(n.ctx, id, reg.Addr()); err != nil {
			n.mu.Unlock()
			return
		}
	}
	n.mu.Unlock()
	n.sendAll([]*transport.Message{{Meta: transport.Meta{
		Recver:  id,
		Control: transport.Control{Cmd: transport.CmdRefused, Reason: reason},
	}}})
}

func (n *Node) onRefused(m *transport.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ready {
		return
	}
	n.refused = fmt.Errorf("%w by the scheduler at %s:%d: %s", ErrRefused, n.cfg.RootURI, n.cfg.RootPort, m.Meta.Control.Reason)
	n.ready = true
	close(n.readyCh)
}

// onTable handles the node table (or an update of some entries) sent by
// the scheduler, and reports whether it applied it, with the messages to
// send then.
func (n *Node) onTable(m *transport.Message) (bool, []*transport.Message) {
	c := &m.Meta.Control
	if !n.verify(authTable, c, nil) {
		n.log.Warn("node table with a bad signature ignored")
		return false, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready {
		found := false
		for _, nd := range c.Nodes {
			if nd.Incarnation == n.me.Incarnation && nd.Role == n.role {
				n.me.ID, n.me.Rank, n.me.IsRecovery = nd.ID, nd.Rank, nd.IsRecovery
				found = true
				if nd.IsRecovery || n.cfg.Joining {
					// The job's barriers have had rounds this process
					// did not see: it joins the next in progress.
					for g := range n.rounds {
						n.rounds[g] = -1
					}
				}
			}
		}
		if !found {
			n.log.Warn("node table without this node ignored")
			return false, nil
		}
		for _, nd := range c.Nodes {
			n.table[nd.ID] = nd
			if nd.ID == n.me.ID || nd.ID == transport.SchedulerID {
				continue
			}
			if err := n.tr.Connect(n.ctx, nd.ID, nd.Addr()); err != nil {
				n.log.WithError(err).WithField("peer", nd.Addr()).Error("connect to node failed")
			}
		}
		n.lastSeen[transport.SchedulerID] = n.now()
		n.log = n.log.WithFields(logrus.Fields{"id": n.me.ID, "rank": n.me.Rank})
		n.ready = true
		close(n.readyCh)
		return true, nil
	}
	var out []*transport.Message
	if m.Meta.Sender == transport.SchedulerID {
		out = n.schedulerBackLocked()
	}
	for _, nd := range c.Nodes {
		old, ok := n.table[nd.ID]
		if nd.ID == n.me.ID || (ok && old.Incarnation == nd.Incarnation) {
			continue
		}
		if nd.ID == transport.SchedulerID {
			// A replacement scheduler (follow.go): its route is set.
			n.table[nd.ID] = nd
			n.emit(Event{Kind: NodeRecovered, Node: nd})
			continue
		}
		if _, d := n.dead[nd.ID]; ok && !d {
			// A replacement scheduler's table: the process it replaces
			// died while the scheduler was down, unannounced.
			n.markDeadLocked(nd.ID, "replaced by a new process while the scheduler was replaced")
		}
		n.table[nd.ID] = nd
		if err := n.tr.Connect(n.ctx, nd.ID, nd.Addr()); err != nil {
			n.log.WithError(err).WithField("peer", nd.Addr()).Error("connect to node failed")
		}
		if _, d := n.dead[nd.ID]; d || ok {
			delete(n.dead, nd.ID)
			n.emit(Event{Kind: NodeRecovered, Node: nd})
			for _, c := range n.customers {
				c.peerBack(nd.ID)
			}
		}
	}
	return true, out
}

// Barrier blocks until every live node of group (a bitmask of
// transport.SchedulerID, ServerGroup and WorkerGroup) has called Barrier
// with the same group. A member that dies meanwhile is no longer waited
// for (Subscribe and DeadNodes tell who died), unless a new process takes
// its place at once (its registration is how the scheduler learnt of the
// death): the new process is then waited for, and an arrival of the dead
// one does not count for it. Nor does a barrier go on past a role that
// died whole (every server, or every worker, of the group dead): their
// new processes are waited for. It fails with an error
// wrapping ErrNodeDead when the scheduler is dead; while a replacement of
// a lost scheduler is sought (see WithSchedulerLocator) it waits for it.
//
// Rounds: the scheduler numbers each group's completed barriers, and a
// release carries the round's number. A node asks for the round after the
// last one it was released from, so that a round a replacement scheduler
// learns was completed (some of its members were released before the old
// scheduler died) is released at once; a process that took over a dead
// node's place, and the scheduler itself, join the round in progress.
func (n *Node) Barrier(ctx context.Context, group int32) error {
	if group < 1 || group > transport.AllGroups {
		return fmt.Errorf("psnode: barrier group %d: want a combination of 1, 2 and 4", group)
	}
	n.mu.Lock()
	if !n.ready || n.refused != nil {
		n.mu.Unlock()
		return ErrNotReady
	}
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		return ErrStopped
	}
	if !inGroup(n.role, group) {
		n.mu.Unlock()
		return fmt.Errorf("psnode: barrier group %d does not include this %s", group, n.role)
	}
	if n.groupSize(group) <= 1 {
		n.mu.Unlock()
		return nil
	}
	if _, busy := n.barrierWait[group]; busy {
		n.mu.Unlock()
		return fmt.Errorf("psnode: a barrier on group %d is already in progress", group)
	}
	if reason, d := n.dead[transport.SchedulerID]; d {
		n.mu.Unlock()
		return &DeadError{ID: transport.SchedulerID, Role: transport.RoleScheduler, Reason: reason}
	}
	w := &barrierWaiter{ch: make(chan error, 1)}
	if n.role != transport.RoleScheduler && n.rounds[group] >= 0 {
		w.round = n.rounds[group] + 1
	}
	n.barrierWait[group] = w
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		if n.barrierWait[group] == w {
			delete(n.barrierWait, group)
		}
		n.mu.Unlock()
	}()

	if n.role == transport.RoleScheduler {
		n.onBarrierRequest(transport.SchedulerID, group, 0)
	} else if err := n.send(ctx, barrierRequest(group, w.round)); err != nil {
		return err
	}
	select {
	case err := <-w.ch:
		return err
	case <-ctx.Done():
		n.withdrawBarrier(group, w.round)
		return fmt.Errorf("psnode: barrier on group %d: %w", group, ctx.Err())
	case <-n.ctx.Done():
		return ErrStopped
	}
}

// barrierRequest is a node's arrival at round (0: the round in progress)
// of group's barrier.
func barrierRequest(group, round int32) *transport.Message {
	return &transport.Message{Meta: transport.Meta{
		Recver:    transport.SchedulerID,
		Request:   true,
		Timestamp: round,
		Control:   transport.Control{Cmd: transport.CmdBarrier, BarrierGroup: group},
	}}
}

// barrierRelease is the scheduler's release of node to from round of
// group's barrier.
func barrierRelease(to, group, round int32) *transport.Message {
	return &transport.Message{Meta: transport.Meta{
		Recver:    to,
		Timestamp: round,
		Control:   transport.Control{Cmd: transport.CmdBarrier, BarrierGroup: group},
	}}
}

// barrierWithdrawn marks a barrier request that takes back an earlier
// arrival (Meta.Status of the request).
const barrierWithdrawn = 1

// withdrawBarrier takes back this node's arrival at an abandoned barrier,
// so that it does not complete a later round early.
func (n *Node) withdrawBarrier(group, round int32) {
	if n.role == transport.RoleScheduler {
		n.onBarrierWithdraw(transport.SchedulerID, group, round)
		return
	}
	m := barrierRequest(group, round)
	m.Meta.Status = barrierWithdrawn
	n.sendAll([]*transport.Message{m})
}

// onBarrierWithdraw forgets an arrival that its node abandoned.
func (n *Node) onBarrierWithdraw(from, group, round int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if arr := n.arrived[group]; arr != nil && arr[from] == round {
		delete(arr, from)
	}
}

// onBarrierRequest counts an arrival at the scheduler and releases the
// group when every live member has arrived. A request for a round that
// is already complete is released at once.
func (n *Node) onBarrierRequest(from, group, round int32) {
	if group < 1 || group > transport.AllGroups {
		return
	}
	n.mu.Lock()
	if round > 0 && round <= n.rounds[group] {
		n.mu.Unlock()
		n.sendAll([]*transport.Message{barrierRelease(from, group, round)})
		return
	}
	arr := n.arrived[group]
	if arr == nil {
		arr = make(map[int32]int32)
		n.arrived[group] = arr
	}
	if len(arr) == 0 {
		n.arrivedAt[group] = make(map[transport.Role]time.Time)
	}
	if nd, ok := n.table[from]; ok && n.arrivedAt[group][nd.Role].IsZero() {
		n.arrivedAt[group][nd.Role] = time.Now()
	}
	arr[from] = round
	out := n.releaseIfCompleteLocked(group)
	n.mu.Unlock()
	n.sendAll(out)
}

// releaseIfCompleteLocked releases group's barrier when every live member
// that has not left has arrived; a finalizing scheduler counts as left.
// It waits while the group's servers or workers are all dead
// (roleAllDeadLocked). n.mu must be held.
func (n *Node) releaseIfCompleteLocked(group int32) []*transport.Message {
	arr := n.arrived[group]
	members := n.groupMembers(group)
	for _, id := range members {
		if _, ok := arr[id]; !ok && !n.left[id] && !(id == transport.SchedulerID && n.leaving) {
			return nil
		}
	}
	if len(arr) == 0 || n.roleAllDeadLocked(group) {
		return nil
	}
	n.stats.BarrierRounds++
	n.rounds[group]++
	delete(n.arrived, group)
	return n.answerBarrierLocked(group, arr, n.rounds[group])
}

// releaseCompleteLocked releases every barrier now complete (see
// releaseIfCompleteLocked). n.mu must be held.
func (n *Node) releaseCompleteLocked() []*transport.Message {
	var out []*transport.Message
	for group := range n.arrived {
		out = append(out, n.releaseIfCompleteLocked(group)...)
	}
	return out
}

// roleAllDeadLocked reports whether group holds servers or workers and
// every one of them of either role is dead, none having left. Such a
// barrier waits for their new processes: released past them all, the
// servers' last barrier would have them write a model that no worker
// trained to the end, and exit. n.mu must be held.
func (n *Node) roleAllDeadLocked(group int32) bool {
	for _, role := range []transport.Role{transport.RoleServer, transport.RoleWorker} {
		if !inGroup(role, group) {
			continue
		}
		nodes, dead := 0, 0
		for id, nd := range n.table {
			if nd.Role != role {
				continue
			}
			nodes++
			if _, d := n.dead[id]; d && !n.left[id] {
				dead++
			}
		}
		if nodes > 0 && dead == nodes {
			return true
		}
	}
	return false
}

// releaseStaleLocked releases the arrivals at group's barrier that asked
// for a round now known to be complete. n.mu must be held.
func (n *Node) releaseStaleLocked(group int32) []*transport.Message {
	var out []*transport.Message
	for id, r := range n.arrived[group] {
		if r > 0 && r <= n.rounds[group] {
			delete(n.arrived[group], id)
			out = append(out, barrierRelease(id, group, r))
		}
	}
	return out
}

// answerBarrierLocked releases every live arrival of round of group's
// barrier. n.mu must be held.
func (n *Node) answerBarrierLocked(group int32, arr map[int32]int32, round int32) []*transport.Message {
	var out []*transport.Message
	for id, r := range arr {
		if _, d := n.dead[id]; d {
			continue
		}
		if id == transport.SchedulerID {
			if w := n.barrierWait[group]; w != nil {
				select {
				case w.ch <- nil:
				default:
				}
			}
			continue
		}
		if r == 0 {
			r = round
		}
		out = append(out, barrierRelease(id, group, r))
	}
	return out
}

func (n *Node) onBarrierRelease(m *transport.Message) {
	if m.Meta.Sender != transport.SchedulerID {
		return
	}
	group, round := m.Meta.Control.BarrierGroup, m.Meta.Timestamp
	if group < 1 || group > transport.AllGroups {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.barrierWait[group]
	if w == nil || (w.round != 0 && w.round != round) {
		return
	}
	n.rounds[group] = max(n.rounds[group], round)
	select {
	case w.ch <- nil:
	default:
	}
}

func (n *Node) onHeartbeat(m *transport.Message) {
	if n.role != transport.RoleScheduler {
		return // the scheduler's answer; touch already noted it
	}
	n.mu.Lock()
	n.stats.HeartbeatsIn++
	n.mu.Unlock()
	n.sendAll([]*transport.Message{{Meta: transport.Meta{
		Recver:  m.Meta.Sender,
		Control: transport.Control{Cmd: transport.CmdHeartbeat},
	}}})
}

// tickPeriod is how often timers are checked: often enough for the
// heartbeat and resend settings, at most every 250 ms.
func (n *Node) tickPeriod() time.Duration {
	p := 250 * time.Millisecond
	if hb := n.cfg.HeartbeatInterval / 4; hb > 0 && hb < p {
		p = hb
	}
	if n.resend != nil {
		if rt := n.cfg.ResendTimeout / 4; rt < p {
			p = rt
		}
	}
	if p < 5*time.Millisecond {
		p = 5 * time.Millisecond
	}
	return p
}

func (n *Node) tickLoop() {
	n.every(n.tickPeriod(), func() { n.tick(n.now()) })
}

// every calls f every period until n closes.
func (n *Node) every(period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// connLostGrace is how long the scheduler's connection to a node may stay
// broken before the node is declared dead (when that is sooner than the
// heartbeat timeout). A node whose process ended refuses the reconnection
// at once; one that is alive takes it back within ZeroMQ's 100 ms retry.
const connLostGrace = time.Second

// connsLost declares dead, on the scheduler, those of ids (its live
// nodes) whose connection the transport lost (transport.ConnWatcher) more
// than connLostGrace ago and could not make again: a process that ended,
// seen without waiting for the heartbeat timeout. It asks the transport
// without holding n.mu, and returns the messages to send.
func (n *Node) connsLost(ids []int32) []*transport.Message {
	w, ok := n.tr.(transport.ConnWatcher)
	if !ok || len(ids) == 0 {
		return nil
	}
	grace := min(connLostGrace, n.cfg.HeartbeatTimeout)
	var lost []int32
	for _, id := range ids {
		if since, down := w.Down(id); down && time.Since(since) >= grace {
			lost = append(lost, id)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*transport.Message
	for _, id := range lost {
		if _, watched := n.lastSeen[id]; !watched {
			continue // it left meanwhile
		}
		out = append(out, n.markDeadLocked(id, fmt.Sprintf("its connection was lost and not made again within %v", grace))...)
	}
	return out
}

// tick runs the timers: heartbeats, dead-node detection, retransmission.
func (n *Node) tick(now time.Time) {
	var out []*transport.Message
	n.mu.Lock()
	n.sinceTickLocked(now)
	ready := n.ready && n.refused == nil
	if ready && n.cfg.HeartbeatInterval > 0 && n.role != transport.RoleScheduler && now.Sub(n.lastBeat) >= n.cfg.HeartbeatInterval {
		n.lastBeat = now
		n.stats.Heartbeats++
		out = append(out, &transport.Message{Meta: transport.Meta{
			Recver:  transport.SchedulerID,
			Control: transport.Control{Cmd: transport.CmdHeartbeat, Nonce: now.UnixNano()},
		}})
	}
	var watch []int32 // the scheduler's live nodes, for connsLost
	_, watching := n.tr.(transport.ConnWatcher)
	watching = watching && n.role == transport.RoleScheduler
	follows := ready && n.followsLocked() && n.schedLost.IsZero()
	if ready && n.cfg.HeartbeatTimeout > 0 {
		var late []int32
		for id, seen := range n.lastSeen {
			if _, d := n.dead[id]; d || id == n.me.ID {
				continue
			}
			if id == transport.SchedulerID && !n.schedLost.IsZero() {
				continue // its replacement is sought
			}
			// Nodes watch only the scheduler; the scheduler watches all.
			if n.role != transport.RoleScheduler && id != transport.SchedulerID {
				continue
			}
			if watching {
				watch = append(watch, id)
			}
			if now.Sub(seen) > n.cfg.HeartbeatTimeout {
				late = append(late, id)
			}
		}
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		for _, id := range late {
			why := fmt.Sprintf("no heartbeat for %v", n.cfg.HeartbeatTimeout)
			if id == transport.SchedulerID && n.followsLocked() {
				n.loseSchedulerLocked(why, now.Sub(n.lastSeen[id]))
				continue
			}
			out = append(out, n.markGoneLocked(id, why, false, now.Sub(n.lastSeen[id]))...)
		}
	}
	out = append(out, n.expireUnclaimedLocked(now)...)
	if ready && n.role == transport.RoleScheduler {
		n.barrierStallsLocked(now)
	}
	n.mu.Unlock()
	out = append(out, n.connsLost(watch)...)
	if follows {
		n.schedulerConnLost()
	}

	if n.resend != nil {
		n.resendMu.Lock()
		resend, exhausted := n.resend.due(now)
		n.resendMu.Unlock()
		for _, m := range resend {
			ctx, cancel := context.WithTimeout(n.ctx, time.Second)
			if nb, err := n.tr.Send(ctx, m); err != nil && n.ctx.Err() == nil {
				n.log.WithError(err).WithField("peer", m.Meta.Recver).Debug("retransmission failed")
			} else if err == nil {
				n.bytes.countSent(m, nb)
			}
			cancel()
		}
		n.mu.Lock()
		n.stats.Resent += uint64(len(resend))
		for _, id := range uniq(exhausted) {
			why := fmt.Sprintf("no acknowledgement after %d retransmissions", n.cfg.ResendRetries)
			if id == transport.SchedulerID && n.followsLocked() {
				n.loseSchedulerLocked(why, 0)
				continue
			}
			out = append(out, n.markDeadLocked(id, why)...)
		}
		n.mu.Unlock()
	}
	n.sendAll(out)
}

// sinceTickLocked notes the tick at now. After a gap of more than half
// the heartbeat timeout since the last one, this node did not run for a
// while (its process stopped, its machine paused, starved of CPU): it
// heard nothing meanwhile through no fault of its peers, whose messages
// wait unread, so their silence counts from now. Otherwise a scheduler
// that comes back from a pause would declare every node dead (and a
// launcher would stop them all), and a node would give up its scheduler.
// n.mu must be held.
func (n *Node) sinceTickLocked(now time.Time) {
	gap := now.Sub(n.lastTick)
	if !n.lastTick.IsZero() && n.cfg.HeartbeatTimeout > 0 && gap > n.cfg.HeartbeatTimeout/2 {
		for id, seen := range n.lastSeen {
			if seen.Before(now) {
				n.lastSeen[id] = now
			}
		}
		n.log.WithField("gap", gap.Round(time.Millisecond)).Warn("this node did not run for a while; its peers' silence counts from now")
	}
	n.lastTick = now
}

// schedLostGrace is how long a node's connection to the scheduler may
// stay broken before the node looks for a replacement. It is short: a
// search that finds the same scheduler costs one rejoin.
const schedLostGrace = 200 * time.Millisecond

// schedulerConnLost starts the search for a new scheduler when the
// connection to the scheduler was lost more than schedLostGrace ago and
// not made again: its process most likely ended.
func (n *Node) schedulerConnLost() {
	w, ok := n.tr.(transport.ConnWatcher)
	if !ok {
		return
	}
	since, down := w.Down(transport.SchedulerID)
	if !down || time.Since(since) < schedLostGrace {
		return
	}
	n.mu.Lock()
	n.loseSchedulerLocked(fmt.Sprintf("its connection was lost and not made again within %v", schedLostGrace), 0)
	n.mu.Unlock()
}

func uniq(ids []int32) []int32 {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

// markDead records a death the scheduler announced and completes what
// depended on the dead node.
func (n *Node) markDead(id int32, reason string) {
	n.mu.Lock()
	out := n.markDeadLocked(id, reason)
	n.mu.Unlock()
	n.sendAll(out)
}

// markDeadOf records the death of process d the scheduler announced,
// unless a new process has taken its id since: the announcement may come
// after the table update that brought the new one, and is not its death.
func (n *Node) markDeadOf(d transport.Node, reason string) {
	n.mu.Lock()
	if nd, ok := n.table[d.ID]; ok && nd.Incarnation != d.Incarnation {
		n.mu.Unlock()
		n.log.WithFields(logrus.Fields{"peer_id": d.ID, "reason": reason}).Debug("death of a replaced process ignored")
		return
	}
	out := n.markDeadLocked(d.ID, reason)
	n.mu.Unlock()
	n.sendAll(out)
}

// markDeadLocked declares node id dead: subscribers hear of it, requests
// and barriers waiting on it fail, retransmissions to it stop, and the
// scheduler tells every live node. It returns the messages to send.
// n.mu must be held.
func (n *Node) markDeadLocked(id int32, reason string) []*transport.Message {
	return n.markGoneLocked(id, reason, false, 0)
}

// markReplacedLocked is markDeadLocked for a process whose id a new
// process is taking at the scheduler (recoverLocked): the barriers the
// dead process was waited for keep waiting, now for the new process,
// which joins the round in progress. Released without it, the others
// would go on past it: the servers' last barrier, for one, would let
// them write the model and exit while the new worker still has its
// share of the data to train on. n.mu must be held.
func (n *Node) markReplacedLocked(id int32, reason string) []*transport.Message {
	return n.markGoneLocked(id, reason, true, 0)
}

// markGoneLocked is markDeadLocked and markReplacedLocked; silent is how
// long the node had not been heard from, for one declared dead by the
// heartbeat watch (Event.Silent), else 0.
func (n *Node) markGoneLocked(id int32, reason string, replaced bool, silent time.Duration) []*transport.Message {
	if _, d := n.dead[id]; d || id == n.me.ID {
		return nil
	}
	nd, ok := n.table[id]
	if !ok {
		return nil
	}
	n.dead[id] = reason
	delete(n.lastSeen, id)
	delete(n.admitting, id)
	select { // a dead node no longer holds up awaitLeaves
	case n.leftCh <- struct{}{}:
	default:
	}
	n.log.WithFields(logrus.Fields{"peer": nd.Addr(), "peer_id": id, "peer_role": nd.Role.String(), "peer_rank": nd.Rank, "reason": reason}).Warn("node dead")
	n.emit(Event{Kind: NodeDied, Node: nd, Reason: reason, Silent: silent})
	derr := &DeadError{ID: id, Role: nd.Role, Rank: int(nd.Rank), Reason: reason}
	for _, c := range n.customers {
		c.peerDead(id, derr)
	}
	if n.resend != nil {
		n.resendMu.Lock()
		n.resend.forget(id)
		n.resendMu.Unlock()
	}
	if id == transport.SchedulerID {
		for _, w := range n.barrierWait {
			select {
			case w.ch <- fmt.Errorf("psnode: barrier: %w", derr):
			default:
			}
		}
		return nil
	}
	if n.role != transport.RoleScheduler {
		return nil
	}
	var out []*transport.Message
	// A recovering node does not wait for a dead peer's acknowledgement.
	for rid, waiting := range n.admitting {
		if _, ok := waiting[id]; ok {
			delete(waiting, id)
			out = append(out, n.admitIfReadyLocked(rid)...)
		}
	}
	// The dead process's arrivals are void: its id's next process must
	// arrive itself. Barriers count live members: one that waited only
	// for the dead node is released now, unless a new process takes its
	// place.
	for group, arr := range n.arrived {
		delete(arr, id)
		if inGroup(nd.Role, group) && !replaced {
			out = append(out, n.releaseIfCompleteLocked(group)...)
		}
	}
	for _, peer := range n.groupMembers(transport.ServerGroup | transport.WorkerGroup) {
		out = append(out, &transport.Message{Meta: transport.Meta{
			Recver:  peer,
			Control: transport.Control{Cmd: transport.CmdNodeDead, Nodes: []transport.Node{nd}, Reason: reason},
		}})
	}
	return out
}
