package psnode

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// Node is one process of a parameter-server job: the scheduler, a server
// or a worker. It owns the transport, the node table, barriers, liveness
// and acknowledged delivery; apps (KVWorker, KVServer, SimpleApp) run on
// top of it.
//
// Its methods are safe for concurrent use.
type Node struct {
	cfg    conf.PS
	tr     transport.Transport
	log    *logrus.Entry
	now    func() time.Time
	secret []byte
	role   transport.Role

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	sigBase    uint64
	sigCounter atomic.Uint64

	// servers and workers are the counts of the job's view (scale.go):
	// atomic, as the replicas read them for every update they forward.
	servers, workers atomic.Int32

	dropRand *rand.Rand // owned by the receive goroutine

	mu       sync.Mutex
	me       transport.Node
	started  bool
	ready    bool
	readyCh  chan struct{}
	refused  error
	table    map[int32]transport.Node
	dead     map[int32]string
	lastSeen map[int32]time.Time
	// lastTick is when tick last ran (sinceTickLocked).
	lastTick   time.Time
	lastBeat   time.Time
	regs       map[int64]transport.Node
	tempRoutes map[string]int32
	// rounds is, per barrier group, the last round this node was
	// released from (-1: not known yet, in a process that took over a
	// dead node's place) and, on the scheduler, the rounds completed.
	rounds      [transport.AllGroups + 1]int32
	barrierWait map[int32]*barrierWaiter
	arrived     map[int32]map[int32]int32
	arrivedAt   map[int32]map[transport.Role]time.Time // scheduler: when each role's first node came to each group's barrier in progress
	stalled     map[int32]time.Time                    // since when each node reported stalled held up the others (stall.go)
	subs        map[chan Event]struct{}
	customers   map[custKey]*customer
	handlers    map[int32]*customer
	borrowing   sync.Map // app id → struct{}: its request handler borrows lent messages (lends)
	unclaimed   map[unclaimedKey][]unclaimedMsg
	heldMsgs    int                       // messages unclaimed holds (maxUnclaimed)
	heldBytes   int                       // their data bytes (maxUnclaimedBytes)
	early       []*transport.Message      // data messages that came before the table
	locator     SchedulerLocator          // node: where a replacement scheduler is (follow.go)
	schedAddr   string                    // node: the address of the route to the scheduler
	schedLost   time.Time                 // node: since when a replacement scheduler is sought; zero otherwise
	leaving     bool                      // Finalize is past its barrier (the scheduler: past every barrier)
	retired     bool                      // node: out of the job's view since a scale-in
	rebuilt     bool                      // scheduler: its table was rebuilt from a running job's nodes
	left        map[int32]bool            // scheduler: nodes that finished
	admitting   map[int32]map[int32]int64 // scheduler: recovering node → peers yet to acknowledge it → the nonce of their update
	leftCh      chan struct{}             // scheduler: signalled on each leave
	answering   int                       // scheduler: LEAVE answers being queued (onLeave)
	leaveAck    chan struct{}             // node: closed when the scheduler acknowledged our leave
	stats       Stats
	bytes       wireBytes

	resendMu sync.Mutex
	resend   *resender

	goMu      sync.Mutex
	closed    bool
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Stats counts what a node did; see Node.Stats.
type Stats struct {
	Sent, Received           uint64
	Dropped                  uint64 // dropped on purpose (PS_DROP_MSG)
	Duplicates               uint64 // received again and suppressed
	Resent                   uint64 // retransmissions
	Ignored                  uint64 // from peers not in the node table
	PendingAcks, SeenSigs    int
	BarrierRounds, Refusals  uint64
	HeartbeatsIn, Heartbeats uint64
	// LeavesUnanswered counts the finalizes in which the scheduler did
	// not answer this node's LEAVE within a second.
	LeavesUnanswered uint64

	// Bytes on the wire (meta plus data frames) of every message sent
	// and received, and of those received from servers and from workers
	// (see AppBytes for one app's, a table's, share).
	BytesSent, BytesReceived           uint64
	BytesFromServers, BytesFromWorkers uint64
}

type barrierWaiter struct {
	// round is the round waited for; 0 joins the round in progress.
	round int32
	ch    chan error
}

type custKey struct{ app, cust int32 }

// Option sets an optional dependency of a Node.
type Option func(*Node)

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *logrus.Entry) Option { return func(n *Node) { n.log = l } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(n *Node) { n.now = now } }

