package psnode

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

// fuzzBytes reads fuzzed values from a byte string; past its end every
// value is zero.
type fuzzBytes struct{ b []byte }

func (r *fuzzBytes) more() bool { return len(r.b) > 0 }

func (r *fuzzBytes) u8() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzBytes) raw(n int) []byte {
	n = min(n, len(r.b))
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// i32 is a small value (-8…231, where ids, ranks, groups and rounds live)
// or, after a marker byte, any 32 bits.
func (r *fuzzBytes) i32() int32 {
	k := r.u8()
	if k < 0xf0 {
		return int32(k) - 8
	}
	var b [4]byte
	copy(b[:], r.raw(4))
	return int32(binary.LittleEndian.Uint32(b[:]))
}

func (r *fuzzBytes) i64() int64 {
	k := r.u8()
	if k < 0xf0 {
		return int64(k)
	}
	var b [8]byte
	copy(b[:], r.raw(8))
	return int64(binary.LittleEndian.Uint64(b[:]))
}

func (r *fuzzBytes) bytes() []byte {
	n := int(r.u8())
	if n == 0 {
		return nil
	}
	return append([]byte(nil), r.raw(n)...)
}

// The states a fuzzed node starts in.
const (
	fuzzSchedRegistering = iota // a scheduler waiting for registrations
	fuzzSchedRunning            // a scheduler of a running job
	fuzzServerJoining           // a server waiting for its table
	fuzzServerRunning           // a server of a running job
	fuzzWorkerRunning           // a worker of a running job
	fuzzStates
)

// Incarnations of the fuzzed job's processes: the fuzzer names them by
// small numbers.
const fuzzSelfInc = 7

// fuzzNode makes a node in state, not started: its transport listens on
// an in-memory network where nobody else does, so what it sends is lost.
// The job has 2 servers and 2 workers.
func fuzzNode(t *testing.T, state int, secret string, resend bool) *Node {
	t.Helper()
	cfg := conf.Default().PS
	cfg.NumServers, cfg.NumWorkers = 2, 2
	cfg.RootURI, cfg.RootPort, cfg.NodeHost = "scheduler", 1, "node"
	cfg.JobSecret = secret
	cfg.Resend = resend
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.HeartbeatTimeout = 2 * time.Second
	cfg.Role, cfg.TaskID = conf.RoleServer, 0
	switch state {
	case fuzzSchedRegistering, fuzzSchedRunning:
		cfg.Role, cfg.TaskID = conf.RoleScheduler, -1
	case fuzzWorkerRunning:
		cfg.Role = conf.RoleWorker
	}
	tr := mem.NewNetwork(1).NewTransport()
	n, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	addr, err := tr.Listen(n.ctx, "node:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.started = true
	n.me.Host, n.me.Port, n.me.Incarnation = host, int32(port), fuzzSelfInc
	n.lastBeat = n.now()
	table := []transport.Node{
		{Role: transport.RoleScheduler, ID: transport.SchedulerID, Host: "scheduler", Port: 1, Incarnation: 1},
		{Role: transport.RoleServer, ID: transport.ServerID(0), Rank: 0, Host: "s0", Port: 2, Incarnation: 2},
		{Role: transport.RoleServer, ID: transport.ServerID(1), Rank: 1, Host: "s1", Port: 3, Incarnation: 3},
		{Role: transport.RoleWorker, ID: transport.WorkerID(0), Rank: 0, Host: "w0", Port: 4, Incarnation: 4},
		{Role: transport.RoleWorker, ID: transport.WorkerID(1), Rank: 1, Host: "w1", Port: 5, Incarnation: 5},
	}
	switch state {
	case fuzzSchedRegistering:
		n.table[transport.SchedulerID] = n.me
		return n
	case fuzzServerJoining:
		return n
	case fuzzSchedRunning:
		table[0] = n.me
	case fuzzServerRunning:
		n.me.ID, n.me.Rank = transport.ServerID(0), 0
	case fuzzWorkerRunning:
		n.me.ID, n.me.Rank = transport.WorkerID(0), 0
	}
	for _, nd := range table {
		if nd.ID == n.me.ID {
			nd = n.me
		}
		n.table[nd.ID] = nd
		if nd.ID != n.me.ID {
			n.lastSeen[nd.ID] = n.now()
		}
	}
	n.ready = true
	close(n.readyCh)
	return n
}

// fuzzMessage reads one message as a peer could send it; when the fuzzer
// asks for it, it is authenticated as its command's sender would.
func fuzzMessage(r *fuzzBytes, n *Node) *transport.Message {
	m := &transport.Message{}
	meta := &m.Meta
	meta.Control.Cmd = transport.Command(r.u8() % 10)
	meta.Sender, meta.Recver = r.i32(), r.i32()
	flags := r.u8()
	meta.Request, meta.Push, meta.Pull, meta.SimpleApp = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
	meta.Control.BarrierGroup, meta.Timestamp, meta.Status = r.i32(), r.i32(), r.i32()
	meta.AppID, meta.CustomerID, meta.Head = r.i32(), r.i32(), r.i32()
	meta.MsgSig = uint64(r.i64())
	meta.Control.MsgSig = uint64(r.i64())
	meta.Control.Nonce = r.i64()
	hosts := []string{"node", "s0", "w0", "", "[::1]", "a:b"}
	for range r.u8() % 8 {
		nd := transport.Node{
			Role: transport.Role(r.u8() % 4), ID: r.i32(), Rank: r.i32(), Port: r.i32(),
			Host: hosts[int(r.u8())%len(hosts)], Incarnation: r.i64(),
		}
		nd.IsRecovery = nd.Incarnation&1 != 0
		meta.Control.Nodes = append(meta.Control.Nodes, nd)
	}
	meta.Control.Reason = string(r.bytes())
	switch {
	case flags&0x40 != 0:
		// A rejoin's body, well formed, with the fuzzer's rounds and dead.
		var rj rejoinState
		for g := range rj.rounds {
			rj.rounds[g] = r.i32()
		}
		for range r.u8() % 8 {
			rj.dead = append(rj.dead, r.i32())
		}
		meta.Body = rj.encode()
	default:
		meta.Body = r.bytes()
	}
	for range r.u8() % 4 {
		m.Data = append(m.Data, r.bytes())
		meta.DataTypes = append(meta.DataTypes, transport.DataType(r.u8()%13))
	}
	if flags&0x80 != 0 {
		label := authRegister
		switch {
		case meta.Control.Cmd == transport.CmdAddNode && n.role != transport.RoleScheduler:
			label = authTable
		case len(meta.Body) > 0:
			label = authRejoin
		}
		body := meta.Body
		if label != authRejoin {
			body = nil
		}
		meta.Control.Auth = n.mac(label, meta.Control.Nodes, meta.Control.Nonce, body)
	} else {
		meta.Control.Auth = r.bytes()
	}
	return m
}

// fuzzSeed writes a message as fuzzMessage reads it, for the corpus.
type fuzzSeed struct{ b []byte }

func (s *fuzzSeed) u8(v byte) *fuzzSeed { s.b = append(s.b, v); return s }

func (s *fuzzSeed) i32(v int32) *fuzzSeed {
	if v >= -8 && v < 0xf0-8 {
		return s.u8(byte(v + 8))
	}
	s.u8(0xf0)
	s.b = binary.LittleEndian.AppendUint32(s.b, uint32(v))
	return s
}

func (s *fuzzSeed) i64(v int64) *fuzzSeed {
	if v >= 0 && v < 0xf0 {
		return s.u8(byte(v))
	}
	s.u8(0xf0)
	s.b = binary.LittleEndian.AppendUint64(s.b, uint64(v))
	return s
}

type seedMsg struct {
	cmd                transport.Command
	sender, recver     int32
	flags              byte
	group, ts, status  int32
	app, cust, head    int32
	sig, ctlSig, nonce int64
	nodes              []transport.Node
	rounds             [8]int32
	dead               []int32
	body               []byte
}

func (s *fuzzSeed) msg(m seedMsg) *fuzzSeed {
	s.u8(byte(m.cmd)).i32(m.sender).i32(m.recver).u8(m.flags)
	s.i32(m.group).i32(m.ts).i32(m.status).i32(m.app).i32(m.cust).i32(m.head)
	s.i64(m.sig).i64(m.ctlSig).i64(m.nonce)
	s.u8(byte(len(m.nodes)))
	for _, nd := range m.nodes {
		s.u8(byte(nd.Role)).i32(nd.ID).i32(nd.Rank).i32(nd.Port).u8(1).i64(nd.Incarnation)
	}
	s.u8(0) // reason
	if m.flags&0x40 != 0 {
		for _, r := range m.rounds {
			s.i32(r)
		}
		s.u8(byte(len(m.dead)))
		for _, id := range m.dead {
			s.i32(id)
		}
	} else {
		s.u8(byte(len(m.body)))
		s.b = append(s.b, m.body...)
	}
	s.u8(0) // data frames
	if m.flags&0x80 == 0 {
		s.u8(0) // auth
	}
	return s.u8(1) // the clock moves on 50 ms
}

const (
	fuzzReq    = 1
	fuzzRejoin = 0x40
	fuzzSign   = 0x80
)

func fuzzControlSeeds() [][]byte {
	srv := func(rank int32, inc int64) transport.Node {
		return transport.Node{Role: transport.RoleServer, ID: transport.EmptyID, Rank: rank, Incarnation: inc}
	}
	wrk := func(rank int32, inc int64) transport.Node {
		return transport.Node{Role: transport.RoleWorker, ID: transport.EmptyID, Rank: rank, Incarnation: inc}
	}
	s0, s1, w0, w1 := transport.ServerID(0), transport.ServerID(1), transport.WorkerID(0), transport.WorkerID(1)
	table := []transport.Node{
		{Role: transport.RoleScheduler, ID: 1, Incarnation: 1},
		{Role: transport.RoleServer, ID: s0, Rank: 0, Incarnation: fuzzSelfInc},
		{Role: transport.RoleServer, ID: s1, Rank: 1, Incarnation: 3},
		{Role: transport.RoleWorker, ID: w0, Rank: 0, Incarnation: 4},
		{Role: transport.RoleWorker, ID: w1, Rank: 1, Incarnation: 5},
	}
	var seeds [][]byte
	add := func(state byte, msgs ...seedMsg) {
		s := (&fuzzSeed{}).u8(state)
		for _, m := range msgs {
			s.msg(m)
		}
		seeds = append(seeds, s.b)
	}
	reg := func(nd transport.Node) seedMsg {
		return seedMsg{cmd: transport.CmdAddNode, sender: transport.EmptyID, recver: 1, flags: fuzzSign, nodes: []transport.Node{nd}}
	}
	// Registrations that fill the job, then the start barrier.
	add(fuzzSchedRegistering, reg(srv(-1, 20)), reg(srv(1, 21)), reg(wrk(-1, 22)), reg(wrk(0, 23)),
		seedMsg{cmd: transport.CmdBarrier, sender: s0, recver: 1, flags: fuzzReq, group: transport.AllGroups},
		seedMsg{cmd: transport.CmdBarrier, sender: w0, recver: 1, flags: fuzzReq, group: transport.AllGroups, ts: 1})
	add(fuzzSchedRegistering, reg(srv(5, 20)), reg(transport.Node{Role: transport.RoleScheduler}))
	// A running job: a recovery, its acknowledgement, barriers, a
	// withdrawal, heartbeats, leaves.
	add(fuzzSchedRunning, reg(wrk(1, 30)),
		seedMsg{cmd: transport.CmdAddNode, sender: s0, recver: 1},
		seedMsg{cmd: transport.CmdBarrier, sender: s1, recver: 1, flags: fuzzReq, group: transport.ServerGroup, ts: 1},
		seedMsg{cmd: transport.CmdBarrier, sender: s1, recver: 1, flags: fuzzReq, group: transport.ServerGroup, ts: 1, status: barrierWithdrawn},
		seedMsg{cmd: transport.CmdHeartbeat, sender: w0, recver: 1, nonce: 99},
		seedMsg{cmd: transport.CmdLeave, sender: s1, recver: 1, flags: fuzzReq},
		seedMsg{cmd: transport.CmdAck, sender: s0, recver: 1, ctlSig: 5})
	// A rejoin at a scheduler that replaced a dead one, and at a running one.
	rejoin := seedMsg{cmd: transport.CmdAddNode, sender: s1, recver: 1, flags: fuzzRejoin | fuzzSign,
		nodes: []transport.Node{table[2], table[1], table[3], table[4]}, rounds: [8]int32{0, 1, 2, 3, 4, 5, 6, 7}, dead: []int32{w1, 77}}
	add(fuzzSchedRegistering, rejoin, reg(srv(0, 40)))
	add(fuzzSchedRunning, rejoin)
	// A node: its table, an update, a barrier release, deaths, the
	// scheduler's heartbeat and leave, a refusal, data.
	tableMsg := seedMsg{cmd: transport.CmdAddNode, sender: 1, recver: transport.EmptyID, flags: fuzzSign, nodes: table}
	add(fuzzServerJoining, tableMsg,
		seedMsg{cmd: transport.CmdBarrier, sender: 1, recver: s0, group: transport.AllGroups, ts: 1})
	add(fuzzServerJoining, seedMsg{cmd: transport.CmdRefused, sender: 1, recver: transport.EmptyID})
	add(fuzzServerRunning,
		seedMsg{cmd: transport.CmdAddNode, sender: 1, recver: s0, flags: fuzzSign | fuzzReq, nodes: []transport.Node{{Role: transport.RoleWorker, ID: w1, Rank: 1, Incarnation: 50, IsRecovery: true}}},
		seedMsg{cmd: transport.CmdNodeDead, sender: 1, recver: s0, nodes: []transport.Node{table[3]}},
		seedMsg{cmd: transport.CmdNodeDead, sender: 1, recver: s0, nodes: []transport.Node{table[0]}},
		seedMsg{cmd: transport.CmdHeartbeat, sender: 1, recver: s0},
		seedMsg{cmd: transport.CmdLeave, sender: 1, recver: s0})
	add(fuzzWorkerRunning,
		seedMsg{cmd: transport.CmdNone, sender: s0, recver: w0, flags: fuzzReq, app: 3, sig: 8},
		seedMsg{cmd: transport.CmdNone, sender: s1, recver: w0, app: 3, cust: 1, ts: 4},
		seedMsg{cmd: 9, sender: s1, recver: w0})
	return seeds
}

// FuzzControl: messages from peers, whatever their meta, drive a
// scheduler or a node through its control plane (registration, rejoin,
// node tables, barriers, heartbeats, deaths, leaves, acknowledgements)
// without a panic and without growing its state beyond its bounds, and
// the node stays usable: it answers its accessors, a barrier ends, and it
// closes.
func FuzzControl(f *testing.F) {
	for _, s := range fuzzControlSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &fuzzBytes{b: b}
		opts := r.u8()
		state := int(opts) % fuzzStates
		secret := ""
		if opts&0x10 != 0 {
			secret = "job-secret"
		}
		n := fuzzNode(t, state, secret, opts&0x20 != 0)
		defer func() {
			done := make(chan error, 1)
			go func() { done <- n.Close() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return")
			}
		}()
		clock := time.Now()
		n.now = func() time.Time { return clock }
		for i := 0; r.more() && i < 64; i++ {
			m := fuzzMessage(r, n)
			handled := make(chan struct{})
			go func() {
				defer close(handled)
				n.handle(m)
			}()
			select {
			case <-handled:
			case <-time.After(10 * time.Second):
				t.Fatalf("message %d (%s) not handled within 10 s", i, m)
			}
			clock = clock.Add(time.Duration(r.u8()) * 50 * time.Millisecond)
			n.tick(clock)
			checkControlBounds(t, n)
		}
		// Usable: its state reads, and a barrier returns.
		_ = n.Nodes()
		_ = n.DeadNodes()
		_ = n.Stats()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- n.Barrier(ctx, transport.AllGroups) }()
		select {
		case <-done: // released, or an error: either is fine
		case <-time.After(10 * time.Second):
			t.Fatal("Barrier did not return")
		}
	})
}

