package psnode

import (
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

// TestDeathOfAReplacedProcessIsIgnored: the scheduler's announcement of a
// process's death can arrive after the table update that brought the
// process replacing it; it must not be taken for the new one's death.
func TestDeathOfAReplacedProcessIsIgnored(t *testing.T) {
	cfg := conf.Default().PS
	cfg.NumServers, cfg.NumWorkers = 1, 1
	cfg.RootURI, cfg.RootPort, cfg.NodeHost = "scheduler", 1, "node"
	cfg.JobSecret = "job-secret"
	cfg.Role = conf.RoleServer
	n, err := New(cfg, mem.NewNetwork(1).NewTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	events, stop := n.Subscribe()
	defer stop()
	id := transport.WorkerID(0)
	n.mu.Lock()
	n.table[id] = transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 2}
	n.mu.Unlock()

	n.markDeadOf(transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 1}, "the old process")
	if dead := n.DeadNodes(); len(dead) != 0 {
		t.Fatalf("dead nodes %v after the old process's death: the new one was taken for dead", dead)
	}
	n.markDeadOf(transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 2}, "the new process")
	if dead := n.DeadNodes(); len(dead) != 1 || dead[0] != id {
		t.Fatalf("dead nodes %v after the new process's death, want [%d]", dead, id)
	}
	// Events are delivered before markDeadOf returns.
	select {
	case ev := <-events:
		if ev.Kind != NodeDied || ev.Node.Incarnation != 2 {
			t.Fatalf("event %+v, want the death of incarnation 2 only", ev)
		}
	default:
		t.Fatal("no event for the new process's death")
	}
	select {
	case ev := <-events:
		t.Fatalf("a second event %+v", ev)
	default:
	}
}

// TestBarrierWaitsForAReplacedMember: when a new process takes a node's
// id at the scheduler, a barrier the others wait in is not released on
// the dead process's account, and an arrival of the dead process does
// not count for the new one. Released early, the servers' last barrier
// let them write the model and exit while a restarted worker still had
// its share of the data to train on, and the worker waited for servers
// that were gone.
func TestBarrierWaitsForAReplacedMember(t *testing.T) {
	n := fuzzNode(t, fuzzSchedRunning, "job-secret", false)
	defer n.Close()
	group := int32(transport.AllGroups)
	s0, s1, w0, w1 := transport.ServerID(0), transport.ServerID(1), transport.WorkerID(0), transport.WorkerID(1)
	inc := int64(100)
	replaceW0 := func() {
		t.Helper()
		inc++
		n.mu.Lock()
		out, refusal := n.recoverLocked(transport.Node{Role: transport.RoleWorker, Rank: 0, Host: "w0", Port: 40, Incarnation: inc})
		n.mu.Unlock()
		if refusal != "" {
			t.Fatalf("the new process of worker 0 refused: %s", refusal)
		}
		for _, m := range out {
			if m.Meta.Control.Cmd == transport.CmdBarrier {
				t.Fatalf("a barrier release to node %d as worker 0's new process took its place", m.Meta.Recver)
			}
		}
	}

	// Everyone but worker 0 waits; its process dies and a new one takes
	// its rank: still waited for.
	for _, id := range []int32{transport.SchedulerID, s0, s1, w1} {
		n.onBarrierRequest(id, group, 0)
	}
	replaceW0()
	wantRound(t, n, group, 0, "complete without worker 0's new process")
	n.onBarrierRequest(w0, group, 0)
	wantRound(t, n, group, 1, "after every member arrived")

	// Worker 0 arrives at the next round and dies; the arrival was its
	// dead process's, and does not count for the new one.
	for _, id := range []int32{transport.SchedulerID, s0, s1, w0} {
		n.onBarrierRequest(id, group, 0)
	}
	replaceW0()
	n.onBarrierRequest(w1, group, 0)
	wantRound(t, n, group, 1, "complete without worker 0's new process: the dead one's arrival counted")
	n.onBarrierRequest(w0, group, 0)
	wantRound(t, n, group, 2, "after every member arrived")
}

