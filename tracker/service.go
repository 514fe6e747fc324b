package tracker

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker/internal/rpc/trackerrpc"
)

// Error codes of trackerrpc.TrackerError.
const (
	codeUnauthorized = 1
	codeBadRequest   = 2
)

// maxFrame bounds a tracker RPC frame, both ways.
const maxFrame = 16 << 20

func thriftConf() *thrift.TConfiguration {
	return &thrift.TConfiguration{
		MaxFrameSize:   maxFrame,
		MaxMessageSize: maxFrame,
		ConnectTimeout: 10 * time.Second,
		SocketTimeout:  0, // calls are bounded by their contexts instead
	}
}

// boundedProtocol is the compact protocol over framed transport, refusing
// a list, set or map with more elements than its frame has bytes left
// (every element takes at least one). Thrift 0.17 bounds a container's
// length only by MaxMessageSize, and the generated code sizes the
// container before reading an element: without the check a frame of a
// few bytes claiming a map of 16 million metrics has the tracker allocate
// most of a gigabyte, before the call's secret is checked.
type boundedProtocol struct {
	*thrift.TCompactProtocol
	frame *thrift.TFramedTransport
}

// newProtocol returns the protocol of a tracker connection over t, both
// ways: frames of at most maxFrame bytes, every container bounded by its
// frame.
func newProtocol(t thrift.TTransport, cfg *thrift.TConfiguration) *boundedProtocol {
	frame := thrift.NewTFramedTransportConf(t, cfg)
	return &boundedProtocol{TCompactProtocol: thrift.NewTCompactProtocolConf(frame, cfg), frame: frame}
}

// checkContainer refuses size elements when the frame has fewer bytes left.
func (p *boundedProtocol) checkContainer(what string, size int) error {
	if rem := p.frame.RemainingBytes(); size > 0 && uint64(size) > rem {
		return thrift.NewTProtocolExceptionWithType(thrift.SIZE_LIMIT,
			fmt.Errorf("%s of %d elements in the %d bytes left of the frame", what, size, rem))
	}
	return nil
}

func (p *boundedProtocol) ReadListBegin(ctx context.Context) (thrift.TType, int, error) {
	elem, size, err := p.TCompactProtocol.ReadListBegin(ctx)
	if err == nil {
		err = p.checkContainer("list", size)
	}
	if err != nil {
		return elem, 0, err
	}
	return elem, size, nil
}

func (p *boundedProtocol) ReadSetBegin(ctx context.Context) (thrift.TType, int, error) {
	elem, size, err := p.TCompactProtocol.ReadSetBegin(ctx)
	if err == nil {
		err = p.checkContainer("set", size)
	}
	if err != nil {
		return elem, 0, err
	}
	return elem, size, nil
}

func (p *boundedProtocol) ReadMapBegin(ctx context.Context) (thrift.TType, thrift.TType, int, error) {
	kt, vt, size, err := p.TCompactProtocol.ReadMapBegin(ctx)
	if err == nil {
		err = p.checkContainer("map", size)
	}
	if err != nil {
		return kt, vt, 0, err
	}
	return kt, vt, size, nil
}

// Skip skips a value of type t with the checks above applied to the
// containers in it.
func (p *boundedProtocol) Skip(ctx context.Context, t thrift.TType) error {
	return thrift.SkipDefaultDepth(ctx, p, t)
}

// Service serves the tracker RPC over TCP for a job's State. Every call
// must carry the job secret.
type Service struct {
	state  *State
	secret []byte
	log    *logrus.Entry
	ln     net.Listener
	ctx    context.Context // for the handlers: the caller's values, not its cancellation

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	// unauth holds a token for each connection being read before it made
	// an authenticated call (maxUnauthConns).
	unauth      chan struct{}
	authTimeout time.Duration
}

// Option configures Serve or NewClient.
type Option func(*options)

type options struct {
	tls         *tls.Config
	authTimeout time.Duration // Serve: 0 means authTimeout
	run         int           // NewClient: the caller's run of the job
}

// WithRun makes a client's shard requests, reports and checkpoint
// commits those of run of the job (conf.Job.Run; State.EndRun), which the
// tracker refuses once the whole job started again since (NewClient).
func WithRun(run int) Option { return func(o *options) { o.run = run } }