// New makes a node for cfg that talks through tr. The node owns tr from
// now on and closes it in Close. Call Start to join the job.
func New(cfg conf.PS, tr transport.Transport, opts ...Option) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("psnode: %w", err)
	}
	n := &Node{
		cfg:         cfg,
		tr:          tr,
		now:         time.Now,
		secret:      []byte(cfg.JobSecret),
		readyCh:     make(chan struct{}),
		table:       make(map[int32]transport.Node),
		dead:        make(map[int32]string),
		lastSeen:    make(map[int32]time.Time),
		regs:        make(map[int64]transport.Node),
		tempRoutes:  make(map[string]int32),
		barrierWait: make(map[int32]*barrierWaiter),
		arrived:     make(map[int32]map[int32]int32),
		arrivedAt:   make(map[int32]map[transport.Role]time.Time),
		stalled:     make(map[int32]time.Time),
		subs:        make(map[chan Event]struct{}),
		customers:   make(map[custKey]*customer),
		handlers:    make(map[int32]*customer),
		unclaimed:   make(map[unclaimedKey][]unclaimedMsg),
		left:        make(map[int32]bool),
		admitting:   make(map[int32]map[int32]int64),
		leftCh:      make(chan struct{}, 1),
		leaveAck:    make(chan struct{}),
	}
	n.setView(cfg.NumServers, cfg.NumWorkers)
	for _, o := range opts {
		o(n)
	}
	if l, ok := tr.(lender); ok {
		l.SetLender(n.lends)
	}
	if n.log == nil {
		l := logrus.New()
		l.Out = discard{}
		n.log = logrus.NewEntry(l)
	}
	switch cfg.Role {
	case conf.RoleScheduler:
		n.role = transport.RoleScheduler
	case conf.RoleServer:
		n.role = transport.RoleServer
	default:
		n.role = transport.RoleWorker
	}
	var seed [16]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("psnode: random incarnation: %w", err)
	}
	inc := int64(binary.LittleEndian.Uint64(seed[:8]) &^ (1 << 63))
	n.sigBase = binary.LittleEndian.Uint64(seed[8:])
	n.me = transport.Node{Role: n.role, ID: transport.EmptyID, Rank: int32(cfg.TaskID), Incarnation: inc}
	if n.role == transport.RoleScheduler {
		n.me.ID = transport.SchedulerID
		n.me.Rank = 0
	}
	if cfg.Resend {
		n.resend = newResender(cfg.ResendTimeout, cfg.ResendRetries)
	}
	n.dropRand = rand.New(rand.NewSource(cfg.DropSeed ^ int64(n.role)<<32 ^ int64(cfg.TaskID)))
	n.log = n.log.WithField("role", n.role.String())
	return n, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// goFunc runs f in a goroutine that Close waits for, unless the node is
