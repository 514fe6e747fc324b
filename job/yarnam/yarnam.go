package yarnam

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/job/webauth"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// Options are the dependencies of Run.
type Options struct {
	// AM is the registered-to-be connection to the ResourceManager's
	// scheduler; Run registers, heartbeats and unregisters it, but does
	// not close it. Required.
	AM *yarn.AMClient
	// NM starts and stops containers; nil means yarn.NewNMClient(AM),
	// closed when Run returns.
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
	Planner tracker.Planner
	// Resolver reaches the output and checkpoint directories (HDFS); nil
	// means local paths only.
	Resolver job.Resolver
	// Rerun marks a later attempt of the ApplicationMaster (see
	// job.Options.Rerun).
	Rerun bool
	// AllocationTimeout is how long a task may wait for a container
	// before the job fails; 0 means DefaultAllocationTimeout.
	AllocationTimeout time.Duration
	// Heartbeat is the interval of the allocate loop; 0 means
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// RootPort is the port the scheduler's first run listens on
	// (DMLC_PS_ROOT_PORT); 0 means one picked at random in [20000, 30000).
	// Later runs pick at random.
	RootPort int
	// OnStatus, when set, is called about once a second and at every
	// change of the containers with the job's status.
	OnStatus func(tracker.Status)
	// Secret is the job secret, shared with the client that submitted the
	// job so that it can ask the tracker for the job's status; "" means a
	// new random one. Ignored when Keys is set.
	Secret string
	// NodeNamesWithPort says that the ResourceManager names nodes
	// host:port (yarn.scheduler.include-port-in-node-name), as the
	// blacklist must name them; otherwise a node is named by its host,
	// unless the AM has seen another NodeManager on the same host.
	NodeNamesWithPort bool
	// LogDir, when set, is the URI of a directory (reached through
	// Resolver) into which the standard output and error of every
	// container that ended are copied from its NodeManager, named by
	// job.LogName, before the AM unregisters: where "ps-submit logs"
	// finds them once the application is over.
	LogDir string
	// User is the user the NodeManagers' web services are asked as
	// (user.name) for the containers' logs; "" asks anonymously.
	User string
	// Keys are the job's keys (job.Options.Keys), shared with the client;
	// nil means new ones with Secret.
	Keys *conf.JobKeys
	// WebProxy, when set, serves the status page only through the
	// ResourceManager's web proxy (webauth.Proxy), as YARN's AmIpFilter
	// does; nil serves it to anyone who reaches it (a warning is logged).
	WebProxy *webauth.ProxyOptions
	// KeysFile is the path of the job's keys file in a task container,
	// which Resources ship (a private resource, conf.JobKeysFile); ""
	// means a file the AM writes on its own host, which only containers
	// on that host can read.
	KeysFile string
	// MoreAttempts says that YARN starts another attempt of the
	// ApplicationMaster if this one ends without unregistering: this is
	// not the application's last attempt. A signal (the end of ctx) then
	// stops the containers and leaves the application to the next
	// attempt instead of ending it KILLED, since a NodeManager that shuts
	// down, or a preempted AM container, stops the AM the same way; a
	// kill of the application has ended it already.
	MoreAttempts bool
	// Tokens returns the Credentials blob of a task container started
	// now: on a Kerberos-secured cluster, the application's delegation
	// tokens (HDFS, the ResourceManager's), with which the NodeManager
	// localizes the task's files and the task reaches HDFS; newer ones as
	// they are obtained (past the first tokens' maximum lifetime). nil,
	// or a nil blob, means none.
	Tokens func() []byte
}

func (o Options) tokens() []byte {
	if o.Tokens == nil {
		return nil
	}
	return o.Tokens()
}

// Defaults of Options.
const (
	DefaultAllocationTimeout = 10 * time.Minute
	DefaultHeartbeat         = 250 * time.Millisecond
)

// Priorities at which the AM asks for each role's containers: the
// scheduler first, then the servers, then the workers.
const (
	prioScheduler int32 = 0
	prioServer    int32 = 1
	prioWorker    int32 = 2
)