// WithTLS serves the RPC over TLS with cfg (Serve), or calls it over TLS
// trusting what cfg trusts (NewClient). A TLS service refuses plain
// connections, and a TLS client a service whose certificate cfg does
// not trust.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// handshakeTimeout bounds a TLS handshake with a caller.
const handshakeTimeout = 10 * time.Second

// Anyone who reaches the port can open a connection; until it makes a
// call with the job secret, it is a stranger's, and bounded:
//   - it waits for one of maxUnauthConns places before anything of it is
//     read, so that strangers hold at most maxUnauthConns×maxUnauthBytes;
//   - from its place, it has authTimeout to make that call (the TLS
//     handshake included), and it is read maxUnauthBytes at most;
//   - a call with a wrong secret is answered, and the connection closed.
//
// A caller with the secret holds a place for its first call's frame
// only, and its connection may then stay idle.
const (
	maxUnauthConns = 32
	maxUnauthBytes = 4 << 20
)

// authTimeout is the default of how long a stranger's connection is
// read (options.authTimeout).
const authTimeout = 30 * time.Second

// Serve starts serving state on addr ("host:port", port 0 for any) and
// returns at once; Addr tells where. Close stops it.
func Serve(ctx context.Context, addr string, state *State, secret string, log *logrus.Entry, opts ...Option) (*Service, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tracker: listen on %s: %w", addr, err)
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	if o.authTimeout <= 0 {
		o.authTimeout = authTimeout
	}
	s := &Service{state: state, secret: []byte(secret), log: log, ln: ln, ctx: context.WithoutCancel(ctx), conns: make(map[net.Conn]struct{}),
		done: make(chan struct{}), unauth: make(chan struct{}, maxUnauthConns), authTimeout: o.authTimeout}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr returns the address the service listens on.
func (s *Service) Addr() string { return s.ln.Addr().String() }

func (s *Service) accept() {
	defer s.wg.Done()
	proc := trackerrpc.NewTrackerProcessor(&handler{s})
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, proc)
	}
}

// serveConn answers calls on one connection until it fails or closes,
// within the bounds on a stranger's connection (maxUnauthConns).
func (s *Service) serveConn(c net.Conn, proc thrift.TProcessor) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	peer := c.RemoteAddr().String()
	wait := time.NewTimer(s.authTimeout)
	select {
	case s.unauth <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		s.log.WithField("peer", peer).Warn("tracker connection closed: too many connections without the job secret")
		return
	case <-s.done:
		wait.Stop()
		return
	}
	st := &connState{}
	var once sync.Once
	st.release = func() { once.Do(func() { <-s.unauth }) }
	defer st.release()
	sc := &strangerConn{Conn: c, st: st, until: time.Now().Add(s.authTimeout)}
	if err := c.SetReadDeadline(sc.until); err != nil {
		return
	}
	if tc, ok := c.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			s.log.WithError(err).WithField("peer", c.RemoteAddr().String()).Warn("tracker connection refused: TLS handshake failed")
			return
		}
	}
	cfg := thriftConf()
	prot := newProtocol(thrift.NewTSocketFromConnConf(sc, cfg), cfg)
	ctx := context.WithValue(s.ctx, connStateKey{}, st)
	for {
		if _, err := proc.Process(ctx, prot, prot); err != nil {
			var te thrift.TTransportException
			if !errors.As(err, &te) || te.TypeId() != thrift.END_OF_FILE {
				s.log.WithError(err).WithField("peer", peer).Debug("tracker connection closed")
			}
			return
		}
		if st.refused.Load() {
			return // answered; a wrong secret gets no second try on the connection
		}
	}
}

// connState is what the handler learns of a connection's calls.
type connState struct {
	authed, refused atomic.Bool
	release         func() // gives the connection's place back, once
}

type connStateKey struct{}

// strangerConn reads at most maxUnauthBytes from a connection, and
// keeps its read deadline at until, until a call on it proves the job
// secret. Thrift's socket sets a deadline before every read from its
// SocketTimeout, none: strangerConn sets its own instead, no deadline
// once the secret is proved.
type strangerConn struct {
	net.Conn
	st    *connState
	read  int
	until time.Time
}

// readDeadline is the read deadline the connection keeps.
func (c *strangerConn) readDeadline() time.Time {
	if c.st.authed.Load() {
		return time.Time{}
	}
	return c.until
}

func (c *strangerConn) SetReadDeadline(time.Time) error {
	return c.Conn.SetReadDeadline(c.readDeadline())
}