// already closed.
func (n *Node) goFunc(f func()) bool {
	n.goMu.Lock()
	defer n.goMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// Start binds the transport, registers with the scheduler (the scheduler
// waits for every node), learns the node table and ends with a barrier over
// all nodes, like ps-lite's Start. A node that takes over a dead node's
// place in a running job (Self().IsRecovery) skips that barrier. It fails after ctx is done or the
// configured RegisterTimeout, whichever comes first.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("psnode: Start called twice")
	}
	n.started = true
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, n.cfg.RegisterTimeout)
	defer cancel()
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))

	host, port := n.cfg.RootURI, n.cfg.RootPort
	if n.role != transport.RoleScheduler {
		h, err := n.cfg.AdvertiseHost()
		if err != nil {
			return err
		}
		host, port = h, n.cfg.Port
	}
	bound, err := n.tr.Listen(ctx, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("psnode: listen on %s:%d: %w", host, port, err)
	}
	bh, bp, err := splitAddr(bound)
	if err != nil {
		return fmt.Errorf("psnode: bound address %q: %w", bound, err)
	}
	n.mu.Lock()
	n.me.Host, n.me.Port = bh, int32(bp)
	if n.role == transport.RoleScheduler {
		n.me.Host = host
		n.table[transport.SchedulerID] = n.me
	}
	n.lastBeat = n.now()
	n.mu.Unlock()
	n.log = n.log.WithField("addr", bound)

	if n.role != transport.RoleScheduler {
		root := net.JoinHostPort(n.cfg.RootURI, strconv.Itoa(n.cfg.RootPort))
		if err := n.tr.Connect(ctx, transport.SchedulerID, root); err != nil {
			return fmt.Errorf("psnode: connect to scheduler %s: %w", root, err)
		}
		n.mu.Lock()
		n.schedAddr = root
		n.mu.Unlock()
	}
	n.goFunc(n.recvLoop)
	n.goFunc(n.tickLoop)

	if err := n.waitReady(ctx); err != nil {
		return err
	}
	if n.Self().IsRecovery {
		// The job is running: nobody else is at the start barrier.
		n.log.WithFields(logrus.Fields{"id": n.ID(), "rank": n.Rank()}).Info("node recovered a dead node's place")
		return nil
	}
	if n.cfg.Joining {
		n.log.WithFields(logrus.Fields{"id": n.ID(), "rank": n.Rank()}).Info("server joined the running job")
		return nil
	}
	if err := n.Barrier(ctx, transport.AllGroups); err != nil {
		return fmt.Errorf("psnode: start barrier: %w", err)
	}
	n.log.WithFields(logrus.Fields{"id": n.ID(), "rank": n.Rank()}).Info("node started")
	return nil
}

func splitAddr(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return h, port, nil
}

// waitReady registers (non-scheduler) and waits for the node table.
func (n *Node) waitReady(ctx context.Context) error {
	// Registration is repeated, with backoff, until the scheduler answers:
	// it may not be listening yet.
	backoff := 50 * time.Millisecond
	retry := time.NewTimer(backoff)
	defer retry.Stop()
	began := time.Now()
	for {
		if n.role != transport.RoleScheduler {
			if n.locator != nil && time.Since(began) >= connLostGrace {
				// The scheduler named in the environment may have died
				// and been replaced elsewhere.
				n.rerouteScheduler()
			}
			if err := n.sendRegistration(ctx); err != nil {
				return err
			}
		}
		select {
		case <-n.readyCh:
			n.mu.Lock()
			err := n.refused
			n.mu.Unlock()
			return err
		case <-ctx.Done():
			return fmt.Errorf("psnode: registration: %s: %w", n.registrationState(), ctx.Err())
		case <-n.ctx.Done():
			return ErrStopped
		case <-retry.C:
			backoff = min(2*backoff, 2*time.Second)
			retry.Reset(backoff)
		}
	}
}

func (n *Node) registrationState() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.role != transport.RoleScheduler {
		return fmt.Sprintf("no node table from the scheduler at %s:%d", n.cfg.RootURI, n.cfg.RootPort)
	}
	var w, s int
	for _, r := range n.regs {
		if r.Role == transport.RoleWorker {
			w++
		} else {
			s++
		}
	}
	return fmt.Sprintf("%d of %d workers and %d of %d servers registered", w, n.cfg.NumWorkers, s, n.cfg.NumServers)
}

func (n *Node) sendRegistration(ctx context.Context) error {
	n.mu.Lock()
	me := n.me
	n.mu.Unlock()
	nonce := n.nonce()
	m := &transport.Message{Meta: transport.Meta{
		Recver: transport.SchedulerID,
		Control: transport.Control{
			Cmd:   transport.CmdAddNode,
			Nodes: []transport.Node{me},
			Nonce: nonce,
			Auth:  n.mac(authRegister, []transport.Node{me}, nonce, nil),
		},
	}}
	return n.send(ctx, m)
}

func (n *Node) nonce() int64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// ID returns the node's id (EmptyID before registration completes).
func (n *Node) ID() int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.me.ID
}

// Rank returns the node's rank within its role (-1 before registration).
func (n *Node) Rank() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return int(n.me.Rank)
}

