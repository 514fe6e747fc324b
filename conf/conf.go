package conf

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Role is the part a psnode process plays in a job.
type Role string

// The roles, spelled as in DMLC_ROLE.
const (
	RoleScheduler Role = "scheduler"
	RoleServer    Role = "server"
	RoleWorker    Role = "worker"
)

// Config is the whole configuration of a Spindle process. Build it with
// Default, overlay the environment with FromEnv (and, in ps-submit, flags),
// then check it with Validate.
type Config struct {
	// PS configures the parameter-server runtime (package psnode).
	PS PS
	// Job tells a program launched by ps-submit where its job's tracker
	// is and what it reads and writes.
	Job Job
}

// Job is what a launcher tells each process of a job beyond the ps-lite
// contract. All fields are empty when the program runs outside ps-submit.
type Job struct {
	// Name of the job (SPINDLE_JOB_NAME).
	Name string
	// TrackerAddr is the tracker's host:port (SPINDLE_TRACKER_ADDR);
	// calls to it carry PS.JobSecret.
	TrackerAddr string
	// TrackerCert is the tracker's TLS certificate (PEM), the only one
	// its clients trust; read from the keys file (PS.JobKeys).
	TrackerCert []byte
	// Output is where servers write the model (SPINDLE_OUTPUT): a local
	// path or a URI such as hdfs:///models/m.
	Output string
	// CheckpointDir and CheckpointInterval (SPINDLE_CHECKPOINT_DIR,
	// SPINDLE_CHECKPOINT_INTERVAL) configure checkpoints. The interval is
	// a number of epochs ("2") or a duration ("10m"); empty means none.
	CheckpointDir      string
	CheckpointInterval string
	// ResumeFrom is the committed checkpoint a resumed job starts from
	// (SPINDLE_RESUME_FROM: the path or URI of <checkpoint-dir>/<n>), and
	// ResumeEpoch the epoch it resumes at (SPINDLE_RESUME_EPOCH). Empty
	// and 0 for a fresh job.
	ResumeFrom  string
	ResumeEpoch int
	// Run counts the times the whole job started again before this
	// task's start (SPINDLE_JOB_RUN; 0 in its first run): the tracker
	// takes shard requests, reports and checkpoint commits of the
	// current run only, not of a process of an earlier one whose call
	// was still on its way.
	Run int
	// TaskMemoryMB is the memory the launcher gave this task
	// (SPINDLE_TASK_MEMORY_MB): its YARN container's size, or in a local
	// job the size the role's containers would have. 0 when unknown.
	TaskMemoryMB int
}