const (
	// finishTimeout bounds unregistering and stopping containers at the end.
	finishTimeout = 30 * time.Second
	// rpcTimeout bounds one heartbeat to the ResourceManager or one call of
	// a NodeManager.
	rpcTimeout = time.Minute
	// maxNodeRejects bounds how often one attempt of a task turns down a
	// container on a node where it failed before.
	maxNodeRejects = 3
	// maxDiagnostics bounds the part of a container's YARN diagnostics
	// quoted in the job's diagnostic.
	maxDiagnostics = 2000
	// resolveTimeout bounds the lookup of a node's address.
	resolveTimeout = 10 * time.Second
)

// ErrNotUnregistered is wrapped by Run's error when the AM did not
// unregister: the ResourceManager then ends the attempt as failed, and
// starts another if the application has attempts left. Whatever the
// next attempt needs (the staged files) must stay.
var ErrNotUnregistered = errors.New("the application master did not unregister")

// Run runs spec from inside a YARN ApplicationMaster container: it
// prepares the job and serves the tracker RPC on opts.Host (job.New),
// serves a status page, registers with the ResourceManager (the status
// page as the tracking URL), and runs the job (job.Job.Run, which holds
// the restart rules) on a Cluster of containers. Whatever happens it
// stops every container, and once registered it unregisters (bounded by
// 30 s): SUCCEEDED
// with a summary when every task exited 0 and the model is committed,
// KILLED for a kill over the tracker RPC or the end of ctx, FAILED
// otherwise, with a diagnostic naming the cause, which Run's error says
// too. It does not unregister when it fails before registering, nor at the
// end of ctx when opts.MoreAttempts; its error then wraps
// ErrNotUnregistered, as it does when unregistering fails.
func Run(ctx context.Context, spec job.JobSpec, opts Options) (job.Result, error) {
	start := time.Now()
	failed := func(err error) (job.Result, error) {
		return job.Result{State: tracker.Failed, Wall: time.Since(start)}, fmt.Errorf("%w (%w)", err, ErrNotUnregistered)
	}
	if err := spec.Validate(); err != nil {
		return failed(err)
	}
	if opts.AM == nil || opts.Host == "" {
		return failed(errors.New("yarnam: Run needs an AM client and the AM's host"))
	}
	if opts.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		opts.Log = logrus.NewEntry(l)
	}
	if opts.NM == nil {
		opts.NM = yarn.NewNMClient(opts.AM)
		defer opts.NM.Close()
	}
	log := opts.Log.WithField("attempt", opts.AM.Attempt())
	// No task's registration wait may expire while the AM still waits for
	// the containers of the gang (gang.go); a setting of the job's own wins.
	opts.Env = append([]string{registerTimeoutEnv(opts.AllocationTimeout)}, opts.Env...)
	j, err := job.New(ctx, spec, job.Options{Log: log, Planner: opts.Planner, Resolver: opts.Resolver,
		OnStatus: opts.OnStatus, Listen: ":0", Host: opts.Host, Secret: opts.Secret, Rerun: opts.Rerun,
		Keys: opts.Keys, KeysFile: opts.KeysFile,
		StopTimeout: finishTimeout})
	if err != nil {
		return failed(err)
	}
	defer j.Close()
	page, err := web.Serve(":0", web.Options{Name: spec.Name, State: j.State(), Logs: nmLogs(opts.User),
		Filter: webFilter(opts.WebProxy, log)}, log)
	if err != nil {
		return failed(fmt.Errorf("yarnam: %w", err))
	}
	defer page.Close()
	trackingURL := "http://" + net.JoinHostPort(opts.Host, strconv.Itoa(page.Port())) + "/"
	_, port, _ := net.SplitHostPort(j.TrackerAddr())
	trackerPort, _ := strconv.Atoi(port)
	if _, err := opts.AM.Register(ctx, opts.Host, trackerPort, trackingURL); err != nil {
		return failed(fmt.Errorf("yarnam: register the application master: %w", err))
	}
	c := NewCluster(ctx, spec, opts, log)
	c.SetInputPlaces(inputPlaces(j.State().Shards()))
	log.WithFields(logrus.Fields{"tracker": j.TrackerAddr(), "status_url": trackingURL,
		"allocation_timeout": c.opts.AllocationTimeout.String()}).Info("application master registered")

	res, runErr := j.Run(ctx, c)
	// Whatever happened, nothing keeps running and the AM unregisters.
	c.Close()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if opts.LogDir != "" && opts.Resolver != nil {
		page.Handler().Sample()
		if err := writeFinalStatus(fctx, opts.Resolver, opts.LogDir, page.Handler().Status()); err != nil {
			log.WithError(err).Warn("final status not kept")
		}
	}
	final, diag := yarn.FinalSucceeded, res.Summary()
	switch res.State {
	case tracker.Failed:
		final = yarn.FinalFailed
	case tracker.Killed:
		final = yarn.FinalKilled
	}
	if runErr != nil {
		diag = runErr.Error()
	}
	if res.State == tracker.Killed && ctx.Err() != nil && opts.MoreAttempts {
		log.Warn("application master stopped by a signal: not unregistering, YARN starts the next attempt unless the application was killed")
		res.Wall = time.Since(start)
		return res, fmt.Errorf("yarnam: stopped before the job ended: %w", ErrNotUnregistered)
	}
	if err := opts.AM.Finish(fctx, final, diag, ""); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("yarnam: unregister the application master: %w (%w)", err, ErrNotUnregistered))
	}
	res.Wall = time.Since(start)
	return res, runErr
}