// Role returns the node's role.
func (n *Node) Role() transport.Role { return n.role }

// NumWorkers returns the number of workers of the job: as configured, or
// as the job's view has it since the job last changed its workers
// (Tables.Rescale). On the scheduler it is always as configured.
func (n *Node) NumWorkers() int { return int(n.workers.Load()) }

// NumServers returns the number of servers of the job: as configured,
// or as the job's view has it since the job last changed its servers
// (Tables.Rescale). On the scheduler it is always as configured.
func (n *Node) NumServers() int { return int(n.servers.Load()) }

// setView sets the counts of the job's view (Tables.Rescale).
func (n *Node) setView(servers, workers int) {
	n.servers.Store(int32(servers))
	n.workers.Store(int32(workers))
}

// Config returns the configuration the node runs with.
func (n *Node) Config() conf.PS { return n.cfg }

// Self returns this node's entry.
func (n *Node) Self() transport.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.me
}

// Nodes returns the node table, sorted by id.
func (n *Node) Nodes() []transport.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]transport.Node, 0, len(n.table))
	for _, v := range n.table {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// incarnation returns the incarnation of node id's process, as this node
// knows it.
func (n *Node) incarnation(id int32) (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	nd, ok := n.table[id]
	return nd.Incarnation, ok
}

// isDead says whether node id is known dead and not replaced.
func (n *Node) isDead(id int32) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, d := n.dead[id]
	return d
}

// DeadNodes returns the ids of the nodes currently known to be dead, sorted.
func (n *Node) DeadNodes() []int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]int32, 0, len(n.dead))
	for id := range n.dead {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Stats returns a snapshot of the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	s := n.stats
	n.mu.Unlock()
	n.bytes.fill(&s)
	if n.resend != nil {
		n.resendMu.Lock()
		s.PendingAcks, s.SeenSigs = n.resend.size()
		n.resendMu.Unlock()
	}
	return s
}

// Subscribe returns a channel of liveness events and a function that
// ends the subscription. The channel holds up to 256 events; when a
// subscriber falls behind that far, later events are dropped for it (and
// logged): DeadNodes is the authoritative state.
func (n *Node) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 256)
	n.mu.Lock()
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			n.mu.Lock()
			delete(n.subs, ch)
			n.mu.Unlock()
		})
	}
}

// Done is closed once the node is closed (Close, Finalize), for the
// goroutines of a program that live as long as its node. It may be
// called once Start has returned.
func (n *Node) Done() <-chan struct{} { return n.ctx.Done() }

// emit delivers ev to subscribers. n.mu must be held.
func (n *Node) emit(ev Event) {
	for ch := range n.subs {
		select {
		case ch <- ev:
		default:
			n.log.WithField("node", ev.Node.ID).Warn("event subscriber is full; event dropped")
		}
	}
}

