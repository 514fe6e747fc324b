package submit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// Main is ps-submit: it parses args, runs the job and returns the exit
// status: 0 if the job succeeded (or for --help and --dry-run), 1 if it
// failed or could not start, 2 on a usage error. lookup reads ps-submit's
// own environment variables; environ is what the tasks inherit.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer,
	lookup func(string) (string, bool), environ []string, opts ...Option) int {
	if len(args) > 0 && args[0] == yarnclient.AMMode {
		// Inside YARN, as the job's ApplicationMaster.
		return yarnclient.AMMain(ctx, args[1:], stderr, lookup)
	}
	if isAppCommand(args) {
		switch args[0] {
		case cmdKill:
			return runKillCommand(ctx, args, stdout, stderr, lookup)
		case cmdScale:
			return runScaleCommand(ctx, args, stdout, stderr, lookup)
		}
		return runJobCommand(ctx, args, stdout, stderr, lookup)
	}
	o := NewOptions(Streams{In: stdin, Out: stdout, Err: stderr}, lookup, environ, opts...)
	err := o.Complete(args)
	if o.Help {
		if err := writeHelp(o.Out); err != nil {
			fmt.Fprintf(o.Err, "%s: %v\n", progName, err)
			return 1
		}
		return 0
	}
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		writeUsageError(o.Err, err)
		return 2
	}
	if err := o.Run(ctx); err != nil {
		var rep reportedError
		if !errors.As(err, &rep) {
			writeLines(o.Err, progName+": ", withFlags(err))
		}
		return 1
	}
	return 0
}

// writeUsageError writes one line per problem and where to find the usage.
func writeUsageError(w io.Writer, err error) {
	writeLines(w, progName+": ", withFlags(err))
	fmt.Fprintf(w, "run '%s --help' for usage\n", progName)
}

// writeLines writes text, its first line and every line that starts a new
// error (each line of an errors.Join) after prefix.
func writeLines(w io.Writer, prefix, text string) {
	bw := bufio.NewWriter(w)
	for i, line := range strings.Split(text, "\n") {
		if i == 0 || !strings.HasPrefix(line, " ") {
			bw.WriteString(prefix)
		}
		bw.WriteString(line)
		bw.WriteString("\n")
	}
	_ = bw.Flush()
}

// reportedError is an error Run has already written to the standard
// error, with the job's summary.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }
func (e reportedError) Unwrap() error { return e.err }

// Run runs the job described by a completed, valid o until it ends, or,
// with --dry-run, prints it. It returns nil only if the job succeeded.
func (o *Options) Run(ctx context.Context) error {
	if o.DryRun {
		return o.dryRun()
	}
	switch o.Cluster {
	case ClusterLocal:
		return o.runLocalJob(ctx)
	case ClusterYARN:
		return o.runYARNJob(ctx)
	default:
		return fmt.Errorf("--cluster %q: want %s or %s", o.Cluster, ClusterLocal, ClusterYARN)
	}
}

// runYARNJob submits the job to YARN and follows it, printing the
// application's state changes and tracking URL, and at the end the
// summary. While the application runs, the job's status, asked of the
// ApplicationMaster's tracker, is shown as for a local job. With
// --detach it returns once the application is submitted, having printed
// its id (on the standard output) and its tracking URL if known.
func (o *Options) runYARNJob(ctx context.Context) error {
	spec := o.JobSpec()
	p := newProgress(o.Err, o.IsTerminal(o.Err), o.now)
	errw := p.around(o.Err)
	level, err := parseLogLevel(o.LogLevel)
	if err != nil {
		level = logrus.InfoLevel
	}
	logger := logrus.New()
	logger.SetOutput(errw)
	logger.SetLevel(level)
	log := logrus.NewEntry(logger).WithField("job", spec.Name)
	urlShown := false
	yopts := yarnclient.Options{
		Lookup:            o.LookupEnv,
		Log:               log,
		Detach:            o.Detach,
		AMMemoryMB:        o.AMMemoryMB,
		AMCores:           o.AMCores,
		AMMaxAttempts:     o.MaxAppAttempts,
		Priority:          o.Priority,
		Tags:              o.TagList,
		AllocationTimeout: o.AllocationTimeoutDuration,
		Login:             yarnclient.Login{Principal: o.Principal, Keytab: o.Keytab},
		OnReport: func(r yarn.ApplicationReport) {
			fmt.Fprintln(errw, reportLine(r))
			// The URL is the AM's once it runs; a detached client shows
			// whatever YARN has.
			if u := r.TrackingURL; u != "" && !urlShown && (r.State == yarn.AppRunning || o.Detach) {
				urlShown = true
				fmt.Fprintf(errw, "%s: tracking URL %s\n", progName, u)
			}
		},
		OnStatus: p.update,
	}
	var app yarn.ApplicationID
	yopts.OnSubmitted = func(id yarn.ApplicationID) {
		app = id
		if o.Detach {
			fmt.Fprintln(o.Out, id)
			fmt.Fprintf(o.Err, "%s: application %s submitted; follow it with '%s status %s', stop it with '%s kill %s'\n",
				progName, id, progName, id, progName, id)
		}
	}
	res, err := yarnclient.Submit(ctx, spec, yopts)
	p.finish()
	if o.Detach && err == nil {
		return nil
	}
	if err != nil {
		writeLines(o.Err, progName+": ", withFlags(err))
		if app != (yarn.ApplicationID{}) {
			fmt.Fprintf(o.Err, "%s: the tasks' output: %s logs %s [--task worker:0]\n", progName, progName, app)
		}
	}
	_ = writeSummary(o.Err, spec.Name, res)
	switch {
	case err != nil:
		return reportedError{err}
	case res.State != tracker.Succeeded:
		return fmt.Errorf("job ended %s", res.State)
	}
	return nil
}

