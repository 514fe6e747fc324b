package tracker

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Elastic servers. A synchronous job changes its number of servers at an
// epoch boundary, driven by its workers: before every epoch each worker
// asks View how many servers the epoch has. The first ask of an epoch
// decides, and every later one gets the same answer, so that the workers
// agree. Scale records the number asked for (the target); the launcher
// learns it from ScaleRequests and starts the new servers, which report
// EventJoined once ready; View switches to a larger target only once
// every new server joined, to a smaller one at once. A server whose rank
// the switch leaves out retires: it hands its keys off and exits 0.

// MaxScaleServers bounds the servers Scale accepts.
const MaxScaleServers = 64

// scaling is the elastic servers' part of a State, guarded by its mutex.
type scaling struct {
	// servers is the current count, the newest decided view's; base is
	// the count the current run started with (SetServers), the view of
	// the epochs before the first decided.
	servers, base int
	// target is the count asked for; servers when none is pending.
	// asked is set once Scale recorded one: SetServers keeps it then.
	target int
	asked  bool
	// replicas is how many replicas each server's tables keep: the
	// servers may not be fewer than replicas+1.
	replicas int
	// views holds each decided epoch's count; newest is the newest
	// decided epoch, -1 for none. viewed is set once any worker asked,
	// and stays set across rewinds.
	views  map[int]int
	newest int
	viewed bool
	// joined are the ranks of the servers beyond servers that reported
	// EventJoined; retiring those a decision left out, until they exit.
	joined   map[int]bool
	retiring map[int]bool
	// requests carries the newest target to the launcher.
	requests chan int
}

// newScaling returns the elastic servers' state of a job of no servers.
func newScaling() scaling {
	return scaling{views: make(map[int]int), newest: -1, joined: make(map[int]bool),
		retiring: make(map[int]bool), requests: make(chan int, 1)}
}

// rewind forgets the views of the epochs from epoch on.
func (sc *scaling) rewind(epoch int) {
	sc.newest = -1
	for e := range sc.views {
		if e >= epoch {
			delete(sc.views, e)
		} else if e > sc.newest {
			sc.newest = e
		}
	}
}

// SetServers sets the job's number of servers: its first run's, and,
// when the whole job starts again from a checkpoint, the number that
// wrote the checkpoint. A target asked for (Scale) stands: the launcher
// starts the servers it lacks again and the job switches to it anew. It
// forgets which servers joined and which retire, since every server of
// the new run starts anew.
func (s *State) SetServers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	if !sc.asked {
		sc.target = n
	}
	sc.servers, sc.base = n, n
	clear(sc.joined)
	clear(sc.retiring)
}

// SetReplicas sets how many other servers keep a copy of each server's
// tables: Scale refuses fewer than replicas+1 servers.
func (s *State) SetReplicas(replicas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scale.replicas = replicas
}

// Servers returns the job's number of servers as of the newest decided
// epoch (View), or as set (SetServers) before any.
func (s *State) Servers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.servers
}

// ScaleTarget returns the number of servers asked for (Scale), Servers
// when no change is pending.
func (s *State) ScaleTarget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.target
}

// ScaleRequests delivers the newest target Scale recorded, for the
// launcher to start the servers it lacks (or stop those no longer
// needed); a target not yet received is replaced by a newer one.
func (s *State) ScaleRequests() <-chan int { return s.scale.requests }