// PS configures one psnode process. The environment variable that sets each
// field is named in its comment; see FromEnv.
type PS struct {
	// Role of this process (DMLC_ROLE). Required; no default.
	Role Role

	// NumWorkers and NumServers are the job's worker and server counts
	// (DMLC_NUM_WORKER, DMLC_NUM_SERVER). Workers must be at least 1,
	// servers at least 1 for a parameter-server job.
	NumWorkers int
	NumServers int

	// RootURI and RootPort locate the scheduler (DMLC_PS_ROOT_URI,
	// DMLC_PS_ROOT_PORT). The scheduler binds RootURI:RootPort.
	RootURI  string
	RootPort int

	// NodeHost is the address this node advertises and binds
	// (DMLC_NODE_HOST). Empty means: the first IPv4 address of Interface,
	// or, with no Interface, the first non-loopback IPv4 address, falling
	// back to 127.0.0.1.
	NodeHost string

	// Interface is the network interface whose address is advertised when
	// NodeHost is empty (DMLC_INTERFACE).
	Interface string

	// Port is the port a server or worker listens on (PORT or DMLC_PORT).
	// Zero picks a free port.
	Port int

	// Local selects ipc:// endpoints instead of tcp:// (DMLC_LOCAL=1).
	Local bool

	// IPCDir is the directory of the ipc endpoints when Local is set
	// (SPINDLE_IPC_DIR): every node of a job must use the same one.
	// Empty means the transport's default, shared by the user's jobs.
	IPCDir string

	// Verbose is the log verbosity (PS_VERBOSE): 0 info, 1 debug, 2 every
	// message.
	Verbose int

	// Resend turns on acknowledged delivery with retransmission of data
	// messages (PS_RESEND=1). Default off, as in ps-lite.
	Resend bool

	// ResendTimeout is the first retransmission timeout
	// (PS_RESEND_TIMEOUT, milliseconds). The n-th retry waits
	// ResendTimeout×(n+1). Default 1 s.
	ResendTimeout time.Duration

	// ResendRetries is how many retransmissions are tried before the peer
	// is reported dead (SPINDLE_RESEND_RETRIES). Default 10. The process
	// never aborts when the budget runs out.
	ResendRetries int

	// HeartbeatInterval is the period of heartbeats from nodes to the
	// scheduler (PS_HEARTBEAT_INTERVAL, seconds). Default 1 s. Unlike
	// ps-lite, heartbeats are on by default; zero turns them off.
	HeartbeatInterval time.Duration

	// HeartbeatTimeout is how long the scheduler waits without a heartbeat
	// before it declares a node dead (PS_HEARTBEAT_TIMEOUT, seconds).
	// Default 10 s. Zero turns dead-node detection off. Must exceed
	// HeartbeatInterval when both are set.
	HeartbeatTimeout time.Duration

	// DropMsg is the percentage (0–100) of received data messages dropped
	// on purpose, for testing resend (PS_DROP_MSG). Default 0.
	DropMsg float64

	// DropSeed seeds the choice of dropped messages (SPINDLE_DROP_SEED).
	// The same seed drops the same messages.
	DropSeed int64

	// WaterMark is the ZeroMQ send high-water mark in messages
	// (DMLC_PS_WATER_MARK). Zero keeps ZeroMQ's default.
	WaterMark int

	// MaxDimension bounds the key space to [0, MaxDimension)
	// (DMLC_MAX_DIMENSION). Zero means the whole uint64 space.
	MaxDimension uint64

	// Partitioner is how keys are assigned to servers
	// (SPINDLE_PARTITIONER): "range" (default), "hash" or "consistent"
	// (hashing that moves the fewest keys when servers come or go).
	Partitioner string

	// Replicas is how many other servers keep a copy of each server's
	// tables (SPINDLE_REPLICAS): the next Replicas servers after it on
	// the ring of server ranks. A server that dies is then replaced by a
	// new process that restores its tables from them, and no other task
	// starts again. Default 0: no replicas. At most NumServers-1.
	Replicas int

	// TaskID is this process's index among the processes of its role
	// (DMLC_TASK_ID, or DMLC_WORKER_ID / DMLC_SERVER_ID). -1 means unset:
	// the scheduler then ranks nodes by (host, port). When set, it is the
	// node's rank.
	TaskID int

	// NumAttempt counts restarts of this task, from 0 (DMLC_NUM_ATTEMPT).
	NumAttempt int

	// Joining marks a server or worker started while the job runs, to
	// join it when the job scales out (SPINDLE_JOINING=1): the scheduler
	// admits its rank beyond the job's count; a server's tables start
	// empty, to be filled by the keys the other servers hand it at the
	// switch, and a worker takes part from the epoch the job switches at.
	// NumServers or NumWorkers is then the count it joins.
	Joining bool

	// JobCluster names the launcher (DMLC_JOB_CLUSTER): "local" or "yarn".
	JobCluster string

	// JobSecret is the job's shared secret. Every node proves it knows it
	// when it registers; the scheduler refuses a node that cannot. The
	// nodes derive their ZeroMQ CURVE keys from it. Empty disables the
	// check and CURVE (a warning is logged). Launchers hand it over in
	// the keys file (JobKeys); SPINDLE_JOB_SECRET, which puts it in the
	// environment, is read too, for programs started by hand.
	JobSecret string

	// JobKeys is the path of the job's keys file (SPINDLE_JOB_KEYS),
	// readable only by the task's user: FromEnv reads the secret and the
	// tracker's certificate (Job.TrackerCert) from it.
	JobKeys string

	// Insecure turns ZeroMQ CURVE off (SPINDLE_INSECURE=1, ps-submit
	// --insecure): node traffic is then plain and unauthenticated, for
	// benchmarking. Registration still needs the secret.
	Insecure bool

	// BusyPoll keeps the machine's processors from idling while the node
	// exchanges messages (SPINDLE_BUSY_POLL=1, for instance ps-submit
	// --env SPINDLE_BUSY_POLL=1; zmq.Options.BusyPoll): shorter waits for
	// each message where an idle processor is slow to wake (virtual
	// machines), paid in processor time: it shows as the process's CPU
	// time, and costs where the processors are busy anyway. Off by
	// default: see BENCHMARKS.md for when it pays and when it costs.
	BusyPoll bool

	// RegisterTimeout bounds how long start-up (registration and the first
	// barrier) may take, and how long a node that lost its scheduler looks
	// for a replacement (SPINDLE_REGISTER_TIMEOUT, seconds). Default 120 s.
	RegisterTimeout time.Duration

	// ShutdownTimeout bounds Finalize (SPINDLE_SHUTDOWN_TIMEOUT, seconds).
	// Default 30 s.
	ShutdownTimeout time.Duration

	// StallTimeout bounds how long the others wait for a server or worker
	// that is alive but takes no part (SPINDLE_STALL_TIMEOUT, seconds; 0
	// waits for ever): a barrier that waits this long for a node that
	// has not arrived, or a synchronous or bounded-delay table's server
	// that holds a request this long for a worker that has sent it
	// nothing since, reports that node as stalled (psnode.NodeStalled);
	// a launcher stops its process and starts it again, as it does one
	// whose heartbeats stopped. A program hung in its own code holds up
	// the job no longer than this. Default 10 minutes: it must exceed
	// the longest a node may rightly keep the others waiting (a worker
	// that evaluates a model, writes a file, or computes a mini-batch).
	StallTimeout time.Duration
}

