package tracker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/spindle-ps/spindle/conf"

	"github.com/spindle-ps/spindle/tracker/internal/rpc/trackerrpc"
)

// ErrUnauthorized is returned when the tracker refuses the job secret.
var ErrUnauthorized = errors.New("tracker: wrong job secret")

// ErrUntrusted is returned when the tracker's TLS certificate is not the
// job's.
var ErrUntrusted = errors.New("tracker: certificate not the job's")

// isUntrusted reports whether err is a failed verification of the
// tracker's certificate, which no retry mends.
func isUntrusted(err error) bool {
	var ve *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	return errors.As(err, &ve) || errors.As(err, &ue) || errors.As(err, &he)
}

// RemoteError is a request the tracker refused as invalid.
type RemoteError struct{ Message string }

func (e *RemoteError) Error() string { return "tracker: " + e.Message }

// Client calls a job's tracker. It reconnects after a failure (the
// tracker may be restarted with its ApplicationMaster), retrying each
// call with backoff until the call's context is done. It is safe for
// concurrent use; calls are serialised on one connection.
type Client struct {
	addr   string
	secret string
	tls    *tls.Config
	run    int // WithRun

	mu    sync.Mutex
	trans thrift.TTransport
	rpc   *trackerrpc.TrackerClient
}

// NewClient returns a client of the tracker at addr ("host:port") using
// the job secret. It connects on first use: over TLS with WithTLS.
func NewClient(addr, secret string, opts ...Option) *Client {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return &Client{addr: addr, secret: secret, tls: o.tls, run: o.run}
}

// ConfigClient returns a client of the job's tracker as a task sees it
// (cfg.Job.TrackerAddr, cfg.PS.JobSecret), over TLS trusting only
// cfg.Job.TrackerCert when the job has one, as every job started by
// ps-submit has.
func ConfigClient(cfg conf.Config) (*Client, error) {
	if len(cfg.Job.TrackerCert) == 0 {
		return NewClient(cfg.Job.TrackerAddr, cfg.PS.JobSecret, WithRun(cfg.Job.Run)), nil
	}
	tc, err := conf.TrackerClientTLS(cfg.Job.TrackerCert)
	if err != nil {
		return nil, fmt.Errorf("tracker: %w", err)
	}
	return NewClient(cfg.Job.TrackerAddr, cfg.PS.JobSecret, WithTLS(tc), WithRun(cfg.Job.Run)), nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropLocked()
}

func (c *Client) dropLocked() error {
	var err error
	if c.trans != nil {
		err = c.trans.Close()
	}
	c.trans, c.rpc = nil, nil
	return err
}

func (c *Client) connectLocked(ctx context.Context) error {
	if c.rpc != nil {
		return nil
	}
	cfg := thriftConf()
	if d, ok := ctx.Deadline(); ok {
		if t := time.Until(d); t < cfg.ConnectTimeout {
			cfg.ConnectTimeout = max(t, time.Millisecond)
		}
	}
	var sock thrift.TTransport
	if c.tls != nil {
		cfg.TLSConfig = c.tls
		sock = thrift.NewTSSLSocketConf(c.addr, cfg)
	} else {
		sock = thrift.NewTSocketConf(c.addr, cfg)
	}
	prot := newProtocol(sock, cfg)
	if err := prot.frame.Open(); err != nil {
		return err
	}
	c.trans = prot.frame
	c.rpc = trackerrpc.NewTrackerClientProtocol(prot.frame, prot, thrift.NewTCompactProtocolConf(prot.frame, cfg))
	return nil
}

