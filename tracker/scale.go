package tracker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

// Elastic servers and workers. A synchronous job changes its number of
// servers or workers at an epoch boundary, driven by its workers: before
// every epoch each worker asks View how many servers and workers the
// epoch has. The first ask of an epoch decides, and every later one gets
// the same answer, so that the workers agree. Scale records the numbers
// asked for (the targets); the launcher learns them from ScaleRequests
// and starts the new servers and workers, which report EventJoined once
// ready; View switches to a larger target only once every new task of
// the role joined, to a smaller one at once, each role on its own. A
// server whose rank a switch leaves out retires: it hands its keys off
// and exits 0; so does a worker, before the epoch. A worker that joins
// learns the epoch it begins at from JoinEpoch.

// MaxScaleServers bounds the servers Scale accepts.
const MaxScaleServers = 64

// MaxScaleWorkers bounds the workers Scale accepts.
const MaxScaleWorkers = 256

// Target is the numbers of servers and workers a job was asked to run
// with (Scale), as ScaleRequests delivers them.
type Target struct {
	Servers, Workers int
}

// epochView is an epoch's numbers of servers and workers (View).
type epochView struct {
	servers, workers int
}

// pool is one elastic role's part of a State: its servers or its
// workers, guarded by the State's mutex.
type pool struct {
	// role names it in events and errors: "servers" or "workers".
	role string
	// n is the current count, the newest decided view's; base is the
	// count the current run started with (SetServers, SetWorkers), the
	// view of the epochs before the first decided.
	n, base int
	// target is the count asked for; n when none is pending. asked is
	// set once Scale recorded one: SetServers and SetWorkers keep it
	// then.
	target int
	asked  bool
	// joined are the ranks beyond n that reported EventJoined; retiring
	// those a decision left out, until they exit.
	joined   map[int]bool
	retiring map[int]bool
}

// newPool returns the pool of role, of no tasks.
func newPool(role string) pool {
	return pool{role: role, joined: make(map[int]bool), retiring: make(map[int]bool)}
}

// reset starts a run of n tasks: the target stands once asked for, and
// every task of the run starts anew, neither joined nor retiring.
func (p *pool) reset(n int) {
	if !p.asked {
		p.target = n
	}
	p.n, p.base = n, n
	clear(p.joined)
	clear(p.retiring)
}

// ready reports whether the next decided view switches to the target:
// fewer at once, more once every new rank joined.
func (p *pool) ready() bool {
	if p.target == p.n {
		return false
	}
	if p.target < p.n {
		return true
	}
	for r := p.n; r < p.target; r++ {
		if !p.joined[r] {
			return false
		}
	}
	return true
}

// switchTo makes to the current count: the ranks it leaves out retire
// and must join anew to come back, those it takes in no longer retire.
func (p *pool) switchTo(to int) {
	for r := to; r < p.n; r++ {
		p.retiring[r] = true
		delete(p.joined, r)
	}
	for r := p.n; r < to; r++ {
		delete(p.retiring, r)
	}
	p.n = to
}

// exited records that rank's process ended (or was stopped): it has
// joined no longer, and retires no longer.
func (p *pool) exited(rank int) {
	delete(p.joined, rank)
	delete(p.retiring, rank)
}

// release reports whether rank is not needed: beyond both the current
// count and the target, and not retiring (started to join for a target
// lowered before the switch). It then forgets that the rank joined, so
// that no view takes it in until a new process of it joins again.
func (p *pool) release(rank int) bool {
	if rank < p.n || rank < p.target || p.retiring[rank] {
		return false
	}
	delete(p.joined, rank)
	return true
}

// scaling is the elastic part of a State, guarded by its mutex.
type scaling struct {
	servers, workers pool
	// replicas is how many replicas each server's tables keep: the
	// servers may not be fewer than replicas+1.
	replicas int
	// views holds each decided epoch's counts; newest is the newest
	// decided epoch, -1 for none. viewed is set once any worker asked,
	// and stays set across rewinds.
	views  map[int]epochView
	newest int
	viewed bool
	// joinAt is, for each worker rank a switch took in as new, the
	// epoch it begins at (JoinEpoch), until a switch leaves it out.
	joinAt map[int]int
	// requests carries the newest targets to the launcher.
	requests chan Target
}

// newScaling returns the elastic state of a job of no servers and no
// workers.
func newScaling() scaling {
	return scaling{servers: newPool("servers"), workers: newPool("workers"), views: make(map[int]epochView), newest: -1,
		joinAt: make(map[int]int), requests: make(chan Target, 1)}
}

