package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

// Shard is one piece of the input that a worker reads at once: the bytes
// [Start, Start+Length) of a file, by the rule that a record belongs to the
// shard in which it starts.
type Shard struct {
	ID     int64
	URI    string
	Start  int64
	Length int64
	// FileSize is the file's size when the job was planned; Compressed
	// marks a gzip file, read whole by one shard.
	FileSize   int64
	Compressed bool
	// Hosts are the hosts (names and addresses) that store most of the
	// shard's bytes, when known (WithLocations); a worker on one of them
	// reads it node-locally. Racks are the racks of the DataNodes that
	// store its bytes.
	Hosts []string
	Racks []string
}

// Dispatch says what NextShard handed out.
type Dispatch int

// The dispatch results.
const (
	// Given: here is a shard to read.
	Given Dispatch = iota + 1
	// Wait: no shard is free, but some are still being read by other
	// workers (and may come back if a worker dies): ask again later.
	Wait
	// EpochDone: every shard of the epoch is done.
	EpochDone
)

// JobState is where a job is in its life.
type JobState string

// The job states.
const (
	Running   JobState = "RUNNING"
	Succeeded JobState = "SUCCEEDED"
	Failed    JobState = "FAILED"
	Killed    JobState = "KILLED"
)

// RoleStatus counts the processes of one role.
type RoleStatus struct {
	Role      conf.Role
	Want      int
	Running   int
	Restarts  int
	Succeeded int
}

// Status is a snapshot of a job.
type Status struct {
	State       JobState
	Epoch       int
	ShardsDone  int
	ShardsTotal int
	// Metrics are the latest epoch's aggregated metrics (see
	// ReportMetrics), from MetricsEpoch.
	Metrics      map[string]float64
	MetricsEpoch int
	Roles        []RoleStatus
	Diagnostics  string
	// EpochRecords counts, per epoch, the records of the shards done.
	EpochRecords map[int]int64
	Started      time.Time
	// FirstData is when a worker first asked for its input (a shard or
	// the plan), right before it read and trained its first batch; zero
	// until then.
	FirstData time.Time
	// BadNodes are the nodes the job stopped using because its tasks
	// failed there repeatedly, in the order blacklisted.
	BadNodes []BadNode
	// LocatedGiven counts the shards with known hosts handed to a worker
	// whose host is known; LocalGiven those of them the worker's host
	// stores (node-local).
	LocatedGiven, LocalGiven int
	// EpochMetrics holds the aggregated metrics of every epoch a worker
	// reported (ReportMetrics, with those of its shards added; Metrics is
	// the newest of them), and MetricsAt when each epoch's last report
	// came.
	EpochMetrics map[int]map[string]float64
	MetricsAt    map[int]time.Time
	// WorkerRecords counts, per worker rank, the records of the shards it
	// read, every epoch and run of the job included (a shard counted once
	// per epoch): its growth over time is the worker's speed.
	WorkerRecords map[int]int64
	// Tasks is every task's state, in the order SetTasks gave them;
	// Failovers counts the times the whole job started again.
	Tasks     []TaskStatus
	Failovers int
	// Events are the newest MaxEvents things that happened to the tasks,
	// oldest first: exits, and how long each took to be running again.
	Events []Event
	// Servers is the job's number of servers as of the newest epoch
	// decided (State.View); ServersTarget the number asked for
	// (State.Scale), Servers when no change is pending. Workers and
	// WorkersTarget are the same of its workers.
	Servers, ServersTarget int
	Workers, WorkersTarget int
	// EpochsPlanned is the number of epochs the job's program trains, as
	// its workers said (State.PlanEpochs); 0 when they did not.
	EpochsPlanned int
}