// TestFinalizingSchedulerReleasesLateBarriers: a worker's new process
// that took its place after the others passed their last barriers and
// left (the old one died before them; the others finished its share)
// calls those barriers in turn: once the scheduler is finalizing, it
// counts as past them, as the nodes that left do, and the worker is
// released instead of waiting for it until its shutdown bound, failing
// a job whose model was already written.
func TestFinalizingSchedulerReleasesLateBarriers(t *testing.T) {
	n := fuzzNode(t, fuzzSchedRunning, "job-secret", false)
	defer n.Close()
	group := int32(transport.AllGroups)
	w1 := transport.WorkerID(1)
	n.mu.Lock()
	for _, id := range []int32{transport.ServerID(0), transport.ServerID(1), transport.WorkerID(0)} {
		n.left[id] = true
	}
	n.mu.Unlock()

	// Before the scheduler finalizes, it is a member yet to arrive.
	n.onBarrierRequest(w1, group, 0)
	wantRound(t, n, group, 0, "complete without the scheduler")
	n.finalizing()
	wantRound(t, n, group, 1, "once the scheduler finalizes: the late worker still waits")
	// Its next barrier (Finalize's own) is released at once.
	n.onBarrierRequest(w1, group, 0)
	wantRound(t, n, group, 2, "after the late worker's next barrier")
	// Nothing else is released: no empty rounds.
	n.finalizing()
	wantRound(t, n, group, 2, "with nobody waiting")
}

// TestBarrierWaitsWhenEveryWorkerDied: the scheduler and the servers
// wait at their last barrier while the workers train; every worker dies
// before its new process registers (found by the heartbeat or the lost
// connection). The barrier waits for the new processes rather than let
// the servers write an untrained model; once one arrived, a worker that
// is still dead is not waited for.
func TestBarrierWaitsWhenEveryWorkerDied(t *testing.T) {
	n := fuzzNode(t, fuzzSchedRunning, "job-secret", false)
	defer n.Close()
	group := int32(transport.AllGroups)
	w0, w1 := transport.WorkerID(0), transport.WorkerID(1)
	for _, id := range []int32{transport.SchedulerID, transport.ServerID(0), transport.ServerID(1)} {
		n.onBarrierRequest(id, group, 0)
	}
	n.markDead(w1, "no heartbeat")
	wantRound(t, n, group, 0, "complete with worker 0 alive and not arrived")
	n.markDead(w0, "no heartbeat")
	wantRound(t, n, group, 0, "complete with every worker dead")
	n.mu.Lock()
	_, refusal := n.recoverLocked(transport.Node{Role: transport.RoleWorker, Rank: 0, Host: "w0", Port: 40, Incarnation: 101})
	n.mu.Unlock()
	if refusal != "" {
		t.Fatalf("the new process of worker 0 refused: %s", refusal)
	}
	n.onBarrierRequest(w0, group, 0)
	wantRound(t, n, group, 1, "once worker 0's new process arrived, worker 1 still dead")
}

// wantRound fails the test unless want is the last round of group's
// barrier n completed; what says when.
func wantRound(t *testing.T, n *Node, group, want int32, what string) {
	t.Helper()
	n.mu.Lock()
	r := n.rounds[group]
	n.mu.Unlock()
	if r != want {
		t.Fatalf("round %d %s; want %d", r, what, want)
	}
}

