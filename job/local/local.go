package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/job/webauth"
	"github.com/spindle-ps/spindle/tracker"
)

// Node is where every task of a local job runs, as the tasks reach each
// other.
const Node = "127.0.0.1"

// Options are the dependencies of Run.
type Options struct {
	// Environ is the environment the children inherit (os.Environ()).
	Environ []string
	// Stdout receives the children's output, each line prefixed with its
	// role and rank.
	Stdout io.Writer
	// Log receives the launcher's own messages.
	Log *logrus.Entry
	// Planner cuts the inputs into shards; nil means the job has no
	// inputs to shard.
	Planner tracker.Planner
	// Resolver reaches the output (local or HDFS) to check it before the
	// job and commit the model after; nil means local paths only.
	Resolver job.Resolver
	// OnStatus, when set, is called about once a second and at every
	// change of the processes with the job's status.
	OnStatus func(tracker.Status)
	// StopGrace is how long stopping children waits after SIGTERM before
	// SIGKILL; 0 means job.DefaultStopGrace.
	StopGrace time.Duration
	// WorkDir is the children's working directory, where spec's archives are
	// unpacked (each into a new directory) and its files linked by their
	// names, all removed when Run returns; "" means this process's.
	WorkDir string
	// Dir, when set, is the job's directory, created if needed: every
	// launch's output is kept in Dir/logs (job.LogName), the status page's
	// address in Dir/job.json, and the job's status (web.Status) in
	// Dir/status.json, rewritten every few seconds and at the end.
	Dir string
	// StatusAddr is where the status page listens; "" means a free port
	// of 127.0.0.1.
	StatusAddr string
	// OnStart, when set, is called once the job's tracker and status page
	// serve, with where the page is and the job's directory.
	OnStart func(Info)
	// CPUBind says whether each server and worker is bound to one CPU
	// (CPUBind); the zero value is CPUBindAuto.
	CPUBind CPUBind
}

// Info says where a running local job can be watched.
type Info struct {
	// ID is the job's id: its directory's base name ("" without one).
	ID string `json:"id"`
	// Name is the job's name.
	Name string `json:"name"`
	// URL is the status page's address ("http://127.0.0.1:port/").
	URL string `json:"status_url"`
	// Token opens the page (webauth.Token): PageURL carries it for a
	// browser, an "Authorization: Bearer" header for a program. The job's
	// directory is the user's alone.
	Token string `json:"token,omitempty"`
	// Dir is the job's directory ("" without one); its output files are
	// under Dir/logs.
	Dir string `json:"dir"`
	// PID is ps-submit's process id.
	PID int `json:"pid"`
	// Started is when the job started.
	Started time.Time `json:"started"`
}

// PageURL is the address that opens the status page: URL with the token.
func (i Info) PageURL() string {
	if i.Token == "" {
		return i.URL
	}
	return i.URL + "?" + webauth.TokenParam + "=" + i.Token
}

// Files in a local job's directory.
const (
	InfoFile   = "job.json"
	StatusFile = "status.json"
	LogsDir    = "logs"
)

// Run runs spec on this machine: the tracker service in this process,
// and the scheduler, servers and workers as child processes of the
// command (see Cluster), supervised by job.Job.Run, which holds the
// restart rules. No child outlives Run.
func Run(ctx context.Context, spec job.JobSpec, opts Options) (job.Result, error) {
	start := time.Now()
	failed := func(err error) (job.Result, error) {
		return job.Result{State: tracker.Failed, Wall: time.Since(start)}, err
	}
	logDir := ""
	if opts.Dir != "" {
		logDir = filepath.Join(opts.Dir, LogsDir)
		if err := os.MkdirAll(logDir, 0o700); err != nil {
			return failed(fmt.Errorf("local: the job's directory: %w", err))
		}
	}
	// The status file follows the job's status, at most every few
	// seconds; the page is known only once the job's state is.
	var page *web.Server
	var lastWrite time.Time
	onStatus := func(st tracker.Status) {
		if opts.OnStatus != nil {
			opts.OnStatus(st)
		}
		if page != nil && opts.Dir != "" && time.Since(lastWrite) >= statusFileEvery {
			lastWrite = time.Now()
			writeStatus(opts.Dir, page.Handler().Status(), opts.Log)
		}
	}
	j, err := job.New(ctx, spec, job.Options{Log: opts.Log, Planner: opts.Planner, Resolver: opts.Resolver,
		OnStatus: onStatus, Listen: Node + ":0"})
	if err != nil {
		return failed(err)
	}
	defer j.Close()
	cleanup, err := prepareWorkDir(ctx, spec, opts.WorkDir)
	if err != nil {
		return failed(err)
	}
	defer func() {
		if err := cleanup(); err != nil && opts.Log != nil {
			opts.Log.WithError(err).Warn("could not remove what the job put in the tasks' working directory")
		}
	}()
	addr := opts.StatusAddr
	if addr == "" {
		addr = Node + ":0"
	}
	token, err := webauth.NewToken()
	if err != nil {
		return failed(err)
	}
	page, err = web.Serve(addr, web.Options{Name: spec.Name, State: j.State(), Logs: openLog, Scale: true, Kill: true,
		Filter: func(h http.Handler) http.Handler { return webauth.Token(token, h) }}, opts.Log)
	if err != nil {
		return failed(err)
	}
	defer page.Close()
	host, _, _ := net.SplitHostPort(addr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = Node
	}
	info := Info{Name: spec.Name, URL: "http://" + net.JoinHostPort(host, strconv.Itoa(page.Port())) + "/",
		Token: token, Dir: opts.Dir, PID: os.Getpid(), Started: start}
	if opts.Dir != "" {
		info.ID = filepath.Base(opts.Dir)
		if err := writeJSON(filepath.Join(opts.Dir, InfoFile), info); err != nil {
			return failed(fmt.Errorf("local: the job's directory: %w", err))
		}
	}
	if opts.OnStart != nil {
		opts.OnStart(info)
	}
	cpus, err := jobCPUs(spec, opts.CPUBind)
	if err != nil {
		return failed(err)
	}
	ipcDir, err := newIPCDir(opts.Log)
	if err != nil {
		return failed(err)
	}
	defer removeIPCDir(ipcDir, opts.Log)
	c := New(Config{Environ: opts.Environ, Stdout: opts.Stdout, Log: opts.Log, StopGrace: opts.StopGrace, Dir: opts.WorkDir, LogDir: logDir,
		CPUs: cpus, IPCDir: ipcDir})
	defer c.Close()
	res, err := j.Run(ctx, c)
	if opts.Dir != "" {
		page.Handler().Sample()
		writeStatus(opts.Dir, page.Handler().Status(), opts.Log)
	}
	return res, err
}