// Cluster is a job.Cluster of YARN containers, run from the
// ApplicationMaster: an allocate loop asks the ResourceManager for one
// container per launch (the scheduler at priority 0, servers at 1,
// workers at 2; the scheduler's size is a server's), and starts the
// command in each container that comes with the launch's environment
// (DMLC_NODE_HOST the IP address of the container's node, which ps-lite
// binds). A launch of a task that failed on a node prefers another node
// (best effort: such a container is released and asked for again, at
// most a few times per launch, and only when the cluster has other
// nodes). A launch that waits longer than AllocationTimeout for a
// container fails the cluster (a Failed event), as does a failed
// heartbeat.
type Cluster struct {
	spec job.JobSpec
	opts Options
	log  *logrus.Entry
	ctx  context.Context // the loop's: ends with Close, not with the job's ctx
	stop context.CancelFunc
	wg   sync.WaitGroup

	events *job.EventQueue
	// beat is signalled after every heartbeat, for StopAll.
	beat chan struct{}
	// copies are the copies of ended containers' logs under way.
	copies sync.WaitGroup
	// addrs caches the nodes' addresses; the loop's own.
	addrs map[string]string

	mu       sync.Mutex
	pending  []*launch // waiting for a container, in Start order
	starting map[int64]*launch
	byCont   map[yarn.ContainerID]*launch
	outst    map[int32]int32 // containers the ResourceManager still owes, per priority
	releases []yarn.ContainerID
	bad      map[job.Task]map[yarn.NodeID]bool
	// seen are the nodes containers came on; blacklist the nodes given
	// to YARN's blacklist, blAdd those not yet sent (nodes.go).
	seen      map[yarn.NodeID]bool
	blacklist map[yarn.NodeID]bool
	blAdd     []string
	// reserve counts, per priority, the containers asked for launches
	// still to come; held are those that came for them (gang.go). gang
	// is set once the current run's gang was asked for, until StopAll.
	reserve map[int32]int32
	held    []yarn.Container
	gang    bool
	// hosts and racks store the input; the workers' asks name them.
	hosts, racks []string
	nodes        int32
	ndone        int
	// progress is the training's (SetProgress), once progressKnown.
	progress      float32
	progressKnown bool
	ntasks        int
	failed        bool
	ports         int
}

// launch is a job.Launch in the cluster.
type launch struct {
	l       job.Launch
	prio    int32
	waiting time.Time // when it began to wait for a container
	rejects int
	ct      yarn.Container
	stopped bool
}

