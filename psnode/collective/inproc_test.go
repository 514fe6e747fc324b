package collective_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

// The protocol's corner cases run in one process, on psnode's in-memory
// network.

type memJob struct {
	nodes   []*psnode.Node // scheduler, servers, workers
	servers []*psnode.Node
	workers []*psnode.Node
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Level = logrus.ErrorLevel
	l.Out = discard{}
	return logrus.NewEntry(l)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func startMemJob(t *testing.T, servers, workers int, mod func(*conf.PS)) *memJob {
	t.Helper()
	nw := mem.NewNetwork(1)
	base := conf.Default().PS
	base.NumServers, base.NumWorkers = servers, workers
	base.RootURI, base.RootPort = "scheduler", 1
	base.NodeHost = "node"
	base.JobSecret = "s"
	base.HeartbeatInterval = 50 * time.Millisecond
	base.HeartbeatTimeout = 2 * time.Second
	base.RegisterTimeout = 10 * time.Second
	base.ShutdownTimeout = 5 * time.Second
	if mod != nil {
		mod(&base)
	}
	mk := func(role conf.Role, task int) *psnode.Node {
		p := base
		p.Role, p.TaskID = role, task
		n, err := psnode.New(p, nw.NewTransport(), psnode.WithLogger(quietLog()))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	j := &memJob{nodes: []*psnode.Node{mk(conf.RoleScheduler, -1)}}
	for r := range servers {
		j.servers = append(j.servers, mk(conf.RoleServer, r))
	}
	for r := range workers {
		j.workers = append(j.workers, mk(conf.RoleWorker, r))
	}
	j.nodes = append(append(j.nodes, j.servers...), j.workers...)
	t.Cleanup(func() {
		for _, n := range j.nodes {
			_ = n.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(j.nodes))
	var wg sync.WaitGroup
	for i, n := range j.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return j
}

func groups(t *testing.T, nodes []*psnode.Node, opts collective.Options) []*collective.Group {
	t.Helper()
	var gs []*collective.Group
	for _, n := range nodes {
		g, err := collective.New(n, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		gs = append(gs, g)
	}
	return gs
}

// each runs f on every group concurrently and returns the errors by rank.
func each(gs []*collective.Group, f func(g *collective.Group) error) []error {
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(g)
		}()
	}
	wg.Wait()
	return errs
}

func TestMismatchedCollectivesFail(t *testing.T) {
	j := startMemJob(t, 0, 2, nil)
	gs := groups(t, j.workers, collective.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := each(gs, func(g *collective.Group) error {
		buf := make([]float32, 10)
		if g.Rank() == 0 {
			return collective.AllReduce(ctx, g, buf, collective.Sum)
		}
		return collective.Broadcast(ctx, g, buf, 0)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "must call the same collectives") {
			t.Errorf("rank %d: %v, want an error about different collectives", r, err)
		}
	}
}

func TestWaitIsBoundedByContext(t *testing.T) {
	j := startMemJob(t, 0, 2, nil)
	gs := groups(t, j.workers, collective.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Rank 1 never joins.
	err := collective.AllReduce(ctx, gs[0], []float64{1, 2, 3}, collective.Sum)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "member 1 (worker rank 1") {
		t.Fatalf("AllReduce without the peer: %v, want the deadline, naming member 1", err)
	}
	// The group is out of step now: later calls fail at once.
	if err2 := collective.Barrier(context.Background(), gs[0]); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Barrier after the failure: %v, want %v", err2, err)
	}
}

// TestGivingUpReachesTheOthers: a rank whose collective fails on its own
// (here its context is already done) tells the others, who fail at once
// with an error naming it instead of waiting for their deadline.
func TestGivingUpReachesTheOthers(t *testing.T) {
	j := startMemJob(t, 0, 3, nil)
	gs := groups(t, j.workers, collective.Options{})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	long, cancelLong := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLong()
	errs := each(gs, func(g *collective.Group) error {
		ctx := long
		if g.Rank() == 2 {
			ctx = done
		}
		return collective.AllReduce(ctx, g, make([]float32, 100000), collective.Sum)
	})
	if !errors.Is(errs[2], context.Canceled) {
		t.Errorf("rank 2: %v, want its own cancellation", errs[2])
	}
	for r := range 2 {
		var ab *collective.AbortError
		if !errors.As(errs[r], &ab) || ab.Rank != 2 || !strings.Contains(errs[r].Error(), "worker rank 2") {
			t.Errorf("rank %d: %v, want an AbortError naming member 2", r, errs[r])
		}
	}
}

// TestMalformedMessageFailsGroup: a member that sends bytes that are not a
// collective message fails the group's pending collective with an error
// naming it; nothing panics.
func TestMalformedMessageFailsGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    transport.Message
		want string
	}{
		{"short header", transport.Message{Meta: transport.Meta{Body: []byte{1, 2, 3}}}, "header of 3 bytes"},
		{"unknown op", transport.Message{Meta: transport.Meta{Body: append([]byte{1, 1, 1, 9, 1}, make([]byte, 23)...)}}, "unknown op 9"},
		{"wrong type", transport.Message{
			Meta: transport.Meta{Body: append([]byte{1, 1, 1, 0, 1}, make([]byte, 23)...), DataTypes: []transport.DataType{transport.TypeInt64}},
			Data: [][]byte{make([]byte, 8)},
		}, "data types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := startMemJob(t, 0, 2, nil)
			g := groups(t, j.workers[:1], collective.Options{Members: []int32{transport.WorkerID(0), transport.WorkerID(1)}})[0]
			bad, err := psnode.NewRawApp(j.workers[1], collective.DefaultApp, func(*transport.Message) {})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m := tc.m
			m.Meta.Recver = transport.WorkerID(0)
			if _, err := bad.Send(ctx, &m); err != nil {
				t.Fatal(err)
			}
			err = collective.AllReduce(ctx, g, make([]float32, 4), collective.Sum)
			if err == nil || !strings.Contains(err.Error(), "member 1 (worker rank 1") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AllReduce: %v, want an error naming member 1 and %q", err, tc.want)
			}
		})
	}
}