// statusFileEvery bounds how often Run rewrites the status file.
const statusFileEvery = 2 * time.Second

// openLog opens a local launch's output file (web.LogOpener).
func openLog(_ context.Context, t tracker.TaskStatus, stream string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(t.Logs, job.LogName(job.Task{Role: t.Role, Rank: t.Rank}, max(t.Launches-1, 0), stream)))
}

// writeStatus writes st to dir's status file; a failure is logged.
func writeStatus(dir string, st web.Status, log *logrus.Entry) {
	if err := writeJSON(filepath.Join(dir, StatusFile), st); err != nil && log != nil {
		log.WithError(err).Warn("status file not written")
	}
}

// writeJSON writes v to path through a temporary file and a rename, so
// that a reader never sees half of it.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

const clusterName = "local"

// Config configures a Cluster.
type Config struct {
	// Environ is the environment the children inherit.
	Environ []string
	// Stdout receives the children's output, each line prefixed with its
	// role and rank ("[worker 1] ", "[worker 1#1] " for a second attempt).
	Stdout io.Writer
	// Log receives the cluster's own messages; nil discards them.
	Log *logrus.Entry
	// StopGrace is how long StopAll waits after SIGTERM before SIGKILL;
	// 0 means job.DefaultStopGrace.
	StopGrace time.Duration
	// TailLines is how many of a child's last lines its exit carries;
	// 0 means 20.
	TailLines int
	// Dir is the children's working directory; "" means this process's.
	Dir string
	// LogDir, when set, is an existing directory where each launch's
	// standard output and error are kept, in files named by job.LogName.
	LogDir string
	// CPUs, when set, binds each server and worker to one of them: rank
	// r's to CPUs[r mod len(CPUs)] (CPUBind).
	CPUs []int
	// IPCDir, when set, is an existing directory, the user's alone, where
	// the tasks' nodes bind Unix sockets (DMLC_LOCAL=1, SPINDLE_IPC_DIR)
	// unless their environment or job sets DMLC_LOCAL.
	IPCDir string
}

// Cluster is a job.Cluster of child processes of this one. Each child
// runs in its own process group, killed as a group, and dies with this
// process (PR_SET_PDEATHSIG). Its output is prefixed with its role and
// rank, and its last lines are kept for the diagnostic of its exit.
type Cluster struct {
	cfg    Config
	out    *lockedWriter
	events *job.EventQueue

	mu    sync.Mutex
	procs map[int64]*proc
}

// proc is one launch's process.
type proc struct {
	l    job.Launch
	cmd  *exec.Cmd
	tail *tailWriter
	done chan struct{} // closed once Wait returned
}

// New returns a Cluster; Close it when done.
func New(cfg Config) *Cluster {
	if cfg.Log == nil {
		l := logrus.New()
		l.Out = io.Discard
		cfg.Log = logrus.NewEntry(l)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = job.DefaultStopGrace
	}
	if cfg.TailLines <= 0 {
		cfg.TailLines = 20
	}
	return &Cluster{cfg: cfg, out: &lockedWriter{w: cfg.Stdout}, events: job.NewEventQueue(), procs: map[int64]*proc{}}
}