// call runs f on a connection, reconnecting and retrying transport
// failures with backoff until ctx is done. A call in flight when ctx ends
// is abandoned by closing the connection.
func (c *Client) call(ctx context.Context, what string, f func(rpc *trackerrpc.TrackerClient) error) error {
	backoff := 50 * time.Millisecond
	for {
		err := c.once(ctx, f)
		var te *trackerrpc.TrackerError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &te) && te.Code == codeUnauthorized:
			return fmt.Errorf("tracker %s: %s: %w", c.addr, what, ErrUnauthorized)
		case errors.As(err, &te):
			return fmt.Errorf("tracker %s: %s: %w", c.addr, what, &RemoteError{Message: te.Message})
		case isUntrusted(err):
			return fmt.Errorf("tracker %s: %s: %w: %v", c.addr, what, ErrUntrusted, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("tracker %s: %s: %w (last error: %v)", c.addr, what, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (c *Client) once(ctx context.Context, f func(rpc *trackerrpc.TrackerClient) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connectLocked(ctx); err != nil {
		return err
	}
	// Thrift's socket honours no context: close the connection when ctx
	// ends so a blocked read returns.
	stop := context.AfterFunc(ctx, func() { _ = c.trans.Close() })
	err := f(c.rpc)
	stop()
	var te *trackerrpc.TrackerError
	if err != nil && !errors.As(err, &te) {
		_ = c.dropLocked()
	}
	return err
}

// NextShard asks for the next shard of epoch for worker (rank, attempt).
// With Wait, wait is how long to wait before asking again.
func (c *Client) NextShard(ctx context.Context, epoch, worker, attempt int) (sh Shard, d Dispatch, wait time.Duration, err error) {
	var r *trackerrpc.NextShardReply
	err = c.call(ctx, "next shard", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		r, err = rpc.NextShard(ctx, c.secret, int32(epoch), int32(worker), int32(attempt), int32(c.run))
		return err
	})
	if err != nil {
		return Shard{}, 0, 0, err
	}
	switch r.State {
	case trackerrpc.ShardState_GIVEN:
		if r.Shard == nil {
			return Shard{}, 0, 0, fmt.Errorf("tracker %s: next shard: reply without a shard", c.addr)
		}
		return shardFromWire(r.Shard), Given, 0, nil
	case trackerrpc.ShardState_WAIT:
		wait = WaitHint
		if r.WaitMs != nil && *r.WaitMs > 0 && *r.WaitMs < 60_000 {
			wait = time.Duration(*r.WaitMs) * time.Millisecond
		}
		return Shard{}, Wait, wait, nil
	case trackerrpc.ShardState_EPOCH_DONE:
		return Shard{}, EpochDone, 0, nil
	}
	return Shard{}, 0, 0, fmt.Errorf("tracker %s: next shard: unknown state %v", c.addr, r.State)
}

// ShardDone reports that worker read shard id of epoch, with records
// records, and m, what its steps added up over the shard (sums and
// counts only: see State.ShardDoneOfRun); m may be nil.
func (c *Client) ShardDone(ctx context.Context, epoch int, id int64, worker, attempt int, records int64, m map[string]float64) error {
	return c.call(ctx, "shard done", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.ShardDone(ctx, c.secret, int32(epoch), id, int32(worker), int32(attempt), records, int32(c.run), m)
	})
}

// DoneShards returns the shards of epoch reported done, by id, each with
// its record count.
func (c *Client) DoneShards(ctx context.Context, epoch int) (map[int64]int64, error) {
	var done map[int64]int64
	err := c.call(ctx, "done shards", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		done, err = rpc.DoneShards(ctx, c.secret, int32(epoch))
		return err
	})
	return done, err
}

// ReportEvent records something that happened to a task, as the task
// saw it (Status.Events); only EventRejoined, EventRestored,
// EventReplicated, EventFollows, EventRebuilt, EventJoined (of a
// server or a worker, "server R" or "worker R") and EventScaled are
// accepted.
func (c *Client) ReportEvent(ctx context.Context, e Event) error {
	return c.call(ctx, "report event", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.ReportEvent(ctx, c.secret, e.Kind, e.Task, e.Detail, e.Took.Microseconds())
	})
}

// Plan returns every shard of the job in plan order.
func (c *Client) Plan(ctx context.Context) ([]Shard, error) {
	var ws []*trackerrpc.Shard
	err := c.call(ctx, "plan", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		ws, err = rpc.Plan(ctx, c.secret)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Shard, 0, len(ws))
	for _, w := range ws {
		if w != nil {
			out = append(out, shardFromWire(w))
		}
	}
	return out, nil
}

// PlanEpochs tells the tracker how many epochs the job's program trains,
// for the job's progress (State.PlanEpochs); a worker says it as it
// starts.
func (c *Client) PlanEpochs(ctx context.Context, epochs int) error {
	return c.call(ctx, "plan epochs", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.PlanEpochs(ctx, c.secret, int32(epochs))
	})
}

// ReportMetrics sends worker's metrics for epoch (see State.ReportMetrics
// for how they are combined).
func (c *Client) ReportMetrics(ctx context.Context, epoch, worker int, m map[string]float64) error {
	return c.call(ctx, "report metrics", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.ReportMetrics(ctx, c.secret, int32(epoch), int32(worker), m)
	})
}