// NewCluster returns a Cluster whose allocate loop runs until Close.
// The ApplicationMaster must be registered.
func NewCluster(ctx context.Context, spec job.JobSpec, opts Options, log *logrus.Entry) *Cluster {
	if opts.AllocationTimeout <= 0 {
		opts.AllocationTimeout = DefaultAllocationTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if log == nil {
		log = opts.Log
	}
	c := &Cluster{spec: spec, opts: opts, log: log, events: job.NewEventQueue(), beat: make(chan struct{}, 1),
		addrs: map[string]string{}, starting: map[int64]*launch{}, byCont: map[yarn.ContainerID]*launch{},
		outst: map[int32]int32{}, bad: map[job.Task]map[yarn.NodeID]bool{}, ntasks: len(job.Tasks(spec)),
		seen: map[yarn.NodeID]bool{}, blacklist: map[yarn.NodeID]bool{}, reserve: map[int32]int32{}}
	c.ctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	c.wg.Add(1)
	go c.loop()
	return c
}

// Name is "yarn".
func (c *Cluster) Name() string { return "yarn" }

// SchedulerPort is Options.RootPort the first time, then a port picked
// at random in [20000, 30000): YARN gives no way to learn a port a
// container bound, so it is chosen before the scheduler's container
// exists; a scheduler that cannot bind it fails and starts again (alone,
// or with the whole job) on another.
func (c *Cluster) SchedulerPort(context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ports++
	if c.ports == 1 && c.opts.RootPort > 0 {
		return c.opts.RootPort, nil
	}
	return 20000 + rand.IntN(10000), nil
}

// Events delivers the launches' Placed and Exited events and the
// cluster's failure.
func (c *Cluster) Events() <-chan job.Event { return c.events.Out() }

// Start asks for a container for l; the allocate loop starts l in it.
func (c *Cluster) Start(_ context.Context, l job.Launch) error {
	prio := prioWorker
	switch l.Task.Role {
	case conf.RoleScheduler:
		prio = prioScheduler
	case conf.RoleServer:
		prio = prioServer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.takeReservedLocked(prio)
	if prio == prioScheduler && !c.gang {
		// A run's first scheduler; one started again alone while the
		// others run asks for no gang.
		c.reserveGangLocked(l)
	}
	c.pending = append(c.pending, &launch{l: l, prio: prio, waiting: time.Now()})
	return nil
}

// Stop gives up launch id while it waits for a container, or stops its
// container, without waiting for the ResourceManager to report it
// complete; its completion is not reported.
func (c *Cluster) Stop(_ context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = slices.DeleteFunc(c.pending, func(ln *launch) bool { return ln.l.ID == id })
	if ln := c.starting[id]; ln != nil {
		ln.stopped = true // place stops it once started
	}
	for _, ln := range c.byCont {
		if ln.l.ID != id || ln.stopped {
			continue
		}
		ln.stopped = true
		ct := ln.ct
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			sctx, cancel := context.WithTimeout(c.ctx, rpcTimeout)
			defer cancel()
			if err := c.opts.NM.StopContainer(sctx, ct); err != nil {
				c.log.WithError(err).WithField("container", ct.ID.String()).Warn("stop container")
			}
		}()
	}
	return nil
}

// StopAll gives up the launches waiting for a container, stops every
// container, and waits (bounded by ctx) until the ResourceManager
// reports them complete and every surplus container is released.
func (c *Cluster) StopAll(ctx context.Context) error {
	c.mu.Lock()
	c.pending = nil
	c.releaseHeldLocked()
	c.ndone = 0
	var stop []yarn.Container
	for _, ln := range c.starting {
		ln.stopped = true
	}
	for _, ln := range c.byCont {
		if !ln.stopped {
			ln.stopped = true
			stop = append(stop, ln.ct)
		}
	}
	c.mu.Unlock()
	for _, ct := range stop {
		sctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		if err := c.opts.NM.StopContainer(sctx, ct); err != nil {
			c.log.WithError(err).WithField("container", ct.ID.String()).Warn("stop container")
		}
		cancel()
	}
	for {
		c.mu.Lock()
		left := len(c.byCont) + len(c.starting)
		asks := 0
		for _, n := range c.outst {
			asks += int(n)
		}
		flushed := left == 0 && asks == 0 && len(c.releases) == 0
		c.mu.Unlock()
		if flushed {
			return nil
		}
		select {
		case <-c.beat:
		case <-ctx.Done():
			return fmt.Errorf("yarnam: %d containers not reported complete after being stopped: %w", left, context.Cause(ctx))
		}
	}
}

// Close stops every container (bounded by 30 s), then the allocate
// loop and the delivery of events.
func (c *Cluster) Close() {
	ctx, cancel := context.WithTimeout(c.ctx, finishTimeout)
	if err := c.StopAll(ctx); err != nil {
		c.log.WithError(err).Warn("containers not reported complete; the resource manager ends them when the AM unregisters")
	}
	cancel()
	c.stop()
	c.wg.Wait()
	c.copies.Wait()
	c.events.Close()
}

// loop heartbeats until Close.
func (c *Cluster) loop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.opts.Heartbeat)
	defer tick.Stop()
	for {
		err := c.heartbeat()
		if err == nil {
			err = c.checkAllocationTimeout()
		}
		if err != nil && c.ctx.Err() == nil {
			c.mu.Lock()
			first := !c.failed
			c.failed = true
			c.mu.Unlock()
			if first {
				c.events.Push(job.Event{Kind: job.Failed, Err: err})
			}
		}
		select {
		case c.beat <- struct{}{}:
		default:
		}
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// heartbeat sends one allocate with the asks that changed and the
// releases, starts the containers that came and reports the ones that
// completed.
func (c *Cluster) heartbeat() error {
	c.mu.Lock()
	place := c.matchHeldLocked()
	c.mu.Unlock()
	for _, ln := range place {
		c.place(ln)
	}
	c.mu.Lock()
	req := yarn.AllocateRequest{Asks: c.asksLocked(), Releases: c.releases, Progress: c.progressLocked(), BlacklistAdd: c.blAdd}
	c.releases, c.blAdd = nil, nil
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, rpcTimeout)
	resp, err := c.opts.AM.Allocate(ctx, req)
	cancel()
	if err != nil {
		c.mu.Lock()
		c.releases = append(c.releases, req.Releases...)
		c.blAdd = append(c.blAdd, req.BlacklistAdd...)
		c.mu.Unlock()
		return fmt.Errorf("yarnam: heartbeat to the resource manager: %w", err)
	}
	c.mu.Lock()
	c.nodes = resp.NumClusterNodes
	place = place[:0]
	for _, ct := range resp.Allocated {
		c.seen[ct.Node] = true
		if c.outst[ct.Priority] > 0 {
			c.outst[ct.Priority]--
		}
		if ln := c.matchLocked(ct); ln != nil {
			ln.ct = ct
			c.starting[ln.l.ID] = ln
			place = append(place, ln)
		}
	}
	c.mu.Unlock()
	for _, ln := range place {
		c.place(ln)
	}
	// Every completion is taken in: the ResourceManager reports each only
	// once.
	c.mu.Lock()
	for _, s := range resp.Completed {
		ln := c.byCont[s.ID]
		if ln == nil {
			continue // released or surplus
		}
		delete(c.byCont, s.ID)
		c.copyLogsLocked(ln)
		if ln.stopped {
			continue
		}
		lost := lostExit(s.ExitStatus)
		switch {
		case s.ExitStatus == yarn.ExitSuccess:
			c.ndone++
		case !lost:
			c.badNodeLocked(ln)
		}
		ex := job.Exit{Code: int(s.ExitStatus), Desc: fmt.Sprintf("%s in container %s on %s", describeExitStatus(s.ExitStatus), s.ID, ln.ct.Node), Lost: lost}
		if d := tidyDiagnostics(s.Diagnostics); d != "" && s.ExitStatus != yarn.ExitSuccess {
			ex.Tail, ex.Diagnostics = "    "+strings.ReplaceAll(d, "\n", "\n    "), true
		}
		c.log.WithFields(logrus.Fields{"task": ln.l.Task.String(), "container": s.ID.String(), "exit": s.ExitStatus}).Info("container completed")
		c.events.Push(job.Event{Kind: job.Exited, ID: ln.l.ID, Exit: ex})
	}
	c.mu.Unlock()
	if resp.Command != yarn.AMCommandNone {
		return fmt.Errorf("yarnam: the resource manager ordered AM command %d (resync/shutdown), which this AM does not support", resp.Command)
	}
	return nil
}

