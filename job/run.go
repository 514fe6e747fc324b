package job

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/tempdir"
	"github.com/spindle-ps/spindle/tracker"
)

// Options are the dependencies of a Job.
type Options struct {
	// Log receives the job's own messages; nil discards them.
	Log *logrus.Entry
	// Planner cuts the inputs into shards; nil means the job has no
	// inputs to shard.
	Planner tracker.Planner
	// Resolver reaches the output and the checkpoint directory (local or
	// HDFS) to prepare them before the job and commit the model after;
	// nil means local paths only.
	Resolver Resolver
	// OnStatus, when set, is called about once a second and at every
	// change of the tasks with the job's status.
	OnStatus func(tracker.Status)
	// Listen is where the tracker RPC listens; "" means "127.0.0.1:0".
	Listen string
	// Host is the tracker's host as the tasks reach it; "" means the
	// host it listens on.
	Host string
	// Secret is the job secret that every tracker call and every node
	// must know; "" means a new random one. Ignored when Keys is set.
	Secret string
	// Keys are the job's keys (the secret and the tracker's TLS
	// certificate and key); nil means new ones, with Secret.
	Keys *conf.JobKeys
	// KeysFile is the path of the job's keys file as the tasks see it,
	// which the launcher provides (the YARN launcher ships it to each
	// container); "" means Job writes one, mode 0600, in a new private
	// directory, and removes it at Close.
	KeysFile string
	// Rerun marks a later attempt of the job's ApplicationMaster: what an
	// earlier attempt wrote is this job's, so the output is cleared and
	// the job starts from its newest usable checkpoint, if any.
	Rerun bool
	// StopTimeout bounds stopping every task (Cluster.StopAll); 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// Job is a job whose directories are prepared and whose tracker serves,
// ready to Run on a Cluster. Close it when done.
type Job struct {
	spec        JobSpec
	opts        Options
	log         *logrus.Entry
	start       time.Time
	state       *tracker.State
	svc         *tracker.Service
	files       *files
	secret      string
	keys        *conf.JobKeys
	keysFile    string
	keysDir     string // the directory of a keys file Job wrote; "" for none
	trackerAddr string
}

// keysValidity is how long a job's tracker certificate is valid.
const keysValidity = 366 * 24 * time.Hour

// New checks everything that can be checked before a task starts (spec,
// the inputs, which it cuts into shards, the output and checkpoint
// directories, which it prepares) and serves the tracker RPC for the
// job's state.
func New(ctx context.Context, spec JobSpec, opts Options) (*Job, error) {
	start := time.Now()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		opts.Log = logrus.NewEntry(l)
	}
	if opts.Resolver == nil {
		opts.Resolver = localResolver()
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	shards, err := planShards(ctx, spec, opts.Planner)
	if err != nil {
		return nil, err
	}
	keys := opts.Keys
	if keys == nil {
		if keys, err = conf.NewJobKeys(opts.Secret, keysValidity); err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
	}
	stls, err := keys.ServerTLS()
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	j := &Job{spec: spec, opts: opts, log: opts.Log, start: start, secret: keys.Secret, keys: keys,
		keysFile: opts.KeysFile, state: tracker.NewState(shards, start)}
	j.state.SetServers(spec.NumServers)
	j.state.SetWorkers(spec.NumWorkers)
	j.state.SetReplicas(spec.Replicas)
	j.files = &files{spec: spec, r: opts.Resolver, log: opts.Log}
	if err := j.files.prepare(ctx, j.state, opts.Rerun); err != nil {
		j.files.dropEmpty(ctx)
		return nil, err
	}
	if p := j.files.from; p.uri != "" {
		j.state.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventResumed, Detail: p.String()})
	}
	if j.keysFile == "" {
		if err := j.writeKeys(); err != nil {
			j.files.dropEmpty(ctx)
			return nil, err
		}
	}
	if j.svc, err = tracker.Serve(ctx, opts.Listen, j.state, keys.Secret, opts.Log, tracker.WithTLS(stls)); err != nil {
		j.removeKeys()
		j.files.dropEmpty(ctx)
		return nil, err
	}
	host, port, _ := net.SplitHostPort(j.svc.Addr())
	if opts.Host != "" {
		host = opts.Host
	}
	j.trackerAddr = net.JoinHostPort(host, port)
	return j, nil
}

// NewSecret returns a new random job secret.
func NewSecret() (string, error) {
	var b [24]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("job: secret: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// State is the job's durable state, which the tracker serves.
func (j *Job) State() *tracker.State { return j.state }

// TrackerAddr is the tracker's host:port as the tasks reach it.
func (j *Job) TrackerAddr() string { return j.trackerAddr }

// Close stops serving the tracker RPC and removes the keys file it wrote.
func (j *Job) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), dropEmptyTimeout)
	j.files.releaseClaims(ctx) // a job closed without Run
	cancel()
	err := j.svc.Close()
	j.removeKeys()
	return err
}

// Keys are the job's keys.
func (j *Job) Keys() *conf.JobKeys { return j.keys }

// KeysFile is the path of the job's keys file as the tasks see it.
func (j *Job) KeysFile() string { return j.keysFile }

// writeKeys writes the tasks' keys file (without the tracker's private
// key), mode 0600, in a new directory of mode 0700; one that a killed
// launcher left is removed by the next (tempdir.New).
func (j *Job) writeKeys() error {
	dir, err := tempdir.New("spindle-job-")
	if err != nil {
		return fmt.Errorf("job: a directory for the keys file: %w", err)
	}
	path := filepath.Join(dir, conf.JobKeysFile)
	if err := conf.WriteJobKeys(path, j.keys.ForTasks()); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("job: %w", err)
	}
	j.keysDir, j.keysFile = dir, path
	return nil
}