// rewind forgets the views of the epochs from epoch on, and the workers
// they took in.
func (sc *scaling) rewind(epoch int) {
	sc.newest = -1
	for e := range sc.views {
		if e >= epoch {
			delete(sc.views, e)
		} else if e > sc.newest {
			sc.newest = e
		}
	}
	for r, e := range sc.joinAt {
		if e >= epoch {
			delete(sc.joinAt, r)
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
	s.scale.servers.reset(n)
}

// SetWorkers sets the job's number of workers: its first run's, and,
// when the whole job starts again, the number it starts again with. A
// target asked for (Scale) stands, as for SetServers; it forgets which
// workers joined, which retire and where the joined ones began, since
// every worker of the new run starts anew.
func (s *State) SetWorkers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scale.workers.reset(n)
	clear(s.scale.joinAt)
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
	return s.scale.servers.n
}

// ScaleTarget returns the number of servers asked for (Scale), Servers
// when no change is pending.
func (s *State) ScaleTarget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.servers.target
}

// Workers returns the job's number of workers as of the newest decided
// epoch (View), or as set (SetWorkers) before any.
func (s *State) Workers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.workers.n
}

// WorkersTarget returns the number of workers asked for (Scale), Workers
// when no change is pending.
func (s *State) WorkersTarget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scale.workers.target
}

// ScaleRequests delivers the newest targets Scale recorded, for the
// launcher to start the servers and workers they lack (or stop those no
// longer needed); targets not yet received are replaced by newer ones.
func (s *State) ScaleRequests() <-chan Target { return s.scale.requests }