func (c *strangerConn) SetDeadline(t time.Time) error {
	return errors.Join(c.Conn.SetWriteDeadline(t), c.Conn.SetReadDeadline(c.readDeadline()))
}

var errUnauthBytes = fmt.Errorf("tracker: %d bytes read without the job secret", maxUnauthBytes)

func (c *strangerConn) Read(b []byte) (int, error) {
	if !c.st.authed.Load() {
		left := maxUnauthBytes - c.read
		if left <= 0 {
			return 0, errUnauthBytes
		}
		if len(b) > left {
			b = b[:left]
		}
	}
	n, err := c.Conn.Read(b)
	c.read += n
	return n, err
}

// Close stops accepting, closes every connection and waits for their
// goroutines. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// handler implements the generated Tracker interface over the State.
type handler struct{ s *Service }

// auth checks a call's secret, and records on the call's connection
// (connState) whether it proved it.
func (h *handler) auth(ctx context.Context, secret string) error {
	st, _ := ctx.Value(connStateKey{}).(*connState)
	if subtle.ConstantTimeCompare([]byte(secret), h.s.secret) != 1 {
		h.s.log.Warn("tracker call with a wrong secret refused")
		if st != nil {
			st.refused.Store(true)
		}
		return &trackerrpc.TrackerError{Code: codeUnauthorized, Message: "wrong job secret"}
	}
	if st != nil && !st.authed.Load() {
		st.authed.Store(true)
		st.release()
	}
	return nil
}

// badRequest answers a call the State refused. The State's errors begin
// "tracker: ", which the caller's RemoteError says already.
func badRequest(err error) error {
	return &trackerrpc.TrackerError{Code: codeBadRequest, Message: strings.TrimPrefix(err.Error(), "tracker: ")}
}

func (h *handler) NextShard(ctx context.Context, secret string, epoch, worker, attempt, run int32) (*trackerrpc.NextShardReply, error) {
	if err := h.auth(ctx, secret); err != nil {
		return nil, err
	}
	if run < 0 {
		return nil, badRequest(fmt.Errorf("next shard: run %d of the job", run))
	}
	sh, d, err := h.s.state.WaitShard(ctx, int(run), int(epoch), int(worker), int(attempt), shardPoll)
	if err != nil {
		return nil, badRequest(err)
	}
	r := &trackerrpc.NextShardReply{}
	switch d {
	case Given:
		r.State = trackerrpc.ShardState_GIVEN
		r.Shard = toWire(sh, int(epoch))
	case Wait:
		// WaitShard waited already: ask again at once.
		r.State = trackerrpc.ShardState_WAIT
		ms := int32(1)
		r.WaitMs = &ms
	default:
		r.State = trackerrpc.ShardState_EPOCH_DONE
	}
	return r, nil
}

// shardPoll bounds how long NextShard holds a worker's call while it has
// no shard to give (State.WaitShard). The worker's client has one
// connection, which its other calls (finding a new scheduler, events)
// wait for meanwhile.
const shardPoll = 100 * time.Millisecond

func toWire(sh Shard, epoch int) *trackerrpc.Shard {
	return &trackerrpc.Shard{ID: sh.ID, URI: sh.URI, Start: sh.Start, Length: sh.Length, Epoch: int32(epoch), FileSize: sh.FileSize, Compressed: sh.Compressed}
}

func (h *handler) ShardDone(ctx context.Context, secret string, epoch int32, shard int64, worker, attempt int32, records int64, run int32, metrics map[string]float64) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	if run < 0 {
		return badRequest(fmt.Errorf("shard done: run %d of the job", run))
	}
	if err := h.s.state.ShardDoneOfRun(int(run), int(epoch), shard, int(worker), int(attempt), records, metrics); err != nil {
		return badRequest(err)
	}
	return nil
}

func (h *handler) DoneShards(ctx context.Context, secret string, epoch int32) (map[int64]int64, error) {
	if err := h.auth(ctx, secret); err != nil {
		return nil, err
	}
	done, err := h.s.state.DoneShards(int(epoch))
	if err != nil {
		return nil, badRequest(err)
	}
	return done, nil
}

// Limits of a reported event's strings.
const (
	maxEventTask   = 64
	maxEventDetail = 1000
)

// taskEventKinds are the kinds of event a task may report (ReportEvent);
// the others are the launcher's.
var taskEventKinds = []string{EventRejoined, EventRestored, EventReplicated, EventFollows, EventRebuilt, EventJoined, EventScaled, EventUnresponsive, EventStalled, EventDied, EventRegistering}