// matchLocked gives container ct to the first launch of its priority
// waiting for one, holds it for a launch still to come (gang.go), or
// releases it (surplus, or on a node blacklisted or where the launch's
// task failed before). c.mu must be held.
func (c *Cluster) matchLocked(ct yarn.Container) *launch {
	for i, ln := range c.pending {
		if ln.prio != ct.Priority {
			continue
		}
		if c.avoidLocked(ln, ct.Node) {
			ln.rejects++
			c.log.WithFields(logrus.Fields{"task": ln.l.Task.String(), "node": ct.Node.String()}).Info("container on a node blacklisted or where the task failed; asking for another")
			c.releases = append(c.releases, ct.ID)
			return nil
		}
		c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
		return ln
	}
	if c.holdLocked(ct) {
		return nil
	}
	c.log.WithField("container", ct.ID.String()).Debug("releasing surplus container")
	c.releases = append(c.releases, ct.ID)
	return nil
}

// place starts ln in its container. It runs on the loop's goroutine,
// without c.mu.
func (c *Cluster) place(ln *launch) {
	ct := ln.ct
	node := c.nodeAddr(ct.Node.Host)
	lc := yarn.LaunchContext{
		Commands:       containerCommand(ln.l.Command),
		Env:            envMap(ln.l.Env(node, c.opts.Env)),
		LocalResources: c.opts.Resources,
		Tokens:         c.opts.tokens(),
	}
	ctx, cancel := context.WithTimeout(c.ctx, rpcTimeout)
	err := c.opts.NM.StartContainer(ctx, ct, lc)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.starting, ln.l.ID)
	if err != nil {
		c.releases = append(c.releases, ct.ID)
		if ln.stopped {
			return
		}
		c.badNodeLocked(ln)
		c.events.Push(job.Event{Kind: job.Exited, ID: ln.l.ID, Exit: job.Exit{Code: int(yarn.ExitInvalid),
			Desc: fmt.Sprintf("container %s did not start on %s: %v", ct.ID, ct.Node, err)}})
		return
	}
	c.byCont[ct.ID] = ln
	if ln.stopped {
		// Stopped while it started: stop it now; StopAll waits for it.
		go func() {
			sctx, cancel := context.WithTimeout(c.ctx, rpcTimeout)
			defer cancel()
			_ = c.opts.NM.StopContainer(sctx, ct)
		}()
		return
	}
	c.log.WithFields(logrus.Fields{"task": ln.l.Task.String(), "attempt": ln.l.Attempt, "container": ct.ID.String(), "node": ct.Node.String()}).Info("task started")
	c.events.Push(job.Event{Kind: job.Placed, ID: ln.l.ID, Node: node, NodeID: ct.Node.String(), Container: ct.ID.String(), Logs: ct.NodeHTTPAddress})
}

