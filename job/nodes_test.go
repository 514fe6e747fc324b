package job

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/tracker"
)

// nodeFake is a Cluster of a few named nodes that places each launch on
// the next node in turn that is not blacklisted, and ends it as exit
// says for that node. It is a NodeBlacklister unless noBlacklist.
type nodeFake struct {
	q           *EventQueue
	nodes       []string
	next        int
	blacklisted []string
	// refuse makes BlacklistNode refuse.
	refuse bool
	// exit says how a launch on node ends; n numbers the task's launches
	// from 0.
	exit func(node string, l Launch, n int) Exit
	// placed records every launch's node, in order; blAt is len(placed)
	// at each blacklisting.
	placed  []string
	blAt    []int
	perTask map[Task]int
}

func newNodeFake(t *testing.T, nodes []string, exit func(node string, l Launch, n int) Exit) *nodeFake {
	f := &nodeFake{q: NewEventQueue(), nodes: nodes, exit: exit, perTask: map[Task]int{}}
	t.Cleanup(f.q.Close)
	return f
}

func (f *nodeFake) Name() string                               { return "fake" }
func (f *nodeFake) SchedulerPort(context.Context) (int, error) { return 40001, nil }
func (f *nodeFake) StopAll(context.Context) error              { return nil }
func (f *nodeFake) Stop(context.Context, int64) error          { return nil }
func (f *nodeFake) Events() <-chan Event                       { return f.q.Out() }

func (f *nodeFake) Start(_ context.Context, l Launch) error {
	var node string
	for range f.nodes {
		node = f.nodes[f.next%len(f.nodes)]
		f.next++
		if !slices.Contains(f.blacklisted, node) {
			break
		}
	}
	f.placed = append(f.placed, node)
	n := f.perTask[l.Task]
	f.perTask[l.Task]++
	// Every node shares one address, as NodeManagers on one host do.
	f.q.Push(Event{Kind: Placed, ID: l.ID, Node: "10.0.0.1", NodeID: node})
	f.q.Push(Event{Kind: Exited, ID: l.ID, Exit: f.exit(node, l, n)})
	return nil
}

func (f *nodeFake) BlacklistNode(node string) bool {
	if f.refuse {
		return false
	}
	f.blacklisted = append(f.blacklisted, node)
	f.blAt = append(f.blAt, len(f.placed))
	return true
}

// plainFake hides nodeFake's BlacklistNode.
type plainFake struct{ *nodeFake }

func (plainFake) BlacklistNode() {}

