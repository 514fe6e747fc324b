package tracker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/yarn"
)

// AMOptions are the dependencies of RunAM.
type AMOptions struct {
	// AM is the registered-to-be connection to the ResourceManager's
	// scheduler; RunAM registers, heartbeats and unregisters it, but does
	// not close it. Required.
	AM *yarn.AMClient
	// NM starts and stops containers; nil means yarn.NewNMClient(AM),
	// closed when RunAM returns.
	NM *yarn.NMClient
	// Log receives the AM's own messages; nil discards them.
	Log *logrus.Entry
	// Host is the AM's host name as the containers reach it: the tracker
	// RPC is advertised at Host:port. Required.
	Host string
	// Resources are localized into every task container (the program,
	// its libraries), keyed by link name.
	Resources map[string]yarn.LocalResource
	// Env holds extra KEY=VALUE settings for every task container (for
	// instance LD_LIBRARY_PATH=./lib); the job's own settings and the
	// environment contract override them.
	Env []string
	// Planner cuts the inputs into shards; nil means the job has no
	// inputs to shard.
	Planner Planner
	// Resolver reaches the output and checkpoint directories (HDFS); nil
	// means local paths only.
	Resolver Resolver
	// Rerun marks a later attempt of the ApplicationMaster: what an
	// earlier attempt wrote is this job's, so the output is cleared and
	// the job starts from its newest usable checkpoint, if any.
	Rerun bool
	// AllocationTimeout is how long a task may wait for a container
	// before the job fails; 0 means 10 minutes.
	AllocationTimeout time.Duration
	// Heartbeat is the interval of the allocate loop; 0 means 250 ms.
	Heartbeat time.Duration
	// RootPort is the port the scheduler listens on (DMLC_PS_ROOT_PORT);
	// 0 means one picked at random in [20000, 30000) when RunAM starts.
	RootPort int
	// OnStatus, when set, is called about once a second and at every
	// change of the containers with the job's status.
	OnStatus func(Status)
	// Secret is the job token of the tracker RPC, shared with the client
	// that submitted the job so that it can ask for the job's status; ""
	// means a new random one.
	Secret string
}

// Priorities at which the AM asks for each role's containers: the
// scheduler first, then the servers, then the workers.
const (
	prioScheduler int32 = 0
	prioServer    int32 = 1
	prioWorker    int32 = 2
)

// Defaults of AMOptions.
const (
	defaultAllocationTimeout = 10 * time.Minute
	defaultHeartbeat         = 250 * time.Millisecond
	// finishTimeout bounds unregistering and stopping containers at the end.
	finishTimeout = 30 * time.Second
	// maxNodeRejects bounds how often one attempt of a task turns down a
	// container on a node where it failed before.
	maxNodeRejects = 3
	// maxDiagnostics bounds the part of a container's YARN diagnostics
	// quoted in the job's diagnostic.
	maxDiagnostics = 2000
	// resolveTimeout bounds the lookup of a node's address.
	resolveTimeout = 10 * time.Second
)

// amTask is one role and rank of a job run by RunAM: at most one
// container at a time.
type amTask struct {
	role    string
	rank    int
	attempt int
	prio    int32
	ct      *yarn.Container // the current attempt's container, once started
	waiting time.Time       // when the current attempt began to wait for a container; zero when it has one
	done    bool
	code    int32 // exit status of the last attempt; yarn.ExitInvalid before one ends
	// badNodes are the nodes on which an attempt of the task failed.
	badNodes map[yarn.NodeID]bool
	rejects  int
}

func (t *amTask) String() string { return fmt.Sprintf("%s %d", t.role, t.rank) }

func (t *amTask) pending() bool { return !t.done && t.ct == nil }