// Scale asks for the job to run with servers servers and workers workers
// from an epoch boundary on (for more, the first View that finds every
// new one joined; for fewer, the next one); 0 for either leaves it as it
// is. It refuses a count out of 1 to MaxScaleServers or MaxScaleWorkers,
// fewer servers than the tables' replicas need, servers for a job
// without, a job that is over, and one whose workers have not asked for
// a view yet (training has not started, or its program does not change
// its servers and workers). A count equal to the current one cancels a
// pending change of it.
func (s *State) Scale(servers, workers int) error {
	what := scaleWhat(servers, workers)
	switch {
	case servers == 0 && workers == 0:
		return errors.New("tracker: scale: no number of servers or workers asked for")
	case servers < 0 || servers > MaxScaleServers:
		return fmt.Errorf("tracker: scale to %d servers: want 1 to %d", servers, MaxScaleServers)
	case workers < 0 || workers > MaxScaleWorkers:
		return fmt.Errorf("tracker: scale to %d workers: want 1 to %d", workers, MaxScaleWorkers)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	switch {
	case servers > 0 && sc.servers.n == 0:
		return fmt.Errorf("tracker: scale to %s: the job has no servers", what)
	case s.state != Running:
		return fmt.Errorf("tracker: scale to %s: the job is over (%s)", what, s.state)
	case !sc.viewed:
		return fmt.Errorf("tracker: scale to %s: the job has not started training yet "+
			"(no worker has asked for the servers and workers of an epoch; only synchronous jobs whose tables use the consistent or hash partitioner do, "+
			"such as ps-lr and ps-fm without --async or --staleness)", what)
	case servers > 0 && servers <= sc.replicas:
		return fmt.Errorf("tracker: scale to %s: the job keeps %d replicas of each server's tables, which needs at least %d servers",
			what, sc.replicas, sc.replicas+1)
	}
	s.askLocked(&sc.servers, servers)
	s.askLocked(&sc.workers, workers)
	select {
	case <-sc.requests: // replaced by the newer targets
	default:
	}
	sc.requests <- Target{Servers: sc.servers.target, Workers: sc.workers.target}
	return nil
}

// scaleWhat names the counts Scale was asked for: "3 servers", "3
// workers" or "3 servers and 4 workers".
func scaleWhat(servers, workers int) string {
	switch {
	case workers == 0:
		return fmt.Sprintf("%d servers", servers)
	case servers == 0:
		return fmt.Sprintf("%d workers", workers)
	}
	return fmt.Sprintf("%d servers and %d workers", servers, workers)
}

// askLocked records n (0: none) as p's target, with an event. s.mu must
// be held.
func (s *State) askLocked(p *pool, n int) {
	if n == 0 {
		return
	}
	p.target, p.asked = n, true
	detail := fmt.Sprintf("%s: %d → %d requested at epoch %d", p.role, p.n, n, s.scale.newest)
	if n == p.n {
		detail = fmt.Sprintf("%s: %d requested at epoch %d, as many as the job has: no change pending", p.role, n, s.scale.newest)
	}
	s.addEventLocked(Event{At: time.Now(), Kind: EventScale, Detail: detail})
}

// View returns the numbers of servers and workers of epoch. The first
// call for an epoch decides them, each on its own: the target (Scale)
// when it is fewer than now, or more and every new one has joined
// (EventJoined), else the current number; the decision becomes the
// current numbers (Servers, Workers). Every later call for the epoch
// returns the same; a call for an epoch older than the newest decided
// one that was never decided returns the numbers in effect then,
// deciding nothing.
func (s *State) View(epoch int) (servers, workers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := &s.scale
	sc.viewed = true
	if v, ok := sc.views[epoch]; ok {
		return v.servers, v.workers
	}
	if epoch < sc.newest {
		v := sc.inEffectLocked(epoch)
		return v.servers, v.workers
	}
	if sc.servers.ready() {
		s.switchLocked(&sc.servers, epoch)
	}
	if sc.workers.ready() {
		from := sc.workers.n
		s.switchLocked(&sc.workers, epoch)
		for r := from; r < sc.workers.n; r++ {
			sc.joinAt[r] = epoch
		}
		for r := sc.workers.n; r < from; r++ {
			delete(sc.joinAt, r)
		}
	}
	v := epochView{servers: sc.servers.n, workers: sc.workers.n}
	sc.views[epoch], sc.newest = v, epoch
	return v.servers, v.workers
}

// inEffectLocked is the view in effect at an undecided epoch: the newest
// decided one before it's, else the run's first. s.mu must be held.
func (sc *scaling) inEffectLocked(epoch int) epochView {
	v, at := epochView{servers: sc.servers.base, workers: sc.workers.base}, -1
	for e, d := range sc.views {
		if e < epoch && e > at {
			v, at = d, e
		}
	}
	return v
}

// switchLocked makes p's target its count from epoch on, with an event.
// s.mu must be held.
func (s *State) switchLocked(p *pool, epoch int) {
	from := p.n
	p.switchTo(p.target)
	s.addEventLocked(Event{At: time.Now(), Kind: EventScaling, Detail: fmt.Sprintf("%s %d → %d from epoch %d", p.role, from, p.n, epoch)})
}

// JoinEpoch returns the epoch worker rank, started to join the job,
// begins at: the first decided epoch whose workers include it, of the
// switch that took it in as new. ok is false while no switch took it in
// (or since one left it out again).
func (s *State) JoinEpoch(rank int) (epoch int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	epoch, ok = s.scale.joinAt[rank]
	return epoch, ok
}

// noteJoinedLocked records that task ("server R" or "worker R") joined.
// s.mu must be held.
func (s *State) noteJoinedLocked(task string) {
	if r, ok := ServerRank(task); ok {
		s.scale.servers.joined[r] = true
	}
	if r, ok := WorkerRank(task); ok {
		s.scale.workers.joined[r] = true
	}
}

// ServerRank returns R of a task named "server R".
func ServerRank(task string) (int, bool) { return taskRank("server ", task) }

// WorkerRank returns R of a task named "worker R".
func WorkerRank(task string) (int, bool) { return taskRank("worker ", task) }

// taskRank returns R of a task named prefix followed by R.
func taskRank(prefix, task string) (int, bool) {
	digits, ok := strings.CutPrefix(task, prefix)
	if !ok {
		return 0, false
	}
	r, err := strconv.Atoi(digits)
	if err != nil || r < 0 || strconv.Itoa(r) != digits {
		return 0, false
	}
	return r, true
}

// poolLocked returns the pool of role: the workers', or the servers'.
// s.mu must be held.
func (s *State) poolLocked(role conf.Role) *pool {
	if role == conf.RoleWorker {
		return &s.scale.workers
	}
	return &s.scale.servers
}

// Exited records that the process of role's rank ended (or was
// stopped): it has joined no longer, and retires no longer.
func (s *State) Exited(role conf.Role, rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poolLocked(role).exited(rank)
}

// Retiring reports whether role's rank was left out by a switch to fewer
// and has not exited since: a server hands its keys off and ends, a
// worker ends before the switch's epoch.
func (s *State) Retiring(role conf.Role, rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poolLocked(role).retiring[rank]
}

// ReleaseJoiner reports whether role's rank is not needed: beyond both
// the current number and the target, and not retiring (started to join
// for a target lowered before the switch). It then forgets that the rank
// joined, so that no view takes it in until a new process of it joins
// again; the launcher may stop it.
func (s *State) ReleaseJoiner(role conf.Role, rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poolLocked(role).release(rank)
}