func (j *Job) removeKeys() {
	if j.keysDir != "" {
		if err := os.RemoveAll(j.keysDir); err != nil {
			j.log.WithError(err).Warn("could not remove the job's keys file")
		}
		j.keysDir = ""
	}
}

// Run runs the job's tasks on c until the job ends, and returns how.
//
// The scheduler starts first, the servers and workers once it is placed
// (DMLC_PS_ROOT_URI is its node); the tracker knows where each launch of
// the scheduler is placed (tracker.State.Scheduler). A task that fails is
// handled by these rules, the only ones of the job:
//
//   - A worker that fails is started again (a new attempt) and its
//     unfinished shards go back to the queue, up to MaxAttempts in all.
//     One started again that still runs, or waits to be placed, once the
//     scheduler and every server exited 0 is stopped and counted done:
//     the servers wrote the model, the others did its share.
//   - A server of a job whose servers keep replicas (JobSpec.Replicas,
//     and every server reported tracker.EventReplicated) is started
//     again alone, as a worker is: its new process restores its tables
//     from the servers that keep their replicas.
//   - A scheduler whose nodes follow it through the tracker (every
//     server and worker reported tracker.EventFollows) is started again
//     alone, as a worker is, on a new port: the running nodes learn its
//     new address from the tracker and register with it again, and it
//     rebuilds the node table from them. A task that fails while the
//     new scheduler waits to be placed starts again once it is.
//   - A scheduler that fails or is lost once every other task has
//     exited 0 is no longer needed: it is not started again and the job
//     succeeds; one that was started again alone and still runs, or
//     waits to be placed, when the last other task exits 0 is stopped,
//     and the job succeeds.
//   - A scheduler or a server without replicas that fails (within its
//     attempts), or a worker of a Collective job, whose peers cannot go
//     on without it, takes the whole job back: every task is stopped,
//     then all start again from the newest checkpoint whose files
//     verify, the later epochs read anew;
//     from scratch when the job has no checkpoint directory but no worker
//     has asked for input yet (nothing is lost); otherwise the job fails
//     naming the task and the missing checkpoint directory.
//   - A task that exits with conf.ExitRestartJob asks for the same whole
//     restart without using up its attempts.
//   - A task that exits with conf.ExitBadInput fails the job at once:
//     its input or arguments are at fault, and another attempt would
//     fail the same way.
//   - A launch the cluster took away (Exit.Lost: preempted, lost with its
//     node) starts again without using up an attempt, at most
//     MaxLostLaunches times per task (a scheduler's or server's still
//     takes the whole job back, within the job's restarts).
//   - A node where JobSpec.BlacklistAfter launches failed is given to the
//     cluster's blacklist (NodeBlacklister) and shown in the status
//     (tracker.Status.BadNodes).
//   - A server or a worker beyond the job's servers or workers
//     (tracker.State.Servers, Workers), started to join it as it scales
//     out, that fails before it joined is started again alone, joining
//     still; one the job's servers or workers leave out (retired by a
//     switch to fewer, or started to join for a target lowered since)
//     ends for good when it exits, whatever its code (a worker's
//     unfinished shards go back to the queue), and does not end the
//     job, nor does a joiner that exits 0; one started to join and no
//     longer needed is stopped (Cluster.Stop), as are those that have
//     not joined once every worker of the job's workers exited 0.
//   - A replacement of one of the job's servers or workers does not
//     join: it is told the job's servers and workers now
//     (DMLC_NUM_SERVER, DMLC_NUM_WORKER), as every launch is.
//   - The whole job starts again at most MaxAttempts-1 times.
//   - A task past its attempts fails the job, the error naming the task,
//     how it ended and its last lines.
//   - A task reported unresponsive (tracker.EventUnresponsive: a server
//     or worker the scheduler declared dead, or the scheduler a node lost,
//     after it was not heard from) is stopped, when its launch began
//     before the silence did, and that end is a failure like any other
//     exit.
//   - A server or worker that exits 0 while the scheduler waits for the
//     nodes to register (tracker.EventRegistering) failed: the others
//     wait for it. So did one that exits 0 without leaving the job (the
//     scheduler declared its process dead: tracker.EventDied, before or
//     after the exit is seen) when the job has not ended diedGrace
//     later.
//
// A request for another number of servers or workers
// (tracker.State.Scale) starts the tasks it adds at once (see package
// doc, Elastic servers and workers).
// A kill over the tracker RPC (tracker.State.Kill) or the end of ctx
// stops every task and ends the job Killed. When every task has exited
// 0 (the scheduler: or is no longer needed, as above) the model is
// committed (manifest, then _SUCCESS) and the job ends Succeeded. Run
// always stops every task it started before it returns.
func (j *Job) Run(ctx context.Context, c Cluster) (Result, error) {
	r := &run{Job: j, c: c, byLaunch: map[int64]*taskState{}, nodeFails: map[string]int{}, blacklisted: map[string]bool{}}
	for _, t := range Tasks(j.spec) {
		r.tasks = append(r.tasks, &taskState{Task: t, state: "pending"})
	}
	// A later attempt of the AM resumes a job that may have scaled: its
	// checkpoint's servers are the job's.
	r.ensureAll()
	r.retireUnneeded()
	st, err := r.loop(ctx)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropEmptyTimeout)
	if st != tracker.Succeeded {
		j.files.dropStage(dctx)
		j.files.dropEmpty(dctx) // the claims too
	} else {
		j.files.releaseClaims(dctx)
	}
	cancel()
	res := Result{State: st, Status: j.state.Status(), Restarts: j.files.restarts, ResumedFrom: j.files.from.uri}
	if st == tracker.Succeeded {
		res.Output = j.spec.Output
	}
	for _, t := range r.tasks {
		res.Tasks = append(res.Tasks, TaskResult{Role: t.Role, Rank: t.Rank, Attempts: t.attempt + 1, ExitCode: t.code,
			NotStarted: t.launches == 0 || t.startFailed, Retired: t.gone})
	}
	// The diagnostic: why the job failed, or what it did.
	diag := res.Summary()
	if err != nil {
		diag = err.Error()
	}
	j.state.Finish(st, diag)
	r.report()
	res.Wall, res.Status = time.Since(j.start), j.state.Status()
	return res, err
}

