package tracker

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
)

// Role names, as in DMLC_ROLE.
const (
	RoleScheduler = "scheduler"
	RoleServer    = "server"
	RoleWorker    = "worker"
)

// TaskPlan is one process RunLocal starts: for --dry-run.
type TaskPlan struct {
	Role    string
	Rank    int
	Command []string
	// Env holds the settings the launcher adds to the inherited
	// environment, sorted, with the job secret redacted.
	Env []string
}

// redacted stands for secrets in plans and logs.
const redacted = "<redacted>"

// PlanLocal returns the processes RunLocal would start for spec, with
// placeholders for what is chosen at start (ports, the tracker's address)
// and the job secret redacted.
func PlanLocal(spec JobSpec) ([]TaskPlan, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l := &localJob{spec: spec, secret: redacted, rootPort: -1, trackerAddr: "127.0.0.1:<tracker-port>"}
	var out []TaskPlan
	for _, t := range l.newTasks() {
		env := l.taskEnv(t, onThisMachine, nil)
		for i, kv := range env {
			if strings.HasPrefix(kv, conf.EnvRootPort+"=-1") {
				env[i] = conf.EnvRootPort + "=<scheduler-port>"
			}
		}
		sort.Strings(env)
		out = append(out, TaskPlan{Role: t.role, Rank: t.rank, Command: spec.Command, Env: env})
	}
	return out, nil
}

// task is one role and rank of a job; it runs as one process at a time,
// restarted up to MaxAttempts times in all.
type task struct {
	role    string
	rank    int
	attempt int
	cmd     *exec.Cmd
	tail    *tailWriter
	running bool
	done    bool
	code    int
}

func (t *task) String() string { return fmt.Sprintf("%s %d", t.role, t.rank) }

type exitEvent struct {
	t       *task
	attempt int
	err     error
}

// localJob runs a job's processes on this machine.
type localJob struct {
	spec        JobSpec
	opts        LocalOptions
	state       *State
	secret      string
	rootPort    int
	trackerAddr string
	out         *lockedWriter
	tasks       []*task
	exits       chan exitEvent
	// files prepares the directories and says where the tasks start;
	// nil for a plan.
	files *jobFiles
}

// RunLocal runs spec on this machine: the tracker service in this
// process, and the scheduler, servers and workers as child processes of
// the command, each with the environment contract (DMLC_*, PS_*,
// SPINDLE_*) and a fresh job secret. A child that fails is restarted, up
// to MaxAttempts in all; past that every other child is stopped and the
// error names the role, rank, exit code and the child's last lines. When
// ctx is cancelled (SIGINT to ps-submit) every child is stopped. No child
// outlives RunLocal: each runs in its own process group, killed as a
// group, and dies with this process (PR_SET_PDEATHSIG).
func RunLocal(ctx context.Context, spec JobSpec, opts LocalOptions) (Result, error) {
	start := time.Now()
	if err := spec.Validate(); err != nil {
		return Result{State: Failed}, err
	}
	if opts.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		opts.Log = logrus.NewEntry(l)
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 5 * time.Second
	}
	if opts.Resolver == nil {
		opts.Resolver = localResolver()
	}
	// Everything that can be checked before a process starts is: the
	// inputs, then the output and checkpoint directories.
	shards, err := planShards(ctx, spec, opts.Planner)
	if err != nil {
		return Result{State: Failed}, err
	}
	secret, err := newSecret()
	if err != nil {
		return Result{State: Failed}, err
	}
	l := &localJob{spec: spec, opts: opts, secret: secret, out: &lockedWriter{w: opts.Stdout}}
	l.state = NewState(shards, start)
	l.files = &jobFiles{spec: spec, r: opts.Resolver, log: opts.Log}
	if err := l.files.prepare(ctx, l.state, false); err != nil {
		return Result{State: Failed}, err
	}
	svc, err := Serve(ctx, "127.0.0.1:0", l.state, secret, opts.Log)
	if err != nil {
		return Result{State: Failed}, err
	}
	defer svc.Close()
	l.trackerAddr = svc.Addr()
	if spec.NumServers > 0 {
		if l.rootPort, err = freePort(); err != nil {
			return Result{State: Failed}, fmt.Errorf("tracker: a port for the scheduler: %w", err)
		}
	}
	l.tasks = l.newTasks()
	l.exits = make(chan exitEvent, len(l.tasks))
	res, err := l.run(ctx)
	res.Wall = time.Since(start)
	res.Status = l.state.Status()
	return res, err
}