// checkControlBounds checks that what peers can make a node keep stays
// within the limits the protocol sets.
func checkControlBounds(t *testing.T, n *Node) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := len(n.table); l > 1+MaxServers+MaxWorkers {
		t.Fatalf("node table of %d entries", l)
	}
	if l := len(n.tempRoutes); l > 1024 {
		t.Fatalf("%d temporary routes", l)
	}
	if l := len(n.early); l > customerQueue {
		t.Fatalf("%d early messages kept", l)
	}
	for g := range n.arrived {
		if g < 1 || g > transport.AllGroups {
			t.Fatalf("arrivals kept for barrier group %d", g)
		}
	}
	if l := len(n.regs); l > n.cfg.NumServers+n.cfg.NumWorkers {
		t.Fatalf("%d registrations kept for a job of %d nodes", l, n.cfg.NumServers+n.cfg.NumWorkers)
	}
	kept, bytes := 0, 0
	for k, l := range n.unclaimed {
		if len(l) > customerQueue {
			t.Fatalf("%d messages kept for app %+v", len(l), k)
		}
		for _, u := range l {
			kept++
			bytes += u.m.DataBytes()
		}
	}
	if kept != n.heldMsgs || bytes != n.heldBytes || kept > maxUnclaimed || (kept > 1 && bytes > maxUnclaimedBytes) {
		t.Fatalf("%d messages of %d bytes kept for apps not created, counted %d of %d", kept, bytes, n.heldMsgs, n.heldBytes)
	}
}
