package job

import "context"

// Cluster runs a job's tasks somewhere: child processes of this one
// (package job/local) or YARN containers (package job/yarnam). The job
// (Run) decides what runs when; the cluster places and starts tasks,
// stops them, and reports what happened to them on Events.
//
// Run calls Start, Stop, StopAll and SchedulerPort from one goroutine; Events
// is read by the same goroutine. A cluster must never block on sending
// an event for longer than it takes Run to read it, and must keep
// delivering events while Run is inside Start.
type Cluster interface {
	// Name is the cluster's name in the environment contract
	// (DMLC_JOB_CLUSTER): "local" or "yarn".
	Name() string
	// SchedulerPort returns the port the scheduler of the next run of the
	// job, or the scheduler started again alone, listens on
	// (DMLC_PS_ROOT_PORT), chosen before the scheduler starts: a new one
	// for every run and every such restart, since the old one may be
	// what failed the scheduler.
	SchedulerPort(ctx context.Context) (int, error)
	// Start asks for the launch to run. It returns once the request is
	// taken; the launch is then placed (Placed event) and later ends
	// (Exited event), or the cluster fails (Failed event). An error
	// means the launch will never run; it fails the job.
	Start(ctx context.Context, l Launch) error
	// StopAll stops every launch started and not yet exited, gives up
	// those not yet placed, and returns once none runs, or with an error
	// when some did not end in time (bounded by ctx and the cluster's
	// own grace). Their exits are not reported on Events.
	StopAll(ctx context.Context) error
	// Stop ends one launch, started and not yet exited, or gives it up
	// while it waits to be placed, without waiting for its end: it ends
	// within the cluster's grace (StopAll ends it if it has not). Run
	// forgets the launch at once and ignores an exit of it the cluster
	// reports. It serves a server or worker started to join a job whose
	// target fell before it joined. An error means it could not be asked
	// to end.
	Stop(ctx context.Context, id int64) error
	// Events delivers what happened to launches, each launch's Placed
	// before its Exited.
	Events() <-chan Event
}

// Launch is one attempt of a task, as Run asks a Cluster to start it.
type Launch struct {
	// ID identifies the launch in Events; it is unique within a job.
	ID   int64
	Task Task
	// Attempt numbers the task's attempts from 0 (DMLC_NUM_ATTEMPT).
	Attempt int
	// Seq numbers the task's launches from 0, the restarts of the whole
	// job included (which do not use up attempts): a launch's log files
	// are named by it.
	Seq int
	// Command is the program and its arguments.
	Command []string
	// Servers and Workers are the job's numbers of servers and workers
	// when the launch starts (tracker.State.Servers, Workers), which
	// scaling changes from the spec's: on a run's first scheduler launch,
	// the servers and workers the run starts with besides the joining
	// ones, which a cluster may ask for at once (yarnam's gang). Zero
	// workers means the spec's numbers.
	Servers, Workers int
	// Env returns the launch's environment once the cluster has placed
	// it on node (the address other tasks reach it at): base, the
	// cluster's own settings (the inherited environment, say), then the
	// job's settings and the environment contract, which win.
	Env func(node string, base []string) []string
}

// EventKind says what happened to a launch.
type EventKind int

// The kinds of Event.
const (
	// Placed: the launch runs (or is about to) on Event.Node.
	Placed EventKind = iota + 1
	// Exited: the launch ended with Event.Exit.
	Exited
	// Failed: the cluster cannot go on (Event.Err); the job fails.
	Failed
)

// Event is something that happened to a launch, or to the cluster.
type Event struct {
	Kind EventKind
	// ID is the launch's (Placed, Exited).
	ID int64
	// Node is where the launch was placed (Placed).
	Node string
	// NodeID is the cluster's own name of that node (Placed), which a
	// NodeBlacklister takes: a YARN NodeManager's host:port, several of
	// which may share one address. "" means Node.
	NodeID string
	// Container is the launch's YARN container id and Logs where its
	// output can be read (a directory, a NodeManager's web address), when
	// the cluster knows (Placed).
	Container string
	Logs      string
	// Exit is how the launch ended (Exited).
	Exit Exit
	// Err is why the cluster failed (Failed).
	Err error
}

// Exit is how a launch ended.
type Exit struct {
	// Code is the exit status: 0 for success, conf.ExitRestartJob for a
	// request to start the whole job again, -1 when a signal killed the
	// process (or YARN's own negative codes).
	Code int
	// Desc says how it ended, for diagnostics: "exit code 3", "killed by
	// signal killed", "exit status 3 in container c on node n".
	Desc string
	// Lost marks a launch the cluster took away (YARN preempted it, or
	// lost it with its node or disks) rather than one that failed on its
	// own: it does not use up one of the task's attempts (at most
	// MaxLostLaunches times per task) and does not count against the node.
	Lost bool
	// Tail holds the launch's last lines of output or, when Diagnostics
	// is set, the cluster's diagnostics, indented, for the job's error;
	// empty when none.
	Tail        string
	Diagnostics bool
	// unfinished, set by Run for an exit 0 it judges a failure, says
	// why; never set by a Cluster.
	unfinished string
}

// NodeBlacklister is a Cluster that can stop placing launches on a node.
// Run blacklists a node once JobSpec.BlacklistAfter launches failed
// there.
type NodeBlacklister interface {
	// BlacklistNode stops placing launches on node (an Event.NodeID, or
	// its Node) and reports whether it did; a cluster may refuse, for
	// instance when no other node would be left. It must not block.
	BlacklistNode(node string) bool
}

// ProgressReporter is a Cluster that shows the job's progress to its
// resource manager (a YARN application's progress). Run tells it at each
// change of the job's status, once the program said how many epochs it
// trains (tracker.Status.Progress).
type ProgressReporter interface {
	// SetProgress sets the job's progress, 0 to 1. It must not block.
	SetProgress(p float64)
}