// Name is "local".
func (c *Cluster) Name() string { return clusterName }

// Events delivers the launches' Placed (at once) and Exited events.
func (c *Cluster) Events() <-chan job.Event { return c.events.Out() }

// Start starts the launch's process at once.
func (c *Cluster) Start(ctx context.Context, l job.Launch) error {
	if len(l.Command) == 0 {
		return errors.New("local: no command")
	}
	cmd := exec.Command(l.Command[0], l.Command[1:]...)
	cmd.Dir = c.cfg.Dir
	cpu, bound := cpuOf(c.cfg.CPUs, l.Task)
	base := append(slices.Clip(c.cfg.Environ), launcherEnv(c.cfg.Environ, c.cfg.IPCDir, bound)...)
	cmd.Env = l.Env(Node, base)
	// Its own process group, so that the whole group can be stopped; and
	// death with the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	prefix := fmt.Sprintf("[%s] ", l.Task)
	if l.Attempt > 0 {
		prefix = fmt.Sprintf("[%s#%d] ", l.Task, l.Attempt)
	}
	p := &proc{l: l, cmd: cmd, tail: newTailWriter(c.out, prefix, c.cfg.TailLines), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.tail, p.tail
	var files []*os.File
	closeFiles := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	if c.cfg.LogDir != "" {
		for _, stream := range job.Streams {
			f, err := os.OpenFile(filepath.Join(c.cfg.LogDir, job.LogName(l.Task, l.Seq, stream)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				closeFiles()
				return fmt.Errorf("local: output file of %s: %w", l.Task, err)
			}
			files = append(files, f)
		}
		cmd.Stdout, cmd.Stderr = io.MultiWriter(files[0], p.tail), io.MultiWriter(files[1], p.tail)
	}
	// A grandchild that keeps the output pipe open must not keep Wait
	// from returning.
	cmd.WaitDelay = 2 * time.Second
	start := cmd.Start
	if bound {
		start = func() error { return startOn(cmd, cpu, c.cfg.Log) }
	}
	if err := start(); err != nil {
		closeFiles()
		return fmt.Errorf("local: start %s: %s: %w", l.Task, l.Command[0], err)
	}
	c.mu.Lock()
	c.procs[l.ID] = p
	c.mu.Unlock()
	c.events.Push(job.Event{Kind: job.Placed, ID: l.ID, Node: Node, Logs: c.cfg.LogDir})
	go func() {
		err := cmd.Wait()
		closeFiles()
		p.tail.flush()
		// Whatever it started in its group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		c.mu.Lock()
		delete(c.procs, l.ID)
		c.mu.Unlock()
		close(p.done)
		c.events.Push(job.Event{Kind: job.Exited, ID: l.ID, Exit: job.Exit{Code: exitCode(err), Desc: describeExit(err), Tail: p.tail.last()}})
	}()
	fields := logrus.Fields{"task": l.Task.String(), "attempt": l.Attempt, "pid": cmd.Process.Pid}
	if bound {
		fields["cpu"] = cpu
	}
	c.cfg.Log.WithFields(fields).Debug("task started")
	return nil
}

// Stop stops launch id's process, if it runs: SIGTERM to its process
// group (terminate), then SIGKILL after the grace period, without
// waiting. Its exit is still reported.
func (c *Cluster) Stop(_ context.Context, id int64) error {
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	if p == nil {
		return nil // ended already
	}
	terminate(p)
	go func() {
		grace := time.NewTimer(c.cfg.StopGrace)
		defer grace.Stop()
		select {
		case <-p.done:
		case <-grace.C:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	return nil
}

// terminate asks p's process group to end: SIGTERM, then SIGCONT, as a
// shell does for a stopped job it kills. A stopped process (SIGSTOP,
// which is how a task that stopped answering is often found) gets
// SIGTERM only once it runs again; without SIGCONT it would wait for the
// grace period's SIGKILL.
func terminate(p *proc) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
}

// StopAll stops every running process: SIGTERM to its process group,
// then SIGKILL after the grace period, and waits for every exit, bounded
// by ctx.
func (c *Cluster) StopAll(ctx context.Context) error {
	c.mu.Lock()
	procs := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		terminate(p)
	}
	grace := time.NewTimer(c.cfg.StopGrace)
	defer grace.Stop()
	exited := func() bool {
		for _, p := range procs {
			select {
			case <-p.done:
			case <-grace.C:
				return false
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	if !exited() {
		// Past the grace: everything left is killed.
		for _, p := range procs {
			select {
			case <-p.done:
			default:
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			}
		}
	}
	var left []string
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			left = append(left, p.l.Task.String())
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("local: %s did not exit after SIGKILL: %w", strings.Join(left, ", "), context.Cause(ctx))
	}
	return nil
}

// Close stops every process and the delivery of events.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StopGrace+job.DefaultStopTimeout)
	defer cancel()
	err := c.StopAll(ctx)
	c.events.Close()
	return err
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
	if err == nil {
		return "exit code 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return "exit code " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
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
