package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

//go:embed assets
var assets embed.FS

// Status is the job's status as the page's JSON (/status.json) carries
// it. It holds no secret.
type Status struct {
	Name         string             `json:"name"`
	State        tracker.JobState   `json:"state"`
	Epoch        int                `json:"epoch"`
	ShardsDone   int                `json:"shards_done"`
	ShardsTotal  int                `json:"shards_total"`
	Metrics      map[string]float64 `json:"metrics,omitempty"`
	MetricsEpoch int                `json:"metrics_epoch"`
	Roles        []RoleStatus       `json:"roles"`
	Diagnostics  string             `json:"diagnostics,omitempty"`
	Started      time.Time          `json:"started"`
	// Now is when the status was taken.
	Now time.Time `json:"now"`
	// Failovers counts the times the whole job started again.
	Failovers int `json:"failovers"`
	// Epochs holds each epoch's metrics, in order: loss (loss_sum /
	// examples_count, or a metric named loss) and AUC (test_auc or auc),
	// nil when the workers report none, and when they came.
	Epochs []EpochPoint `json:"epochs"`
	// Speed is every worker's examples per second over time.
	Speed Speed `json:"speed"`
	// Tasks is every task's state.
	Tasks []Task `json:"tasks"`
	// BadNodes are the nodes given to the cluster's blacklist for the job.
	BadNodes []tracker.BadNode `json:"blacklisted_nodes,omitempty"`
	// LocatedShards and NodeLocalShards count the shards handed out
	// whose hosts were known, and those read on a host that stores them.
	LocatedShards   int `json:"located_shards"`
	NodeLocalShards int `json:"node_local_shards"`
	// Events are the newest exits, restarts and recoveries, oldest
	// first (tracker.Event).
	Events []Event `json:"events"`
	// Servers is the job's number of servers as of its newest epoch;
	// ServersTarget the number asked for (ps-submit scale), Servers
	// when no change is pending. Workers and WorkersTarget are the same
	// of its workers.
	Servers       int `json:"servers"`
	ServersTarget int `json:"servers_target"`
	Workers       int `json:"workers"`
	WorkersTarget int `json:"workers_target"`
	// EpochsPlanned is the number of epochs the program trains, as its
	// workers said (0 when they did not), and Progress the share of
	// them done, 0 to 1 (tracker.Status.Progress; absent while unknown).
	EpochsPlanned int      `json:"epochs_planned,omitempty"`
	Progress      *float64 `json:"progress,omitempty"`
}

// ScaleReply is the answer to a POST /scale the job took: its servers
// and workers now, and the numbers asked for (Target, the servers',
// and WorkersTarget), which take effect at an epoch boundary.
type ScaleReply struct {
	Servers       int `json:"servers"`
	Target        int `json:"target"`
	Workers       int `json:"workers"`
	WorkersTarget int `json:"workers_target"`
}

// Event is one of Status.Events. TookSeconds is how long the task or
// the job was down, for the kinds "back" and "job back", how long after
// its start a replacement worker rejoined, for "rejoined", and how long
// after the dead one's exit a server's new process restored its tables
// or the new scheduler its node table, for "restored" and
// "scheduler-rebuilt".
type Event struct {
	At          time.Time `json:"at"`
	Kind        string    `json:"kind"`
	Task        string    `json:"task,omitempty"`
	Detail      string    `json:"detail"`
	TookSeconds float64   `json:"took_s,omitempty"`
}

// RoleStatus is one role's tasks in Status.
type RoleStatus struct {
	Role      conf.Role `json:"role"`
	Want      int       `json:"want"`
	Running   int       `json:"running"`
	Restarts  int       `json:"restarts"`
	Succeeded int       `json:"succeeded"`
}

// EpochPoint is one epoch's metrics.
type EpochPoint struct {
	Epoch   int                `json:"epoch"`
	At      time.Time          `json:"at"`
	Loss    *float64           `json:"loss"`
	AUC     *float64           `json:"auc"`
	Metrics map[string]float64 `json:"metrics"`
}