// amJob is the state of RunAM. It is owned by RunAM's goroutine.
type amJob struct {
	spec     JobSpec
	opts     AMOptions
	log      *logrus.Entry
	state    *State
	env      *localJob // builds the environment contract
	tasks    []*amTask
	byCont   map[yarn.ContainerID]*amTask
	outst    map[int32]int32 // containers the ResourceManager still owes, per priority
	rootHost string          // the scheduler's current node
	nodes    int32           // cluster size from the last heartbeat
	releases []yarn.ContainerID
	files    *jobFiles
	// addrs caches the nodes' addresses (nodeAddr).
	addrs map[string]string
	// restart, when set, says why every task must start again (the
	// scheduler or a server failed); the allocate loop does it.
	restart string
}

// RunAM runs spec from inside a YARN ApplicationMaster container: it
// serves the tracker RPC on opts.Host, registers with the
// ResourceManager, asks for one container per task (the scheduler at
// priority 0, servers at 1, workers at 2; the scheduler's size is a
// server's) and starts the command in each with the environment contract
// (DMLC_JOB_CLUSTER=yarn, DMLC_NODE_HOST the IP address of the
// container's node).
//
// The scheduler comes first: servers and workers are asked for only once
// the scheduler's container is allocated, because DMLC_PS_ROOT_URI is its
// node's address. Its port, DMLC_PS_ROOT_PORT, is opts.RootPort, chosen by the AM
// before any container exists (YARN gives no way to learn a port a
// container bound); a scheduler that cannot bind it fails and is retried
// like any failed task, on another node when there is one.
//
// A task whose container ends with a non-zero exit status is run again
// in a new container, up to MaxAttempts in all, preferring another node
// than the ones it failed on (best effort: an allocation on such a node
// is released and asked for again, at most a few times per attempt, and
// only when the cluster has other nodes). Past the budget, when a task
// waits longer than AllocationTimeout for a container, when a kill is
// requested over the tracker RPC, or when ctx ends, every running
// container is stopped and the AM unregisters FAILED (KILLED for a kill
// or ctx) with a diagnostic naming the cause; RunAM returns an error
// saying the same. When every task has exited 0 the AM unregisters
// SUCCEEDED. RunAM always unregisters (bounded by 30 s) and never leaves
// a container it started running.
//
// Before any container is asked for, the inputs are cut into shards and
// the output and checkpoint directories are prepared as RunLocal does;
// when every task has exited 0 the model is committed (manifest, then
// _SUCCESS) before the AM unregisters SUCCEEDED. Checkpoints are
// committed by the AM's tracker as the servers write them.
//
// The scheduler's or a server's failure (within its attempts), and a
// task's exit with conf.ExitRestartJob, start the whole job again: every container is stopped, and once YARN reports
// them all complete, every task runs again in a new container from the
// newest usable checkpoint (from scratch when none is committed yet).
// Without a checkpoint directory that failure fails the job, naming the
// task. A later attempt of the AM itself (opts.Rerun) also starts from
// the newest usable checkpoint; containers of the earlier attempt are not
// kept.
//
// The AM serves a status page over HTTP on opts.Host (see
// StatusHandler: "/" and "/status.json") and registers it as the
// application's tracking URL, which the ResourceManager's web proxy
// (/proxy/<application id>/) leads to while the application runs.
func RunAM(ctx context.Context, spec JobSpec, opts AMOptions) (Result, error) {
	start := time.Now()
	if err := spec.Validate(); err != nil {
		return Result{State: Failed}, err
	}
	if opts.AM == nil || opts.Host == "" {
		return Result{State: Failed}, errors.New("tracker: RunAM needs an AM client and the AM's host")
	}
	if opts.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		opts.Log = logrus.NewEntry(l)
	}
	if opts.AllocationTimeout <= 0 {
		opts.AllocationTimeout = defaultAllocationTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.RootPort == 0 {
		opts.RootPort = 20000 + rand.IntN(10000)
	}
	if opts.NM == nil {
		opts.NM = yarn.NewNMClient(opts.AM)
		defer opts.NM.Close()
	}
	if opts.Resolver == nil {
		opts.Resolver = localResolver()
	}
	shards, err := planShards(ctx, spec, opts.Planner)
	if err != nil {
		return Result{State: Failed}, err
	}
	secret := opts.Secret
	if secret == "" {
		var err error
		if secret, err = newSecret(); err != nil {
			return Result{State: Failed}, err
		}
	}
	j := &amJob{
		spec:   spec,
		opts:   opts,
		log:    opts.Log.WithField("attempt", opts.AM.Attempt()),
		state:  NewState(shards, start),
		byCont: map[yarn.ContainerID]*amTask{},
		outst:  map[int32]int32{},
		addrs:  map[string]string{},
	}
	j.files = &jobFiles{spec: spec, r: opts.Resolver, log: j.log}
	if err := j.files.prepare(ctx, j.state, opts.Rerun); err != nil {
		return Result{State: Failed}, err
	}
	// The tracker listens on every interface and is advertised on Host.
	svc, err := Serve(ctx, ":0", j.state, secret, opts.Log)
	if err != nil {
		return Result{State: Failed}, err
	}
	defer svc.Close()
	web, err := serveWeb(":0", spec.Name, j.state, opts.Log)
	if err != nil {
		return Result{State: Failed}, fmt.Errorf("tracker: status page: %w", err)
	}
	defer web.Close()
	trackingURL := "http://" + net.JoinHostPort(opts.Host, strconv.Itoa(web.Port())) + "/"
	_, port, _ := net.SplitHostPort(svc.Addr())
	trackerPort, _ := strconv.Atoi(port)
	j.env = &localJob{spec: spec, secret: secret, rootPort: opts.RootPort,
		trackerAddr: net.JoinHostPort(opts.Host, port), files: j.files}
	for _, t := range j.env.newTasks() {
		at := &amTask{role: t.role, rank: t.rank, prio: prioWorker, waiting: start, code: yarn.ExitInvalid}
		switch t.role {
		case RoleScheduler:
			at.prio = prioScheduler
		case RoleServer:
			at.prio = prioServer
		}
		j.tasks = append(j.tasks, at)
	}

	if _, err := opts.AM.Register(ctx, opts.Host, trackerPort, trackingURL); err != nil {
		return Result{State: Failed}, fmt.Errorf("tracker: register the application master: %w", err)
	}
	j.log.WithFields(logrus.Fields{"tracker": j.env.trackerAddr, "root_port": opts.RootPort, "status_url": trackingURL,
		"allocation_timeout": opts.AllocationTimeout.String()}).Info("application master registered")

	st, diag, runErr := j.run(ctx)
	// Whatever happened, nothing keeps running and the AM unregisters.
	sctx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	j.stopAll(sctx)
	cancelStop()
	// Unregistering has a bound of its own, whatever stopping took.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	final := yarn.FinalSucceeded
	switch st {
	case Failed:
		final = yarn.FinalFailed
	case Killed:
		final = yarn.FinalKilled
	}
	j.state.Finish(st, diag)
	j.report()
	if err := opts.AM.Finish(fctx, final, diag, ""); err != nil {
		err = fmt.Errorf("tracker: unregister the application master: %w", err)
		if runErr == nil {
			runErr = err
		} else {
			runErr = errors.Join(runErr, err)
		}
	}
	res := j.result(st)
	res.Wall = time.Since(start)
	res.Status = j.state.Status()
	return res, runErr
}