// Default returns a fresh configuration with every default filled in.
func Default() Config {
	return Config{PS: PS{
		ResendTimeout:     time.Second,
		ResendRetries:     10,
		HeartbeatInterval: time.Second,
		HeartbeatTimeout:  10 * time.Second,
		Partitioner:       "range",
		TaskID:            -1,
		RegisterTimeout:   120 * time.Second,
		ShutdownTimeout:   30 * time.Second,
		StallTimeout:      10 * time.Minute,
	}}
}

// Validate reports every problem of c at once, naming each setting by the
// environment variable that sets it. It changes nothing.
func (c Config) Validate() error {
	return c.PS.Validate()
}

// Validate reports every problem of p at once.
func (p PS) Validate() error {
	var errs []error
	bad := func(name string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	switch p.Role {
	case RoleScheduler, RoleServer, RoleWorker:
	case "":
		bad(EnvRole, "not set (want scheduler, server or worker)")
	default:
		bad(EnvRole, "%q is not a role (want scheduler, server or worker)", string(p.Role))
	}
	if p.NumWorkers < 1 {
		bad(EnvNumWorker, "%d: need at least 1 worker", p.NumWorkers)
	} else if p.NumWorkers > MaxWorkers {
		bad(EnvNumWorker, "%d: at most %d workers", p.NumWorkers, MaxWorkers)
	}
	if p.NumServers < 0 {
		bad(EnvNumServer, "%d: must not be negative", p.NumServers)
	} else if p.NumServers > MaxServers {
		bad(EnvNumServer, "%d: at most %d servers", p.NumServers, MaxServers)
	}
	if p.RootURI == "" {
		bad(EnvRootURI, "not set")
	} else if strings.ContainsAny(p.RootURI, " /") {
		bad(EnvRootURI, "%q is not a host name or address", p.RootURI)
	}
	if p.RootPort < 1 || p.RootPort > 65535 {
		bad(EnvRootPort, "%d is not a port (1-65535)", p.RootPort)
	}
	if p.Port < 0 || p.Port > 65535 {
		bad(EnvPort, "%d is not a port (0-65535)", p.Port)
	}
	if p.NodeHost != "" && strings.ContainsAny(p.NodeHost, " /") {
		bad(EnvNodeHost, "%q is not a host name or address", p.NodeHost)
	}
	if p.Verbose < 0 || p.Verbose > 2 {
		bad(EnvVerbose, "%d: want 0, 1 or 2", p.Verbose)
	}
	if p.ResendTimeout <= 0 {
		bad(EnvResendTimeout, "%v: must be positive", p.ResendTimeout)
	}
	if p.ResendRetries < 1 {
		bad(EnvResendRetries, "%d: need at least 1", p.ResendRetries)
	}
	if p.HeartbeatInterval < 0 {
		bad(EnvHeartbeatInterval, "%v: must not be negative", p.HeartbeatInterval)
	}
	if p.HeartbeatTimeout < 0 {
		bad(EnvHeartbeatTimeout, "%v: must not be negative", p.HeartbeatTimeout)
	}
	if p.HeartbeatTimeout > 0 && p.HeartbeatInterval > 0 && p.HeartbeatTimeout <= p.HeartbeatInterval {
		bad(EnvHeartbeatTimeout, "%v must exceed %s (%v)", p.HeartbeatTimeout, EnvHeartbeatInterval, p.HeartbeatInterval)
	}
	if p.HeartbeatTimeout > 0 && p.HeartbeatInterval == 0 {
		bad(EnvHeartbeatInterval, "0 turns heartbeats off, but %s is %v: every node would be declared dead", EnvHeartbeatTimeout, p.HeartbeatTimeout)
	}
	if p.DropMsg < 0 || p.DropMsg >= 100 {
		bad(EnvDropMsg, "%v: want a percentage in [0, 100)", p.DropMsg)
	}
	if p.WaterMark < 0 {
		bad(EnvWaterMark, "%d: must not be negative", p.WaterMark)
	}
	if p.MaxDimension != 0 && p.NumServers > 0 && p.MaxDimension < uint64(p.NumServers) {
		bad(EnvMaxDimension, "%d is smaller than the %d servers", p.MaxDimension, p.NumServers)
	}
	switch p.Partitioner {
	case "range", "hash", "consistent":
	default:
		bad(EnvPartitioner, "%q: want range, hash or consistent", p.Partitioner)
	}
	if p.Replicas < 0 || (p.NumServers > 0 && p.Replicas >= p.NumServers) {
		bad(EnvReplicas, "%d: want 0 to %s-1 (%d)", p.Replicas, EnvNumServer, p.NumServers-1)
	}
	if p.TaskID < -1 {
		bad(EnvTaskID, "%d: must not be negative", p.TaskID)
	}
	if p.TaskID >= 0 {
		switch p.Role {
		case RoleWorker:
			if p.TaskID >= p.NumWorkers && p.NumWorkers > 0 {
				bad(EnvTaskID, "%d: a worker's task id must be below %s (%d)", p.TaskID, EnvNumWorker, p.NumWorkers)
			}
		case RoleServer:
			if p.TaskID >= p.NumServers && p.NumServers > 0 {
				bad(EnvTaskID, "%d: a server's task id must be below %s (%d)", p.TaskID, EnvNumServer, p.NumServers)
			}
		}
	}
	if p.NumAttempt < 0 {
		bad(EnvNumAttempt, "%d: must not be negative", p.NumAttempt)
	}
	if p.RegisterTimeout <= 0 {
		bad(EnvRegisterTimeout, "%v: must be positive", p.RegisterTimeout)
	}
	if p.ShutdownTimeout <= 0 {
		bad(EnvShutdownTimeout, "%v: must be positive", p.ShutdownTimeout)
	}
	if p.StallTimeout < 0 {
		bad(EnvStallTimeout, "%v: must not be negative (0 waits for ever)", p.StallTimeout)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("conf: invalid configuration: %w", errors.Join(errs...))
}

// MaxServers and MaxWorkers bound a job's servers and workers, as it
// scales out too: psnode's limits, which the launchers (job.JobSpec)
// take as theirs.
const (
	MaxServers = 4096
	MaxWorkers = 4096
)

// AdvertiseHost resolves the address a node advertises: NodeHost, else the
// first IPv4 address of Interface, else the first non-loopback IPv4
// address, else 127.0.0.1.
func (p PS) AdvertiseHost() (string, error) {
	if p.NodeHost != "" {
		return p.NodeHost, nil
	}
	if p.Interface != "" {
		ifi, err := net.InterfaceByName(p.Interface)
		if err != nil {
			return "", fmt.Errorf("conf: %s=%s: %w", EnvInterface, p.Interface, err)
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return "", fmt.Errorf("conf: %s=%s: %w", EnvInterface, p.Interface, err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
		return "", fmt.Errorf("conf: %s=%s has no IPv4 address", EnvInterface, p.Interface)
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "127.0.0.1", nil
}