// Speed is a table of examples per second: one row per worker, one
// column per sample time (Unix seconds); a worker's value is nil before
// it first read anything.
type Speed struct {
	Times   []float64    `json:"times"`
	Workers []WorkerRate `json:"workers"`
}

// WorkerRate is one worker's row of Speed and its total.
type WorkerRate struct {
	Rank    int        `json:"rank"`
	Records int64      `json:"records"`
	Rates   []*float64 `json:"rates"`
}

// Task is one task in Status.
type Task struct {
	Task  string    `json:"task"`
	Role  conf.Role `json:"role"`
	Rank  int       `json:"rank"`
	State string    `json:"state"`
	// Attempt is the current attempt (from 0); Restarts counts the
	// task's starts after its first, the whole job's included.
	Attempt   int    `json:"attempt"`
	Restarts  int    `json:"restarts"`
	Node      string `json:"node,omitempty"`
	Container string `json:"container,omitempty"`
	// LogsAt is where the output is kept: a local directory or a
	// NodeManager's web address; Logs is the page's path to the
	// output ("logs/worker/0/"), to which "stdout" or "stderr" is added.
	LogsAt string `json:"logs_at,omitempty"`
	Logs   string `json:"logs"`
	Exit   string `json:"exit,omitempty"`
}

// LogOpener opens the output of a task's current or last launch: stream
// is "stdout" or "stderr". An error matching fs.ErrNotExist is a 404.
type LogOpener func(ctx context.Context, t tracker.TaskStatus, stream string) (io.ReadCloser, error)

// Options configure a Handler.
type Options struct {
	// Name is the job's name.
	Name string
	// State is the job's state, read at every request and sample.
	State *tracker.State
	// Logs opens a task's output for the page's log links; nil serves
	// none.
	Logs LogOpener
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Filter, when set, guards the page (Serve serves Filter(handler)):
	// webauth.Token locally, webauth.Proxy on YARN.
	Filter func(http.Handler) http.Handler
	// Scale serves "POST /scale", which asks for another number of
	// servers (tracker.State.Scale): only for a page whose Filter lets
	// the job's owner alone in (webauth.Token). On YARN, where anyone
	// who may view the application reaches the page through the
	// ResourceManager's proxy, ps-submit scale calls the tracker
	// instead, with the job's secret.
	Scale bool
	// Kill serves "POST /kill", which ends the job KILLED
	// (tracker.State.Kill): for the same pages as Scale. On YARN the
	// ResourceManager kills an application.
	Kill bool
}

// Handler serves a job's status page: "/" (HTML and the script that
// draws it, with the charting library, all embedded), "/status.json"
// (Status), "/logs/{role}/{rank}/{stdout|stderr}" (a task's output),
// "/assets/", with Options.Scale, "POST /scale" (servers=N, workers=N or
// both in the form: 200 with a ScaleReply, or 400 with what the job
// refused) and, with Options.Kill, "POST /kill" (200 with a KillReply:
// the job ends KILLED unless it had ended already). It keeps a history of the workers' speed, sampled by
// Sample; a Server samples it every second.
type Handler struct {
	opts    Options
	mux     *http.ServeMux
	mu      sync.Mutex
	history history
}

// NewHandler returns the page's handler.
func NewHandler(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{opts: opts, mux: http.NewServeMux(), history: history{max: maxSamples, every: 1}}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("web: embedded assets missing: " + err.Error())
	}
	static := http.FileServerFS(sub)
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, err := assets.ReadFile("assets/index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		setHeaders(w, "text/html; charset=utf-8")
		_, _ = w.Write(b)
	})
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w, "")
		static.ServeHTTP(w, r)
	})))
	h.mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w, "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(h.Status())
	})
	h.mux.HandleFunc("GET /logs/{role}/{rank}/{stream}", h.serveLog)
	if opts.Scale {
		h.mux.HandleFunc("POST /scale", h.serveScale)
	}
	if opts.Kill {
		h.mux.HandleFunc("POST /kill", h.serveKill)
	}
	return h
}