// quoteAll is ss quoted and joined with commas.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func (h *handler) ReportEvent(ctx context.Context, secret, kind, task, detail string, tookMicros int64) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	switch {
	case !slices.Contains(taskEventKinds, kind):
		return badRequest(fmt.Errorf("tracker: event kind %q: a task may report only %s", kind, quoteAll(taskEventKinds)))
	case task == "" || len(task) > maxEventTask:
		return badRequest(fmt.Errorf("tracker: event task %q: want 1 to %d bytes", task, maxEventTask))
	case len(detail) > maxEventDetail:
		return badRequest(fmt.Errorf("tracker: event detail of %d bytes, limit %d", len(detail), maxEventDetail))
	case tookMicros < 0:
		return badRequest(fmt.Errorf("tracker: event took %d µs", tookMicros))
	case (kind == EventJoined || kind == EventDied || kind == EventStalled) && !isElasticTask(task):
		return badRequest(fmt.Errorf("tracker: event %q of task %q: only a server (\"server R\") or a worker (\"worker R\") %s", kind, task, map[string]string{EventJoined: "joins", EventDied: "is reported dead", EventStalled: "is reported stalled"}[kind]))
	case kind == EventRegistering && task != "scheduler 0":
		return badRequest(fmt.Errorf("tracker: event %q of task %q: only the scheduler (\"scheduler 0\") registers nodes", kind, task))
	case kind == EventUnresponsive && !isElasticTask(task) && task != "scheduler 0":
		return badRequest(fmt.Errorf("tracker: event %q of task %q: only the scheduler (\"scheduler 0\"), a server (\"server R\") or a worker (\"worker R\") is reported unresponsive", kind, task))
	}
	h.s.state.AddEvent(Event{At: time.Now(), Kind: kind, Task: task, Detail: detail, Took: time.Duration(tookMicros) * time.Microsecond})
	return nil
}

func (h *handler) Scheduler(ctx context.Context, secret string) (string, error) {
	if err := h.auth(ctx, secret); err != nil {
		return "", err
	}
	return h.s.state.Scheduler(), nil
}

// isElasticTask reports whether task names a server ("server R") or a
// worker ("worker R"), the tasks that join a job as it scales out.
func isElasticTask(task string) bool {
	_, server := ServerRank(task)
	_, worker := WorkerRank(task)
	return server || worker
}

func (h *handler) Scale(ctx context.Context, secret string, servers, workers int32) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	if err := h.s.state.Scale(int(servers), int(workers)); err != nil {
		return badRequest(err)
	}
	return nil
}

func (h *handler) View(ctx context.Context, secret string, epoch int32) (*trackerrpc.View, error) {
	if err := h.auth(ctx, secret); err != nil {
		return nil, err
	}
	if epoch < 0 || epoch > maxEpoch {
		return nil, badRequest(fmt.Errorf("tracker: view of epoch %d: out of range", epoch))
	}
	servers, workers := h.s.state.View(int(epoch))
	return &trackerrpc.View{Servers: int32(servers), Workers: int32(workers)}, nil
}

func (h *handler) JoinEpoch(ctx context.Context, secret string, rank int32) (int32, error) {
	if err := h.auth(ctx, secret); err != nil {
		return 0, err
	}
	if rank < 0 || rank >= MaxScaleWorkers {
		return 0, badRequest(fmt.Errorf("tracker: join epoch of worker %d: out of range", rank))
	}
	epoch, ok := h.s.state.JoinEpoch(int(rank))
	if !ok {
		return -1, nil
	}
	return int32(epoch), nil
}

func (h *handler) Plan(ctx context.Context, secret string) ([]*trackerrpc.Shard, error) {
	if err := h.auth(ctx, secret); err != nil {
		return nil, err
	}
	shards := h.s.state.Plan()
	out := make([]*trackerrpc.Shard, len(shards))
	for i, sh := range shards {
		out[i] = toWire(sh, 0)
	}
	return out, nil
}

func (h *handler) ReportMetrics(ctx context.Context, secret string, epoch, worker int32, metrics map[string]float64) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	if err := h.s.state.ReportMetrics(int(epoch), int(worker), metrics); err != nil {
		return badRequest(err)
	}
	return nil
}

func (h *handler) PlanEpochs(ctx context.Context, secret string, epochs int32) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	if err := h.s.state.PlanEpochs(int(epochs)); err != nil {
		return badRequest(err)
	}
	return nil
}