// group returns the live members of a group (a bitmask of 1, 2, 4).
// n.mu must be held.
//
// On a server or worker, the servers and workers of a group are those of
// the job's view (NumServers, NumWorkers): one that joins for a scale-out
// is not one before the switch, one that drains for a scale-in no more
// after it. The scheduler counts every live node that has not left.
func (n *Node) groupMembers(group int32) []int32 {
	var out []int32
	for id, nd := range n.table {
		if _, d := n.dead[id]; d {
			continue
		}
		if n.role != transport.RoleScheduler && !n.inViewLocked(nd) {
			continue
		}
		if inGroup(nd.Role, group) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// inViewLocked says whether nd is a server or worker of the job's view,
// or another role. n.mu must be held.
func (n *Node) inViewLocked(nd transport.Node) bool {
	switch nd.Role {
	case transport.RoleServer:
		return int(nd.Rank) < n.NumServers()
	case transport.RoleWorker:
		return int(nd.Rank) < n.NumWorkers()
	}
	return true
}

func inGroup(r transport.Role, group int32) bool {
	switch r {
	case transport.RoleScheduler:
		return group&transport.SchedulerID != 0
	case transport.RoleServer:
		return group&transport.ServerGroup != 0
	case transport.RoleWorker:
		return group&transport.WorkerGroup != 0
	}
	return false
}

// groupSize returns the size of a group as configured (dead nodes count).
func (n *Node) groupSize(group int32) int {
	s := 0
	if group&transport.SchedulerID != 0 {
		s++
	}
	if group&transport.ServerGroup != 0 {
		s += n.cfg.NumServers
	}
	if group&transport.WorkerGroup != 0 {
		s += n.cfg.NumWorkers
	}
	return s
}

// send stamps m with this node's id and, with resend on, a signature, and
// hands it to the transport. The message must not be changed afterwards.
func (n *Node) send(ctx context.Context, m *transport.Message) error {
	_, err := n.sendCount(ctx, m)
	return err
}

// sendCount is send, returning the bytes the transport queued (0 when a
// failed send is left to the retransmission).
func (n *Node) sendCount(ctx context.Context, m *transport.Message) (int, error) {
	n.mu.Lock()
	m.Meta.Sender = n.me.ID
	n.stats.Sent++
	n.mu.Unlock()
	if n.resend != nil && needsAck(m) {
		m.Meta.MsgSig = n.newSig()
		n.resendMu.Lock()
		ok := n.resend.track(m, n.now())
		n.resendMu.Unlock()
		if !ok {
			return 0, fmt.Errorf("psnode: send to node %d: %d messages await acknowledgement", m.Meta.Recver, maxPending)
		}
	}
	if n.cfg.Verbose >= 2 {
		n.log.WithField("msg", m.String()).Debug("send")
	}
	nb, err := n.tr.Send(ctx, m)
	if err != nil {
		if n.resend != nil && m.Meta.MsgSig != 0 && !errors.Is(err, transport.ErrUnknownPeer) && !errors.Is(err, transport.ErrClosed) {
			// The retransmission will try again.
			n.log.WithError(err).WithField("peer", m.Meta.Recver).Debug("send failed; will resend")
			return 0, nil
		}
		return 0, fmt.Errorf("psnode: send to node %d: %w", m.Meta.Recver, err)
	}
	n.bytes.countSent(m, nb)
	return nb, nil
}

func needsAck(m *transport.Message) bool {
	switch m.Meta.Control.Cmd {
	case transport.CmdAck, transport.CmdHeartbeat, transport.CmdRefused:
		return false
	case transport.CmdAddNode:
		// A registration or rejoin is repeated until the table comes;
		// a scheduler that does not know the sender yet cannot
		// acknowledge it.
		return !(m.Meta.Recver == transport.SchedulerID && len(m.Meta.Control.Nodes) > 0)
	}
	return true
}

func (n *Node) newSig() uint64 {
	// splitmix64 of a per-process random base plus a counter: unique per
	// process, and unrelated across processes.
	z := n.sigBase + n.sigCounter.Add(1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 1
	}
	return z
}

// sendAll sends each message, logging failures: control traffic whose
// loss the protocol tolerates (retries, heartbeats, timeouts).
func (n *Node) sendAll(out []*transport.Message) {
	for _, m := range out {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		if err := n.send(ctx, m); err != nil && n.ctx.Err() == nil {
			n.log.WithError(err).WithField("peer", m.Meta.Recver).Debug("control message not sent")
		}
		cancel()
	}
}

func (n *Node) recvLoop() {
	for {
		m, err := n.tr.Recv(n.ctx)
		if err != nil {
			if n.ctx.Err() == nil && !errors.Is(err, transport.ErrClosed) {
				n.log.WithError(err).Error("receive failed; node stops receiving")
			}
			return
		}
		n.handle(m)
	}
}

// handle processes one received message. A message lent by the
// transport (see lends) stays lent only on its way to the request handler
// that borrows it, which releases it; any other is made the node's own,
// or released when nothing takes it.
func (n *Node) handle(m *transport.Message) {
	if m.Lent() && !n.lends(&m.Meta) {
		m.Own()
	}
	if !n.route(m) {
		m.Release()
	}
}

// lends tells the transport which messages it may hand over with its own
// receive buffers as data frames rather than copies: requests of an app
// whose handler borrows them (a KVServer's), which lets them go when it
// returns. It runs on the transport's receive loop.
func (n *Node) lends(meta *transport.Meta) bool {
	if meta.Control.Cmd != transport.CmdNone || !meta.Request {
		return false
	}
	_, ok := n.borrowing.Load(meta.AppID)
	return ok
}

// lender is a transport that can hand over large received frames in its
// own memory rather than copy them (the zmq transport).
type lender interface {
	SetLender(func(*transport.Meta) bool)
}

// route processes one received message and reports whether a customer's
// queue took it.
func (n *Node) route(m *transport.Message) bool {
	meta := &m.Meta
	cmd := meta.Control.Cmd
	now := n.now()
	n.bytes.countReceived(m)
	if n.cfg.Verbose >= 2 {
		n.log.WithField("msg", m.String()).Debug("receive")
	}
	if cmd == transport.CmdAck {
		if n.resend != nil {
			n.resendMu.Lock()
			n.resend.ack(meta.Control.MsgSig)
			n.resendMu.Unlock()
		}
		n.touch(meta.Sender, now)
		return false
	}
	if !n.accept(m) {
		n.mu.Lock()
		if cmd == transport.CmdNone && !n.ready && len(n.early) < customerQueue {
			// A peer that learned of this process (it replaces a dead
			// node) may send before the scheduler's table reaches it:
			// judged once the table is here (replayEarly).
			m.Own() // kept for later
			n.early = append(n.early, m)
			n.mu.Unlock()
			return false
		}
		n.stats.Ignored++
		n.mu.Unlock()
		if n.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
			n.log.WithField("msg", m.String()).Debug("message from a node not in the table ignored")
		}
		return false
	}
	n.touch(meta.Sender, now)
	if cmd == transport.CmdNone && n.cfg.DropMsg > 0 && n.isReady() && n.dropRand.Float64()*100 < n.cfg.DropMsg {
		n.mu.Lock()
		n.stats.Dropped++
		n.mu.Unlock()
		return false
	}
	if meta.MsgSig != 0 && n.resend != nil {
		ack := &transport.Message{Meta: transport.Meta{
			Recver:  meta.Sender,
			Control: transport.Control{Cmd: transport.CmdAck, MsgSig: meta.MsgSig},
		}}
		if meta.Sender != transport.EmptyID {
			n.sendAll([]*transport.Message{ack})
		}
		n.resendMu.Lock()
		dup := n.resend.duplicate(meta.MsgSig, now)
		n.resendMu.Unlock()
		if dup {
			n.mu.Lock()
			n.stats.Duplicates++
			n.mu.Unlock()
			return false
		}
	}
	n.mu.Lock()
	n.stats.Received++
	n.mu.Unlock()
	switch cmd {
	case transport.CmdNone:
		return n.dispatch(m)
	case transport.CmdAddNode:
		switch {
		case n.role == transport.RoleScheduler && len(meta.Control.Nodes) == 0:
			n.onTableAck(meta.Sender, meta.Control.Nonce)
		case n.role == transport.RoleScheduler:
			n.onRegister(m)
		default:
			ok, out := n.onTable(m)
			n.sendAll(out)
			if ok {
				n.replayEarly()
			}
			if ok && meta.Request {
				// The scheduler admits a recovering node once every
				// peer has applied its entry: acknowledge this update,
				// by its nonce (two nodes may be admitted at once).
				n.sendAll([]*transport.Message{{Meta: transport.Meta{
					Recver:  transport.SchedulerID,
					Control: transport.Control{Cmd: transport.CmdAddNode, Nonce: meta.Control.Nonce},
				}}})
			}
		}
	case transport.CmdRefused:
		n.onRefused(m)
	case transport.CmdBarrier:
		switch {
		case meta.Request && meta.Status == barrierWithdrawn:
			n.onBarrierWithdraw(meta.Sender, meta.Control.BarrierGroup, meta.Timestamp)
		case meta.Request:
			n.onBarrierRequest(meta.Sender, meta.Control.BarrierGroup, meta.Timestamp)
		default:
			n.onBarrierRelease(m)
		}
	case transport.CmdHeartbeat:
		n.onHeartbeat(m)
	case transport.CmdLeave:
		n.onLeave(m)
	case transport.CmdNodeDead:
		for _, d := range meta.Control.Nodes {
			n.markDeadOf(d, "declared dead by the scheduler: "+meta.Control.Reason)
		}
	default:
		n.log.WithField("cmd", cmd.String()).Debug("unknown control command ignored")
	}
	return false
}

// replayEarly handles the data messages that arrived before this node
// had its table, now that it has: those of nodes in it are kept, the
// others ignored.
func (n *Node) replayEarly() {
	n.mu.Lock()
	early := n.early
	n.early = nil
	n.mu.Unlock()
	for _, m := range early {
		n.handle(m)
	}
}

// accept decides whether a message's sender may talk to this node: a
// node in the table, or, for registration, anybody (the registration is
// then authenticated); the scheduler's table and refusal before this node
// is ready.
func (n *Node) accept(m *transport.Message) bool {
	cmd := m.Meta.Control.Cmd
	if n.role == transport.RoleScheduler && cmd == transport.CmdAddNode {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if m.Meta.Sender == transport.SchedulerID && (cmd == transport.CmdAddNode || (cmd == transport.CmdRefused && !n.ready)) {
		return true
	}
	if _, ok := n.table[m.Meta.Sender]; !ok || m.Meta.Sender == transport.EmptyID {
		return false
	}
	if _, d := n.dead[m.Meta.Sender]; d && cmd != transport.CmdHeartbeat {
		return false
	}
	return true
}

func (n *Node) touch(id int32, now time.Time) {
	n.mu.Lock()
	if _, ok := n.table[id]; ok && !n.left[id] {
		if _, d := n.dead[id]; !d {
			n.lastSeen[id] = now
		}
	}
	n.mu.Unlock()
}

func (n *Node) isReady() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ready
}

// Close stops the node without a final barrier: heartbeats and
// retransmissions stop, apps' queues are drained, the transport is closed,
// and every goroutine has returned when Close returns. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.goMu.Lock()
		n.closed = true
		n.goMu.Unlock()
		if n.cancel != nil {
			n.cancel()
		}
		n.mu.Lock()
		for _, c := range n.allCustomersLocked() {
			c.stop()
		}
		for _, w := range n.barrierWait {
			select {
			case w.ch <- ErrStopped:
			default:
			}
		}
		n.mu.Unlock()
		n.closeErr = n.tr.Close()
		n.wg.Wait()
		n.closeLocator()
		n.mu.Lock()
		cs := n.allCustomersLocked()
		n.mu.Unlock()
		for _, c := range cs {
			c.failAll(ErrStopped)
		}
	})
	return n.closeErr
}