// Status returns the job's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var w *trackerrpc.JobStatus
	err := c.call(ctx, "status", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		w, err = rpc.Status(ctx, c.secret)
		return err
	})
	if err != nil {
		return Status{}, err
	}
	return fromWire(w), nil
}

// SchedulerAddr returns the host:port of the scheduler's current launch
// (State.Scheduler), "" while none is placed: where a node that lost its
// scheduler registers again.
func (c *Client) SchedulerAddr(ctx context.Context) (string, error) {
	var addr string
	err := c.call(ctx, "scheduler", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		addr, err = rpc.Scheduler(ctx, c.secret)
		return err
	})
	return addr, err
}

// Scale asks for the job to run with servers servers and workers
// workers from an epoch boundary on, 0 for either leaving it as it is
// (State.Scale); a refusal is a RemoteError saying why.
func (c *Client) Scale(ctx context.Context, servers, workers int) error {
	return c.call(ctx, "scale", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.Scale(ctx, c.secret, int32(servers), int32(workers))
	})
}

// View returns the numbers of servers and workers of epoch, the same to
// every worker (State.View): a worker asks before every epoch.
func (c *Client) View(ctx context.Context, epoch int) (servers, workers int, err error) {
	var v *trackerrpc.View
	err = c.call(ctx, "view", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		v, err = rpc.View(ctx, c.secret, int32(epoch))
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	if v == nil {
		return 0, 0, fmt.Errorf("tracker %s: view: reply without a view", c.addr)
	}
	return int(v.Servers), int(v.Workers), nil
}

// JoinEpoch returns the epoch worker rank, started to join the job,
// begins at (State.JoinEpoch), -1 while the job's workers do not include
// it yet: a joining worker asks until they do.
func (c *Client) JoinEpoch(ctx context.Context, rank int) (int, error) {
	var e int32
	err := c.call(ctx, "join epoch", func(rpc *trackerrpc.TrackerClient) error {
		var err error
		e, err = rpc.JoinEpoch(ctx, c.secret, int32(rank))
		return err
	})
	if err != nil {
		return -1, err
	}
	return int(e), nil
}

// Kill asks the tracker to end the job.
func (c *Client) Kill(ctx context.Context, reason string) error {
	return c.call(ctx, "kill", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.Kill(ctx, c.secret, reason)
	})
}

func shardFromWire(w *trackerrpc.Shard) Shard {
	return Shard{ID: w.ID, URI: w.URI, Start: w.Start, Length: w.Length, FileSize: w.FileSize, Compressed: w.Compressed}
}

// CommitCheckpoint asks the tracker to commit a checkpoint whose server
// files are written.
func (c *Client) CommitCheckpoint(ctx context.Context, info CheckpointInfo) error {
	w := &trackerrpc.Checkpoint{N: int32(info.N), Epoch: int32(info.Epoch), NextEpoch: int32(info.NextEpoch), Partitioner: info.Partitioner, MaxKey: int64(info.MaxKey)}
	for _, f := range info.Files {
		w.Files = append(w.Files, &trackerrpc.CheckpointFile{Name: f.Name, Bytes: f.Bytes, Sha256: f.SHA256})
	}
	return c.call(ctx, "commit checkpoint", func(rpc *trackerrpc.TrackerClient) error {
		return rpc.CommitCheckpoint(ctx, c.secret, w, int32(c.run))
	})
}

// TableCheckpoint is a checkpoint as psnode's tables describe it to their
// committer. It is the same type as psnode.CheckpointCommit (both are
// aliases of one unnamed struct type), so that a *Client commits the
// checkpoints of psnode.Tables without either package importing the
// other.
type TableCheckpoint = struct {
	N, Epoch, NextEpoch int
	Partitioner         string
	MaxKey              uint64
	Files               []struct {
		Name   string
		Bytes  int64
		SHA256 string
	}
}

// CommitTableCheckpoint asks the tracker to commit a checkpoint of
// psnode's tables whose files are written (psnode.CheckpointCommitter).
func (c *Client) CommitTableCheckpoint(ctx context.Context, tc TableCheckpoint) error {
	info := CheckpointInfo{N: tc.N, Epoch: tc.Epoch, NextEpoch: tc.NextEpoch, Partitioner: tc.Partitioner, MaxKey: tc.MaxKey}
	for _, f := range tc.Files {
		info.Files = append(info.Files, CheckpointFile{Name: f.Name, Bytes: f.Bytes, SHA256: f.SHA256})
	}
	return c.CommitCheckpoint(ctx, info)
}
