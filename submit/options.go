package submit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
)

// progName is the command's name in messages and help.
const progName = "ps-submit"

// envSubmitCluster is dmlc-submit's default for --cluster.
const envSubmitCluster = "DMLC_SUBMIT_CLUSTER"

// The clusters --cluster accepts.
const (
	ClusterLocal = "local"
	ClusterYARN  = "yarn"
)

// Streams are the standard streams of a command.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Options is everything ps-submit is told: its flags, the command, and its
// dependencies. NewOptions fills in the defaults, Complete parses the
// flags and derives the rest, Validate checks, Run runs.
//
// Options is not safe for concurrent use.
type Options struct {
	// Cluster is where the job runs: ClusterLocal or ClusterYARN
	// (--cluster). Empty until Complete, which takes $DMLC_SUBMIT_CLUSTER
	// when the flag is not given, else ClusterLocal.
	Cluster string
	// NumWorkers (--num-workers, -n) is required and at least 1.
	// NumServers (--num-servers, -s) defaults to 0. Given, even as 0, it
	// makes a psnode job with a scheduler (0: a collective job,
	// job.JobSpec.Collective); not given, the command runs as NumWorkers
	// plain workers, with no scheduler.
	NumWorkers, NumServers int
	// Replicas (--replicas) is how many other servers keep a copy of each
	// server's tables, so that a server that dies is replaced alone,
	// without rolling the job back. Not given: 1 with two servers or
	// more, else 0.
	Replicas int
	// WorkerCores and ServerCores (--worker-cores, --server-cores) are
	// cores per process on YARN; default 1.
	WorkerCores, ServerCores int
	// WorkerMemory and ServerMemory (--worker-memory, --server-memory) are
	// memory per process as given: "512m", "2g", or a bare number of MB;
	// default "1g". Complete converts them into WorkerMemoryMB and
	// ServerMemoryMB.
	WorkerMemory, ServerMemory string
	// JobName (--jobname); Complete defaults it to
	// "spindle:<base name of the command>".
	JobName string
	// Queue is the YARN queue (--queue); default "default".
	Queue string
	// Principal and Keytab (--principal, --keytab) log ps-submit in to a
	// Kerberos-secured cluster from a keytab; without them it uses the
	// ticket cache kinit left ($KRB5CCNAME).
	Principal, Keytab string
	// AMMemory (--am-memory, default "512m") and AMCores (--am-cores,
	// default 1) size the ApplicationMaster's container; Complete
	// converts AMMemory into AMMemoryMB.
	AMMemory string
	AMCores  int
	// MaxAppAttempts (--max-app-attempts, default 1) is how many times
	// YARN may start the ApplicationMaster. A new attempt starts every
	// task again, from the job's newest checkpoint when it has one.
	MaxAppAttempts int
	// Priority (--priority) is the YARN application priority; default 0.
	Priority int
	// Tags (--tags) are the YARN application tags, comma-separated as
	// given; Complete splits them into TagList.
	Tags string
	// AllocationTimeout (--allocation-timeout, default "10m") is how long
	// a task may wait for a container before the job fails; Complete
	// parses it into AllocationTimeoutDuration.
	AllocationTimeout string
	// LogLevel is ps-submit's and the tasks' log level (--log-level):
	// debug, info (default), warn or error, in any case. Complete turns it
	// into logrus's name for the level.
	LogLevel string
	// Env (--env), ServerEnv (--server-env) and WorkerEnv (--worker-env)
	// are KEY=VALUE settings for every task, for the servers and the
	// scheduler, and for the workers.
	Env, ServerEnv, WorkerEnv []string
	// Files (--files) are local files the command needs; each must exist.
	Files []string
	// Archives (--archives) are local .tar.gz, .tgz or .zip files, as
	// PATH or PATH#NAME, each unpacked into a directory of the tasks'
	// working directory (job.JobSpec.Archives); each must exist.
	Archives []string
	// BlacklistAfter (--blacklist-after) is how many launches may fail on
	// one node before the job stops using it (YARN's blacklist); 0 means
	// never; default 3.
	BlacklistAfter int
	// MaxAttempts (--max-attempts) is how many times each task may run in
	// all, the first attempt included; default 3.
	MaxAttempts int
	// Inputs (--input) are paths or globs of the training data.
	Inputs []string
	// SplitSize (--split-size) is the target shard size as given: "64m",
	// "1g", "512k" or a bare number of bytes; default "8m". Complete
	// converts it into SplitSizeBytes.
	SplitSize string
	// Output (--output) is where the servers write the model; empty: no
	// model.
	Output string
	// CheckpointDir (--checkpoint-dir) and CheckpointInterval
	// (--checkpoint-interval: a number of epochs such as "2", or a
	// duration such as "10m") configure checkpoints.
	CheckpointDir, CheckpointInterval string
	// Overwrite (--overwrite) replaces an existing output; Resume
	// (--resume) continues from the newest checkpoint; CheckpointKeep
	// (--checkpoint-keep) is how many committed checkpoints are kept.
	Overwrite, Resume bool
	CheckpointKeep    int

	// DryRun (--dry-run) prints the resolved job and the tasks it would
	// start instead of starting them.
	DryRun bool

	// Insecure (--insecure) turns ZeroMQ CURVE off between the job's
	// nodes (job.JobSpec.Insecure), for benchmarking.
	Insecure bool
	// StallTimeout (--stall-timeout, default "10m"; "0" waits for ever)
	// bounds how long the others wait for a server or worker that holds
	// them up while alive (job.JobSpec.StallTimeout). Complete parses it
	// into StallTimeoutDuration.
	StallTimeout         string
	StallTimeoutDuration time.Duration
	// Help (--help, -h) asks for the help text.
	Help bool
	// Detach (--detach) returns once the YARN application is submitted,
	// after printing its id, instead of following it.
	Detach bool
	// CPUBind (--cpu-bind) says whether a local job's servers and workers
	// are each bound to one CPU: "auto" (default), "none" or "cores"
	// (local.CPUBind).
	CPUBind string
	// JobsDir (--jobs-dir) is where local jobs keep their directories
	// (output of every task, status); "" means $HOME/.spindle/jobs.
	JobsDir string
	// Command is the program to run and its arguments: what follows "--",
	// or the arguments from the first one that is not a flag.
	Command []string

	// Derived by Complete.
	WorkerMemoryMB, ServerMemoryMB int
	SplitSizeBytes                 int64
	AMMemoryMB                     int
	TagList                        []string
	AllocationTimeoutDuration      time.Duration

	// Streams are the command's standard streams.
	Streams
	// LookupEnv reads ps-submit's own environment variable
	// (DMLC_SUBMIT_CLUSTER); os.LookupEnv in production.
	LookupEnv func(key string) (string, bool)
	// Environ is the environment the tasks inherit (os.Environ()).
	Environ []string
	// Planner cuts the inputs into shards; nil means the job cannot have
	// --input (the launcher then fails). Set it with WithPlanner.
	Planner tracker.Planner
	// IsTerminal tells whether a stream is a terminal, which switches the
	// progress display to one line redrawn in place. Default: a check of
	// *os.File for a character device.
	IsTerminal func(io.Writer) bool

	// given holds the canonical names of the flags on the command line.
	given map[string]bool
	// clusterFromEnv is set when Cluster came from DMLC_SUBMIT_CLUSTER.
	clusterFromEnv bool
	// badInts holds, by flag name, the integer flags' values that did not
	// parse, for Validate to report.
	badInts map[string]error

	now       func() time.Time
	runLocal  func(context.Context, job.JobSpec, local.Options) (job.Result, error)
	planLocal func(job.JobSpec, local.Options) ([]job.TaskPlan, error)
}