// run is the allocate loop; it returns how the job ended.
func (j *amJob) run(ctx context.Context) (JobState, string, error) {
	tick := time.NewTicker(j.opts.Heartbeat)
	defer tick.Stop()
	lastReport := time.Time{}
	for {
		if err := j.heartbeat(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			return Failed, err.Error(), err
		}
		if j.restart != "" {
			if err := j.restartAll(ctx); err != nil {
				return Failed, err.Error(), err
			}
			continue
		}
		if j.allDone() {
			if err := j.files.commitModel(ctx, j.state.Status()); err != nil {
				err = fmt.Errorf("tracker: every task exited 0, but the model is not complete: %w", err)
				return Failed, err.Error(), err
			}
			return Succeeded, j.summary(), nil
		}
		if err := j.checkAllocationTimeout(); err != nil {
			return Failed, err.Error(), err
		}
		if time.Since(lastReport) >= time.Second {
			j.report()
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
		case reason := <-j.state.KillRequests():
			err := fmt.Errorf("%w: %s", ErrKillRequested, reason)
			return Killed, err.Error(), err
		case <-tick.C:
			continue
		}
		break
	}
	err := fmt.Errorf("tracker: job stopped: %w", context.Cause(ctx))
	return Killed, err.Error(), err
}

// heartbeat sends one allocate with the asks that changed and the
// releases, starts the containers that came and handles the ones that
// completed. It returns an error that fails the job.
func (j *amJob) heartbeat(ctx context.Context) error {
	req := yarn.AllocateRequest{Asks: j.asks(), Releases: j.releases, Progress: j.progress()}
	resp, err := j.opts.AM.Allocate(ctx, req)
	if err != nil {
		return fmt.Errorf("tracker: heartbeat to the resource manager: %w", err)
	}
	j.releases = nil
	j.nodes = resp.NumClusterNodes
	if resp.Command != yarn.AMCommandNone {
		return fmt.Errorf("tracker: the resource manager ordered AM command %d (resync/shutdown), which this AM does not support", resp.Command)
	}
	changed := false
	for _, c := range resp.Allocated {
		if j.outst[c.Priority] > 0 {
			j.outst[c.Priority]--
		}
		if err := j.place(ctx, c); err != nil {
			return err
		}
		changed = true
	}
	// Every completion is taken in, even after one that fails the job:
	// the ResourceManager reports each only once.
	var failed error
	for _, s := range resp.Completed {
		t := j.byCont[s.ID]
		if t == nil {
			continue // released or surplus
		}
		delete(j.byCont, s.ID)
		changed = true
		if j.restart != "" || failed != nil {
			// Everything starts again, or stops: this exit does not count.
			t.ct, t.code = nil, s.ExitStatus
			continue
		}
		failed = j.onComplete(t, s)
	}
	if changed {
		j.report()
	}
	return failed
}