// taskState is a task as Run sees it.
type taskState struct {
	Task
	attempt int
	// launch is the current attempt's launch, 0 when none runs, and
	// started when Run asked for it.
	launch  int64
	started time.Time
	placed  bool
	done    bool
	code    int
	// startFailed is set when the cluster could not start the current
	// attempt (Cluster.Start failed).
	startFailed bool
	// lost counts the launches the cluster took away (Exit.Lost), which
	// are attempts that do not count against MaxAttempts.
	lost int
	// launches counts the task's launches; state, node, container, logs
	// and exit are what the status shows of it (tracker.TaskStatus). node
	// is where the current launch was placed: the cluster's own name of
	// it (Event.NodeID, which a NodeBlacklister takes), or its host.
	launches             int
	state                string
	node, container, log string
	exit                 string
	// downSince is when the task's last launch failed, until a new one is
	// placed; zero otherwise (and while the whole job restarts).
	downSince time.Time
	// gone marks a server or worker the job no longer has: it retired
	// after a switch to fewer, or was started to join for a target that
	// fell before it joined. It is done, and not counted among the
	// job's tasks in the status.
	gone bool
}

// failures is how many of t's attempts so far count against MaxAttempts,
// the current one included.
func (t *taskState) failures() int { return t.attempt - t.lost + 1 }

// run is the state of Job.Run, owned by its goroutine.
type run struct {
	*Job
	c        Cluster
	tasks    []*taskState
	byLaunch map[int64]*taskState
	nextID   int64
	contract Contract
	// suspects are the tasks whose exit 0 judgeSuspects judges again,
	// and when (suspect).
	suspects map[*taskState]time.Time
	// schedulerAlone is set once the current run's scheduler was started
	// again alone: a replacement, which the nodes no longer need once
	// every other task exited 0.
	schedulerAlone bool
	// nodeFails counts the failed launches per node (Event.NodeID);
	// blacklisted holds the nodes given to the cluster's blacklist.
	nodeFails   map[string]int
	blacklisted map[string]bool
	// jobDownSince is when the whole job began to start again, until
	// every task is placed; zero otherwise.
	jobDownSince time.Time
}

func (r *run) loop(ctx context.Context) (tracker.JobState, error) {
	if err := r.begin(ctx); err != nil {
		return r.fail(ctx, err)
	}
	r.report()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case ev := <-r.c.Events():
			if err := r.onEvent(ctx, ev); err != nil {
				return r.fail(ctx, err)
			}
			r.report()
			if r.allDone() {
				if err := r.files.commitModel(ctx, r.state.Status()); err != nil {
					return tracker.Failed, fmt.Errorf("job: every task exited 0, but the model is not complete: %w", err)
				}
				return tracker.Succeeded, nil
			}
		case <-ctx.Done():
			r.stopAll(ctx)
			return tracker.Killed, fmt.Errorf("job: stopped: %w", context.Cause(ctx))
		case reason := <-r.state.KillRequests():
			r.stopAll(ctx)
			return tracker.Killed, fmt.Errorf("%w: %s", tracker.ErrKillRequested, reason)
		case e := <-r.state.Reports():
			handle := r.onUnresponsive
			switch e.Kind {
			case tracker.EventDied:
				handle = r.onDied
			case tracker.EventRegistering:
				handle = r.onRegistering
			}
			if err := handle(ctx, e); err != nil {
				return r.fail(ctx, err)
			}
			r.report()
		case target := <-r.state.ScaleRequests():
			if err := r.onScale(ctx, target); err != nil {
				return r.fail(ctx, err)
			}
			r.report()
		case <-tick.C:
			if err := r.judgeSuspects(ctx); err != nil {
				return r.fail(ctx, err)
			}
			if limit := r.spec.StallLimit(); limit > 0 {
				for _, e := range r.state.StalledShards(time.Now(), limit) {
					r.state.AddEvent(e) // a report like a node's, handled in turn
				}
			}
			r.report()
			r.files.renewClaims(ctx)
		}
	}
}

// fail stops every task and ends the job Failed with err.
func (r *run) fail(ctx context.Context, err error) (tracker.JobState, error) {
	r.stopAll(ctx)
	return tracker.Failed, err
}