// KillReason is what a job killed through its page (POST /kill) gives
// as the reason.
const KillReason = "killed through its status page (ps-submit kill)"

// serveKill asks the job to end KILLED, and answers with its state then.
func (h *Handler) serveKill(w http.ResponseWriter, r *http.Request) {
	setHeaders(w, "application/json")
	h.opts.State.Kill(KillReason)
	_ = json.NewEncoder(w).Encode(KillReply{State: h.opts.State.Status().State})
}

// KillReply is the answer to a POST /kill: the job's state when it was
// asked (RUNNING, or the state it had ended in).
type KillReply struct {
	State tracker.JobState `json:"state"`
}

// maxScaleForm bounds the body of a POST /scale.
const maxScaleForm = 4 << 10

// serveScale asks the job for the servers and workers of the form's
// "servers" and "workers", either of which may be absent.
func (h *Handler) serveScale(w http.ResponseWriter, r *http.Request) {
	setHeaders(w, "")
	r.Body = http.MaxBytesReader(w, r.Body, maxScaleForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "scale: "+err.Error(), http.StatusBadRequest)
		return
	}
	servers, err := formCount(r, "servers")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	workers, err := formCount(r, "workers")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st := h.opts.State
	if err := st.Scale(servers, workers); err != nil {
		http.Error(w, strings.TrimPrefix(err.Error(), "tracker: "), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ScaleReply{Servers: st.Servers(), Target: st.ScaleTarget(), Workers: st.Workers(), WorkersTarget: st.WorkersTarget()})
}

// formCount is the number in the form's field name, 0 when it is
// absent or empty.
func formCount(r *http.Request, name string) (int, error) {
	v := r.PostForm.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("scale: %s %q: want a number", name, v)
	}
	return n, nil
}