// Option sets an optional dependency of Options.
type Option func(*Options)

// WithPlanner sets the planner that cuts --input into shards.
func WithPlanner(p tracker.Planner) Option {
	return func(o *Options) { o.Planner = p }
}

// WithIsTerminal replaces the check of whether a stream is a terminal.
func WithIsTerminal(f func(io.Writer) bool) Option {
	return func(o *Options) { o.IsTerminal = f }
}

// NewOptions returns Options with every flag at its default, the given
// streams, the lookup for ps-submit's own environment variables and the
// environment the tasks inherit.
func NewOptions(streams Streams, lookup func(string) (string, bool), environ []string, opts ...Option) *Options {
	if streams.In == nil {
		streams.In = strings.NewReader("")
	}
	if streams.Out == nil {
		streams.Out = io.Discard
	}
	if streams.Err == nil {
		streams.Err = io.Discard
	}
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	o := &Options{
		WorkerCores:       1,
		ServerCores:       1,
		WorkerMemory:      "1g",
		ServerMemory:      "1g",
		Queue:             "default",
		AMMemory:          "512m",
		AMCores:           1,
		MaxAppAttempts:    1,
		AllocationTimeout: "10m",
		StallTimeout:      "10m",
		LogLevel:          "info",
		CPUBind:           local.CPUBindAuto.String(),
		MaxAttempts:       job.DefaultMaxAttempts,
		BlacklistAfter:    job.DefaultBlacklistAfter,
		CheckpointKeep:    job.DefaultCheckpointKeep,
		SplitSize:         "8m",
		Streams:           streams,
		LookupEnv:         lookup,
		Environ:           environ,
		IsTerminal:        isTerminal,
		now:               time.Now,
		runLocal:          local.Run,
		planLocal:         local.Plan,
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Complete parses args (flags, then the command) into o and fills in the
// derived values: the cluster from $DMLC_SUBMIT_CLUSTER, the job name,
// memory in MB, the split size in bytes. It fails only on what stops the
// parsing (an unknown flag, a flag without its value); bad values are left
// for Validate to report, all together.
func (o *Options) Complete(args []string) error {
	o.badInts = map[string]error{}
	fs := o.flagSet()
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[canonicalFlag(f.Name)] = true })
	o.Command = fs.Args()

	if !o.given["cluster"] {
		if v, ok := o.LookupEnv(envSubmitCluster); ok && strings.TrimSpace(v) != "" {
			o.Cluster, o.clusterFromEnv = v, true
		} else if o.Cluster == "" {
			o.Cluster = ClusterLocal
		}
	}
	o.Cluster = strings.ToLower(strings.TrimSpace(o.Cluster))
	if lvl, err := parseLogLevel(o.LogLevel); err == nil {
		o.LogLevel = lvl.String()
	}
	if o.JobName == "" && len(o.Command) > 0 && o.Command[0] != "" {
		o.JobName = "spindle:" + filepath.Base(o.Command[0])
	}
	o.WorkerMemoryMB, _ = parseMemoryMB(o.WorkerMemory)
	o.ServerMemoryMB, _ = parseMemoryMB(o.ServerMemory)
	o.SplitSizeBytes, _ = parseSize(o.SplitSize)
	o.AMMemoryMB, _ = parseMemoryMB(o.AMMemory)
	o.TagList, _ = parseTags(o.Tags)
	o.AllocationTimeoutDuration, _ = parseTimeout(o.AllocationTimeout)
	o.StallTimeoutDuration, _ = parseStallTimeout(o.StallTimeout)
	return nil
}