// allCustomersLocked returns the apps' customers: response receivers and
// request handlers. n.mu must be held.
func (n *Node) allCustomersLocked() []*customer {
	out := make([]*customer, 0, len(n.customers)+len(n.handlers))
	for _, c := range n.customers {
		out = append(out, c)
	}
	for _, c := range n.handlers {
		out = append(out, c)
	}
	return out
}

// Finalize ends the node's part in the job: a barrier over all live
// nodes (so no node leaves while others still need it), then the leave
// handshake, then Close. It is bounded by ctx and the configured
// ShutdownTimeout; the node is closed even when the barrier fails, and the
// barrier's error is returned.
//
// The handshake exists because sockets close with linger 0, discarding
// what is not sent yet: the scheduler closes only once every live node
// has told it (LEAVE) that the final release arrived, and each node waits
// for the scheduler's acknowledgement of its LEAVE (at most leaveWait).
func (n *Node) Finalize(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	var berr error
	n.mu.Lock()
	retired := n.retired
	n.mu.Unlock()
	if n.isReady() && !retired {
		// A server drained by a scale-in leaves at once: the others do
		// not wait for it, and it has no part of the model to write.
		berr = n.Barrier(ctx, transport.AllGroups)
	}
	if berr == nil && n.isReady() {
		if n.role == transport.RoleScheduler {
			n.finalizing()
			n.awaitLeaves(ctx)
			// The answer to the last LEAVE may still be queued: Close
			// sends it rather than leave that node waiting leaveWait.
			if d, ok := n.tr.(transport.Drainer); ok {
				d.Drain(lastWords)
			}
		} else {
			n.leave(ctx)
		}
	}
	cerr := n.Close()
	if berr != nil {
		return fmt.Errorf("psnode: finalize barrier: %w", berr)
	}
	return cerr
}

