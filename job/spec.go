package job

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

// Defaults of a job. A zero field of JobSpec or Options that has a
// default here means that default.
const (
	// DefaultMaxAttempts is how many times a task may run in all, the
	// first included, when a launcher is not told otherwise.
	DefaultMaxAttempts = 3
	// DefaultSplitSize is the target shard size in bytes.
	DefaultSplitSize = 8 << 20
	// DefaultCheckpointKeep is how many committed checkpoints are kept.
	DefaultCheckpointKeep = 3
	// DefaultStopGrace is how long stopping a task waits after asking it
	// to end (SIGTERM) before it is killed.
	DefaultStopGrace = 5 * time.Second
	// DefaultStopTimeout bounds stopping every task of a job, once the
	// grace period is over.
	DefaultStopTimeout = 30 * time.Second
	// MaxLostLaunches bounds how often one task may be started again
	// after the cluster took its launch away (Exit.Lost: preempted, or
	// lost with its node) without using up one of its attempts; past it,
	// such a loss counts as a failure.
	MaxLostLaunches = 10
	// DefaultBlacklistAfter is ps-submit's default for
	// JobSpec.BlacklistAfter.
	DefaultBlacklistAfter = 3
	// DefaultMemoryMB and DefaultCores size a YARN container whose role's
	// resources are not given.
	DefaultMemoryMB = conf.DefaultTaskMemoryMB
	DefaultCores    = 1
	// MaxWorkers and MaxServers bound JobSpec.NumWorkers and NumServers:
	// as many as a psnode job can have (conf.MaxWorkers, MaxServers).
	// A launcher plans every task of a job at once.
	MaxWorkers = conf.MaxWorkers
	MaxServers = conf.MaxServers
)

// JobSpec describes a job: what to run, how many of each role, and what
// the job reads and writes. ps-submit builds it from its flags.
type JobSpec struct {
	// Name is the job's name; empty means derived from the command.
	Name string
	// Command is the program and its arguments, run for every role.
	Command []string
	// NumWorkers (1 to MaxWorkers) and NumServers (0 to MaxServers; 0:
	// the command runs as NumWorkers plain workers, with no scheduler,
	// unless Collective).
	NumWorkers, NumServers int
	// Collective makes a job without servers (NumServers 0) a psnode job
	// all the same: the scheduler starts first and gives the workers
	// their rendezvous (registration, the node table, barriers,
	// heartbeats), with the environment contract of a job with servers
	// and DMLC_NUM_SERVER=0, so that they can run collectives. Its
	// workers depend on each other: a worker that fails takes the whole
	// job back to its newest checkpoint, as a server does in a job with
	// servers. It needs NumServers 0.
	Collective bool
	// Replicas is how many other servers keep a copy of each server's
	// tables (SPINDLE_REPLICAS; conf.PS.Replicas). With replicas a server
	// that fails is started again alone, like a worker, and its new
	// process restores its tables from them; without (0), a server's
	// failure takes the whole job back to its newest checkpoint. At most
	// NumServers-1.
	Replicas int
	// Env holds KEY=VALUE settings for every role; ServerEnv and
	// WorkerEnv add to or override them for one role (servers' also go to
	// the scheduler).
	Env, ServerEnv, WorkerEnv []string
	// Files are extra files the command needs in its working directory.
	Files []string
	// Archives are tar.gz (.tar.gz, .tgz) and zip files, each unpacked
	// into a directory of the command's working directory: "PATH#NAME"
	// into NAME, "PATH" into the base name without its extension (see
	// ArchiveName). On YARN the NodeManager unpacks them (LocalResource
	// type ARCHIVE); locally the launcher does.
	Archives []string
	// MaxAttempts is how many times a task may run in all, the first
	// included; at least 1. The whole job starts again at most
	// MaxAttempts-1 times.
	MaxAttempts int
	// BlacklistAfter is how many launches may fail on one node before the
	// job stops using the node (on YARN: the application's blacklist); 0
	// means never. Launches the cluster took away (Exit.Lost) do not
	// count.
	BlacklistAfter int
	// Inputs are paths or globs of the training data, cut into shards.
	Inputs []string
	// SplitSize is the target shard size in bytes; 0 means
	// DefaultSplitSize.
	SplitSize int64
	// Output is where servers write the model; empty means no model.
	Output string
	// Overwrite lets an existing non-empty Output be replaced, and an
	// existing CheckpointDir be cleared; without it they are errors. A
	// complete model (_SUCCESS) in Output stays until the new one is
	// complete, written beside it; other contents go at the start.
	Overwrite bool
	// Resume continues from the newest committed checkpoint in
	// CheckpointDir.
	Resume bool
	// CheckpointDir and CheckpointInterval configure checkpoints;
	// CheckpointKeep is how many committed ones are kept (0 means
	// DefaultCheckpointKeep).
	CheckpointDir      string
	CheckpointInterval string
	CheckpointKeep     int
	// Resources, for YARN (memory in MB; 0 means DefaultMemoryMB and
	// DefaultCores).
	WorkerCores, ServerCores       int
	WorkerMemoryMB, ServerMemoryMB int
	Queue                          string
	// LogLevel is the tasks' log level (logrus level name).
	LogLevel string
	// Insecure turns ZeroMQ CURVE off between the nodes (ps-submit
	// --insecure, SPINDLE_INSECURE): node traffic is then plain and
	// unauthenticated. For benchmarking only.
	Insecure bool
	// StallTimeout bounds how long the others wait for a server or worker
	// that is alive but holds them up, a program hung in its own code
	// (ps-submit --stall-timeout, conf.PS.StallTimeout); then its process
	// is stopped and started again. 0 means the default, 10 minutes; a
	// negative value waits for ever.
	StallTimeout time.Duration
}