// TestPausedSchedulerDeclaresNoneDead: a scheduler that did not run for
// longer than the heartbeat timeout (its process stopped, its machine
// paused) does not take its own pause for its nodes' silence, whose
// messages wait unread; a node still silent a timeout after its return
// is declared dead then, with how long it had been silent.
func TestPausedSchedulerDeclaresNoneDead(t *testing.T) {
	n := fuzzNode(t, fuzzSchedRunning, "job-secret", false)
	defer n.Close()
	events, stop := n.Subscribe()
	defer stop()
	timeout, step := n.cfg.HeartbeatTimeout, n.cfg.HeartbeatTimeout/4
	start := n.now()
	n.tick(start)
	back := start.Add(3 * timeout)
	n.tick(back)
	if dead := n.DeadNodes(); len(dead) != 0 {
		t.Fatalf("dead nodes %v right after the scheduler's own pause", dead)
	}
	// Regular ticks from then on: the nodes, silent, die one timeout
	// after the scheduler's return.
	at := back
	for ; at.Sub(back) <= timeout; at = at.Add(step) {
		n.tick(at)
		if dead := n.DeadNodes(); len(dead) != 0 {
			t.Fatalf("dead nodes %v %v after the scheduler's return, before a timeout (%v)", dead, at.Sub(back), timeout)
		}
	}
	n.tick(at)
	if dead := n.DeadNodes(); len(dead) != 4 {
		t.Fatalf("dead nodes %v a timeout after the scheduler's return; want the 4 silent ones", dead)
	}
	for range 4 {
		select {
		case ev := <-events:
			if ev.Kind != NodeDied || ev.Silent <= timeout || ev.Silent > timeout+step {
				t.Errorf("event %+v; want a death after a silence of %v to %v", ev, timeout, timeout+step)
			}
		default:
			t.Fatal("fewer than 4 deaths reported")
		}
	}
}

// TestTwoJoinersAwaitTheirOwnAcknowledgements: two servers that join at
// once are each admitted only once every peer has applied that server's
// entry. A peer's acknowledgement of the first update says nothing of
// the second, which may still wait in its queue: taken for both, it let
// the second server start while a worker did not know it yet, and the
// worker's first request to it failed ("no node 14 in the table").
func TestTwoJoinersAwaitTheirOwnAcknowledgements(t *testing.T) {
	n := fuzzNode(t, fuzzSchedRunning, "job-secret", false)
	defer n.Close()
	join := func(rank int32, inc int64) (int32, map[int32]int64) {
		t.Helper()
		n.mu.Lock()
		defer n.mu.Unlock()
		out, refusal := n.recoverLocked(transport.Node{Role: transport.RoleServer, Rank: rank, Host: "joiner", Port: 50 + rank, Incarnation: inc})
		if refusal != "" {
			t.Fatalf("server %d refused: %s", rank, refusal)
		}
		sent := make(map[int32]int64)
		for _, m := range out {
			if m.Meta.Control.Cmd == transport.CmdAddNode && m.Meta.Request {
				sent[m.Meta.Recver] = m.Meta.Control.Nonce
			}
		}
		return transport.ServerID(int(rank)), sent
	}
	first, firstSent := join(2, 200)
	second, secondSent := join(3, 201)
	peers := []int32{transport.ServerID(0), transport.ServerID(1), transport.WorkerID(0), transport.WorkerID(1)}
	for _, id := range peers {
		if firstSent[id] == 0 || secondSent[id] == 0 || firstSent[id] == secondSent[id] {
			t.Fatalf("peer %d was sent updates of nonces %d and %d, want two distinct ones", id, firstSent[id], secondSent[id])
		}
	}
	waiting := func(joiner int32) int {
		n.mu.Lock()
		defer n.mu.Unlock()
		w, ok := n.admitting[joiner]
		if !ok {
			return 0
		}
		return len(w)
	}
	// Every peer applies the first update only.
	for _, id := range peers {
		n.onTableAck(id, firstSent[id])
	}
	if got := waiting(first); got != 0 {
		t.Fatalf("server %d still waits for %d acknowledgements after all its peers gave theirs", first, got)
	}
	if got := waiting(second); got != len(peers) {
		t.Fatalf("server %d waits for %d acknowledgements after its peers acknowledged only the other joiner, want %d", second, got, len(peers))
	}
	// An acknowledgement of an unknown update counts for nothing.
	n.onTableAck(peers[0], secondSent[peers[0]]+1)
	if got := waiting(second); got != len(peers) {
		t.Fatalf("an acknowledgement with a wrong nonce was counted: %d left, want %d", got, len(peers))
	}
	for _, id := range peers {
		n.onTableAck(id, secondSent[id])
	}
	if got := waiting(second); got != 0 {
		t.Fatalf("server %d still waits for %d acknowledgements after all its peers gave theirs", second, got)
	}
}