// Validate reports every problem of o at once (errors.Join), each naming
// its flag. It only checks; Complete fills in.
func (o *Options) Validate() error {
	var errs []error

	switch o.Cluster {
	case ClusterLocal, ClusterYARN:
	default:
		from := ""
		if o.clusterFromEnv {
			from = " (from $" + envSubmitCluster + ")"
		}
		errs = append(errs, fmt.Errorf("--cluster %q%s: want %s or %s", o.Cluster, from, ClusterLocal, ClusterYARN))
	}
	for _, c := range []struct {
		name string
		n    int
		min  int
	}{
		{"num-workers", o.NumWorkers, 1}, {"num-servers", o.NumServers, 0}, {"replicas", o.Replicas, 0}, {"max-attempts", o.MaxAttempts, 1},
		{"worker-cores", o.WorkerCores, 1}, {"server-cores", o.ServerCores, 1},
		{"am-cores", o.AMCores, 1}, {"max-app-attempts", o.MaxAppAttempts, 1}, {"priority", o.Priority, 0},
		{"blacklist-after", o.BlacklistAfter, 0},
	} {
		switch {
		case o.badInts[c.name] != nil:
			errs = append(errs, o.badInts[c.name])
		case c.name == "num-workers" && c.n == 0 && !o.given[c.name]:
			errs = append(errs, errors.New("--num-workers (-n) is required"))
		case c.n < c.min && c.min == 0:
			errs = append(errs, fmt.Errorf("--%s %d: must not be negative", c.name, c.n))
		case c.n < c.min:
			errs = append(errs, fmt.Errorf("--%s %d: need at least %d", c.name, c.n, c.min))
		}
	}
	for _, m := range []struct{ name, v string }{{"worker-memory", o.WorkerMemory}, {"server-memory", o.ServerMemory}, {"am-memory", o.AMMemory}} {
		if _, err := parseMemoryMB(m.v); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", m.name, m.v, err))
		}
	}
	if _, err := parseSize(o.SplitSize); err != nil {
		errs = append(errs, fmt.Errorf("--split-size %q: %w", o.SplitSize, err))
	}
	if _, err := parseTags(o.Tags); err != nil {
		errs = append(errs, fmt.Errorf("--tags %q: %w", o.Tags, err))
	}
	if _, err := parseTimeout(o.AllocationTimeout); err != nil {
		errs = append(errs, fmt.Errorf("--allocation-timeout %q: %w", o.AllocationTimeout, err))
	}
	if _, err := parseStallTimeout(o.StallTimeout); err != nil {
		errs = append(errs, fmt.Errorf("--stall-timeout %q: %w", o.StallTimeout, err))
	}
	if strings.TrimSpace(o.Queue) == "" {
		errs = append(errs, errors.New("--queue: must not be empty"))
	}
	if (o.Principal == "") != (o.Keytab == "") {
		errs = append(errs, errors.New("--principal and --keytab go together"))
	}
	if _, err := local.ParseCPUBind(o.CPUBind); err != nil {
		errs = append(errs, fmt.Errorf("--cpu-bind %q: %w", o.CPUBind, err))
	} else if o.given["cpu-bind"] && o.Cluster == ClusterYARN {
		errs = append(errs, errors.New("--cpu-bind: only with --cluster local (on YARN the NodeManager places containers on CPUs)"))
	}
	if o.Principal != "" && o.Cluster != ClusterYARN {
		errs = append(errs, errors.New("--principal and --keytab: only with --cluster yarn (a local job's tasks log in from the ticket cache)"))
	}
	if o.Keytab != "" {
		if _, err := os.Stat(o.Keytab); err != nil {
			errs = append(errs, fmt.Errorf("--keytab %s: %w", o.Keytab, err))
		}
	}
	if _, err := parseLogLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: %w", o.LogLevel, err))
	}
	for _, l := range []struct {
		name string
		kvs  []string
	}{{"env", o.Env}, {"server-env", o.ServerEnv}, {"worker-env", o.WorkerEnv}} {
		for _, kv := range l.kvs {
			if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t\n") {
				errs = append(errs, fmt.Errorf("--%s %q: want KEY=VALUE", l.name, redactSetting(kv)))
			}
		}
	}
	for _, f := range o.Files {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("--files %q: no such file", f))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("--files %q: %w", f, err))
		}
	}
	for _, a := range o.Archives {
		local, _, err := job.ArchiveName(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("--archives %q: want a .tar.gz, .tgz or .zip file, optionally #NAME (a directory name)", a))
			continue
		}
		if _, err := os.Stat(local); errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("--archives %q: no such file", local))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("--archives %q: %w", local, err))
		}
	}
	for _, in := range o.Inputs {
		if strings.TrimSpace(in) == "" {
			errs = append(errs, errors.New("--input: empty path"))
		}
	}
	if o.CheckpointKeep < 1 {
		errs = append(errs, fmt.Errorf("--checkpoint-keep %d: need at least 1", o.CheckpointKeep))
	}
	if o.Detach && o.Cluster != ClusterYARN {
		errs = append(errs, errors.New("--detach: only with --cluster yarn"))
	}
	if o.Resume && o.CheckpointDir == "" {
		errs = append(errs, errors.New("--resume: needs --checkpoint-dir"))
	}
	if o.CheckpointInterval != "" {
		if err := checkInterval(o.CheckpointInterval); err != nil {
			errs = append(errs, fmt.Errorf("--checkpoint-interval %q: %w", o.CheckpointInterval, err))
		}
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		errs = append(errs, errors.New("no command to run: give it after --"))
	}
	if len(errs) == 0 {
		// What the launcher itself requires, should it ask for more.
		// The job names its fields; ps-submit names its flags.
		if err := o.JobSpec().Validate(); err != nil {
			errs = append(errs, errors.New(withFlags(err)))
		}
	}
	if o.Cluster == ClusterYARN {
		if err := yarnclient.CheckSpec(o.JobSpec()); err != nil {
			errs = append(errs, errors.New(withFlags(err)))
		}
	}
	return errors.Join(errs...)
}