// reportLine is the line ps-submit prints for a report of the
// application it follows: its state, the final status once it ended
// ("FINISHED SUCCEEDED", but "FAILED" once), and the attempt of the
// ApplicationMaster after the first.
func reportLine(r yarn.ApplicationReport) string {
	line := fmt.Sprintf("%s: application %s %s", progName, r.ID, appState(r))
	if n := r.CurrentAttempt.Attempt; n > 1 {
		line += fmt.Sprintf(" (attempt %d of the ApplicationMaster)", n)
	}
	return line
}

// appState is r's state, and its final status once it ended when that
// says more: "RUNNING", "FINISHED SUCCEEDED", "FINISHED FAILED", "KILLED".
func appState(r yarn.ApplicationReport) string {
	if f := r.FinalStatus.String(); r.State.Terminal() && f != r.State.String() {
		return r.State.String() + " " + f
	}
	return r.State.String()
}

// runLocalJob runs the job on this machine, showing progress and, at the
// end, the summary.
func (o *Options) runLocalJob(ctx context.Context) error {
	spec := o.JobSpec()
	p := newProgress(o.Err, o.IsTerminal(o.Err), o.now)
	stdout := o.Out
	if p.tty && o.IsTerminal(o.Out) {
		// The tasks' lines and the status line share the terminal.
		stdout = p.around(o.Out)
	}
	level, err := parseLogLevel(o.LogLevel)
	if err != nil {
		level = logrus.InfoLevel
	}
	logger := logrus.New()
	logger.SetOutput(p.around(o.Err))
	logger.SetLevel(level)
	log := logrus.NewEntry(logger).WithField("job", spec.Name)

	// Inputs and the output may be local paths or HDFS URIs, reached
	// with the Hadoop configuration of this machine.
	resolver, err := dfs.DefaultResolver(o.LookupEnv)
	if err != nil {
		p.finish()
		return err
	}
	defer resolver.Close()
	planner := o.Planner
	if planner == nil {
		// Workers get the shards stored on their host first.
		planner = tracker.WithLocations(tracker.InputPlanner(resolver), resolver.Locator().Blocks)
	}
	jobsDir := o.JobsDir
	if jobsDir == "" {
		jobsDir = defaultJobsDir(o.LookupEnv)
	}
	id := newLocalJobID(o.now())
	pruneLocalJobs(jobsDir, keepLocalJobs, log)
	res, err := o.runLocal(ctx, spec, local.Options{
		Environ:  o.Environ,
		Stdout:   stdout,
		Log:      log,
		Planner:  planner,
		Resolver: resolver,
		OnStatus: p.update,
		Dir:      filepath.Join(jobsDir, id),
		CPUBind:  o.cpuBind(),
		OnStart: func(info local.Info) {
			fmt.Fprintf(p.around(o.Err), "%s: job %s: status page %s; output of every task in %s ('%s logs %s', '%s status %s')\n",
				progName, id, info.PageURL(), filepath.Join(info.Dir, local.LogsDir), progName, id, progName, id)
		},
	})
	p.finish()
	if err != nil {
		writeLines(o.Err, progName+": ", withFlags(err))
	}
	_ = writeSummary(o.Err, spec.Name, res)
	switch {
	case err != nil:
		return reportedError{err}
	case res.State != tracker.Succeeded:
		msg := fmt.Sprintf("job ended %s", res.State)
		if d := res.Status.Diagnostics; d != "" {
			msg += ": " + d
		}
		return errors.New(msg)
	}
	return nil
}

// cpuBind is --cpu-bind's value, which Validate has checked.
func (o *Options) cpuBind() local.CPUBind {
	b, _ := local.ParseCPUBind(o.CPUBind)
	return b
}