func newSecret() (string, error) {
	var b [24]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tracker: job secret: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// newTasks lists the job's tasks: the scheduler and servers first, so
// they are listening when workers come.
func (l *localJob) newTasks() []*task {
	var ts []*task
	if l.spec.NumServers > 0 {
		ts = append(ts, &task{role: RoleScheduler})
		for r := 0; r < l.spec.NumServers; r++ {
			ts = append(ts, &task{role: RoleServer, rank: r})
		}
	}
	for r := 0; r < l.spec.NumWorkers; r++ {
		ts = append(ts, &task{role: RoleWorker, rank: r})
	}
	return ts
}

// placement says where a task runs: the launcher's name for the cluster
// (DMLC_JOB_CLUSTER), the task's host (DMLC_NODE_HOST) and the
// scheduler's (DMLC_PS_ROOT_URI).
type placement struct {
	cluster, node, root string
}

// onThisMachine places every task of a local job.
var onThisMachine = placement{cluster: "local", node: "127.0.0.1", root: "127.0.0.1"}

// taskEnv is the environment of one attempt of t placed at pl: the
// inherited environment, the user's settings, then the contract, which
// wins.
func (l *localJob) taskEnv(t *task, pl placement, inherited []string) []string {
	env := append([]string(nil), inherited...)
	env = append(env, l.spec.Env...)
	if t.role == RoleWorker {
		env = append(env, l.spec.WorkerEnv...)
	} else {
		env = append(env, l.spec.ServerEnv...)
	}
	if strings.EqualFold(l.spec.LogLevel, "debug") && !hasKey(env, conf.EnvVerbose) {
		env = append(env, conf.EnvVerbose+"=1")
	}
	if l.spec.NumServers == 0 {
		// No parameter servers: plain workers, without a scheduler.
		env = append(env,
			conf.EnvRole+"="+RoleWorker,
			conf.EnvNumWorker+"="+strconv.Itoa(l.spec.NumWorkers),
			conf.EnvNumServer+"=0",
			conf.EnvTaskID+"="+strconv.Itoa(t.rank),
			conf.EnvWorkerID+"="+strconv.Itoa(t.rank),
			conf.EnvNumAttempt+"="+strconv.Itoa(t.attempt),
			conf.EnvJobCluster+"="+pl.cluster,
			conf.EnvNodeHost+"="+pl.node,
			conf.EnvJobSecret+"="+l.secret,
		)
	} else {
		p := conf.Default().PS
		p.Role = conf.Role(t.role)
		p.NumWorkers, p.NumServers = l.spec.NumWorkers, l.spec.NumServers
		p.RootURI, p.RootPort = pl.root, l.rootPort
		p.NodeHost = pl.node
		if t.role != RoleScheduler {
			p.TaskID = t.rank
		}
		p.NumAttempt = t.attempt
		p.JobCluster = pl.cluster
		p.JobSecret = l.secret
		env = append(env, p.Environ()...)
	}
	job := conf.Job{
		Name:               l.spec.Name,
		TrackerAddr:        l.trackerAddr,
		Output:             l.spec.Output,
		CheckpointDir:      l.spec.CheckpointDir,
		CheckpointInterval: l.spec.CheckpointInterval,
	}
	if l.files != nil {
		job.ResumeFrom, job.ResumeEpoch = l.files.from.uri, l.files.from.epoch
	}
	return append(env, job.Environ()...)
}

func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// start starts the current attempt of t.
func (l *localJob) start(t *task) error {
	cmd := exec.Command(l.spec.Command[0], l.spec.Command[1:]...)
	cmd.Env = l.taskEnv(t, onThisMachine, l.opts.Environ)
	// Its own process group, so the launcher can stop everything the
	// command started; and death with the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	prefix := fmt.Sprintf("[%s %d] ", t.role, t.rank)
	if t.attempt > 0 {
		prefix = fmt.Sprintf("[%s %d#%d] ", t.role, t.rank, t.attempt)
	}
	t.tail = newTailWriter(l.out, prefix, 20)
	cmd.Stdout, cmd.Stderr = t.tail, t.tail
	// A grandchild that keeps the output pipe open must not keep Wait
	// from returning.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.code = -1
		return fmt.Errorf("tracker: start %s: %s: %w", t, l.spec.Command[0], err)
	}
	t.cmd, t.running = cmd, true
	attempt := t.attempt
	go func() {
		err := cmd.Wait()
		t.tail.flush()
		l.exits <- exitEvent{t: t, attempt: attempt, err: err}
	}()
	l.opts.Log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt, "pid": cmd.Process.Pid}).Debug("task started")
	return nil
}