// replicas is --replicas, or its default: 1 with two servers or more.
func (o *Options) replicas() int {
	if o.given["replicas"] || o.NumServers < 2 {
		return o.Replicas
	}
	return 1
}

// JobSpec returns the job o describes, for the launchers.
func (o *Options) JobSpec() job.JobSpec {
	return job.JobSpec{
		Name:               o.JobName,
		Command:            o.Command,
		NumWorkers:         o.NumWorkers,
		NumServers:         o.NumServers,
		Collective:         o.NumServers == 0 && o.given["num-servers"],
		Replicas:           o.replicas(),
		Env:                o.Env,
		ServerEnv:          o.ServerEnv,
		WorkerEnv:          o.WorkerEnv,
		Files:              o.Files,
		Archives:           o.Archives,
		BlacklistAfter:     o.BlacklistAfter,
		MaxAttempts:        o.MaxAttempts,
		Inputs:             o.Inputs,
		SplitSize:          o.SplitSizeBytes,
		Output:             o.Output,
		Overwrite:          o.Overwrite,
		CheckpointDir:      o.CheckpointDir,
		CheckpointInterval: o.CheckpointInterval,
		CheckpointKeep:     o.CheckpointKeep,
		Resume:             o.Resume,
		WorkerCores:        o.WorkerCores,
		ServerCores:        o.ServerCores,
		WorkerMemoryMB:     o.WorkerMemoryMB,
		ServerMemoryMB:     o.ServerMemoryMB,
		Queue:              o.Queue,
		LogLevel:           o.LogLevel,
		Insecure:           o.Insecure,
		StallTimeout:       o.stallTimeout(),
	}
}