// Kinds of Event.
const (
	// EventExited: a task's process ended with an error or was lost.
	EventExited = "exited"
	// EventBack: a task that exited runs again; Took is since its exit.
	EventBack = "back"
	// EventResumed: the job's first run starts from a committed
	// checkpoint (--resume, or a later attempt of a YARN job's
	// ApplicationMaster); Detail names it and the epoch it starts at.
	EventResumed = "resumed"
	// EventJobRestart: the whole job starts again (from a checkpoint).
	EventJobRestart = "job restart"
	// EventJobBack: after a job restart every task runs again; Took is
	// since the restart began.
	EventJobBack = "job back"
	// EventRejoined: a worker that replaces a dead one rejoined the
	// synchronous steps (reported by the worker); Took is from its start.
	EventRejoined = "rejoined"
	// EventRestored: a server that replaces a dead one restored its
	// tables from their replicas and applied its first update (reported
	// by the server); Took is from the dead one's exit, when the tracker
	// saw it, else from the restore's start.
	EventRestored = "restored"
	// EventReplicated: a server serves tables whose replicas other
	// servers keep (reported by the server); not listed in Status.Events,
	// but once every server said so, the launcher starts a failed server
	// again alone (Replicated).
	EventReplicated = "replicated"
	// EventFollows: a task's node follows the scheduler through the
	// tracker: when the scheduler is gone it asks for the scheduler's
	// address (State.Scheduler) and registers again with the
	// replacement (reported by every server and worker once started);
	// not listed in Status.Events, but once every server and worker
	// said so, the launcher starts a failed scheduler again alone
	// (Following). Detail is the node's incarnation (EventDied).
	EventFollows = "follows-scheduler"
	// EventRebuilt: a scheduler that replaces a dead one rebuilt the
	// node table from the running nodes (reported by the scheduler,
	// Task "scheduler 0"); Took is from the dead one's exit, when the
	// tracker saw it, else from the rebuild's start.
	EventRebuilt = "scheduler-rebuilt"
	// EventScale: someone asked for the job to run with another number
	// of servers or workers (State.Scale; the whole job's), one event
	// per role.
	EventScale = "scale"
	// EventScaling: the servers or the workers change from an epoch on
	// (State.View decided it; the whole job's), one event per role.
	EventScaling = "scaling"
	// EventJoined: a server started to join the job (conf.PS.Joining)
	// is ready to take its keys, or a worker started to join is ready to
	// take part in the steps (reported by the task, Task "server R" or
	// "worker R"); the job switches to more servers or workers only once
	// every new one joined.
	EventJoined = "joined"
	// EventUnresponsive: the scheduler declared a server or a worker dead,
	// or a server or worker lost the scheduler, after it had not been
	// heard from for Took (its heartbeats stopped), while its process may
	// still run, stopped, hung or cut off (reported by the scheduler, Task
	// "server R" or "worker R", or by a node, Task "scheduler 0"). The
	// launcher stops that process, if it started before the silence
	// began, and handles it as a failure: it starts again (Reports).
	EventUnresponsive = "unresponsive"
	// EventStalled: a server or a worker that is alive held up the others
	// for Took, the job's stall timeout (conf.PS.StallTimeout): a barrier
	// waited that long for it (reported by the scheduler), or a
	// synchronous or bounded-delay table's server held a request that
	// long for it (reported by that server), or it held a shard that
	// long while another worker waited that long for the epoch's last
	// shards (found by the tracker itself, StalledShards); Task "server
	// R" or "worker R", Detail what waited. Its program may be hung in its own
	// code. The launcher handles it as EventUnresponsive: it stops that
	// process, if it started before the wait began, and starts it again.
	EventStalled = "stalled"
	// EventDied: the scheduler declared a server or a worker dead for
	// another cause than silence: its connection was lost and not made
	// again, or a new process took its place (reported by the scheduler,
	// Task "server R" or "worker R", Detail the dead process's
	// incarnation). Not listed in Status.Events. When that process is
	// the one whose EventFollows came last, and it exited 0, it ended
	// without leaving the job (it never finalized its node) while the
	// others wait for it or its successor: the launcher handles that
	// exit as a failure (DiedUnfinished).
	EventDied = "died"
	// EventRegistering: a scheduler's node started and waits for the
	// servers and workers to register (reported by the scheduler, Task
	// "scheduler 0", before it has its node table). Not listed in
	// Status.Events. Until a server or worker reports EventFollows after
	// it (the node table came: every node registered), a server or worker
	// that exits 0 has not finished, as none can before it joined: the
	// others wait for it (Registering).
	EventRegistering = "registering"
	// EventScaled: the keys moved to the servers of a new view, or the
	// steps count a new number of workers (reported by worker 0); Took
	// is how long the move took.
	EventScaled = "scaled"
)

// MaxEvents bounds Status.Events; older events are dropped.
const MaxEvents = 200

// Event is one thing that happened to a job's tasks, for the status page
// and ps-submit status.
type Event struct {
	At   time.Time
	Kind string
	// Task names the task ("worker 1"); empty for the whole job.
	Task   string
	Detail string
	// Took is, for EventBack and EventJobBack, how long the task or the
	// job was down; for EventRejoined, EventRestored and EventRebuilt see
	// those kinds.
	Took time.Duration
}

// NodeLocalShare is the share of node-local shards among those handed
// out whose locality is known, and false when none is.
func (st Status) NodeLocalShare() (float64, bool) {
	if st.LocatedGiven == 0 {
		return 0, false
	}
	return float64(st.LocalGiven) / float64(st.LocatedGiven), true
}

// BadNode is a node the job stopped using (its cluster's blacklist).
type BadNode struct {
	// Node is the cluster's name of the node (a YARN NodeManager's
	// host:port).
	Node string `json:"node"`
	// Failures is how many launches had failed there.
	Failures int `json:"failures"`
}