func runNodeJob(t *testing.T, spec JobSpec, c Cluster) (Result, error, *Job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	spec.Command = []string{"prog"}
	j, err := New(ctx, spec, Options{Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	res, err := j.Run(ctx, c)
	return res, err, j
}

var (
	exitOK     = Exit{Code: 0, Desc: "exit code 0"}
	exitFailed = Exit{Code: 1, Desc: "exit code 1"}
	exitLost   = Exit{Code: -102, Desc: "exit status -102 (PREEMPTED)", Lost: true}
)

// TestBadNodeBlacklisted: a node where every launch fails is blacklisted
// after BlacklistAfter failures, shown in the status, and the job
// succeeds on the other node; nothing is placed there afterwards.
func TestBadNodeBlacklisted(t *testing.T) {
	t.Parallel()
	f := newNodeFake(t, []string{"nm:1", "nm:2"}, func(node string, _ Launch, _ int) Exit {
		if node == "nm:1" {
			return exitFailed
		}
		return exitOK
	})
	res, err, j := runNodeJob(t, JobSpec{NumWorkers: 4, MaxAttempts: 3, BlacklistAfter: 2}, f)
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if !slices.Equal(f.blacklisted, []string{"nm:1"}) {
		t.Fatalf("blacklisted %v, want [nm:1]", f.blacklisted)
	}
	if bad := j.State().Status().BadNodes; !slices.Equal(bad, []tracker.BadNode{{Node: "nm:1", Failures: 2}}) {
		t.Errorf("status's bad nodes %v", bad)
	}
	for i := f.blAt[0]; i < len(f.placed); i++ {
		if f.placed[i] == "nm:1" {
			t.Errorf("launch %d placed on nm:1 after it was blacklisted (placements %v)", i, f.placed)
		}
	}
}

// TestBadNodeThreshold: below BlacklistAfter, with BlacklistAfter 0, on a
// cluster that cannot blacklist, or when the cluster refuses, no node is
// recorded as bad.
func TestBadNodeThreshold(t *testing.T) {
	t.Parallel()
	// Every launch of worker 0 fails once, wherever it runs.
	failFirst := func(_ string, l Launch, n int) Exit {
		if n == 0 {
			return exitFailed
		}
		return exitOK
	}
	tests := []struct {
		name    string
		after   int
		refuse  bool
		plain   bool
		workers int
		wantBL  int
	}{
		{"below the threshold", 3, false, false, 2, 0}, // one failure on each node
		{"never", 0, false, false, 4, 0},
		{"refused", 1, true, false, 2, 0},
		{"not a blacklister", 1, false, true, 2, 0},
		{"at the threshold", 1, false, false, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newNodeFake(t, []string{"nm:1", "nm:2"}, failFirst)
			f.refuse = tt.refuse
			var c Cluster = f
			if tt.plain {
				c = plainFake{f}
			}
			res, err, j := runNodeJob(t, JobSpec{NumWorkers: tt.workers, MaxAttempts: 2, BlacklistAfter: tt.after}, c)
			if err != nil || res.State != tracker.Succeeded {
				t.Fatalf("job %v: %v", res.State, err)
			}
			if got := len(j.State().Status().BadNodes); got != tt.wantBL {
				t.Errorf("%d bad nodes (%v), want %d", got, j.State().Status().BadNodes, tt.wantBL)
			}
			if len(f.blacklisted) != tt.wantBL {
				t.Errorf("cluster blacklisted %v, want %d nodes", f.blacklisted, tt.wantBL)
			}
		})
	}
}

// TestLostLaunches: launches the cluster took away neither use up the
// task's attempts nor count against their node, and are bounded.
func TestLostLaunches(t *testing.T) {
	t.Parallel()
	t.Run("preempted twice, one attempt", func(t *testing.T) {
		t.Parallel()
		f := newNodeFake(t, []string{"nm:1"}, func(_ string, _ Launch, n int) Exit {
			if n < 2 {
				return exitLost
			}
			return exitOK
		})
		res, err, j := runNodeJob(t, JobSpec{NumWorkers: 1, MaxAttempts: 1, BlacklistAfter: 1}, f)
		if err != nil || res.State != tracker.Succeeded {
			t.Fatalf("job %v: %v", res.State, err)
		}
		if got := f.perTask[worker0]; got != 3 {
			t.Errorf("%d launches, want 3", got)
		}
		if len(f.blacklisted) != 0 || len(j.State().Status().BadNodes) != 0 {
			t.Errorf("a node blacklisted for preemptions: %v", f.blacklisted)
		}
		if res.Tasks[0].Attempts != 3 {
			t.Errorf("result counts %d attempts, want 3", res.Tasks[0].Attempts)
		}
	})
	t.Run("lost without end", func(t *testing.T) {
		t.Parallel()
		f := newNodeFake(t, []string{"nm:1"}, func(string, Launch, int) Exit { return exitLost })
		res, err, _ := runNodeJob(t, JobSpec{NumWorkers: 1, MaxAttempts: 2}, f)
		if res.State != tracker.Failed || err == nil {
			t.Fatalf("job %v: %v, want it failed", res.State, err)
		}
		// MaxLostLaunches free losses, then the two attempts.
		if got, want := f.perTask[worker0], MaxLostLaunches+2; got != want {
			t.Errorf("%d launches, want %d", got, want)
		}
		if want := fmt.Sprintf("on attempt %d of %d", 2, 2); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "PREEMPTED") {
			t.Errorf("error %q, want it to say %q and PREEMPTED", err, want)
		}
	})
}
