package psnode

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrStopped is returned by calls made after Close, and by calls
	// interrupted by it.
	ErrStopped = errors.New("psnode: stopped")
	// ErrNodeDead is wrapped by the error of a request or barrier that
	// cannot complete because a node it depends on is dead.
	ErrNodeDead = errors.New("psnode: node dead")
	// ErrRefused is returned by Start when the scheduler refuses this
	// node, for example because it does not know the job secret.
	ErrRefused = errors.New("psnode: registration refused")
	// ErrNotReady is returned by calls that need the node table before
	// Start has completed registration.
	ErrNotReady = errors.New("psnode: not started")
)

// DeadError says which node is dead; it matches ErrNodeDead.
type DeadError struct {
	ID     int32
	Role   transport.Role
	Rank   int
	Reason string
}

func (e *DeadError) Error() string {
	if e.ID == transport.SchedulerID {
		return fmt.Sprintf("psnode: scheduler is dead: %s", e.Reason)
	}
	return fmt.Sprintf("psnode: %s rank %d (node %d) is dead: %s", e.Role, e.Rank, e.ID, e.Reason)
}

// Is makes errors.Is(err, ErrNodeDead) true.
func (e *DeadError) Is(target error) bool { return target == ErrNodeDead }

// RemoteError is a failure reported by the peer that handled a request.
type RemoteError struct {
	Peer    int32
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("psnode: node %d: %s", e.Peer, e.Message)
}

// remoteSentinels are the errors a peer's failure can be matched against
// with errors.Is once it has crossed the wire as text: those whose
// message it starts with.
var remoteSentinels = []error{ErrSyncWorkerDied}

// Is makes errors.Is(err, ErrSyncWorkerDied) true for a peer's failure
// that began as that error.
func (e *RemoteError) Is(target error) bool {
	for _, s := range remoteSentinels {
		if target == s {
			return strings.HasPrefix(e.Message, s.Error())
		}
	}
	return false
}

// EventKind says what happened to a node.
type EventKind int

// The event kinds.
const (
	// NodeDied: the node was declared dead (by the scheduler's heartbeat
	// watch, or locally after the resend budget ran out).
	NodeDied EventKind = iota + 1
	// NodeRecovered: a new process took over a dead node's id.
	NodeRecovered
	// SchedulerLost: a node that follows the scheduler lost it and looks
	// for its replacement (WithSchedulerLocator); Node is the scheduler
	// as it was.
	SchedulerLost
	// NodeStalled: a server or worker that is alive held up the others
	// for conf.PS.StallTimeout: a barrier waited that long for it (on
	// the scheduler), or a synchronous or bounded-delay table held a
	// request that long while it sent the table nothing (on a server).
	// Its program may be hung; a launcher stops its process (see
	// feed.StartNode). Silent is how long the others waited.
	NodeStalled
)

func (k EventKind) String() string {
	switch k {
	case NodeDied:
		return "died"
	case NodeRecovered:
		return "recovered"
	case SchedulerLost:
		return "scheduler lost"
	case NodeStalled:
		return "stalled"
	}
	return "unknown"
}

// Event reports a change in the liveness of a node.
type Event struct {
	Kind   EventKind
	Node   transport.Node
	Reason string
	// Silent is, for a NodeDied the scheduler's heartbeat watch
	// declared, or a SchedulerLost a node's heartbeat watch found, how
	// long the node had not been heard from: its process may still run,
	// stopped, hung or cut off, and a launcher stops it (see
	// feed.StartNode). It is 0 for the other causes, after which the
	// process is gone or has a successor. For a NodeStalled, it is how
	// long the others waited for the node.
	Silent time.Duration
}