// TaskStatus is one task as the launcher sees it.
type TaskStatus struct {
	// Task names it ("worker 0"); Role and Rank are its parts.
	Task string
	Role conf.Role
	Rank int
	// State is "pending" (not started yet, or to be started again once
	// the scheduler's replacement is placed), "waiting" (for a
	// container), "running", "succeeded",
	// "failed" (and started again, or the job failed), "stopped" (with
	// the job, or a server or worker started to join that was not needed
	// after all), "retired" (a server or worker a switch to fewer left
	// out, which exited), or, for a scheduler that failed, was lost or was stopped
	// after every other task had succeeded, "finished" (no longer
	// needed).
	State string
	// Attempt is the current attempt's number (DMLC_NUM_ATTEMPT), from 0;
	// Launches counts the task's starts, the restarts of the whole job
	// included, so Launches-1 is how often it was started again.
	Attempt  int
	Launches int
	// Node is where the current or last launch runs or ran; Container is
	// its YARN container id ("" locally).
	Node      string
	Container string
	// Logs locates the current or last launch's output: a directory on
	// this machine for a local job, the NodeManager's web address for a
	// YARN container ("host:port").
	Logs string
	// Exit says how the last launch that ended did ("" while none has).
	Exit string
}

// State is a job's durable state: the shards of every epoch and who reads
// them, the metrics workers report, the processes' status. It does no
// I/O; the tracker service and the launchers drive it. It is safe for
// concurrent use.
type State struct {
	mu      sync.Mutex
	shards  []Shard
	epochs  map[int]*epochState
	attempt map[int]int // worker rank → latest attempt seen
	metrics map[int]map[int]map[string]float64
	// metricsAt is when each epoch's latest metrics came.
	metricsAt map[int]time.Time
	// workerRecords counts each worker's records (Status.WorkerRecords).
	workerRecords map[int]int64
	tasks         []TaskStatus
	failovers     int
	roles         map[conf.Role]*RoleStatus
	order         []conf.Role
	state         JobState
	diag          string
	started       time.Time
	// planned is Status.EpochsPlanned.
	planned int
	// run counts the EndRuns: the times the whole job started again.
	run int
	// firstData is Status.FirstData.
	firstData time.Time
	badNodes  []BadNode
	events    []Event
	// replicated are the servers ("server 2") that reported
	// EventReplicated, following the tasks ("worker 1") that reported
	// EventFollows.
	replicated map[string]bool
	following  map[string]bool
	// incarnation is, per task that reported EventFollows, its last
	// report's incarnation; died the incarnation of its last EventDied.
	incarnation, died map[string]string
	// registering is when the last EventRegistering came, followed when
	// the last EventFollows did.
	registering, followed time.Time
	// scheduler is the host:port of the scheduler's current launch
	// (SetScheduler); "" while none is placed.
	scheduler string
	// hosts are the workers' hosts (SetWorkerHost); located and local
	// count the hand-outs (Status.LocatedGiven, LocalGiven).
	hosts          map[int]string
	located, local int
	killReq        chan string
	reports        chan Event
	commit         func(context.Context, CheckpointInfo) error
	// committing is held while a checkpoint is committed (capacity 1),
	// so that EndRun can wait for a commit under way.
	committing chan struct{}
	// scale is the job's elastic servers and workers (scale.go).
	scale scaling
	// shardsMoved is closed, and replaced, when a shard is done or goes
	// back to the queue: what a worker told to Wait waits for
	// (WaitShard).
	shardsMoved chan struct{}
	waiting     atomic.Int32 // workers in WaitShard, for tests
}

type epochState struct {
	queue   []int // shard indexes not handed out, next first
	owner   []int // worker rank reading each shard; -1 for none
	reader  []int // worker rank that reported each shard done; -1 for none
	done    []bool
	recs    []int64 // records of each shard done
	ndone   int
	records int64
	// metrics add up the metrics reported with the shards done.
	metrics map[string]float64
	// given is when each shard went to its owner; waiting, since when
	// each worker told to Wait has waited for the epoch's last shards
	// (StalledShards).
	given   []time.Time
	waiting map[int]time.Time
}

// WaitHint is how long a worker told to Wait should wait before asking
// again, when the tracker does not say (an older tracker).
const WaitHint = 200 * time.Millisecond

// WaitShard is NextShard, except that rather than answer Wait at once it
// waits, at most max or until ctx ends, for a shard to be done or to go
// back to the queue, and asks again: a worker that ran out of shards
// learns that the epoch is done, or gets a shard another worker gave up,
// as soon as it is so. The caller is of run of the job (Run; < 0: the
// current one): one of an earlier run is refused, also once woken by the
// EndRun that ended its run.
func (s *State) WaitShard(ctx context.Context, run, epoch, worker, attempt int, max time.Duration) (Shard, Dispatch, error) {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		s.mu.Lock()
		moved := s.shardsMoved // before asking: no move is missed
		s.mu.Unlock()
		sh, d, err := s.nextShard(run, epoch, worker, attempt)
		if err != nil || d != Wait {
			return sh, d, err
		}
		s.waiting.Add(1)
		woken := false
		select {
		case <-moved:
			woken = true
		case <-t.C:
		case <-ctx.Done():
		}
		s.waiting.Add(-1)
		if !woken {
			return sh, d, nil
		}
	}
}

// shardsMovedLocked wakes the workers waiting in WaitShard. s.mu must be
// held.
func (s *State) shardsMovedLocked() {
	close(s.shardsMoved)
	s.shardsMoved = make(chan struct{})
}

// maxEpoch bounds epoch numbers a caller may ask for, so a bad request
// cannot make the state allocate without end.
const maxEpoch = 1 << 20