// StallLimit is the stall timeout in effect: StallTimeout, or its
// default; 0 for none.
func (s JobSpec) StallLimit() time.Duration {
	switch {
	case s.StallTimeout < 0:
		return 0
	case s.StallTimeout == 0:
		return conf.Default().PS.StallTimeout
	}
	return s.StallTimeout
}

// FieldError is a problem with one field of a JobSpec. Validate's errors
// are FieldErrors (joined), so that a command line can name its own flag
// for the field.
type FieldError struct {
	// Field is the JobSpec field's name, such as "NumWorkers".
	Field string
	// Value is the field's value as shown, such as "0"; empty for none.
	Value string
	// Problem says what is wrong: "need at least 1".
	Problem string
	// Err is the cause, when there is one.
	Err error
}

func (e *FieldError) Unwrap() error { return e.Err }

func (e *FieldError) Error() string {
	if e.Value == "" {
		return "job: " + e.Field + ": " + e.Problem
	}
	return "job: " + e.Field + " " + e.Value + ": " + e.Problem
}

// Validate reports every problem of s at once, as joined FieldErrors.
func (s JobSpec) Validate() error {
	var errs []error
	bad := func(field, value, problem string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Problem: problem})
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		bad("Command", "", "no command to run")
	}
	if s.NumWorkers < 1 {
		bad("NumWorkers", fmt.Sprint(s.NumWorkers), "need at least 1")
	} else if s.NumWorkers > MaxWorkers {
		bad("NumWorkers", fmt.Sprint(s.NumWorkers), fmt.Sprintf("at most %d", MaxWorkers))
	}
	if s.NumServers < 0 {
		bad("NumServers", fmt.Sprint(s.NumServers), "must not be negative")
	} else if s.NumServers > MaxServers {
		bad("NumServers", fmt.Sprint(s.NumServers), fmt.Sprintf("at most %d", MaxServers))
	}
	if s.Replicas < 0 || (s.Replicas > 0 && s.Replicas >= s.NumServers) {
		bad("Replicas", strconv.Itoa(s.Replicas), fmt.Sprintf("want 0 to the servers less one (%d)", max(s.NumServers-1, 0)))
	}
	if s.Collective && s.NumServers > 0 {
		bad("Collective", "", fmt.Sprintf("only for a job without servers, and this one has %d", s.NumServers))
	}
	if s.MaxAttempts < 1 {
		bad("MaxAttempts", fmt.Sprint(s.MaxAttempts), "need at least 1")
	}
	if s.BlacklistAfter < 0 {
		bad("BlacklistAfter", fmt.Sprint(s.BlacklistAfter), "must not be negative (0 means never)")
	}
	names := map[string]bool{}
	for _, a := range s.Archives {
		_, name, err := ArchiveName(a)
		switch {
		case err != nil:
			errs = append(errs, &FieldError{Field: "Archives", Value: fmt.Sprintf("%q", a), Problem: "want a .tar.gz, .tgz or .zip file, optionally #NAME (a directory name)", Err: err})
		case names[name]:
			bad("Archives", fmt.Sprintf("%q", a), fmt.Sprintf("another archive unpacks into %q too", name))
		}
		names[name] = true
	}
	if s.SplitSize < 0 {
		bad("SplitSize", fmt.Sprint(s.SplitSize), "must not be negative")
	}
	if s.CheckpointKeep < 0 {
		bad("CheckpointKeep", fmt.Sprint(s.CheckpointKeep), "must not be negative")
	}
	if s.CheckpointInterval != "" && s.CheckpointDir == "" {
		// Else the job would run without the checkpoints asked for.
		bad("CheckpointInterval", fmt.Sprintf("%q", s.CheckpointInterval), "needs CheckpointDir")
	}
	for _, l := range []struct {
		field string
		list  []string
	}{{"Env", s.Env}, {"ServerEnv", s.ServerEnv}, {"WorkerEnv", s.WorkerEnv}} {
		for _, kv := range l.list {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				bad(l.field, fmt.Sprintf("%q", kv), "want KEY=VALUE")
			}
		}
	}
	return errors.Join(errs...)
}

