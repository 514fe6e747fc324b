package tracker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// JobSpec describes a job: what to run, how many of each role, and what
// the job reads and writes. ps-submit builds it from its flags.
type JobSpec struct {
	// Name is the job's name (--jobname); empty means derived from the
	// command.
	Name string
	// Command is the program and its arguments, run for every role.
	Command []string
	// NumWorkers (at least 1) and NumServers (0: the command runs as
	// NumWorkers plain workers, with no scheduler).
	NumWorkers, NumServers int
	// Env holds KEY=VALUE settings for every role; ServerEnv and
	// WorkerEnv add to or override them for one role (servers' also go to
	// the scheduler).
	Env, ServerEnv, WorkerEnv []string
	// Files are extra files the command needs in its working directory.
	Files []string
	// MaxAttempts is how many times a task may run in all, the first
	// included (--max-attempts); at least 1.
	MaxAttempts int
	// Inputs are paths or globs of the training data, cut into shards.
	Inputs []string
	// SplitSize is the target shard size in bytes; 0 means DefaultSplitSize.
	SplitSize int64
	// Output is where servers write the model; empty means no model.
	Output string
	// Overwrite lets an existing non-empty Output be replaced, and an
	// existing CheckpointDir be cleared; without it they are errors.
	Overwrite bool
	// Resume continues from the newest committed checkpoint in
	// CheckpointDir.
	Resume bool
	// CheckpointDir and CheckpointInterval configure checkpoints;
	// CheckpointKeep is how many committed ones are kept (0 means 3).
	CheckpointDir      string
	CheckpointInterval string
	CheckpointKeep     int
	// Resources, for YARN (memory in MB).
	WorkerCores, ServerCores       int
	WorkerMemoryMB, ServerMemoryMB int
	Queue                          string
	// LogLevel is the children's log level (logrus level name).
	LogLevel string
}

// DefaultSplitSize is the shard size when JobSpec.SplitSize is 0.
const DefaultSplitSize = 8 << 20

// Validate reports every problem of spec at once.
func (s JobSpec) Validate() error {
	var errs []error
	if len(s.Command) == 0 || s.Command[0] == "" {
		errs = append(errs, errors.New("no command to run (give it after --)"))
	}
	if s.NumWorkers < 1 {
		errs = append(errs, fmt.Errorf("--num-workers %d: need at least 1", s.NumWorkers))
	}
	if s.NumServers < 0 {
		errs = append(errs, fmt.Errorf("--num-servers %d: must not be negative", s.NumServers))
	}
	if s.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("--max-attempts %d: need at least 1", s.MaxAttempts))
	}
	if s.SplitSize < 0 {
		errs = append(errs, fmt.Errorf("split size %d: must not be negative", s.SplitSize))
	}
	for _, list := range [][]string{s.Env, s.ServerEnv, s.WorkerEnv} {
		for _, kv := range list {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				errs = append(errs, fmt.Errorf("environment setting %q: want KEY=VALUE", kv))
			}
		}
	}
	return errors.Join(errs...)
}

// TaskResult is how one task (a role and rank) ended.
type TaskResult struct {
	Role     string
	Rank     int
	Attempts int
	// ExitCode of the last attempt; -1 when killed by a signal.
	ExitCode int
}

// Result is how a job ended.
type Result struct {
	State JobState
	Tasks []TaskResult
	Wall  time.Duration
	// Output is where the model is (empty without one).
	Output string
	// Status is the tracker's last snapshot (epochs, metrics).
	Status Status
}

// LocalOptions are the dependencies of RunLocal.
type LocalOptions struct {
	// Environ is the environment the children inherit (os.Environ()).
	Environ []string
	// Stdout receives the children's output, each line prefixed with its
	// role and rank.
	Stdout io.Writer
	// Log receives the launcher's own messages.
	Log *logrus.Entry
	// Planner cuts the inputs into shards; nil means the job has no
	// inputs to shard.
	Planner Planner
	// Resolver reaches the output (local or HDFS) to check it before the
	// job and commit the model after; nil means local paths only.
	Resolver Resolver
	// OnStatus, when set, is called about once a second and at every
	// change of the processes with the job's status.
	OnStatus func(Status)
	// StopGrace is how long stopping children waits after SIGTERM before
	// SIGKILL; 0 means 5 s.
	StopGrace time.Duration
}

// Planner cuts a job's inputs into shards.
type Planner func(ctx context.Context, inputs []string, splitSize int64) ([]Shard, error)