// begin starts a run of the job: the scheduler on a new port, or, for a
// job without a scheduler, every worker.
func (r *run) begin(ctx context.Context) error {
	r.contract = Contract{Spec: r.spec, Cluster: r.c.Name(), Secret: r.secret, KeysFile: r.keysFile, TrackerAddr: r.trackerAddr,
		ResumeFrom: r.files.from.uri, ResumeEpoch: r.files.from.epoch, Output: r.files.modelDir(), Run: r.state.Run()}
	r.schedulerAlone = false
	if r.spec.HasScheduler() {
		port, err := r.c.SchedulerPort(ctx)
		if err != nil {
			return fmt.Errorf("job: a port for the scheduler: %w", err)
		}
		r.contract.RootPort = port
		return r.start(ctx, r.tasks[0])
	}
	return r.startRest(ctx)
}

// startRest starts every task that is not the scheduler, not done and
// not running.
func (r *run) startRest(ctx context.Context) error {
	for _, t := range r.tasks {
		if t.Role != conf.RoleScheduler && !t.done && t.launch == 0 {
			if err := r.start(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// start launches t's current attempt under the current contract.
func (r *run) start(ctx context.Context, t *taskState) error {
	r.nextID++
	id := r.nextID
	c, task, attempt := r.contract, t.Task, t.attempt
	servers, workers := r.state.Servers(), r.state.Workers()
	c.Servers, c.Workers = servers, workers
	if now, target := r.counts(t.Role); r.elastic(t) && t.Rank >= now {
		// Beyond the job's servers or workers: it joins them, as one of
		// the target.
		c.Joining = true
		if t.Role == conf.RoleWorker {
			c.Workers = max(target, t.Rank+1)
		} else {
			c.Servers = max(target, t.Rank+1)
		}
	}
	l := Launch{ID: id, Task: task, Attempt: attempt, Seq: t.launches, Command: r.spec.Command,
		Servers: servers, Workers: workers,
		Env: func(node string, base []string) []string { return c.Env(task, attempt, node, base) }}
	asked := time.Now() // its process may report before Start returns
	if err := r.c.Start(ctx, l); err != nil {
		t.code, t.startFailed = -1, true
		return err
	}
	t.launch, t.placed, t.startFailed = id, false, false
	t.started = asked
	t.launches++
	t.state, t.node, t.container, t.log = "waiting", "", "", ""
	r.byLaunch[id] = t
	r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": attempt}).Debug("task launched")
	return nil
}

// onEvent handles one event of the cluster; an error fails the job.
func (r *run) onEvent(ctx context.Context, ev Event) error {
	if ev.Kind == Failed {
		return ev.Err
	}
	t := r.byLaunch[ev.ID]
	if t == nil || t.launch != ev.ID {
		return nil // a launch stopped before a restart
	}
	switch ev.Kind {
	case Placed:
		t.placed = true
		t.state, t.container, t.log = "running", ev.Container, ev.Logs
		t.node = ev.NodeID
		if t.node == "" {
			t.node = ev.Node
		}
		if t.Role == conf.RoleWorker {
			r.state.SetWorkerHost(t.Rank, ev.Node)
		}
		r.notePlaced(t)
		if t.Role == conf.RoleScheduler {
			// Tasks started from now on are told its node; those not
			// started yet start now: every other task at the run's first
			// placement, those that failed while a replacement waited
			// to be placed at a later one.
			r.contract.RootHost = ev.Node
			r.state.SetScheduler(net.JoinHostPort(ev.Node, strconv.Itoa(r.contract.RootPort)))
			return r.startRest(ctx)
		}
	case Exited:
		delete(r.byLaunch, ev.ID)
		t.launch, t.placed = 0, false
		if t.Role == conf.RoleScheduler {
			r.state.SetScheduler("")
		}
		return r.onExit(ctx, t, ev.Exit)
	}
	return nil
}

// tail is what the job's error adds of ex: the launch's last lines of
// output, or the cluster's diagnostics; empty when it has none.
func (ex Exit) tail() string {
	switch {
	case ex.Tail == "":
		return ""
	case ex.Diagnostics:
		return "; the cluster's diagnostics:\n" + ex.Tail
	}
	return "; its last lines:\n" + ex.Tail
}

// onExit applies the restart rules to t's exit.
func (r *run) onExit(ctx context.Context, t *taskState, ex Exit) error {
	t.code = ex.Code
	t.exit, t.state = ex.Desc, "failed"
	if ex.Diagnostics {
		// The status shows the first line, and the rest on demand.
		t.exit += "\n" + ex.Tail
	}
	if r.elastic(t) {
		if left, err := r.left(ctx, t, ex); left || err != nil {
			return err
		}
	}
	if ex.Code == 0 && t.Role != conf.RoleScheduler {
		switch {
		case ex.unfinished != "":
		case r.registering():
			ex.unfinished = "before its node joined the job (the others wait for it)"
		case r.state.DiedUnfinished(t.String()):
			r.suspect(t)
		}
		if ex.unfinished != "" {
			ex.Desc += " " + ex.unfinished
			t.exit = ex.Desc
		}
	}
	if ex.Code == 0 && ex.unfinished == "" {
		t.state = "succeeded"
		t.done = true
		r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt}).Debug("task done")
		if t.Role == conf.RoleWorker && r.workersDone() {
			r.releaseJoiners(ctx)
		}
		if s := r.scheduler(); s != nil && t != s && r.schedulerAlone && !s.done && r.othersDone() {
			r.endScheduler(ctx, s)
		}
		r.endRestartedWorkers(ctx)
		return nil
	}
	if t.Role == conf.RoleScheduler && r.othersDone() {
		// Every node finished: nothing needs a scheduler any more.
		t.state, t.done = "finished", true
		r.state.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventExited, Task: t.String(),
			Detail: firstLine(ex.Desc) + "; every other task had exited 0, not started again"})
		r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt, "exit": ex.Code, "lost": ex.Lost}).
			Warn("the scheduler ended after every node finished; not starting it again")
		return nil
	}
	if t.Role == conf.RoleWorker {
		r.state.WorkerLost(t.Rank)
	}
	t.downSince = time.Now()
	r.state.AddEvent(tracker.Event{At: t.downSince, Kind: tracker.EventExited, Task: t.String(), Detail: firstLine(ex.Desc)})
	if ex.Code == conf.ExitRestartJob {
		// Not the task's failure: the job's restarts are bounded instead.
		err := r.restartAll(ctx, fmt.Sprintf("%s asked to start the whole job again (%s)", t, ex.Desc), true)
		if err != nil {
			// Its last lines say why it asked.
			err = fmt.Errorf("%w%s", err, ex.tail())
		}
		return err
	}
	if ex.Code == conf.ExitBadInput {
		// Its input or arguments are at fault: it would fail the same way
		// again, and so would its replacement. The node is not blamed.
		return fmt.Errorf("%s failed: %s on attempt %d of %d, and is not started again: exit status %d says its input or arguments are at fault%s",
			t, ex.Desc, t.failures(), r.spec.MaxAttempts, ex.Code, ex.tail())
	}
	if ex.Lost && t.lost < MaxLostLaunches {
		// The cluster's doing, not the task's: a new launch that does
		// not use up an attempt.
		t.lost++
		t.attempt++
		lost := fmt.Sprintf("%s lost: %s (%d of %d such losses allowed)", t, ex.Desc, t.lost, MaxLostLaunches)
		if !r.alone(t) {
			err := r.restartAllAfter(ctx, t, lost)
			if err != nil {
				err = fmt.Errorf("%w%s", err, ex.tail())
			}
			return err
		}
		r.log.WithFields(logrus.Fields{"task": t.String(), "lost": t.lost, "exit": ex.Code}).Warn("task's container taken away; starting it again without using up an attempt")
		return r.startAlone(ctx, t)
	}
	r.nodeFailed(t.node)
	failed := fmt.Sprintf("%s failed: %s on attempt %d of %d", t, ex.Desc, t.failures(), r.spec.MaxAttempts)
	if t.failures() >= r.spec.MaxAttempts {
		return errors.New(failed + ex.tail())
	}
	t.attempt++
	if !r.alone(t) {
		// The others cannot go on without it: a server's parameters, or
		// a member of the workers' collectives, are gone.
		err := r.restartAllAfter(ctx, t, failed)
		if err != nil {
			// The job ends here: its last lines say why.
			err = fmt.Errorf("%w%s", err, ex.tail())
		}
		return err
	}
	r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt - 1, "exit": ex.Code}).Warn("task failed; restarting it")
	return r.startAlone(ctx, t)
}