// asks returns an Ask for every priority whose number of waiting tasks
// differs from what the ResourceManager still owes. Servers and workers
// are asked for only once the scheduler has a node.
func (j *amJob) asks() []yarn.Ask {
	want := map[int32]int32{}
	for _, t := range j.tasks {
		if t.pending() && (t.prio == prioScheduler || j.spec.NumServers == 0 || j.rootHost != "") {
			want[t.prio]++
		}
	}
	var asks []yarn.Ask
	for _, p := range []int32{prioScheduler, prioServer, prioWorker} {
		if want[p] == j.outst[p] {
			continue
		}
		asks = append(asks, yarn.Ask{Priority: p, Count: want[p], Resource: j.resource(p)})
		j.outst[p] = want[p]
	}
	return asks
}

func (j *amJob) resource(prio int32) yarn.Resource {
	mem, cores := j.spec.ServerMemoryMB, j.spec.ServerCores
	if prio == prioWorker {
		mem, cores = j.spec.WorkerMemoryMB, j.spec.WorkerCores
	}
	if mem <= 0 {
		mem = 1024
	}
	if cores <= 0 {
		cores = 1
	}
	return yarn.Resource{MemoryMB: int64(mem), VCores: int32(cores)}
}

// place gives container c to a waiting task of its priority and starts
// it, or releases it.
func (j *amJob) place(ctx context.Context, c yarn.Container) error {
	var t *amTask
	for _, cand := range j.tasks {
		if cand.prio == c.Priority && cand.pending() {
			t = cand
			break
		}
	}
	if t == nil || (t.prio != prioScheduler && j.spec.NumServers > 0 && j.rootHost == "") {
		j.log.WithField("container", c.ID.String()).Debug("releasing surplus container")
		j.releases = append(j.releases, c.ID)
		return nil
	}
	if t.badNodes[c.Node] && t.rejects < maxNodeRejects && j.nodes > int32(len(t.badNodes)) {
		t.rejects++
		j.log.WithFields(logrus.Fields{"task": t.String(), "node": c.Node.String()}).Info("container on a node where the task failed; asking for another")
		j.releases = append(j.releases, c.ID)
		return nil
	}
	launch := yarn.LaunchContext{
		Commands:       append(shellWords(j.spec.Command), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"),
		Env:            j.containerEnv(ctx, t, c),
		LocalResources: j.opts.Resources,
	}
	if err := j.opts.NM.StartContainer(ctx, c, launch); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		j.releases = append(j.releases, c.ID)
		return j.onFailure(t, c, fmt.Sprintf("container %s did not start on %s: %v", c.ID, c.Node, err), yarn.ExitInvalid)
	}
	ct := c
	t.ct, t.waiting = &ct, time.Time{}
	j.byCont[c.ID] = t
	if t.role == RoleScheduler {
		j.rootHost = j.nodeAddr(ctx, c.Node.Host)
	}
	j.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt, "container": c.ID.String(), "node": c.Node.String()}).Info("task started")
	return nil
}