// stallTimeout is job.JobSpec.StallTimeout for --stall-timeout: 0 there
// waits for ever.
func (o *Options) stallTimeout() time.Duration {
	if o.StallTimeoutDuration == 0 {
		return -1
	}
	return o.StallTimeoutDuration
}

// YARN's limits on application tags.
const (
	maxTags      = 10
	maxTagLength = 100
)

// parseTags splits comma-separated YARN application tags, trimming
// spaces and dropping empty ones; YARN allows at most 10 tags of at most
// 100 ASCII characters.
func parseTags(s string) ([]string, error) {
	var tags []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if len(t) > maxTagLength {
			return nil, fmt.Errorf("tag %q is longer than %d characters", t, maxTagLength)
		}
		for _, r := range t {
			if r < 0x20 || r > 0x7e {
				return nil, fmt.Errorf("tag %q: only printable ASCII characters", t)
			}
		}
		tags = append(tags, t)
	}
	if len(tags) > maxTags {
		return nil, fmt.Errorf("%d tags: at most %d", len(tags), maxTags)
	}
	return tags, nil
}

// parseTimeout parses a positive duration with its unit ("30s", "10m").
// parseStallTimeout parses --stall-timeout: a duration, 0 for ever.
func parseStallTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, errors.New("want a duration such as 10m or 1h, or 0 to wait for ever")
	case d < 0:
		return 0, errors.New("must not be negative (0 waits for ever)")
	}
	return d, nil
}