func (h *handler) Status(ctx context.Context, secret string) (*trackerrpc.JobStatus, error) {
	if err := h.auth(ctx, secret); err != nil {
		return nil, err
	}
	st := h.s.state.Status()
	w := &trackerrpc.JobStatus{
		State:         string(st.State),
		Epoch:         int32(st.Epoch),
		ShardsDone:    int64(st.ShardsDone),
		ShardsTotal:   int64(st.ShardsTotal),
		Metrics:       st.Metrics,
		MetricsEpoch:  int32(st.MetricsEpoch),
		Diagnostics:   st.Diagnostics,
		EpochRecords:  make(map[int32]int64, len(st.EpochRecords)),
		StartedUnixMs: st.Started.UnixMilli(),
		Servers:       int32(st.Servers),
		ServersTarget: int32(st.ServersTarget),
		Workers:       int32(st.Workers),
		WorkersTarget: int32(st.WorkersTarget),
		EpochsPlanned: int32(st.EpochsPlanned),
	}
	for e, n := range st.EpochRecords {
		w.EpochRecords[int32(e)] = n
	}
	for _, r := range st.Roles {
		w.Roles = append(w.Roles, &trackerrpc.RoleStatus{Role: string(r.Role), Want: int32(r.Want), Running: int32(r.Running), Restarts: int32(r.Restarts), Succeeded: int32(r.Succeeded)})
	}
	for _, e := range st.Events {
		w.Events = append(w.Events, &trackerrpc.Event{AtUnixMs: e.At.UnixMilli(), Kind: e.Kind, Task: e.Task, Detail: e.Detail, TookMicros: e.Took.Microseconds()})
	}
	return w, nil
}

func (h *handler) Kill(ctx context.Context, secret, reason string) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	h.s.state.Kill(reason)
	return nil
}

func (h *handler) CommitCheckpoint(ctx context.Context, secret string, c *trackerrpc.Checkpoint, run int32) error {
	if err := h.auth(ctx, secret); err != nil {
		return err
	}
	if c == nil || len(c.Files) > 1<<20 {
		return badRequest(errors.New("commit checkpoint: missing or oversized checkpoint"))
	}
	if run < 0 {
		return badRequest(fmt.Errorf("commit checkpoint: run %d of the job", run))
	}
	info := CheckpointInfo{N: int(c.N), Epoch: int(c.Epoch), NextEpoch: int(c.NextEpoch), Partitioner: c.Partitioner, MaxKey: uint64(c.MaxKey), Run: int(run)}
	for _, f := range c.Files {
		if f != nil {
			info.Files = append(info.Files, CheckpointFile{Name: f.Name, Bytes: f.Bytes, SHA256: f.Sha256})
		}
	}
	if err := h.s.state.CommitCheckpoint(ctx, info); err != nil {
		return badRequest(err)
	}
	return nil
}

// fromWire converts a wire status.
func fromWire(w *trackerrpc.JobStatus) Status {
	st := Status{
		State:         JobState(w.State),
		Epoch:         int(w.Epoch),
		ShardsDone:    int(w.ShardsDone),
		ShardsTotal:   int(w.ShardsTotal),
		Metrics:       w.Metrics,
		MetricsEpoch:  int(w.MetricsEpoch),
		Diagnostics:   w.Diagnostics,
		EpochRecords:  make(map[int]int64, len(w.EpochRecords)),
		Started:       time.UnixMilli(w.StartedUnixMs),
		Servers:       int(w.Servers),
		ServersTarget: int(w.ServersTarget),
		Workers:       int(w.Workers),
		WorkersTarget: int(w.WorkersTarget),
		EpochsPlanned: int(w.EpochsPlanned),
	}
	for e, n := range w.EpochRecords {
		st.EpochRecords[int(e)] = n
	}
	for _, r := range w.Roles {
		if r != nil {
			st.Roles = append(st.Roles, RoleStatus{Role: conf.Role(r.Role), Want: int(r.Want), Running: int(r.Running), Restarts: int(r.Restarts), Succeeded: int(r.Succeeded)})
		}
	}
	for _, e := range w.Events {
		if e != nil && len(st.Events) < MaxEvents {
			st.Events = append(st.Events, Event{At: time.UnixMilli(e.AtUnixMs), Kind: e.Kind, Task: e.Task, Detail: e.Detail, Took: time.Duration(e.TookMicros) * time.Microsecond})
		}
	}
	return st
}
