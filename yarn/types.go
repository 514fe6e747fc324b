package yarn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
)

// ErrApplicationNotFound matches (errors.Is) a ResourceManager's
// ApplicationNotFoundException.
var ErrApplicationNotFound = errors.New("yarn: application not found")

// ErrClosed is returned by calls on a closed client.
var ErrClosed = hrpc.ErrClosed

// RemoteError is an error reported by a YARN daemon: the RPC method, the
// Java exception class and its message. errors.Is maps well-known classes
// onto ErrApplicationNotFound, fs.ErrNotExist and fs.ErrPermission.
type RemoteError struct {
	Method  string
	Class   string
	Message string
}

func (e *RemoteError) Error() string {
	msg, _, _ := strings.Cut(e.Message, "\n")
	return fmt.Sprintf("yarn: %s: %s: %s", e.Method, e.Class, msg)
}

func (e *RemoteError) shortClass() string {
	c := e.Class
	if i := strings.LastIndexAny(c, ".$"); i >= 0 {
		c = c[i+1:]
	}
	return c
}

// Is reports whether e is of the kind target names.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrApplicationNotFound:
		return e.shortClass() == "ApplicationNotFoundException"
	case fs.ErrNotExist:
		switch e.shortClass() {
		case "ApplicationNotFoundException", "ApplicationAttemptNotFoundException",
			"ContainerNotFoundException", "FileNotFoundException":
			return true
		}
	case fs.ErrPermission:
		switch e.shortClass() {
		case "AccessControlException", "AuthorizationException", "InvalidToken", "SaslException":
			return true
		}
	}
	return false
}

// wrapErr turns an hrpc remote error into a *RemoteError and adds context.
func wrapErr(method string, err error) error {
	if err == nil {
		return nil
	}
	var re *hrpc.RemoteError
	if errors.As(err, &re) {
		return &RemoteError{Method: method, Class: re.Class, Message: re.Message}
	}
	return fmt.Errorf("yarn: %s: %w", method, err)
}

// ApplicationID identifies a YARN application: the ResourceManager's
// start time (ms since the epoch) and a sequence number.
type ApplicationID struct {
	ClusterTimestamp int64
	ID               int32
}

// String returns the form YARN prints, application_<ts>_<id, at least 4 digits>.
func (a ApplicationID) String() string {
	return fmt.Sprintf("application_%d_%04d", a.ClusterTimestamp, a.ID)
}

// ParseApplicationID parses the form String returns.
func ParseApplicationID(s string) (ApplicationID, error) {
	rest, ok := strings.CutPrefix(s, "application_")
	ts, id, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return ApplicationID{}, fmt.Errorf("yarn: invalid application id %q", s)
	}
	t, err1 := strconv.ParseInt(ts, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 32)
	if err1 != nil || err2 != nil || t < 0 || n < 0 {
		return ApplicationID{}, fmt.Errorf("yarn: invalid application id %q", s)
	}
	return ApplicationID{ClusterTimestamp: t, ID: int32(n)}, nil
}

// AttemptID identifies one attempt of an application.
type AttemptID struct {
	App     ApplicationID
	Attempt int32
}

// String returns appattempt_<ts>_<app %04d>_<attempt %06d>.
func (a AttemptID) String() string {
	return fmt.Sprintf("appattempt_%d_%04d_%06d", a.App.ClusterTimestamp, a.App.ID, a.Attempt)
}

// Resource is an amount of memory (MiB) and virtual cores.
type Resource struct {
	MemoryMB int64
	VCores   int32
}

// AppState is YARN's YarnApplicationState.
type AppState int32

// Application states; the values are YARN's.
const (
	AppNew       AppState = 1
	AppNewSaving AppState = 2
	AppSubmitted AppState = 3
	AppAccepted  AppState = 4
	AppRunning   AppState = 5
	AppFinished  AppState = 6
	AppFailed    AppState = 7
	AppKilled    AppState = 8
)

var appStateNames = map[AppState]string{
	AppNew: "NEW", AppNewSaving: "NEW_SAVING", AppSubmitted: "SUBMITTED", AppAccepted: "ACCEPTED",
	AppRunning: "RUNNING", AppFinished: "FINISHED", AppFailed: "FAILED", AppKilled: "KILLED",
}