// onUnresponsive handles a report that a task had not been heard from for
// e.Took when it was declared dead or lost (tracker.EventUnresponsive),
// or that it held up the others for e.Took while alive
// (tracker.EventStalled): its process may still run, stopped, hung or
// cut off, and the others go on without it or wait for it or its
// successor, which its exit alone would start. So the process is
// stopped (stopLaunch) and its end handled as a failure (onExit): it
// starts again, within its attempts. A report about
// an earlier process of the task (the current launch was asked for after
// the silence began) or about a task not running is ignored.
func (r *run) onUnresponsive(ctx context.Context, e tracker.Event) error {
	i := slices.IndexFunc(r.tasks, func(t *taskState) bool { return t.String() == e.Task })
	if i < 0 {
		return nil
	}
	t := r.tasks[i]
	if t.launch == 0 || t.done || !t.started.Before(e.At.Add(-e.Took)) {
		return nil
	}
	what, why := "stopped answering", "not heard from for %v (%s)"
	if e.Kind == tracker.EventStalled {
		what, why = "held up the others", "stalled, the others waited %v for it (%s)"
	}
	r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt}).Warn("stopping a task that " + what + "; it starts again")
	r.stopLaunch(ctx, t)
	why = "stopped: " + fmt.Sprintf(why, e.Took.Round(100*time.Millisecond), e.Detail)
	return r.onExit(ctx, t, Exit{Code: -1, Desc: why})
}

// onDied handles a report that the process of a server or worker that
// last said it follows the scheduler was declared dead rather than
// leaving the job (tracker.EventDied). Had it exited 0 already, it is a
// suspect (suspect); an exit still to come is judged when it comes.
func (r *run) onDied(_ context.Context, e tracker.Event) error {
	i := slices.IndexFunc(r.tasks, func(t *taskState) bool { return t.String() == e.Task })
	if i >= 0 && exitedOK(r.tasks[i]) {
		r.suspect(r.tasks[i])
	}
	return nil
}

// diedGrace is how long a job may take to end after a server or worker
// exited 0 without leaving it (tracker.EventDied) before that exit is
// judged a failure (judgeSuspects). Tests shorten it.
var diedGrace = 10 * time.Second

// suspect marks t, counted done after an exit 0 although its node never
// left the job, for judgeSuspects. A program that skipped Finalize after
// its last barrier, or whose last word to the scheduler was lost, did
// finish: the job then ends within diedGrace. One that exited in the
// middle of training did not, and the others wait for it or its
// successor.
func (r *run) suspect(t *taskState) {
	if r.suspects == nil {
		r.suspects = map[*taskState]time.Time{}
	}
	if _, ok := r.suspects[t]; !ok {
		r.suspects[t] = time.Now().Add(diedGrace)
	}
}