// finalizing marks the scheduler past every barrier, as a node that left
// is: a process that took over a dead node's place after the others'
// last barriers, and calls them in turn, is released rather than waited
// on by a scheduler that will never arrive. Its work is done: the others
// passed the last barrier, the servers have written the model.
func (n *Node) finalizing() {
	n.mu.Lock()
	n.leaving = true
	out := n.releaseCompleteLocked()
	n.mu.Unlock()
	n.sendAll(out)
}

// leaveWait bounds how long a node waits for the scheduler to acknowledge
// its LEAVE, in case the acknowledgement is lost (a scheduler that dies).
const leaveWait = time.Second

// lastWords bounds how long a finalizing scheduler's Close waits for its
// answers to the last LEAVEs to be sent.
const lastWords = 200 * time.Millisecond

// leave tells the scheduler this node is done and waits, briefly, for
// the acknowledgement.
func (n *Node) leave(ctx context.Context) {
	n.mu.Lock()
	n.leaving = true // the scheduler closes once all left: not lost
	n.mu.Unlock()
	m := &transport.Message{Meta: transport.Meta{
		Recver:  transport.SchedulerID,
		Request: true,
		Control: transport.Control{Cmd: transport.CmdLeave},
	}}
	if err := n.send(ctx, m); err != nil {
		return
	}
	t := time.NewTimer(leaveWait)
	defer t.Stop()
	select {
	case <-n.leaveAck:
	case <-t.C:
		n.mu.Lock()
		n.stats.LeavesUnanswered++
		n.mu.Unlock()
		n.log.Debug("the scheduler did not answer this node's LEAVE")
	case <-ctx.Done():
	case <-n.ctx.Done():
	}
}