// MemoryMB is the memory of role's tasks in MB: the size of their YARN
// containers, WorkerMemoryMB for workers and ServerMemoryMB for the
// others, DefaultMemoryMB when not given. A local job passes it on too
// (conf.Job.TaskMemoryMB), for a task to size what it keeps in memory.
func (s JobSpec) MemoryMB(role conf.Role) int {
	return byRole(role, s.WorkerMemoryMB, s.ServerMemoryMB, DefaultMemoryMB)
}

// Cores is the number of cores of role's YARN containers: WorkerCores for
// workers and ServerCores for the others, DefaultCores when not given.
func (s JobSpec) Cores(role conf.Role) int {
	return byRole(role, s.WorkerCores, s.ServerCores, DefaultCores)
}

// byRole is worker for a worker, server for the other roles, def when
// that is not positive (not given).
func byRole(role conf.Role, worker, server, def int) int {
	v := server
	if role == conf.RoleWorker {
		v = worker
	}
	if v <= 0 {
		return def
	}
	return v
}

// HasScheduler reports whether s's job runs a scheduler: with servers,
// or without them when Collective.
func (s JobSpec) HasScheduler() bool { return s.NumServers > 0 || s.Collective }

// checkpointWriters is the number of tasks that write a checkpoint's
// files, which its manifest records as its servers: the servers, or in a
// collective job the one worker (rank 0) that writes them.
func (s JobSpec) checkpointWriters() int {
	if s.NumServers == 0 {
		return 1
	}
	return s.NumServers
}

// splitSize is s's shard size.
func (s JobSpec) splitSize() int64 {
	if s.SplitSize == 0 {
		return DefaultSplitSize
	}
	return s.SplitSize
}

// checkpointKeep is how many committed checkpoints s keeps.
func (s JobSpec) checkpointKeep() int {
	if s.CheckpointKeep < 1 {
		return DefaultCheckpointKeep
	}
	return s.CheckpointKeep
}

// Task is one role and rank of a job. A task runs as one process (or
// container) at a time; each run is an attempt.
type Task struct {
	Role conf.Role
	// Rank numbers the tasks of a role from 0; the scheduler's is 0.
	Rank int
}

func (t Task) String() string { return fmt.Sprintf("%s %d", t.Role, t.Rank) }

// Tasks lists spec's tasks: the scheduler and servers first, then the
// workers.
func Tasks(spec JobSpec) []Task {
	var ts []Task
	if spec.HasScheduler() {
		ts = append(ts, Task{Role: conf.RoleScheduler})
		for r := 0; r < spec.NumServers; r++ {
			ts = append(ts, Task{Role: conf.RoleServer, Rank: r})
		}
	}
	for r := 0; r < spec.NumWorkers; r++ {
		ts = append(ts, Task{Role: conf.RoleWorker, Rank: r})
	}
	return ts
}

// TaskResult is how one task ended.
type TaskResult struct {
	Role     conf.Role
	Rank     int
	Attempts int
	// ExitCode of the last attempt; -1 when killed by a signal.
	ExitCode int
	// NotStarted marks a task whose last attempt never ran: the job
	// ended before its turn, or the cluster could not start it. Its
	// ExitCode says nothing then.
	NotStarted bool
	// Retired marks a server or worker the job no longer had when it
	// ended: one a switch to fewer left out, or one started to join that
	// was not needed after all. Its exit is not the job's.
	Retired bool
}

// Result is how a job ended.
type Result struct {
	State tracker.JobState
	Tasks []TaskResult
	Wall  time.Duration
	// Output is where the model is (empty without one, or unless the job
	// succeeded).
	Output string
	// Status is the tracker's last snapshot (epochs, metrics).
	Status tracker.Status
	// Restarts counts the times the whole job started again; ResumedFrom
	// is the checkpoint the last run started from ("" for scratch).
	Restarts    int
	ResumedFrom string
}
