package tracker

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

func TestServiceOverTCP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := NewState(shards(2), time.Now())
	svc, err := Serve(ctx, "127.0.0.1:0", st, "s3cret", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	c := NewClient(svc.Addr(), "s3cret")
	defer c.Close()
	plan, err := c.Plan(ctx)
	if err != nil || len(plan) != 2 {
		t.Fatalf("plan %v %v", plan, err)
	}
	sh, d, _, err := c.NextShard(ctx, 0, 0, 0)
	if err != nil || d != Given || sh.URI != "file:///data" {
		t.Fatalf("next shard %+v %v %v", sh, d, err)
	}
	// The shard's sums count with the worker's report at the epoch's end.
	if err := c.ShardDone(ctx, 0, sh.ID, 0, 0, 42, map[string]float64{"examples_count": 40}); err != nil {
		t.Fatal(err)
	}
	if err := c.ReportMetrics(ctx, 0, 0, map[string]float64{"test_auc": 0.75, "examples_count": 2}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Status(ctx)
	if err != nil || got.EpochRecords[0] != 42 || got.Metrics["test_auc"] != 0.75 || got.Metrics["examples_count"] != 42 || got.ShardsTotal != 2 {
		t.Fatalf("status %+v %v", got, err)
	}
	// Until the program says how many epochs it trains, the progress is
	// not known; then it is one shard of two in the first of 4 epochs.
	if p, ok := got.Progress(); ok || got.EpochsPlanned != 0 {
		t.Fatalf("progress %v, %v of %d epochs planned; want none known", p, ok, got.EpochsPlanned)
	}
	if err := c.PlanEpochs(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got, err = c.Status(ctx); err != nil || got.EpochsPlanned != 4 {
		t.Fatalf("status after planning 4 epochs: %+v %v", got, err)
	}
	if p, ok := got.Progress(); !ok || p != 0.125 {
		t.Fatalf("progress %v, %v; want 0.125 (half of the first of 4 epochs)", p, ok)
	}
	var refused *RemoteError
	if err := c.PlanEpochs(ctx, 0); !errors.As(err, &refused) {
		t.Fatalf("planning 0 epochs: %v, want RemoteError", err)
	}
	// A caller of another run of the job than the current one, or of
	// none, is refused, a checkpoint commit included.
	var commits []int
	st.SetCheckpointCommitter(func(_ context.Context, info CheckpointInfo) error {
		commits = append(commits, info.Run)
		return nil
	})
	for _, run := range []int{-1, 1} {
		other := NewClient(svc.Addr(), "s3cret", WithRun(run))
		if _, _, _, err := other.NextShard(ctx, 0, 1, 0); !errors.As(err, &refused) {
			t.Errorf("next shard of run %d: %v, want RemoteError", run, err)
		}
		if err := other.ShardDone(ctx, 0, 1, 1, 0, 5, nil); !errors.As(err, &refused) {
			t.Errorf("shard done of run %d: %v, want RemoteError", run, err)
		}
		if err := other.CommitCheckpoint(ctx, CheckpointInfo{N: 1, Epoch: 1, NextEpoch: 1}); !errors.As(err, &refused) {
			t.Errorf("checkpoint commit of run %d: %v, want RemoteError", run, err)
		}
		other.Close()
	}
	if err := c.CommitCheckpoint(ctx, CheckpointInfo{N: 1, Epoch: 1, NextEpoch: 1}); err != nil || !slices.Equal(commits, []int{0}) {
		t.Fatalf("checkpoint commit of run 0: %v; committed those of runs %v, want 0 only", err, commits)
	}
	if done, err := c.DoneShards(ctx, 0); err != nil || len(done) != 1 || done[sh.ID] != 42 {
		t.Fatalf("done shards of epoch 0: %v %v, want shard %d with 42 records", done, err, sh.ID)
	}
	if done, err := c.DoneShards(ctx, 1); err != nil || len(done) != 0 {
		t.Fatalf("done shards of epoch 1: %v %v, want none", done, err)
	}
	// A worker's rejoin is recorded; events of other kinds are refused.
	if err := c.ReportEvent(ctx, Event{Kind: EventRejoined, Task: "worker 1", Detail: "rejoined", Took: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if ev := st.Status().Events; len(ev) != 1 || ev[0].Task != "worker 1" || ev[0].Took != 1500*time.Millisecond || ev[0].At.IsZero() {
		t.Fatalf("events %+v", ev)
	}
	// A server's restore too, which lasted from its exit; its report
	// that its tables keep replicas counts it among the replicated
	// servers instead.
	st.AddEvent(Event{At: time.Now().Add(-time.Second), Kind: EventExited, Task: "server 0", Detail: "exit code 137"})
	if err := c.ReportEvent(ctx, Event{Kind: EventRestored, Task: "server 0", Detail: "restored", Took: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventReplicated, Task: "server 0"}); err != nil {
		t.Fatal(err)
	}
	if n := st.Replicated(); n != 1 {
		t.Fatalf("%d servers replicated, want 1", n)
	}
	// The events travel with the status.
	remote, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := remote.Events; len(ev) != 3 || ev[2].Kind != EventRestored || ev[2].Task != "server 0" || ev[2].Took < time.Second ||
		ev[2].Detail != "restored (the restore and the update 1ms)" || ev[0].At.UnixMilli() != st.Status().Events[0].At.UnixMilli() {
		t.Fatalf("events over the RPC %+v", ev)
	}
	var re *RemoteError
	if err := c.ReportEvent(ctx, Event{Kind: EventJobRestart, Task: "worker 1"}); !errors.As(err, &re) {
		t.Fatalf("a job restart reported by a task: %v, want RemoteError", err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventRejoined, Task: "worker 1", Detail: strings.Repeat("x", 2000)}); !errors.As(err, &re) {
		t.Fatalf("a 2000-byte detail: %v, want RemoteError", err)
	}
	if _, err := c.DoneShards(ctx, -1); !errors.As(err, &re) {
		t.Fatalf("done shards of a bad epoch: %v, want RemoteError", err)
	}
	if _, _, _, err := c.NextShard(ctx, -5, 0, 0); !errors.As(err, &re) {
		t.Fatalf("bad epoch: %v, want RemoteError", err)
	} else if strings.Count(err.Error(), "tracker: ") != 1 {
		t.Errorf("the error %q says \"tracker: \" more than once", err)
	}

	bad := NewClient(svc.Addr(), "guess")
	defer bad.Close()
	if _, err := bad.Status(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong token: %v, want ErrUnauthorized", err)
	}
	if err := bad.Kill(ctx, "x"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong token kill: %v", err)
	}
	select {
	case r := <-st.KillRequests():
		t.Fatalf("kill with a wrong token went through: %q", r)
	default:
	}
}

// TestSchedulerOverTCP: a node asks the tracker, over TLS, where the
// scheduler is now and reports that it follows it; a replacement
// scheduler reports its rebuild; a wrong secret learns nothing.
func TestSchedulerOverTCP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := conf.NewJobKeys("s3cret", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stls, err := keys.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := keys.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(nil, time.Now())
	svc, err := Serve(ctx, "127.0.0.1:0", st, "s3cret", quietLog(), WithTLS(stls))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	c := NewClient(svc.Addr(), "s3cret", WithTLS(ctls))
	defer c.Close()

	if addr, err := c.SchedulerAddr(ctx); err != nil || addr != "" {
		t.Fatalf("scheduler before any placement: %q %v, want none", addr, err)
	}
	st.SetScheduler("node-7:41234")
	if addr, err := c.SchedulerAddr(ctx); err != nil || addr != "node-7:41234" {
		t.Fatalf("scheduler %q %v, want node-7:41234", addr, err)
	}
	for _, task := range []string{"server 0", "worker 0", "worker 0"} {
		if err := c.ReportEvent(ctx, Event{Kind: EventFollows, Task: task}); err != nil {
			t.Fatalf("%s follows the scheduler: %v", task, err)
		}
	}
	if n := st.Following(); n != 2 {
		t.Fatalf("%d tasks follow the scheduler, want 2", n)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventRebuilt, Task: "scheduler 0", Detail: "rebuilt", Took: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if ev := st.Status().Events; len(ev) != 1 || ev[0].Kind != EventRebuilt || ev[0].Task != "scheduler 0" {
		t.Fatalf("events %+v, want the rebuild alone", ev)
	}

	bad := NewClient(svc.Addr(), "guess", WithTLS(ctls))
	defer bad.Close()
	if addr, err := bad.SchedulerAddr(ctx); !errors.Is(err, ErrUnauthorized) || addr != "" {
		t.Fatalf("scheduler with a wrong secret: %q %v, want ErrUnauthorized", addr, err)
	}
}

func TestServiceCloseWithIdleClients(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, err := Serve(ctx, "127.0.0.1:0", NewState(nil, time.Now()), "t", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(svc.Addr(), "t")
	defer c.Close()
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Close() }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close blocked on an idle connection")
	}
}

func TestClientGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	c := NewClient(addr, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Status(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("status with no tracker: %v, want deadline exceeded", err)
	}
}