// Scale asks for the job to run with servers servers from an epoch
// boundary on (the first View that finds every new server joined, or
// the next one for fewer servers). It refuses a count out of 1 to
// MaxScaleServers, fewer servers than the tables' replicas need, a job
// without servers, one that is over, and one whose workers have not
// asked for a view yet (training has not started, or its program does
// not change its servers). A count equal to the current one cancels a
// pending change.
func (s *State) Scale(servers int) error {
	if servers < 1 || servers > MaxScaleServers {
		return fmt.Errorf("tracker: scale to %d servers: want 1 to %d", servers, MaxScaleServers)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	switch {
	case sc.servers == 0:
		return fmt.Errorf("tracker: scale to %d servers: the job has no servers", servers)
	case s.state != Running:
		return fmt.Errorf("tracker: scale to %d servers: the job is over (%s)", servers, s.state)
	case !sc.viewed:
		return fmt.Errorf("tracker: scale to %d servers: the job has not started training yet "+
			"(no worker has asked for the servers of an epoch; only synchronous jobs whose tables use the consistent or hash partitioner do, "+
			"such as ps-lr and ps-fm without --async or --staleness)", servers)
	case servers <= sc.replicas:
		return fmt.Errorf("tracker: scale to %d servers: the job keeps %d replicas of each server's tables, which needs at least %d servers",
			servers, sc.replicas, sc.replicas+1)
	}
	sc.target, sc.asked = servers, true
	detail := fmt.Sprintf("servers: %d → %d requested at epoch %d", sc.servers, servers, sc.newest)
	if servers == sc.servers {
		detail = fmt.Sprintf("servers: %d requested at epoch %d, as many as the job has: no change pending", servers, sc.newest)
	}
	s.addEventLocked(Event{At: time.Now(), Kind: EventScale, Detail: detail})
	select {
	case <-sc.requests: // replaced by the newer target
	default:
	}
	sc.requests <- servers
	return nil
}

// View returns the number of servers of epoch. The first call for an
// epoch decides it: the target (Scale) when it is fewer servers than now,
// or more and every new server has joined (EventJoined), else the
// current number; the decision becomes the current number (Servers).
// Every later call for the epoch returns the same; a call for an epoch
// older than the newest decided one that was never decided returns the
// number in effect then, deciding nothing.
func (s *State) View(epoch int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	sc.viewed = true
	if n, ok := sc.views[epoch]; ok {
		return n
	}
	if epoch < sc.newest {
		return sc.inEffectLocked(epoch)
	}
	n := sc.servers
	if sc.target != n && (sc.target < n || sc.joinedLocked(n, sc.target)) {
		s.switchLocked(epoch, sc.target)
		n = sc.target
	}
	sc.views[epoch], sc.newest = n, epoch
	return n
}

// inEffectLocked is the count in effect at an undecided epoch: the
// newest decided one before it's, else the run's first. s.mu must be
// held.
func (sc *scaling) inEffectLocked(epoch int) int {
	n, at := sc.base, -1
	for e, v := range sc.views {
		if e < epoch && e > at {
			n, at = v, e
		}
	}
	return n
}

// joinedLocked reports whether every rank in [from, to) joined. s.mu
// must be held.
func (sc *scaling) joinedLocked(from, to int) bool {
	for r := from; r < to; r++ {
		if !sc.joined[r] {
			return false
		}
	}
	return true
}

// switchLocked makes to the job's number of servers from epoch on: the
// ranks it leaves out retire, those it takes in no longer do. s.mu must
// be held.
func (s *State) switchLocked(epoch, to int) {
	sc := &s.scale
	from := sc.servers
	for r := to; r < from; r++ {
		sc.retiring[r] = true
	}
	for r := from; r < to; r++ {
		delete(sc.retiring, r)
	}
	sc.servers = to
	s.addEventLocked(Event{At: time.Now(), Kind: EventScaling, Detail: fmt.Sprintf("servers %d → %d from epoch %d", from, to, epoch)})
}

// noteJoinedLocked records that task ("server R") joined. s.mu must be
// held.
func (s *State) noteJoinedLocked(task string) {
	if r, ok := ServerRank(task); ok {
		s.scale.joined[r] = true
	}
}

// ServerRank returns R of a task named "server R".
func ServerRank(task string) (int, bool) {
	digits, ok := strings.CutPrefix(task, "server ")
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(digits)
	if err != nil || r < 0 || strconv.Itoa(r) != digits {
		return 0, false
	}
	return r, true
}

// ServerExited records that server rank's process ended (or was
// stopped): it has joined no longer, and retires no longer.
func (s *State) ServerExited(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.scale.joined, rank)
	delete(s.scale.retiring, rank)
}

// Retiring reports whether server rank was left out by a switch to fewer
// servers and has not exited since: it hands its keys off and ends.
func (s *State) Retiring(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.retiring[rank]
}

// ReleaseJoiner reports whether server rank is not needed: beyond both
// the current number of servers and the target, and not retiring (a
// server started to join for a target lowered before the switch). It
// then forgets that the rank joined, so that no view takes it in until
// a new process of it joins again; the launcher may stop it.
func (s *State) ReleaseJoiner(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	if rank < sc.servers || rank < sc.target || sc.retiring[rank] {
		return false
	}
	delete(sc.joined, rank)
	return true
}