// NewState returns the state of a job over shards, started at now.
func NewState(shards []Shard, now time.Time) *State {
	s := &State{
		shards:        shards,
		epochs:        make(map[int]*epochState),
		attempt:       make(map[int]int),
		metrics:       make(map[int]map[int]map[string]float64),
		metricsAt:     make(map[int]time.Time),
		workerRecords: make(map[int]int64),
		roles:         make(map[conf.Role]*RoleStatus),
		state:         Running,
		started:       now,
		killReq:       make(chan string, 1),
		reports:       make(chan Event, maxReports),
		hosts:         make(map[int]string),
		scale:         newScaling(),
		shardsMoved:   make(chan struct{}),
		committing:    make(chan struct{}, 1),
	}
	for i := range s.shards {
		s.shards[i].ID = int64(i)
	}
	return s
}

// Shards returns the job's shards in plan order (the order of the
// synchronous schedule: in step s, worker w reads shard s·W+w).
func (s *State) Shards() []Shard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Shard(nil), s.shards...)
}

// Plan is Shards for a worker that is about to read them.
func (s *State) Plan() []Shard {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteDataLocked()
	return append([]Shard(nil), s.shards...)
}

// noteDataLocked records the first request for input. s.mu must be held.
func (s *State) noteDataLocked() {
	if s.firstData.IsZero() {
		s.firstData = time.Now()
	}
}

// epochLocked returns epoch e's state, creating it with every shard
// queued. s.mu must be held.
func (s *State) epochLocked(e int) *epochState {
	ep := s.epochs[e]
	if ep != nil {
		return ep
	}
	ep = &epochState{queue: make([]int, len(s.shards)), owner: make([]int, len(s.shards)), reader: make([]int, len(s.shards)),
		done: make([]bool, len(s.shards)), recs: make([]int64, len(s.shards)), given: make([]time.Time, len(s.shards)),
		waiting: make(map[int]time.Time)}
	for i := range ep.queue {
		ep.queue[i] = i
		ep.owner[i], ep.reader[i] = -1, -1
	}
	s.epochs[e] = ep
	return ep
}

// noteAttemptLocked records worker's attempt; a newer attempt means the
// worker restarted, and what its previous process was reading goes back
// to the queue. s.mu must be held.
func (s *State) noteAttemptLocked(worker, attempt int) {
	prev, seen := s.attempt[worker]
	if seen && attempt > prev {
		s.requeueLocked(worker)
	}
	if !seen || attempt > prev {
		s.attempt[worker] = attempt
	}
}

// NextShard hands worker (rank, attempt) the next shard of epoch.
func (s *State) NextShard(epoch, worker, attempt int) (Shard, Dispatch, error) {
	return s.nextShard(-1, epoch, worker, attempt)
}

// nextShard is NextShard for a caller of run of the job (checkRunLocked).
func (s *State) nextShard(run, epoch, worker, attempt int) (Shard, Dispatch, error) {
	if epoch < 0 || epoch > maxEpoch {
		return Shard{}, 0, fmt.Errorf("tracker: epoch %d out of range", epoch)
	}
	if worker < 0 {
		return Shard{}, 0, fmt.Errorf("tracker: worker rank %d out of range", worker)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRunLocked(run, worker); err != nil {
		return Shard{}, 0, err
	}
	s.noteDataLocked()
	s.noteAttemptLocked(worker, attempt)
	if attempt < s.attempt[worker] {
		return Shard{}, 0, fmt.Errorf("tracker: worker %d attempt %d was replaced by attempt %d", worker, attempt, s.attempt[worker])
	}
	ep := s.epochLocked(epoch)
	if len(ep.queue) > 0 {
		// The pick swaps places with the head, which then leaves.
		k := s.pickLocked(ep.queue, worker, s.epochs[epoch-1])
		ep.queue[0], ep.queue[k] = ep.queue[k], ep.queue[0]
		i := ep.queue[0]
		ep.queue = ep.queue[1:]
		ep.owner[i], ep.given[i] = worker, time.Now()
		delete(ep.waiting, worker)
		return s.shards[i], Given, nil
	}
	if ep.ndone == len(s.shards) {
		delete(ep.waiting, worker)
		return Shard{}, EpochDone, nil
	}
	if _, ok := ep.waiting[worker]; !ok {
		ep.waiting[worker] = time.Now()
	}
	return Shard{}, Wait, nil
}

// StalledShards returns, for the launcher to add (AddEvent), an
// EventStalled for each worker that has held a shard for limit or longer
// while another worker has waited that long for the epoch's last shards:
// reading a shard takes seconds, so its program is likely hung in its
// own code, and the epoch cannot end without it. Free modes, whose
// workers meet nowhere else, need this: the synchronous tables' servers
// and the barriers find their stalls themselves (conf.PS.StallTimeout).
func (s *State) StalledShards(now time.Time, limit time.Duration) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for e, ep := range s.epochs {
		if len(ep.waiting) == 0 {
			continue
		}
		for i, o := range ep.owner {
			if o < 0 || ep.done[i] || now.Sub(ep.given[i]) < limit {
				continue
			}
			// The longest waiter but the holder, which asks for more
			// shards as it reads this one: its feed is not hung.
			waiter, since := -1, time.Time{}
			for w, at := range ep.waiting {
				if w != o && (waiter < 0 || at.Before(since)) {
					waiter, since = w, at
				}
			}
			if waiter < 0 || now.Sub(since) < limit {
				continue
			}
			out = append(out, Event{At: now, Kind: EventStalled, Task: fmt.Sprintf("worker %d", o), Took: now.Sub(since),
				Detail: fmt.Sprintf("it has read shard %d of epoch %d for %v; worker %d waited %v for the epoch's last shards",
					i, e, now.Sub(ep.given[i]).Round(time.Second), waiter, now.Sub(since).Round(time.Second))})
		}
	}
	return out
}