func (c *Cluster) badNodeLocked(ln *launch) {
	bad := c.bad[ln.l.Task]
	if bad == nil {
		bad = map[yarn.NodeID]bool{}
		c.bad[ln.l.Task] = bad
	}
	bad[ln.ct.Node] = true
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// asksLocked returns an Ask for every priority whose number of waiting
// launches differs from what the ResourceManager still owes. c.mu must
// be held.
func (c *Cluster) asksLocked() []yarn.Ask {
	want := map[int32]int32{}
	for _, ln := range c.pending {
		want[ln.prio]++
	}
	for p, n := range c.reserve {
		want[p] += max(0, n-c.countHeldLocked(p))
	}
	var asks []yarn.Ask
	for _, p := range []int32{prioScheduler, prioServer, prioWorker} {
		if want[p] == c.outst[p] {
			continue
		}
		asks = append(asks, yarn.Ask{Priority: p, Count: want[p], Resource: c.resource(p)})
		if p == prioWorker {
			asks = append(asks, c.placeAsksLocked(want[p])...)
		}
		c.outst[p] = want[p]
	}
	return asks
}

func (c *Cluster) resource(prio int32) yarn.Resource { return taskResource(c.spec, prio) }

// taskResource is the size of spec's containers at priority prio.
func taskResource(spec job.JobSpec, prio int32) yarn.Resource {
	role := conf.RoleServer
	if prio == prioWorker {
		role = conf.RoleWorker
	}
	return yarn.Resource{MemoryMB: int64(spec.MemoryMB(role)), VCores: int32(spec.Cores(role))}
}

// SetProgress sets the progress the ApplicationMaster reports to the
// ResourceManager (job.ProgressReporter): the training's, once known.
func (c *Cluster) SetProgress(p float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress, c.progressKnown = float32(min(max(p, 0), 1)), true
}

// progressLocked is the application's progress: the training's, and
// before its program says how many epochs it trains, the share of tasks
// done.
func (c *Cluster) progressLocked() float32 {
	switch {
	case c.progressKnown:
		return c.progress
	case c.ntasks == 0:
		return 0
	}
	return float32(min(c.ndone, c.ntasks)) / float32(c.ntasks)
}

// checkAllocationTimeout fails when a launch has waited too long for a
// container.
func (c *Cluster) checkAllocationTimeout() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	late := false
	missing := map[conf.Role]int{}
	for _, ln := range c.pending {
		missing[ln.l.Task.Role]++
		if now.Sub(ln.waiting) > c.opts.AllocationTimeout {
			late = true
		}
	}
	if !late {
		return nil
	}
	var parts []string
	for _, r := range []conf.Role{conf.RoleScheduler, conf.RoleServer, conf.RoleWorker} {
		if n := missing[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return fmt.Errorf("yarnam: containers did not come within %v: still missing %s (cluster of %d nodes)",
		c.opts.AllocationTimeout, strings.Join(parts, ", "), c.nodes)
}

// nodeAddr is the IP address of a NodeManager's host as this AM resolves
// it (the first IPv4 address, else the first), which the containers use
// to reach each other; the host name itself when it does not resolve
// (logged), so that the task's own failure names it. It runs on the
// loop's goroutine.
func (c *Cluster) nodeAddr(host string) string {
	if a, ok := c.addrs[host]; ok {
		return a
	}
	addr := host
	if net.ParseIP(host) == nil {
		rctx, cancel := context.WithTimeout(c.ctx, resolveTimeout)
		ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
		cancel()
		switch {
		case err != nil || len(ips) == 0:
			c.log.WithError(err).WithField("node", host).Warn("node's address not found; the tasks get its name")
		default:
			sort.SliceStable(ips, func(a, b int) bool { return ips[a].IP.To4() != nil && ips[b].IP.To4() == nil })
			addr = ips[0].IP.String()
		}
	}
	c.addrs[host] = addr
	return addr
}

// diagnosticStamp is the time a NodeManager puts before each part of a
// container's diagnostics.
var diagnosticStamp = regexp.MustCompile(`\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\]`)

// emptySection is the heading of a file's last bytes in a container's
// diagnostics ("Last 4096 bytes of stderr :").
var emptySection = regexp.MustCompile(`^Last \d+ bytes of \S+ :$`)

// tidyDiagnostics keeps what a completed container's diagnostics say
// beyond its exit status, at most the last maxDiagnostics bytes: a
// NodeManager repeats the part about a failed launch's exit, restates
// the container's id and exit code, and heads files that were empty.
// The parts are those of its time stamps, which go.
func tidyDiagnostics(d string) string {
	var (
		parts []string
		seen  = make(map[string]bool)
	)
	for _, part := range diagnosticStamp.Split(d, -1) {
		var lines []string
		launch := false // the part of a failed launch, which restates the id and code
		for i, l := range strings.Split(strings.TrimSpace(part), "\n") {
			l = strings.TrimRight(l, " \t\r")
			switch {
			case i == 0 && l == "Exception from container-launch.":
				launch = true
				continue
			case launch && (strings.HasPrefix(l, "Container id: ") || strings.HasPrefix(l, "Exit code: ")):
				continue
			case len(lines) > 0 && emptySection.MatchString(lines[len(lines)-1]) && (l == "" || emptySection.MatchString(l)):
				lines = lines[:len(lines)-1] // the file before was empty
				if l == "" {
					continue
				}
			}
			lines = append(lines, l)
		}
		for len(lines) > 0 && (lines[len(lines)-1] == "" || emptySection.MatchString(lines[len(lines)-1])) {
			lines = lines[:len(lines)-1]
		}
		part = strings.TrimSpace(strings.Join(lines, "\n"))
		if part != "" && !seen[part] {
			seen[part] = true
			parts = append(parts, part)
		}
	}
	out := strings.Join(parts, "\n")
	if len(out) > maxDiagnostics {
		out = out[len(out)-maxDiagnostics:]
		if i := strings.IndexByte(out, '\n'); i >= 0 {
			out = out[i+1:]
		}
		out = "…\n" + out
	}
	return out
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