// judgeSuspects applies the restart rules again to the exit 0 of every
// suspect whose diedGrace has passed with the job still running: it
// failed (onExit).
func (r *run) judgeSuspects(ctx context.Context) error {
	now := time.Now()
	for t, at := range r.suspects {
		if now.Before(at) {
			continue
		}
		delete(r.suspects, t)
		if exitedOK(t) && r.state.DiedUnfinished(t.String()) {
			if err := r.judgeAgain(ctx, t, "without leaving the job (its node was not finalized; the others wait for it)"); err != nil {
				return err
			}
		}
	}
	return nil
}

// exitedOK reports whether t's last process exited 0 and t is done.
func exitedOK(t *taskState) bool { return t.launch == 0 && t.done && !t.gone && t.code == 0 }

// judgeAgain applies the restart rules again to t's exit 0, which was
// counted a success, as the failure that why says it was (onExit).
func (r *run) judgeAgain(ctx context.Context, t *taskState, why string) error {
	t.done = false
	return r.onExit(ctx, t, Exit{Desc: t.exit, unfinished: why})
}

// registering reports whether the job's scheduler, started with the
// other tasks rather than alone, waits for the servers and workers to
// register (tracker.State.Registering): none of them can have finished.
func (r *run) registering() bool {
	s := r.scheduler()
	return s != nil && !r.schedulerAlone && s.launch != 0 && r.state.Registering(s.started)
}

// onRegistering handles the scheduler's report that it waits for the
// servers and workers to register (tracker.EventRegistering): a server
// or worker that exited 0 before it came, as a program that ends at once
// does, failed after all (onExit), since the others wait for it.
func (r *run) onRegistering(ctx context.Context, _ tracker.Event) error {
	if !r.registering() {
		return nil
	}
	for _, t := range r.tasks {
		if t.Role != conf.RoleScheduler && exitedOK(t) {
			if err := r.judgeAgain(ctx, t, "before its node joined the job (the others wait for it)"); err != nil {
				return err
			}
		}
	}
	return nil
}

// restartAllAfter is restartAll for the exit of t, whose attempt was
// raised for its next launch: when the job ends instead, before that
// launch, the attempt it never had is not counted (TaskResult.Attempts).
func (r *run) restartAllAfter(ctx context.Context, t *taskState, cause string) error {
	err := r.restartAll(ctx, cause, false)
	if err != nil && t.launch == 0 && !t.startFailed {
		t.attempt--
	}
	return err
}

// startAlone starts t's next attempt by itself, the other tasks going
// on. A scheduler starts on a new port (the old one may be what failed
// it), which the contract then tells the tasks started later; another
// task waits, "pending", while a scheduler that was started again alone
// is not placed yet, and startRest starts it once it is.
func (r *run) startAlone(ctx context.Context, t *taskState) error {
	s := r.scheduler()
	if t == s {
		port, err := r.c.SchedulerPort(ctx)
		if err != nil {
			return fmt.Errorf("job: a port for the scheduler started again alone: %w", err)
		}
		r.contract.RootPort = port
		r.schedulerAlone = true
		return r.start(ctx, t)
	}
	if s != nil && !s.placed && !s.done {
		t.state = "pending"
		r.log.WithField("task", t.String()).Info("task to start again once the scheduler's replacement is placed")
		return nil
	}
	return r.start(ctx, t)
}

// scheduler is the scheduler's task, nil for a job without one.
func (r *run) scheduler() *taskState {
	if !r.spec.HasScheduler() {
		return nil
	}
	return r.tasks[0]
}

// othersDone reports whether every task but the scheduler exited 0.
func (r *run) othersDone() bool {
	for _, t := range r.tasks {
		if t.Role != conf.RoleScheduler && !t.done {
			return false
		}
	}
	return true
}

// endScheduler stops s, a scheduler started again alone that still runs
// or waits to be placed once every other task exited 0, and counts it
// done: the job is complete.
func (r *run) endScheduler(ctx context.Context, s *taskState) {
	r.log.WithFields(logrus.Fields{"task": s.String(), "attempt": s.attempt}).
		Info("every node finished: stopping the scheduler that was started again alone")
	_ = r.stopAll(ctx) // it logs its error; the model is complete either way
	s.state, s.done = "finished", true
	s.exit = "stopped once every other task had exited 0"
}

// endRestartedWorkers stops the workers started again that still run, or
// wait to be placed, once every server has exited 0, and counts them
// done. The servers wrote the model after the job's last barrier, which
// no longer waits for a dead worker once another one arrived having
// trained on every shard, the dead one's given to it; a new process has
// nothing left to do, and a scheduler that saw the last barrier pass, or
// is gone, no longer registers it. A worker on its first attempt that
// still runs is left to the other rules, as is a job without servers.
func (r *run) endRestartedWorkers(ctx context.Context) {
	servers := 0
	var late []*taskState
	for _, t := range r.tasks {
		switch {
		case t.gone:
		case t.Role == conf.RoleWorker:
			if !t.done {
				if t.attempt == 0 {
					return
				}
				late = append(late, t)
			}
		case t.Role != conf.RoleServer:
		case !t.done:
			return // a server is not done
		default:
			servers++
		}
	}
	if servers == 0 {
		return
	}
	for _, t := range late {
		r.stopLaunch(ctx, t)
		t.done, t.downSince = true, time.Time{}
		t.state, t.exit = "stopped", "stopped once the servers had written the model: nothing was left for it"
		r.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt}).
			Info("the servers wrote the model: stopping the worker started again, which has nothing left to do")
	}
}