// maxLocalScan bounds how far into the queue NextShard looks for a shard
// stored on the worker's host.
const maxLocalScan = 4096

// pickLocked returns the index in queue of the shard to give worker: the
// first one it read in the epoch before, prev (nil for none), where it may
// still have the shard's examples in memory (feed.Options.CacheBytes) and
// its host the file's pages; else the first one stored on its host;
// else the first. It looks within maxLocalScan, and counts node-local
// hand-outs. s.mu must be held.
func (s *State) pickLocked(queue []int, worker int, prev *epochState) int {
	host := s.hosts[worker]
	scan := queue[:min(len(queue), maxLocalScan)]
	pick, again := 0, false
	if prev != nil {
		for k, i := range scan {
			if prev.reader[i] == worker {
				pick, again = k, true
				break
			}
		}
	}
	if host != "" {
		if !again {
			for k, i := range scan {
				if slices.Contains(s.shards[i].Hosts, host) {
					pick = k
					break
				}
			}
		}
		if sh := s.shards[queue[pick]]; len(sh.Hosts) > 0 {
			s.located++
			if slices.Contains(sh.Hosts, host) {
				s.local++
			}
		}
	}
	return pick
}

// SetWorkerHost records the host (name or address) worker runs on, so
// that NextShard prefers shards stored there.
func (s *State) SetWorkerHost(worker int, host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[worker] = host
}

// ShardDone records that worker read shard id of epoch, with records
// records. The first report of a shard counts; a later one (from a
// process thought dead whose shard went to another worker) is ignored, so
// every shard's records are counted once.
func (s *State) ShardDone(epoch int, id int64, worker, attempt int, records int64) error {
	return s.ShardDoneOfRun(-1, epoch, id, worker, attempt, records, nil)
}