// onLeave records a node's LEAVE at the scheduler and acknowledges it, or
// takes the scheduler's acknowledgement at a node.
func (n *Node) onLeave(m *transport.Message) {
	if n.role != transport.RoleScheduler {
		if m.Meta.Sender == transport.SchedulerID && !m.Meta.Request {
			n.mu.Lock()
			select {
			case <-n.leaveAck:
			default:
				close(n.leaveAck)
			}
			n.mu.Unlock()
		}
		return
	}
	n.mu.Lock()
	n.left[m.Meta.Sender] = true
	// Until the answer is queued, awaitLeaves must not take this node's
	// leave for done: the scheduler would close first, and the answer be
	// refused or lost.
	n.answering++
	delete(n.lastSeen, m.Meta.Sender) // no more heartbeats will come
	out := []*transport.Message{{Meta: transport.Meta{
		Recver:  m.Meta.Sender,
		Control: transport.Control{Cmd: transport.CmdLeave},
	}}}
	// A node that left is past every barrier: one that waited only for
	// it (the scheduler's, when it missed rounds it was replaced during)
	// is released now.
	out = append(out, n.releaseCompleteLocked()...)
	n.mu.Unlock()
	// The answer is queued before awaitLeaves may see every node gone
	// and the scheduler close (Finalize drains what it queued).
	n.sendAll(out)
	n.mu.Lock()
	n.answering--
	n.mu.Unlock()
	select {
	case n.leftCh <- struct{}{}:
	default:
	}
}

// awaitLeaves waits until every live node has left, or ctx is done.
func (n *Node) awaitLeaves(ctx context.Context) {
	for {
		n.mu.Lock()
		waiting := 0
		for _, id := range n.groupMembers(transport.ServerGroup | transport.WorkerGroup) {
			if !n.left[id] {
				waiting++
			}
		}
		answering := n.answering
		n.mu.Unlock()
		if waiting == 0 && answering == 0 {
			return
		}
		select {
		case <-n.leftCh:
		case <-ctx.Done():
			n.log.WithField("nodes", waiting).Warn("closing before every node has left")
			return
		case <-n.ctx.Done():
			return
		}
	}
}