// containerEnv is the environment of t's current attempt in c: the
// AM's extra settings, the job's, then the contract, which wins.
// DMLC_NODE_HOST and DMLC_PS_ROOT_URI are the nodes' IP addresses, as
// ps-lite needs: it binds them with ZeroMQ, which takes no host names.
func (j *amJob) containerEnv(ctx context.Context, t *amTask, c yarn.Container) map[string]string {
	node := j.nodeAddr(ctx, c.Node.Host)
	pl := placement{cluster: "yarn", node: node, root: j.rootHost}
	if t.role == RoleScheduler {
		pl.root = node
	}
	env := j.env.taskEnv(&task{role: t.role, rank: t.rank, attempt: t.attempt}, pl, j.opts.Env)
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// nodeAddr is the IP address of a NodeManager's host as this AM resolves
// it (the first IPv4 address, else the first), which the containers use
// to reach each other; the host name itself when it does not resolve
// (logged), so that the task's own failure names it.
func (j *amJob) nodeAddr(ctx context.Context, host string) string {
	if a, ok := j.addrs[host]; ok {
		return a
	}
	addr := host
	if net.ParseIP(host) == nil {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
		cancel()
		switch {
		case err != nil || len(ips) == 0:
			j.log.WithError(err).WithField("node", host).Warn("node's address not found; the tasks get its name")
		default:
			addr = ips[0].IP.String()
			for _, ip := range ips {
				if ip.IP.To4() != nil {
					addr = ip.IP.String()
					break
				}
			}
		}
	}
	j.addrs[host] = addr
	return addr
}

// onComplete handles the end of t's container.
func (j *amJob) onComplete(t *amTask, s yarn.ContainerStatus) error {
	c := *t.ct
	t.ct = nil
	t.code = s.ExitStatus
	if s.ExitStatus == yarn.ExitSuccess {
		t.done = true
		j.log.WithFields(logrus.Fields{"task": t.String(), "container": s.ID.String()}).Info("task done")
		return nil
	}
	msg := fmt.Sprintf("%s in container %s on %s", describeExitStatus(s.ExitStatus), s.ID, c.Node)
	if d := strings.TrimSpace(s.Diagnostics); d != "" {
		if len(d) > maxDiagnostics {
			d = "…" + d[len(d)-maxDiagnostics:]
		}
		msg += "; YARN diagnostics: " + d
	}
	return j.onFailure(t, c, msg, s.ExitStatus)
}

// onFailure restarts t in a new container, or fails the job when t has
// used its attempts.
func (j *amJob) onFailure(t *amTask, c yarn.Container, msg string, code int32) error {
	t.code = code
	if t.role == RoleWorker {
		j.state.WorkerLost(t.rank)
	}
	if t.badNodes == nil {
		t.badNodes = map[yarn.NodeID]bool{}
	}
	t.badNodes[c.Node] = true
	if code == conf.ExitRestartJob {
		// Not the task's failure: the job's restarts are bounded instead.
		t.ct, t.rejects, t.waiting = nil, 0, time.Now()
		j.restart = fmt.Sprintf("%s %d asked to start the whole job again (%s)", t.role, t.rank, msg)
		return nil
	}
	failed := fmt.Sprintf("%s %d failed: %s, on attempt %d of %d", t.role, t.rank, msg, t.attempt+1, j.spec.MaxAttempts)
	if t.attempt+1 >= j.spec.MaxAttempts {
		return errors.New("tracker: " + failed)
	}
	t.attempt++
	t.ct, t.rejects, t.waiting = nil, 0, time.Now()
	if t.role != RoleWorker {
		j.restart = failed
		return nil
	}
	j.log.WithFields(logrus.Fields{"task": t.String(), "attempt": t.attempt - 1, "exit": code}).Warn("task failed; restarting it")
	return nil
}

// restartAll starts every task again, from the newest usable checkpoint
// (jobFiles.restartPoint), once YARN reports every container of the job
// complete: the job cannot go on after losing its scheduler or a server.
func (j *amJob) restartAll(ctx context.Context) error {
	failed := j.restart
	j.restart = ""
	p, err := j.files.restartPoint(ctx, failed, !j.state.Status().FirstData.IsZero())
	if err != nil {
		return errors.New("tracker: " + err.Error())
	}
	j.log.WithFields(logrus.Fields{"cause": failed, "checkpoint": p.uri, "epoch": p.epoch}).Warn("starting the whole job again")
	sctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	j.stopAll(sctx)
	if n := len(j.byCont); n > 0 {
		return fmt.Errorf("tracker: %s, and the job cannot start again: %d containers were not reported complete within %v of being stopped", failed, n, finishTimeout)
	}
	j.state.Rewind(p.epoch)
	now := time.Now()
	for _, t := range j.tasks {
		t.done, t.ct, t.waiting, t.rejects = false, nil, now, 0
	}
	// The scheduler is placed first again, on a new port (the old one
	// may be what failed it); the others follow its node.
	j.rootHost = ""
	j.env.rootPort = 20000 + rand.IntN(10000)
	j.report()
	return nil
}

// summary is the diagnostic of a job that succeeded: what it read and
// its last metrics.
func (j *amJob) summary() string {
	st := j.state.Status()
	s := fmt.Sprintf("all %d tasks exited 0", len(j.tasks))
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
	if j.files.restarts > 0 {
		s += fmt.Sprintf("; started again %d time(s) from %s", j.files.restarts, orScratch(j.files.from.uri))
	}
	return s
}

func orScratch(uri string) string {
	if uri == "" {
		return "scratch"
	}
	return "checkpoint " + uri
}

// describeExitStatus names a container's exit status.
func describeExitStatus(code int32) string {
	s := "exit status " + strconv.Itoa(int(code))
	switch code {
	case yarn.ExitInvalid:
		return s + " (not set)"
	case yarn.ExitAborted:
		return s + " (ABORTED: released, or lost with its node)"
	case yarn.ExitDisksFailed:
		return s + " (DISKS_FAILED)"
	case yarn.ExitPreempted:
		return s + " (PREEMPTED)"
	case yarn.ExitKilledExceededVMem:
		return s + " (KILLED_EXCEEDED_VMEM: over its virtual memory limit)"
	case yarn.ExitKilledExceededPMem:
		return s + " (KILLED_EXCEEDED_PMEM: over its memory limit)"
	case yarn.ExitKilledByAppMaster:
		return s + " (KILLED_BY_APPMASTER)"
	case yarn.ExitKilledByResourceManager:
		return s + " (KILLED_BY_RESOURCEMANAGER)"
	case yarn.ExitKilledAfterAppCompletion:
		return s + " (KILLED_AFTER_APP_COMPLETION)"
	case 137:
		return s + " (SIGKILL)"
	case 143:
		return s + " (SIGTERM)"
	}
	return s
}

// checkAllocationTimeout fails the job when a task has waited too long
// for a container.
func (j *amJob) checkAllocationTimeout() error {
	now := time.Now()
	late := false
	missing := map[string]int{}
	for _, t := range j.tasks {
		if !t.pending() {
			continue
		}
		missing[t.role]++
		if now.Sub(t.waiting) > j.opts.AllocationTimeout {
			late = true
		}
	}
	if !late {
		return nil
	}
	var parts []string
	for _, r := range []string{RoleScheduler, RoleServer, RoleWorker} {
		if n := missing[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return fmt.Errorf("tracker: containers did not come within %v: still missing %s (cluster of %d nodes)",
		j.opts.AllocationTimeout, strings.Join(parts, ", "), j.nodes)
}

func (j *amJob) allDone() bool {
	for _, t := range j.tasks {
		if !t.done {
			return false
		}
	}
	return true
}

func (j *amJob) progress() float32 {
	done := 0
	for _, t := range j.tasks {
		if t.done {
			done++
		}
	}
	return float32(done) / float32(len(j.tasks))
}

// stopAll stops every running container, cancels the asks, and waits
// (bounded by ctx) until the ResourceManager reports them complete.
func (j *amJob) stopAll(ctx context.Context) {
	for _, t := range j.tasks {
		if t.ct == nil {
			continue
		}
		if err := j.opts.NM.StopContainer(ctx, *t.ct); err != nil {
			j.log.WithError(err).WithField("container", t.ct.ID.String()).Warn("stop container")
			continue
		}
		t.code = yarn.ExitKilledByAppMaster // until the ResourceManager reports it
	}
	var asks []yarn.Ask
	for p, n := range j.outst {
		if n > 0 {
			asks = append(asks, yarn.Ask{Priority: p, Count: 0, Resource: j.resource(p)})
			j.outst[p] = 0
		}
	}
	tick := time.NewTicker(j.opts.Heartbeat)
	defer tick.Stop()
	for len(j.byCont) > 0 || len(asks) > 0 || len(j.releases) > 0 {
		resp, err := j.opts.AM.Allocate(ctx, yarn.AllocateRequest{Asks: asks, Releases: j.releases, Progress: j.progress()})
		if err != nil {
			j.log.WithError(err).Warn("heartbeat while stopping containers")
			return
		}
		asks, j.releases = nil, nil
		for _, c := range resp.Allocated {
			j.releases = append(j.releases, c.ID) // too late: give it back
		}
		for _, s := range resp.Completed {
			if t := j.byCont[s.ID]; t != nil {
				delete(j.byCont, s.ID)
				t.ct, t.code = nil, s.ExitStatus
				if s.ExitStatus == yarn.ExitSuccess {
					t.done = true
				}
			}
		}
		if len(j.byCont) == 0 && len(j.releases) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			j.log.WithField("containers", len(j.byCont)).Warn("containers not reported complete; the resource manager ends them when the AM unregisters")
			return
		case <-tick.C:
		}
	}
}

func (j *amJob) result(st JobState) Result {
	return jobResult(st, j.spec.Output, j.views())
}

// report publishes the containers' counts and calls OnStatus.
func (j *amJob) report() { publishRoles(j.state, j.views(), j.opts.OnStatus) }

func (j *amJob) views() []taskView {
	out := make([]taskView, len(j.tasks))
	for i, t := range j.tasks {
		out[i] = taskView{role: t.role, rank: t.rank, attempt: t.attempt, code: int(t.code), running: t.ct != nil, done: t.done}
	}
	return out
}

// shellWords quotes a command for a NodeManager's launch script, which
// runs `exec /bin/bash -c "<words joined by spaces>"`: each word is
// single-quoted for the inner bash, then the characters special inside
// the outer double quotes are escaped, so the command runs as given.
func shellWords(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		q := "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		out[i] = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(q)
	}
	return out
}