// dryRun prints the resolved job and the tasks it would start.
func (o *Options) dryRun() error {
	bw := bufio.NewWriter(o.Out)
	o.writeJob(bw)
	var err error
	switch o.Cluster {
	case ClusterLocal:
		var plan []job.TaskPlan
		if plan, err = o.planLocal(o.JobSpec(), local.Options{Environ: o.Environ, CPUBind: o.cpuBind()}); err == nil {
			writePlan(bw, plan)
		}
	case ClusterYARN:
		err = o.dryRunYARN(bw)
	default:
		err = fmt.Errorf("--cluster %q: want %s or %s", o.Cluster, ClusterLocal, ClusterYARN)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// writeJob writes every option of the resolved job, one per line, named as
// its flag; lists take a line per item.
func (o *Options) writeJob(w *bufio.Writer) {
	item := func(name, value string) { fmt.Fprintf(w, "  %-20s %s\n", name, value) }
	opt := func(name, value string) {
		if value == "" {
			value = "(none)"
		}
		item(name, value)
	}
	list := func(name string, values []string, redact bool) {
		if len(values) == 0 {
			item(name, "(none)")
		}
		for i, v := range values {
			if redact {
				v = redactSetting(v)
			}
			if i > 0 {
				name = ""
			}
			item(name, v)
		}
	}
	fmt.Fprintf(w, "job %s\n", o.JobName)
	opt("cluster", o.Cluster)
	opt("command", shellJoin(o.Command))
	opt("num-workers", strconv.Itoa(o.NumWorkers))
	servers := strconv.Itoa(o.NumServers)
	if o.JobSpec().Collective {
		servers += " (collective: the workers meet at a scheduler)"
	}
	opt("num-servers", servers)
	opt("replicas", strconv.Itoa(o.JobSpec().Replicas))
	opt("max-attempts", strconv.Itoa(o.MaxAttempts))
	opt("log-level", o.LogLevel)
	list("input", o.Inputs, false)
	opt("split-size", fmt.Sprintf("%d bytes (%s)", o.SplitSizeBytes, o.SplitSize))
	opt("output", o.Output)
	opt("overwrite", strconv.FormatBool(o.Overwrite))
	opt("checkpoint-dir", o.CheckpointDir)
	opt("checkpoint-interval", o.CheckpointInterval)
	opt("checkpoint-keep", strconv.Itoa(o.CheckpointKeep))
	opt("resume", strconv.FormatBool(o.Resume))
	list("env", o.Env, true)
	list("server-env", o.ServerEnv, true)
	list("worker-env", o.WorkerEnv, true)
	list("files", o.Files, false)
	list("archives", o.Archives, false)
	opt("worker-cores", strconv.Itoa(o.WorkerCores))
	opt("worker-memory", fmt.Sprintf("%d MB", o.WorkerMemoryMB))
	opt("server-cores", strconv.Itoa(o.ServerCores))
	opt("server-memory", fmt.Sprintf("%d MB", o.ServerMemoryMB))
	opt("queue", o.Queue)
	opt("principal", o.Principal)
	opt("keytab", o.Keytab)
	opt("am-memory", fmt.Sprintf("%d MB", o.AMMemoryMB))
	opt("am-cores", strconv.Itoa(o.AMCores))
	opt("max-app-attempts", strconv.Itoa(o.MaxAppAttempts))
	opt("priority", strconv.Itoa(o.Priority))
	opt("tags", strings.Join(o.TagList, ","))
	opt("allocation-timeout", o.AllocationTimeoutDuration.String())
	stall := o.StallTimeoutDuration.String()
	if o.StallTimeoutDuration == 0 {
		stall = "0 (waits for ever)"
	}
	opt("stall-timeout", stall)
	opt("blacklist-after", strconv.Itoa(o.BlacklistAfter))
	opt("detach", strconv.FormatBool(o.Detach))
	opt("jobs-dir", o.JobsDir)
	opt("cpu-bind", o.CPUBind)
	opt("insecure", strconv.FormatBool(o.Insecure))
}

// writePlan writes each task: role, rank, command and the environment the
// launcher adds, sorted, secrets redacted.
func writePlan(w *bufio.Writer, plan []job.TaskPlan) {
	fmt.Fprintf(w, "\ntasks (%d), each with the inherited environment plus:\n", len(plan))
	for _, t := range plan {
		fmt.Fprintf(w, "\n%s %d\n", t.Role, t.Rank)
		fmt.Fprintf(w, "  command  %s\n", shellJoin(t.Command))
		if t.CPU >= 0 {
			fmt.Fprintf(w, "  cpu      %d\n", t.CPU)
		}
		env := make([]string, len(t.Env))
		for i, kv := range t.Env {
			env[i] = redactSetting(kv)
		}
		sort.Strings(env)
		for _, kv := range env {
			fmt.Fprintf(w, "  env      %s\n", kv)
		}
	}
}

// secretWords mark the keys whose values are never shown.
var secretWords = []string{"SECRET", "TOKEN", "PASSWORD", "PASSWD"}

// redactSetting hides the value of a KEY=VALUE setting whose key looks
// like a secret's.
func redactSetting(kv string) string {
	k, _, ok := strings.Cut(kv, "=")
	if !ok {
		return kv
	}
	up := strings.ToUpper(k)
	for _, s := range secretWords {
		if strings.Contains(up, s) {
			return k + "=<redacted>"
		}
	}
	return kv
}

// shellJoin quotes args for a POSIX shell, so that the printed command can
// be pasted back.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