// alone says whether t starts again by itself when it fails: a worker
// of a job with servers (the others go on, its shards go back to the
// queue), a server of a job whose servers all reported that their
// tables keep replicas (tracker.EventReplicated; its new process restores
// them from the servers that keep them), and a scheduler whose servers
// and workers all reported that they follow it through the tracker
// (tracker.EventFollows; they register again with its new process, which
// rebuilds the node table from them). Any other scheduler, a server
// without replicas and a collective job's worker take the whole job back.
func (r *run) alone(t *taskState) bool {
	switch t.Role {
	case conf.RoleWorker:
		// One started to join takes no part in the steps yet.
		return !r.spec.Collective || t.Rank >= r.state.Workers()
	case conf.RoleServer:
		if t.Rank >= r.state.Servers() {
			// Started to join: it holds no keys yet.
			return true
		}
		// Every server must have said that its tables keep replicas: a
		// program that keeps its own state (a ps-lite program, a raw
		// KV server) would come back empty.
		return r.spec.Replicas > 0 && r.state.Replicated() >= r.active(conf.RoleServer)
	case conf.RoleScheduler:
		// Every node must have said it follows the scheduler: a ps-lite
		// node, or one of an older runtime, would wait for the dead one
		// for ever.
		return r.state.Following() >= r.active(conf.RoleServer)+r.active(conf.RoleWorker)
	}
	return false
}

// nodeFailed counts a failed launch on node and, at the job's
// BlacklistAfter, asks the cluster (when it is a NodeBlacklister) to stop
// using the node.
func (r *run) nodeFailed(node string) {
	if node == "" || r.spec.BlacklistAfter <= 0 || r.blacklisted[node] {
		return
	}
	r.nodeFails[node]++
	n := r.nodeFails[node]
	if n < r.spec.BlacklistAfter {
		return
	}
	bl, ok := r.c.(NodeBlacklister)
	if !ok {
		return
	}
	log := r.log.WithFields(logrus.Fields{"node": node, "failures": n})
	if !bl.BlacklistNode(node) {
		log.Warn("node failed launches repeatedly, but the cluster keeps it (no other node left)")
		return
	}
	r.blacklisted[node] = true
	r.state.AddBadNode(tracker.BadNode{Node: node, Failures: n})
	log.Warn("node blacklisted: launches failed there repeatedly")
}

// restartAll starts every task again, from the newest usable checkpoint
// (files.restartPoint), once every task of the job has stopped: the job
// cannot go on after losing its scheduler or a server, or a task asked
// for it (asked: see files.restartPoint).
func (r *run) restartAll(ctx context.Context, failed string, asked bool) error {
	// The run's processes stop first, and with them their checkpoint
	// commits: the newest checkpoint is chosen only then, so that none of
	// them can commit a later one, which the new run would meet.
	downSince := time.Now()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.StopTimeout)
	if !r.state.EndRun(ectx) {
		r.log.Warn("a checkpoint commit of the run that ended did not finish in time")
	}
	cancel()
	if err := r.stopAll(ctx); err != nil {
		return fmt.Errorf("%s, and the job cannot start again: %w", failed, err)
	}
	p, err := r.files.restartPoint(ctx, failed, !r.state.Status().FirstData.IsZero(), asked)
	if err != nil {
		return err
	}
	r.log.WithFields(logrus.Fields{"cause": failed, "checkpoint": p.uri, "epoch": p.epoch}).Warn("starting the whole job again")
	from := "from the start"
	if p.uri != "" {
		from = p.String()
	}
	r.jobDownSince = downSince
	r.state.AddEvent(tracker.Event{At: r.jobDownSince, Kind: tracker.EventJobRestart, Detail: firstLine(failed) + "; " + from})
	for _, t := range r.tasks {
		t.downSince = time.Time{} // the job's event covers them
	}
	r.state.Rewind(p.epoch)
	if r.spec.NumServers > 0 {
		// The servers that wrote the checkpoint; the job switches to
		// the target again once the others joined.
		servers := r.spec.NumServers
		if p.servers > 0 {
			servers = p.servers
		}
		r.state.SetServers(servers)
	}
	// The workers it had, every one a member; the job switches to the
	// target again once the others joined.
	r.state.SetWorkers(r.state.Workers())
	for _, t := range r.tasks {
		t.done, t.gone = false, false
	}
	clear(r.suspects)
	r.retireUnneeded()
	r.ensureAll()
	return r.begin(ctx)
}

// stopAll stops every task, bounded by StopTimeout even after ctx ended.
func (r *run) stopAll(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.StopTimeout)
	defer cancel()
	err := r.c.StopAll(sctx)
	r.state.SetScheduler("")
	for _, t := range r.tasks {
		if t.launch != 0 {
			t.code = -1 // killed
			t.state = "stopped"
		}
		t.launch, t.placed = 0, false
	}
	clear(r.byLaunch)
	if err != nil {
		r.log.WithError(err).Error("tasks not stopped")
	}
	return err
}