// run supervises the tasks until the job ends.
func (l *localJob) run(ctx context.Context) (Result, error) {
	for _, t := range l.tasks {
		if err := l.start(t); err != nil {
			l.stopAll()
			l.state.Finish(Failed, err.Error())
			return l.result(Failed), err
		}
	}
	l.report()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case ev := <-l.exits:
			if err := l.onExit(ctx, ev); err != nil {
				l.stopAll()
				l.state.Finish(Failed, err.Error())
				l.report()
				return l.result(Failed), err
			}
			l.report()
			if l.allDone() {
				if err := l.files.commitModel(ctx, l.state.Status()); err != nil {
					l.state.Finish(Failed, err.Error())
					return l.result(Failed), err
				}
				l.state.Finish(Succeeded, "")
				l.report()
				return l.result(Succeeded), nil
			}
		case <-ctx.Done():
			l.stopAll()
			err := fmt.Errorf("tracker: job stopped: %w", context.Cause(ctx))
			l.state.Finish(Killed, err.Error())
			l.report()
			return l.result(Killed), err
		case reason := <-l.state.KillRequests():
			l.stopAll()
			err := fmt.Errorf("%w: %s", ErrKillRequested, reason)
			l.state.Finish(Killed, err.Error())
			l.report()
			return l.result(Killed), err
		case <-tick.C:
			l.report()
		}
	}
}

// onExit handles a task's exit: done, restarted, or the job fails. The
// scheduler's or a server's failure, and a task's exit with
// conf.ExitRestartJob, start the whole job again (see restartAll).
func (l *localJob) onExit(ctx context.Context, ev exitEvent) error {
	t := ev.t
	t.running = false
	t.code = exitCode(ev.err)
	if ev.err == nil {
		t.done = true
		return nil
	}
	if t.role == RoleWorker {
		l.state.WorkerLost(t.rank)
	}
	if t.code == conf.ExitRestartJob {
		// Not the task's failure: the job's restarts are bounded instead.
		return l.restartAll(ctx, fmt.Sprintf("%s %d asked to start the whole job again (exit code %d)", t.role, t.rank, t.code))
	}
	failed := fmt.Sprintf("%s %d failed: %s on attempt %d of %d", t.role, t.rank, describeExit(ev.err), t.attempt+1, l.spec.MaxAttempts)
	if t.attempt+1 >= l.spec.MaxAttempts {
		return fmt.Errorf("%s; its last lines:\n%s", failed, t.tail.last())
	}
	t.attempt++
	if t.role != RoleWorker {
		return l.restartAll(ctx, failed)
	}
	l.opts.Log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt - 1, "exit": t.code}).Warn("task failed; restarting it")
	return l.start(t)
}