// setHeaders forbids caching (the page is live) and anything the page
// would fetch from elsewhere.
func setHeaders(w http.ResponseWriter, ctype string) {
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// maxLogBytes bounds the output the page serves of one task: its last
// bytes.
const maxLogBytes = 8 << 20

func (h *Handler) serveLog(w http.ResponseWriter, r *http.Request) {
	role, stream := conf.Role(r.PathValue("role")), r.PathValue("stream")
	rank, err := strconv.Atoi(r.PathValue("rank"))
	if err != nil || (stream != "stdout" && stream != "stderr") || h.opts.Logs == nil {
		http.NotFound(w, r)
		return
	}
	var task *tracker.TaskStatus
	for _, t := range h.opts.State.Status().Tasks {
		if t.Role == role && t.Rank == rank {
			task = &t
			break
		}
	}
	if task == nil || task.Logs == "" {
		http.Error(w, fmt.Sprintf("no output of %s %d yet", role, rank), http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	rc, err := h.opts.Logs(ctx, *task, stream)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, fs.ErrNotExist) {
			code = http.StatusNotFound
		}
		http.Error(w, fmt.Sprintf("%s of %s: %v", stream, task.Task, err), code)
		return
	}
	defer rc.Close()
	b, err := readTail(rc, maxLogBytes)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s of %s: %v", stream, task.Task, err), http.StatusBadGateway)
		return
	}
	setHeaders(w, "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

// readTail reads r to its end and returns at most its last max bytes.
func readTail(r io.Reader, max int) ([]byte, error) {
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if len(buf) > 2*max {
			buf = append(buf[:0], buf[len(buf)-max:]...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(buf) > max {
		buf = buf[len(buf)-max:]
	}
	return buf, nil
}

// Sample records the workers' records read now, for their speed.
func (h *Handler) Sample() {
	st := h.opts.State.Status()
	now := h.opts.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history.add(now, st.WorkerRecords)
}

// Status returns the job's status as the page shows it.
func (h *Handler) Status() Status {
	st := h.opts.State.Status()
	s := Status{Name: h.opts.Name, State: st.State, Epoch: st.Epoch, ShardsDone: st.ShardsDone, ShardsTotal: st.ShardsTotal,
		Metrics: st.Metrics, MetricsEpoch: st.MetricsEpoch, Roles: []RoleStatus{}, Diagnostics: st.Diagnostics,
		Started: st.Started, Now: h.opts.Now(), Failovers: st.Failovers, Epochs: []EpochPoint{}, Tasks: []Task{},
		BadNodes: st.BadNodes, LocatedShards: st.LocatedGiven, NodeLocalShards: st.LocalGiven, Events: []Event{},
		Servers: st.Servers, ServersTarget: st.ServersTarget, Workers: st.Workers, WorkersTarget: st.WorkersTarget,
		EpochsPlanned: st.EpochsPlanned}
	if p, ok := st.Progress(); ok {
		s.Progress = &p
	}
	for _, e := range st.Events {
		s.Events = append(s.Events, Event{At: e.At, Kind: e.Kind, Task: e.Task, Detail: e.Detail, TookSeconds: e.Took.Seconds()})
	}
	for _, r := range st.Roles {
		s.Roles = append(s.Roles, RoleStatus(r))
	}
	for _, e := range slices.Sorted(maps.Keys(st.EpochMetrics)) {
		m := st.EpochMetrics[e]
		loss, auc := Loss(m), AUC(m)
		s.Epochs = append(s.Epochs, EpochPoint{Epoch: e, At: st.MetricsAt[e], Loss: loss, AUC: auc, Metrics: m})
	}
	for _, t := range st.Tasks {
		s.Tasks = append(s.Tasks, Task{Task: t.Task, Role: t.Role, Rank: t.Rank, State: t.State, Attempt: t.Attempt,
			Restarts: max(t.Launches-1, 0), Node: t.Node, Container: t.Container, LogsAt: t.Logs,
			Logs: fmt.Sprintf("logs/%s/%d/", t.Role, t.Rank), Exit: t.Exit})
	}
	h.mu.Lock()
	s.Speed = h.history.speed(st.WorkerRecords)
	h.mu.Unlock()
	return s
}

// Loss is an epoch's mean loss: loss_sum/examples_count, else the metric
// "loss"; nil when neither is there.
func Loss(m map[string]float64) *float64 {
	if sum, ok := m["loss_sum"]; ok {
		if n := m["examples_count"]; n > 0 {
			v := sum / n
			return &v
		}
	}
	if v, ok := m["loss"]; ok {
		return &v
	}
	return nil
}

// AUC is an epoch's AUC: test_auc, else auc; nil when neither is there.
func AUC(m map[string]float64) *float64 {
	for _, k := range []string{"test_auc", "auc"} {
		if v, ok := m[k]; ok {
			return &v
		}
	}
	return nil
}

// Server serves a Handler on a listener and samples it every second.
type Server struct {
	h    *Handler
	srv  *http.Server
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// idleTimeout is how long the status page keeps a connection that waits
// for its next request: browsers and ps-submit come back within seconds,
// and a connection nobody uses is not kept for the job's life.
var idleTimeout = 2 * time.Minute

// Serve listens on addr ("host:port", port 0 for any) and serves the
// page of opts until Close. log receives the server's failure.
func Serve(addr string, opts Options, log *logrus.Entry) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web: status page: %w", err)
	}
	h := NewHandler(opts)
	var served http.Handler = h
	if opts.Filter != nil {
		served = opts.Filter(h)
	}
	s := &Server{h: h, ln: ln, stop: make(chan struct{}),
		srv: &http.Server{Handler: served, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: idleTimeout}}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.WithError(err).Warn("status page server stopped")
		}
	}()
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			h.Sample()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s, nil
}

// Handler is the server's handler.
func (s *Server) Handler() *Handler { return s.h }

// Port is the port the page listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops the server, letting requests in flight finish briefly. It
// is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		s.wg.Wait()
	})
}