// notePlaced records that t runs again after its exit, or the whole job
// after its restart once t was the last task to be placed.
func (r *run) notePlaced(t *taskState) {
	now := time.Now()
	if !t.downSince.IsZero() {
		where := t.node
		if t.container != "" {
			where = t.container + " on " + t.node
		}
		r.state.AddEvent(tracker.Event{At: now, Kind: tracker.EventBack, Task: t.String(),
			Detail: "running again (attempt " + strconv.Itoa(t.attempt) + ") in " + where, Took: now.Sub(t.downSince)})
		t.downSince = time.Time{}
	}
	if r.jobDownSince.IsZero() {
		return
	}
	for _, o := range r.tasks {
		if !o.placed && !o.done {
			return
		}
	}
	r.state.AddEvent(tracker.Event{At: now, Kind: tracker.EventJobBack, Detail: "every task running again", Took: now.Sub(r.jobDownSince)})
	r.jobDownSince = time.Time{}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// allDone reports whether every task is done: exited 0, or, for the
// scheduler, no longer needed once every other task had.
func (r *run) allDone() bool {
	for _, t := range r.tasks {
		if !t.done {
			return false
		}
	}
	return true
}

// report publishes the tasks' counts per role, in the order roles first
// appear, and calls OnStatus.
func (r *run) report() {
	byRole := map[conf.Role]*tracker.RoleStatus{}
	var order []conf.Role
	for _, t := range r.tasks {
		rs := byRole[t.Role]
		if rs == nil {
			rs = &tracker.RoleStatus{Role: t.Role}
			byRole[t.Role] = rs
			order = append(order, t.Role)
		}
		rs.Restarts += t.attempt
		if t.placed {
			rs.Running++
		}
		if t.gone {
			continue
		}
		rs.Want++
		if t.done {
			rs.Succeeded++
		}
	}
	for _, role := range order {
		r.state.SetRole(*byRole[role])
	}
	tasks := make([]tracker.TaskStatus, len(r.tasks))
	for i, t := range r.tasks {
		tasks[i] = tracker.TaskStatus{Task: t.String(), Role: t.Role, Rank: t.Rank, State: t.state, Attempt: t.attempt,
			Launches: t.launches, Node: t.node, Container: t.container, Logs: t.log, Exit: t.exit}
	}
	r.state.SetTasks(tasks, r.files.restarts)
	pr, showsProgress := r.c.(ProgressReporter)
	if r.opts.OnStatus == nil && !showsProgress {
		return
	}
	st := r.state.Status()
	if r.opts.OnStatus != nil {
		r.opts.OnStatus(st)
	}
	if p, ok := st.Progress(); ok && showsProgress {
		pr.SetProgress(p)
	}
}

// leftSummary says how many servers and workers left the job as it
// scaled, and how many it ended with; "" when none left.
func (r Result) leftSummary() string {
	var left, ended []string
	for _, role := range []conf.Role{conf.RoleServer, conf.RoleWorker} {
		n := 0
		for _, t := range r.Tasks {
			if t.Retired && t.Role == role {
				n++
			}
		}
		if n == 0 {
			continue
		}
		end := r.Status.Servers
		if role == conf.RoleWorker {
			end = r.Status.Workers
		}
		left, ended = append(left, countNoun(n, string(role))), append(ended, countNoun(end, string(role)))
	}
	if len(left) == 0 {
		return ""
	}
	return strings.Join(left, " and ") + " left the job as it scaled, which ended with " + strings.Join(ended, " and ")
}

// countNoun is "1 server", "2 servers".
func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Summary says what a job that ended did: how many tasks, the records
// read per epoch, the last metrics and where it started again from.
func (r Result) Summary() string {
	st := r.Status
	// Servers and workers that left the job (scaled in) count apart.
	tasks := slices.DeleteFunc(slices.Clone(r.Tasks), func(t TaskResult) bool { return t.Retired })
	s := fmt.Sprintf("all %d tasks exited 0", len(tasks))
	if r.State != tracker.Succeeded {
		s = fmt.Sprintf("%d tasks, job %s", len(tasks), r.State)
	} else if odd := slices.DeleteFunc(slices.Clone(tasks), func(t TaskResult) bool { return t.ExitCode == 0 }); len(odd) > 0 {
		// Only tasks no longer needed did not exit 0 in a job that
		// succeeded: a scheduler that ended after every node finished,
		// workers started again once the servers had written the model.
		var names []string
		for _, t := range odd {
			names = append(names, fmt.Sprintf("the %s (code %d)", Task{Role: t.Role, Rank: t.Rank}, t.ExitCode))
		}
		s = fmt.Sprintf("%d of %d tasks exited 0; %s ended after them, no longer needed", len(tasks)-len(odd), len(tasks), strings.Join(names, " and "))
	}
	if left := r.leftSummary(); left != "" {
		s += "; " + left
	}
	if len(st.EpochRecords) > 0 {
		var parts []string
		for _, e := range slices.Sorted(maps.Keys(st.EpochRecords)) {
			parts = append(parts, fmt.Sprintf("%d:%d", e, st.EpochRecords[e]))
		}
		s += "; records per epoch " + strings.Join(parts, " ")
	}
	if len(st.Metrics) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(st.Metrics)) {
			parts = append(parts, fmt.Sprintf("%s=%.6g", k, st.Metrics[k]))
		}
		s += fmt.Sprintf("; epoch %d metrics %s", st.MetricsEpoch, strings.Join(parts, " "))
	}
	if share, ok := st.NodeLocalShare(); ok {
		s += fmt.Sprintf("; node-local shards %d of %d (%.0f%%)", st.LocalGiven, st.LocatedGiven, 100*share)
	}
	for _, n := range st.BadNodes {
		s += fmt.Sprintf("; node %s blacklisted after %d failed launches", n.Node, n.Failures)
	}
	if r.Restarts > 0 {
		from := "scratch"
		if r.ResumedFrom != "" {
			from = "checkpoint " + r.ResumedFrom
		}
		s += fmt.Sprintf("; started again %d time(s) from %s", r.Restarts, from)
	}
	return s
}