func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("want a duration such as 30s or 10m")
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// parseMemoryMB parses a memory size as dmlc-submit does ("512m", "2g"),
// in any case, with an optional "b" ("2gb"); a bare number is MB.
func parseMemoryMB(s string) (int, error) {
	n, unit, err := splitNumber(s)
	if err != nil {
		return 0, errors.New("want a size such as 512m, 2g or 1024 (MB)")
	}
	var mb int64
	switch unit {
	case "", "m", "mb":
		mb = n
	case "g", "gb":
		if n > (1<<31-1)/1024 {
			return 0, errors.New("too large")
		}
		mb = n * 1024
	default:
		return 0, errors.New("want a size such as 512m, 2g or 1024 (MB)")
	}
	if mb < 1 {
		return 0, errors.New("need at least 1m")
	}
	if mb > 1<<31-1 {
		return 0, errors.New("too large")
	}
	return int(mb), nil
}

// parseSize parses a byte size: "512k", "8m", "1g" (binary units, any
// case, optional "b"), or a bare number of bytes.
func parseSize(s string) (int64, error) {
	n, unit, err := splitNumber(s)
	if err != nil {
		return 0, errors.New("want a size such as 512k, 8m or 1g")
	}
	var mult int64
	switch unit {
	case "", "b":
		mult = 1
	case "k", "kb":
		mult = 1 << 10
	case "m", "mb":
		mult = 1 << 20
	case "g", "gb":
		mult = 1 << 30
	default:
		return 0, errors.New("want a size such as 512k, 8m or 1g")
	}
	if n < 1 {
		return 0, errors.New("must be positive")
	}
	if n > (1<<63-1)/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}

// splitNumber splits "512M" into 512 and "m".
func splitNumber(s string) (int64, string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, "", errors.New("no number")
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, "", err
	}
	return n, s[i:], nil
}

// checkInterval checks a checkpoint interval: a whole number of epochs
// ("2") or a positive duration with its unit ("10m", "1h30m").
func checkInterval(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return errors.New("need at least 1 epoch")
		}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a number of epochs (2) or a duration (10m, 1h)")
	}
	if d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

// logLevels are the levels --log-level accepts.
var logLevels = map[string]logrus.Level{
	"debug":   logrus.DebugLevel,
	"info":    logrus.InfoLevel,
	"warn":    logrus.WarnLevel,
	"warning": logrus.WarnLevel,
	"error":   logrus.ErrorLevel,
}

func parseLogLevel(s string) (logrus.Level, error) {
	if l, ok := logLevels[strings.ToLower(strings.TrimSpace(s))]; ok {
		return l, nil
	}
	return 0, errors.New("want debug, info, warn or error")
}