// TestRetransmissionUnderDrops runs collectives with psnode's
// acknowledged delivery on and a tenth of the data messages dropped: the
// collectives send copies, since the node keeps a message until it is
// acknowledged, and still reach the reference.
func TestRetransmissionUnderDrops(t *testing.T) {
	j := startMemJob(t, 0, 3, func(p *conf.PS) {
		p.Resend, p.ResendTimeout, p.DropMsg = true, 50*time.Millisecond, 10
	})
	gs := groups(t, j.workers, collective.Options{ChunkBytes: 256})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := each(gs, func(g *collective.Group) error {
		for round := range 5 {
			n := 1000 + round
			buf := inputs[float64](g.Rank(), n, round)
			if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
				return err
			}
			if err := check("AllReduce", buf, 0, n, func(i int) float64 { return reference[float64](collective.Sum, g.Size(), i, round) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestGroupOfChosenMembers builds a group of a server and two workers,
// in an order of the caller's, beside a second group on another app.
func TestGroupOfChosenMembers(t *testing.T) {
	j := startMemJob(t, 1, 2, nil)
	ids := []int32{transport.WorkerID(1), transport.ServerID(0), transport.WorkerID(0)}
	nodes := []*psnode.Node{j.workers[1], j.servers[0], j.workers[0]}
	gs := groups(t, nodes, collective.Options{Members: ids, App: 7})
	pair := groups(t, j.workers, collective.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := each(gs, func(g *collective.Group) error {
		buf := []int64{int64(g.Rank() + 1), 10}
		if err := collective.AllReduce(ctx, g, buf, collective.Max); err != nil {
			return err
		}
		if buf[0] != 3 || buf[1] != 10 {
			return fmt.Errorf("rank %d: %v, want [3 10]", g.Rank(), buf)
		}
		return nil
	})
	errs = append(errs, each(pair, func(g *collective.Group) error {
		buf := []int64{int64(g.Rank() + 1)}
		if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
			return err
		}
		if buf[0] != 3 {
			return fmt.Errorf("pair rank %d: %v, want [3]", g.Rank(), buf)
		}
		return nil
	})...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if gs[1].Rank() != 1 || gs[1].Members()[0].ID != transport.WorkerID(1) {
		t.Errorf("the server is rank %d, members %v: ranks follow Options.Members", gs[1].Rank(), gs[1].Members())
	}
	if _, err := collective.New(j.nodes[0], collective.Options{App: 8}); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Errorf("New on the scheduler, not a worker: %v, want an error", err)
	}
	if _, err := collective.New(j.workers[0], collective.Options{Members: []int32{transport.WorkerID(0), 99}, App: 9}); err == nil || !strings.Contains(err.Error(), "no node 99") {
		t.Errorf("New with an unknown member: %v, want an error naming it", err)
	}
}