// restartAll starts every task again, from the newest usable checkpoint
// (jobFiles.restartPoint), once every process of the job has exited: the
// job cannot go on after losing its scheduler or a server.
func (l *localJob) restartAll(ctx context.Context, failed string) error {
	p, err := l.files.restartPoint(ctx, failed, !l.state.Status().FirstData.IsZero())
	if err != nil {
		return err
	}
	l.opts.Log.WithFields(logrus.Fields{"cause": failed, "checkpoint": p.uri, "epoch": p.epoch}).Warn("starting the whole job again")
	l.stopAll()
	for _, t := range l.tasks {
		if t.running {
			return fmt.Errorf("%s, and the job cannot start again: %s did not exit", failed, t)
		}
	}
	l.state.Rewind(p.epoch)
	if l.rootPort, err = freePort(); err != nil {
		return fmt.Errorf("tracker: a port for the scheduler: %w", err)
	}
	for _, t := range l.tasks {
		t.done = false
		if err := l.start(t); err != nil {
			return err
		}
	}
	return nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode() // -1 when killed by a signal
	}
	return -1
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return "exit code " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

func (l *localJob) allDone() bool {
	for _, t := range l.tasks {
		if !t.done {
			return false
		}
	}
	return true
}

// stopAll stops every running task: SIGTERM to its process group, then
// SIGKILL after the grace period, and waits for every exit (bounded).
func (l *localJob) stopAll() {
	running := 0
	for _, t := range l.tasks {
		if t.running {
			running++
			_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	grace := time.NewTimer(l.opts.StopGrace)
	defer grace.Stop()
	killed := false
	for running > 0 {
		select {
		case ev := <-l.exits:
			ev.t.running = false
			ev.t.code = exitCode(ev.err)
			// Whatever it started in its group goes too.
			_ = syscall.Kill(-ev.t.cmd.Process.Pid, syscall.SIGKILL)
			running--
		case <-grace.C:
			if killed {
				l.opts.Log.WithField("tasks", running).Error("tasks did not exit after SIGKILL")
				return
			}
			killed = true
			for _, t := range l.tasks {
				if t.running {
					_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
				}
			}
			grace.Reset(5 * time.Second)
		}
	}
}

func (l *localJob) result(st JobState) Result {
	return jobResult(st, l.spec.Output, l.views())
}

// report publishes the processes' counts and calls OnStatus.
func (l *localJob) report() { publishRoles(l.state, l.views(), l.opts.OnStatus) }

func (l *localJob) views() []taskView {
	out := make([]taskView, len(l.tasks))
	for i, t := range l.tasks {
		out[i] = taskView{role: t.role, rank: t.rank, attempt: t.attempt, code: t.code, running: t.running, done: t.done}
	}
	return out
}

// lockedWriter serialises writes from several tasks.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// tailWriter prefixes each line of a task's output, passes it on, and
// keeps the last lines for diagnostics. It is safe for concurrent use
// (stdout and stderr share it).
type tailWriter struct {
	out    *lockedWriter
	prefix string
	mu     sync.Mutex
	buf    []byte
	lines  []string
	keep   int
}

func newTailWriter(out *lockedWriter, prefix string, keep int) *tailWriter {
	return &tailWriter{out: out, prefix: prefix, keep: keep}
}

// maxLine bounds a buffered partial line.
const maxLine = 64 << 10

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLine {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// emit writes one line. w.mu must be held.
func (w *tailWriter) emit(line []byte) {
	s := string(line)
	_, _ = w.out.Write([]byte(w.prefix + s + "\n"))
	w.lines = append(w.lines, s)
	if len(w.lines) > w.keep {
		w.lines = w.lines[len(w.lines)-w.keep:]
	}
}

func (w *tailWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

// last returns the kept lines, indented, or a note that there were none.
func (w *tailWriter) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lines) == 0 {
		return "    (no output)"
	}
	return "    " + strings.Join(w.lines, "\n    ")
}