// ShardDoneOfRun is ShardDone reported by a worker of run of the job, and
// refused when the whole job started again since (Run); run < 0 is the
// current run. m are what the worker's steps added up over the shard,
// every name ending in "_sum" or "_count": they count once, with the
// shard, towards the epoch's metrics (Status.EpochMetrics, beside the
// workers' ReportMetrics), so that a worker that dies in an epoch takes
// with it only what it had not reported with a shard.
func (s *State) ShardDoneOfRun(run, epoch int, id int64, worker, attempt int, records int64, m map[string]float64) error {
	if id < 0 || id >= int64(len(s.shards)) {
		return fmt.Errorf("tracker: no shard %d", id)
	}
	if epoch < 0 || epoch > maxEpoch {
		return fmt.Errorf("tracker: epoch %d out of range", epoch)
	}
	if records < 0 {
		return fmt.Errorf("tracker: negative record count %d", records)
	}
	if err := checkShardMetrics(m); err != nil {
		return fmt.Errorf("tracker: shard %d: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRunLocked(run, worker); err != nil {
		return err
	}
	s.noteAttemptLocked(worker, attempt)
	ep := s.epochLocked(epoch)
	if ep.done[id] {
		return nil
	}
	if err := ep.addMetrics(m); err != nil {
		return fmt.Errorf("tracker: shard %d: %w", id, err)
	}
	ep.done[id] = true
	ep.recs[id] = records
	ep.owner[id], ep.reader[id] = -1, worker
	ep.ndone++
	ep.records += records
	s.workerRecords[worker] += records
	// A shard requeued after its reader was presumed dead is done now.
	for i, q := range ep.queue {
		if int64(q) == id {
			ep.queue = append(ep.queue[:i], ep.queue[i+1:]...)
			break
		}
	}
	s.shardsMovedLocked()
	return nil
}

// maxMetrics bounds the metrics of one report, and the distinct names
// of an epoch's shard reports.
const maxMetrics = 256

// checkShardMetrics refuses a shard's metrics that are not sums or
// counts, or too many.
func checkShardMetrics(m map[string]float64) error {
	if len(m) > maxMetrics {
		return fmt.Errorf("%d metrics in one report; at most %d", len(m), maxMetrics)
	}
	for k := range m {
		if !additive(k) {
			return fmt.Errorf("metric %q: a shard reports only sums and counts (names ending in _sum or _count)", k)
		}
	}
	return nil
}

// additive reports whether metrics named k add up across reports.
func additive(k string) bool {
	return strings.HasSuffix(k, "_sum") || strings.HasSuffix(k, "_count")
}

// addMetrics adds a shard's metrics to the epoch's, refusing a name
// beyond the epoch's maxMetrics distinct ones.
func (ep *epochState) addMetrics(m map[string]float64) error {
	names := len(ep.metrics)
	for k := range m {
		if _, ok := ep.metrics[k]; !ok {
			if names++; names > maxMetrics {
				return fmt.Errorf("metric %q: the epoch's shards would report more than %d names", k, maxMetrics)
			}
		}
	}
	if len(m) > 0 && ep.metrics == nil {
		ep.metrics = make(map[string]float64, len(m))
	}
	for k, v := range m {
		ep.metrics[k] += v
	}
	return nil
}

// DoneShards returns the shards of epoch reported done, each with the
// records its reader counted.
func (s *State) DoneShards(epoch int) (map[int64]int64, error) {
	if epoch < 0 || epoch > maxEpoch {
		return nil, fmt.Errorf("tracker: epoch %d out of range", epoch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]int64{}
	ep := s.epochs[epoch]
	if ep == nil {
		return out, nil
	}
	for id, d := range ep.done {
		if d {
			out[int64(id)] = ep.recs[id]
		}
	}
	return out, nil
}

// WorkerLost puts what worker was reading, in every epoch, back at the
// front of the queue, for another worker (or its restart) to read.
func (s *State) WorkerLost(worker int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeueLocked(worker)
}

func (s *State) requeueLocked(worker int) {
	for _, ep := range s.epochs {
		var back []int
		for i, o := range ep.owner {
			if o == worker && !ep.done[i] {
				ep.owner[i] = -1
				back = append(back, i)
			}
		}
		if len(back) > 0 {
			ep.queue = append(back, ep.queue...)
			s.shardsMovedLocked()
		}
	}
}

// EndRun ends the job's current run, as the whole job is to start
// again: from now on the calls of its processes are refused (a waiting
// one is woken for that), a checkpoint commit among them too, and one
// under way is waited for, at most until ctx ends (it reports false
// then). So what the launcher then finds in the checkpoint directory
// stays as it is, and the run it starts from there (Rewind) does not
// meet a checkpoint of the run before that came after it looked.
func (s *State) EndRun(ctx context.Context) bool {
	s.mu.Lock()
	s.run++
	s.shardsMovedLocked()
	s.mu.Unlock()
	select {
	case s.committing <- struct{}{}:
		<-s.committing
		return true
	case <-ctx.Done():
		return false
	}
}

// Rewind forgets the epochs from epoch on, their shards, metrics and
// views (View), for a job that starts again from a checkpoint taken
// before epoch: every shard of those epochs is read anew and counted
// once. The launcher calls it once the previous run ended (EndRun) and
// every process of it has exited.
func (s *State) Rewind(epoch int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := range s.epochs {
		if e >= epoch {
			delete(s.epochs, e)
		}
	}
	s.shardsMovedLocked()
	for e := range s.metrics {
		if e >= epoch {
			delete(s.metrics, e)
			delete(s.metricsAt, e)
		}
	}
	s.scale.rewind(epoch)
}

// Run returns the job's current run: the number of EndRuns, the times it
// started again as a whole. Its tasks are told it (conf.Job.Run) and
// their shard requests and reports carry it (WaitShard, ShardDoneOfRun).
func (s *State) Run() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// checkRunLocked refuses a call of another run of the job than the
// current one: a process stopped as the whole job started again may
// still have had a call on its way, which must neither take a shard of
// the new run nor report one done. run < 0 means the current run.
func (s *State) checkRunLocked(run, worker int) error {
	if run >= 0 && run != s.run {
		return fmt.Errorf("tracker: worker %d of run %d of the job: the whole job started again since (run %d)", worker, run, s.run)
	}
	return nil
}

// MaxEpochs bounds the epochs a job may plan (PlanEpochs).
const MaxEpochs = 1 << 20

// PlanEpochs records the number of epochs the job's program trains, which
// its workers say as they start, for the job's progress (Progress); a
// later call replaces it.
func (s *State) PlanEpochs(n int) error {
	if n < 1 || n > MaxEpochs {
		return fmt.Errorf("tracker: plan epochs: %d: want 1 to %d", n, MaxEpochs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planned = n
	return nil
}

// runningCeiling bounds a running job's progress: once every epoch is
// trained the model is still to be written, and 100% would tell the user
// (and YARN) that the job is done while it is not.
const runningCeiling = 0.99

// Progress is how far a job is, 0 to 1: the epochs done and the shards
// done of the current one over st.EpochsPlanned, at most 0.99 while it
// runs; 1 once it succeeded, and ok false while its program has not said
// how many epochs it trains.
func (st Status) Progress() (p float64, ok bool) {
	switch {
	case st.State == Succeeded:
		return 1, true
	case st.EpochsPlanned <= 0:
		return 0, false
	}
	done := float64(st.Epoch)
	if st.ShardsTotal > 0 {
		done += float64(min(st.ShardsDone, st.ShardsTotal)) / float64(st.ShardsTotal)
	}
	return min(max(done/float64(st.EpochsPlanned), 0), runningCeiling), true
}

// ReportMetrics records worker's metrics for epoch, replacing what it
// reported of epoch before. Aggregation across workers: names ending in
// "_sum" or "_count" are added up, and so are those the epoch's shards
// were reported done with (ShardDoneOfRun); any other name keeps the
// value of the lowest-ranked worker that reported it. An epoch's metrics
// show (Status) from its first report on.
func (s *State) ReportMetrics(epoch, worker int, m map[string]float64) error {
	if epoch < 0 || epoch > maxEpoch {
		return fmt.Errorf("tracker: epoch %d out of range", epoch)
	}
	if len(m) > maxMetrics {
		return fmt.Errorf("tracker: %d metrics in one report; at most %d", len(m), maxMetrics)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byWorker := s.metrics[epoch]
	if byWorker == nil {
		byWorker = make(map[int]map[string]float64)
		s.metrics[epoch] = byWorker
	}
	cp := make(map[string]float64, len(m))
	for k, v := range m {
		cp[k] = v
	}
	byWorker[worker] = cp
	s.metricsAt[epoch] = time.Now()
	return nil
}

// aggregate combines per-worker metrics.
func aggregate(byWorker map[int]map[string]float64) map[string]float64 {
	ranks := make([]int, 0, len(byWorker))
	for r := range byWorker {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	out := make(map[string]float64)
	for _, r := range ranks {
		for k, v := range byWorker[r] {
			if additive(k) {
				out[k] += v
			} else if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

// SetRole sets the process counts of a role, keeping roles in the order
// first set.
func (s *State) SetRole(r RoleStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.roles[r.Role]; !ok {
		s.order = append(s.order, r.Role)
	}
	cp := r
	s.roles[r.Role] = &cp
}

// AddBadNode records a node the job stopped using (Status.BadNodes).
func (s *State) AddBadNode(n BadNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badNodes = append(s.badNodes, n)
}

// AddEvent records an event (Status.Events), keeping the newest
// MaxEvents. EventReplicated and EventFollows are counted, not listed;
// EventJoined ("server R", "worker R") also marks server or worker R
// joined (View).
func (s *State) AddEvent(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addEventLocked(e)
}

// addEventLocked is AddEvent. s.mu must be held.
func (s *State) addEventLocked(e Event) {
	switch e.Kind {
	case EventReplicated:
		s.replicated = addTask(s.replicated, e.Task)
		return
	case EventFollows:
		s.following = addTask(s.following, e.Task)
		s.incarnation = setTask(s.incarnation, e.Task, e.Detail)
		s.followed = e.At
		return
	case EventRegistering:
		s.registering = e.At
		s.reportLocked(e)
		return
	case EventDied:
		s.died = setTask(s.died, e.Task, e.Detail)
		if s.diedUnfinishedLocked(e.Task) {
			s.reportLocked(e)
		}
		return
	case EventJoined:
		s.noteJoinedLocked(e.Task)
	case EventUnresponsive, EventStalled:
		if s.sameSilenceLocked(e) {
			return // another node's report of it
		}
		s.reportLocked(e)
	case EventRestored, EventRebuilt:
		// The failover's whole duration: from the task's exit; the
		// detail keeps what the task measured itself.
		for i := len(s.events) - 1; i >= 0; i-- {
			if x := s.events[i]; x.Task == e.Task && x.Kind == EventExited {
				e.Detail += fmt.Sprintf(" (%s %v)", ownPart[e.Kind], e.Took.Round(time.Millisecond))
				e.Took = e.At.Sub(x.At)
				break
			}
		}
	}
	if len(s.events) == MaxEvents {
		s.events = append(s.events[:0], s.events[1:]...)
	}
	s.events = append(s.events, e)
}

// reportLocked hands e to the launcher (Reports), unless it is so far
// behind that maxReports wait: then the task's exit, or the next report,
// tells it. s.mu must be held.
func (s *State) reportLocked(e Event) {
	select {
	case s.reports <- e:
	default:
	}
}

// sameSilenceLocked reports whether e, an EventUnresponsive or an
// EventStalled, tells of a silence already reported: one of the same kind
// and task that began within a second of e's, as every server and worker
// report the scheduler's, and every server of a synchronous table the
// stalled worker it waits for. s.mu must be held.
func (s *State) sameSilenceLocked(e Event) bool {
	began := e.At.Add(-e.Took)
	for i := len(s.events) - 1; i >= 0; i-- {
		x := s.events[i]
		if x.Kind == e.Kind && x.Task == e.Task {
			d := x.At.Add(-x.Took).Sub(began)
			return d > -time.Second && d < time.Second
		}
	}
	return false
}

// ownPart names, for the events whose Took AddEvent takes from the
// task's exit, the part of the failover the task measured itself.
var ownPart = map[string]string{
	EventRestored: "the restore and the update",
	EventRebuilt:  "the rebuild",
}

// addTask adds task to set, making the set when nil, and returns it.
func addTask(set map[string]bool, task string) map[string]bool {
	if set == nil {
		set = make(map[string]bool)
	}
	set[task] = true
	return set
}

// setTask sets task's value in m, making m when nil, and returns it.
func setTask(m map[string]string, task, v string) map[string]string {
	if m == nil {
		m = make(map[string]string)
	}
	m[task] = v
	return m
}

// DiedUnfinished reports whether the process of task whose
// EventFollows came last was declared dead (EventDied) rather than
// leaving the job: if it exited 0, it ended without finalizing its node.
func (s *State) DiedUnfinished(task string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diedUnfinishedLocked(task)
}

// Registering reports whether a scheduler that started at since or
// later (EventRegistering) still waits for the servers and workers to
// register: no EventFollows came after its report.
func (s *State) Registering(since time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.registering.IsZero() && !s.registering.Before(since) && s.followed.Before(s.registering)
}

func (s *State) diedUnfinishedLocked(task string) bool {
	inc, ok := s.incarnation[task]
	return ok && inc != "" && s.died[task] == inc
}

// Replicated returns how many servers reported that other servers keep
// replicas of their tables (EventReplicated).
func (s *State) Replicated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replicated)
}

// Following returns how many tasks reported that their nodes follow the
// scheduler through the tracker (EventFollows), each task counted once.
func (s *State) Following() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.following)
}

// SetScheduler records the host:port of the scheduler's current launch,
// once it is placed; "" when it exited or was stopped and none is placed.
func (s *State) SetScheduler(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduler = addr
}

// Scheduler returns the host:port of the scheduler's current launch
// (SetScheduler), "" while none is placed: where a node that follows the
// scheduler (EventFollows) registers again once it lost it.
func (s *State) Scheduler() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scheduler
}

// SetTasks sets every task's state and the number of times the whole job
// started again (Status.Tasks, Status.Failovers). The State keeps its own
// copy.
func (s *State) SetTasks(tasks []TaskStatus, failovers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks = append(s.tasks[:0], tasks...)
	s.failovers = failovers
}

// Finish records the job's end state and a diagnostic. Only the first
// call counts.
func (s *State) Finish(st JobState, diag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != Running {
		return
	}
	s.state, s.diag = st, diag
}

// ErrKillRequested is the reason a job ends when Kill was called.
var ErrKillRequested = errors.New("tracker: job killed on request")

// Kill asks the launcher to end the job; the launcher watches KillRequests.
func (s *State) Kill(reason string) {
	select {
	case s.killReq <- reason:
	default:
	}
}

// KillRequests delivers Kill's reasons to the launcher.
func (s *State) KillRequests() <-chan string { return s.killReq }

// Reports delivers to the launcher the task reports it acts on: the
// EventUnresponsive and EventStalled reports, the EventDied reports of the processes that
// last reported EventFollows, and the EventRegistering reports, at most
// maxReports not yet taken.
func (s *State) Reports() <-chan Event { return s.reports }

// maxReports bounds the reports waiting for the launcher (Reports).
const maxReports = 64

// Status returns a snapshot.
func (s *State) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		State:         s.state,
		ShardsTotal:   len(s.shards),
		Diagnostics:   s.diag,
		EpochRecords:  make(map[int]int64, len(s.epochs)),
		Started:       s.started,
		FirstData:     s.firstData,
		MetricsEpoch:  -1,
		EpochMetrics:  make(map[int]map[string]float64, len(s.metrics)),
		MetricsAt:     make(map[int]time.Time, len(s.metricsAt)),
		WorkerRecords: make(map[int]int64, len(s.workerRecords)),
		Tasks:         append([]TaskStatus(nil), s.tasks...),
		Failovers:     s.failovers,
	}
	for w, n := range s.workerRecords {
		st.WorkerRecords[w] = n
	}
	for e, t := range s.metricsAt {
		st.MetricsAt[e] = t
	}
	for e, ep := range s.epochs {
		st.EpochRecords[e] = ep.records
		if e > st.Epoch || (e == st.Epoch && ep.ndone > st.ShardsDone) {
			st.Epoch, st.ShardsDone = e, ep.ndone
		}
	}
	for e, m := range s.metrics {
		agg := aggregate(m)
		if ep := s.epochs[e]; ep != nil {
			for k, v := range ep.metrics {
				agg[k] += v
			}
		}
		st.EpochMetrics[e] = agg
		if e > st.MetricsEpoch {
			st.MetricsEpoch, st.Metrics = e, agg
		}
	}
	for _, name := range s.order {
		st.Roles = append(st.Roles, *s.roles[name])
	}
	st.BadNodes = slices.Clone(s.badNodes)
	st.Events = slices.Clone(s.events)
	st.LocatedGiven, st.LocalGiven = s.located, s.local
	st.Servers, st.ServersTarget = s.scale.servers.n, s.scale.servers.target
	st.Workers, st.WorkersTarget = s.scale.workers.n, s.scale.workers.target
	st.EpochsPlanned = s.planned
	return st
}