func (s AppState) String() string {
	if n, ok := appStateNames[s]; ok {
		return n
	}
	return "AppState(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s is FINISHED, FAILED or KILLED.
func (s AppState) Terminal() bool { return s == AppFinished || s == AppFailed || s == AppKilled }

// FinalStatus is YARN's FinalApplicationStatus, as the AM reported it.
type FinalStatus int32

// Final statuses; the values are YARN's.
const (
	FinalUndefined FinalStatus = 0
	FinalSucceeded FinalStatus = 1
	FinalFailed    FinalStatus = 2
	FinalKilled    FinalStatus = 3
	FinalEnded     FinalStatus = 4
)

func (s FinalStatus) String() string {
	switch s {
	case FinalUndefined:
		return "UNDEFINED"
	case FinalSucceeded:
		return "SUCCEEDED"
	case FinalFailed:
		return "FAILED"
	case FinalKilled:
		return "KILLED"
	case FinalEnded:
		return "ENDED"
	}
	return "FinalStatus(" + strconv.Itoa(int(s)) + ")"
}

// ApplicationReport is the ResourceManager's view of an application.
type ApplicationReport struct {
	ID          ApplicationID
	Name        string
	Type        string
	User        string
	Queue       string
	Tags        []string
	State       AppState
	FinalStatus FinalStatus
	Diagnostics string
	TrackingURL string
	// Host and RPCPort are where the AM said it listens ("N/A"/-1 until it registers).
	Host    string
	RPCPort int32
	// CurrentAttempt is the latest attempt, or zero before one exists.
	CurrentAttempt AttemptID
	Progress       float32
	StartTime      time.Time
	FinishTime     time.Time // zero while running
}

// NodeState is YARN's NodeState.
type NodeState int32

// Node states; the values are YARN's.
const (
	NodeNew             NodeState = 1
	NodeRunning         NodeState = 2
	NodeUnhealthy       NodeState = 3
	NodeDecommissioned  NodeState = 4
	NodeLost            NodeState = 5
	NodeRebooted        NodeState = 6
	NodeDecommissioning NodeState = 7
	NodeShutdown        NodeState = 8
)

func (s NodeState) String() string {
	names := [...]string{"", "NEW", "RUNNING", "UNHEALTHY", "DECOMMISSIONED", "LOST", "REBOOTED", "DECOMMISSIONING", "SHUTDOWN"}
	if s > 0 && int(s) < len(names) {
		return names[s]
	}
	return "NodeState(" + strconv.Itoa(int(s)) + ")"
}

// NodeReport describes one NodeManager.
type NodeReport struct {
	Host          string // NodeId host
	Port          int32  // NodeId port (the NM's ContainerManager RPC port)
	HTTPAddress   string
	Rack          string
	State         NodeState
	Capability    Resource
	Used          Resource
	NumContainers int32
	HealthReport  string
}

// Address returns host:port of the node's ContainerManager.
func (n NodeReport) Address() string { return fmt.Sprintf("%s:%d", n.Host, n.Port) }

// ClusterMetrics counts the cluster's NodeManagers by state.
type ClusterMetrics struct {
	NodeManagers    int32 // num_node_managers: active NMs
	Active          int32
	Decommissioned  int32
	Decommissioning int32
	Lost            int32
	Unhealthy       int32
	Rebooted        int32
	Shutdown        int32
}

// QueueState is YARN's QueueState.
type QueueState int32

// Queue states; the values are YARN's.
const (
	QueueStopped  QueueState = 1
	QueueRunning  QueueState = 2
	QueueDraining QueueState = 3
)

// QueueInfo describes a scheduler queue. Capacities are fractions (0..1).
type QueueInfo struct {
	Name            string
	State           QueueState
	Capacity        float32
	MaximumCapacity float32
	CurrentCapacity float32
	Children        []QueueInfo
}

// NewApplication is the ResourceManager's answer to NewApplication.
type NewApplication struct {
	ID ApplicationID
	// MaxResource is the largest container the scheduler will grant.
	MaxResource Resource
}

// LocalResource is a file or archive the NodeManager downloads into the
// container's working directory before starting it.
type LocalResource struct {
	// URL locates it, e.g. hdfs://nn:8020/path; the port may be omitted.
	URL        string
	Size       int64 // bytes, as the file system reports
	Timestamp  int64 // modification time, ms since the epoch, as the file system reports
	Archive    bool  // unpack (ARCHIVE) instead of FILE
	Visibility string
}

// Submission describes an application to submit.
type Submission struct {
	ID   ApplicationID // from NewApplication
	Name string
	Type string // applicationType; "" means "YARN"
	// Queue is the scheduler queue; "" means "default".
	Queue    string
	Priority int32
	Tags     []string
	// Command is the AM's command; the NodeManager joins the words with
	// spaces and runs the result with bash -c.
	Command []string
	Env     map[string]string
	// LocalResources maps a link name in the AM's working directory to a resource.
	LocalResources map[string]LocalResource
	// Tokens is a Credentials blob for the AM; nil means none.
	Tokens []byte
	// Resource is the AM container's size. Required.
	Resource Resource
	// MaxAttempts is the number of AM attempts; 0 means the cluster default.
	MaxAttempts int32
	// KeepContainers keeps containers across AM attempts.
	KeepContainers bool
}

// ContainerID identifies a container: the attempt that allocated it and a
// number. The high bits of ID (above bit 40) carry the ResourceManager's
// restart epoch.
type ContainerID struct {
	Attempt AttemptID
	ID      int64
}

// String returns YARN's form, container_[e<epoch>_]<ts>_<app %04d>_<attempt %02d>_<id %06d>.
func (c ContainerID) String() string {
	epoch := ""
	if e := c.ID >> 40; e > 0 {
		epoch = fmt.Sprintf("e%02d_", e)
	}
	return fmt.Sprintf("container_%s%d_%04d_%02d_%06d", epoch, c.Attempt.App.ClusterTimestamp,
		c.Attempt.App.ID, c.Attempt.Attempt, c.ID&(1<<40-1))
}

// NodeID names a NodeManager by the address of its ContainerManager.
type NodeID struct {
	Host string
	Port int32
}

// String returns host:port.
func (n NodeID) String() string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

// Token is a Hadoop security token as YARN hands it out (AMRMToken,
// NMToken, container token).
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// Container is a container the ResourceManager allocated.
type Container struct {
	ID              ContainerID
	Node            NodeID
	NodeHTTPAddress string
	Resource        Resource
	Priority        int32
	// Token is the container token; the NodeManager requires it,
	// unchanged, to start the container.
	Token Token
}

// ContainerState is YARN's ContainerState.
type ContainerState int32

// Container states; the values are YARN's.
const (
	ContainerNew      ContainerState = 1
	ContainerRunning  ContainerState = 2
	ContainerComplete ContainerState = 3
)

func (s ContainerState) String() string {
	switch s {
	case ContainerNew:
		return "NEW"
	case ContainerRunning:
		return "RUNNING"
	case ContainerComplete:
		return "COMPLETE"
	}
	return "ContainerState(" + strconv.Itoa(int(s)) + ")"
}

// ContainerSubState is YARN's ContainerSubState: where in its life a
// container the NodeManager calls RUNNING is. Zero means the NodeManager
// did not say (it predates Hadoop 3.1).
type ContainerSubState int32

// Container sub-states; the values are YARN's.
const (
	// SubScheduled: accepted, its resources still being localized or its
	// turn still to come; the process has not started.
	SubScheduled  ContainerSubState = 1
	SubRunning    ContainerSubState = 2 // the process has started
	SubPaused     ContainerSubState = 3
	SubCompleting ContainerSubState = 4 // the process has ended, cleanup under way
	SubDone       ContainerSubState = 5
)

func (s ContainerSubState) String() string {
	switch s {
	case 0:
		return "unknown"
	case SubScheduled:
		return "SCHEDULED"
	case SubRunning:
		return "RUNNING"
	case SubPaused:
		return "PAUSED"
	case SubCompleting:
		return "COMPLETING"
	case SubDone:
		return "DONE"
	}
	return "ContainerSubState(" + strconv.Itoa(int(s)) + ")"
}

// Exit statuses YARN reports for containers it ended itself
// (ContainerExitStatus); other values are the process's exit code.
const (
	ExitSuccess                  = 0
	ExitInvalid                  = -1000 // not set yet
	ExitAborted                  = -100  // released by the AM, or lost with its node
	ExitDisksFailed              = -101
	ExitPreempted                = -102
	ExitKilledExceededVMem       = -103
	ExitKilledExceededPMem       = -104
	ExitKilledByAppMaster        = -105
	ExitKilledByResourceManager  = -106
	ExitKilledAfterAppCompletion = -107
)

// ContainerStatus is the state of a container and, once it is COMPLETE,
// its exit status.
type ContainerStatus struct {
	ID    ContainerID
	State ContainerState
	// SubState is finer than State: a container YARN reports RUNNING
	// may still be SubScheduled, its process not started.
	SubState    ContainerSubState
	ExitStatus  int32 // ExitInvalid until the container completes
	Diagnostics string
}

// LaunchContext is what a NodeManager needs to start a container.
type LaunchContext struct {
	// Commands are the words of the command; the NodeManager joins them
	// with spaces and runs the result with bash -c, after replacing
	// <LOG_DIR> with the container's log directory.
	Commands []string
	// Env is added to the container's environment (values undergo shell
	// expansion).
	Env map[string]string
	// LocalResources maps a link name in the working directory to a resource.
	LocalResources map[string]LocalResource
	// Tokens is a Credentials blob for the container; nil means none.
	Tokens []byte
}
