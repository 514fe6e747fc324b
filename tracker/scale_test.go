package tracker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

// joined reports that server rank is ready, as a joining server does.
func joined(s *State, rank int) {
	s.AddEvent(Event{At: time.Now(), Kind: EventJoined, Task: "server " + strconv.Itoa(rank), Detail: "ready"})
}

// view asks for epoch's servers and checks the answer.
func view(t *testing.T, s *State, epoch, want int) {
	t.Helper()
	if got, _ := s.View(epoch); got != want {
		t.Fatalf("view of epoch %d: %d servers, want %d", epoch, got, want)
	}
}

// viewBoth asks for epoch's servers and workers and checks the answer.
func viewBoth(t *testing.T, s *State, epoch, servers, workers int) {
	t.Helper()
	if gs, gw := s.View(epoch); gs != servers || gw != workers {
		t.Fatalf("view of epoch %d: %d servers and %d workers, want %d and %d", epoch, gs, gw, servers, workers)
	}
}

// workerJoined reports that worker rank is ready, as a joining worker
// does.
func workerJoined(s *State, rank int) {
	s.AddEvent(Event{At: time.Now(), Kind: EventJoined, Task: "worker " + strconv.Itoa(rank), Detail: "ready"})
}

// joinEpoch checks worker rank's JoinEpoch: want, or none for -1.
func joinEpoch(t *testing.T, s *State, rank, want int) {
	t.Helper()
	e, ok := s.JoinEpoch(rank)
	if !ok {
		e = -1
	}
	if e != want {
		t.Fatalf("worker %d joins at epoch %d, want %d (-1: none yet)", rank, e, want)
	}
}

// scaleEvents lists the scale and scaling events' details.
func scaleEvents(s *State) []string {
	var out []string
	for _, e := range s.Status().Events {
		if e.Kind == EventScale || e.Kind == EventScaling {
			out = append(out, e.Kind+": "+e.Detail)
		}
	}
	return out
}

// TestScaleOutWaitsForTheJoiners: the first view of an epoch decides it
// for every worker; more servers take effect only at the first epoch
// whose view finds every new server joined, and a view of an older epoch
// keeps its answer.
func TestScaleOutWaitsForTheJoiners(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	view(t, s, 0, 2)
	if err := s.Scale(4, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.ScaleTarget(); got != 4 {
		t.Fatalf("target %d after scale to 4", got)
	}
	view(t, s, 1, 2) // nobody joined yet
	joined(s, 2)
	view(t, s, 1, 2) // decided already
	view(t, s, 2, 2) // server 3 still missing
	joined(s, 3)
	view(t, s, 2, 2) // every worker keeps epoch 2's answer
	view(t, s, 3, 4)
	view(t, s, 3, 4)
	view(t, s, 1, 2)
	if got := s.Servers(); got != 4 {
		t.Fatalf("servers %d after the switch, want 4", got)
	}
	st := s.Status()
	if st.Servers != 4 || st.ServersTarget != 4 {
		t.Errorf("status servers %d target %d, want 4 and 4", st.Servers, st.ServersTarget)
	}
	want := []string{"scale: servers: 2 → 4 requested at epoch 0", "scaling: servers 2 → 4 from epoch 3"}
	if got := scaleEvents(s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestScaleInAtOnce: fewer servers take effect at the next epoch's view;
// the ranks left out retire until they exit.
func TestScaleInAtOnce(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(4)
	view(t, s, 0, 4)
	if err := s.Scale(2, 0); err != nil {
		t.Fatal(err)
	}
	view(t, s, 0, 4)
	view(t, s, 1, 2)
	for r, want := range []bool{false, false, true, true} {
		if got := s.Retiring(conf.RoleServer, r); got != want {
			t.Errorf("server %d retiring %v, want %v", r, got, want)
		}
	}
	s.Exited(conf.RoleServer, 3)
	if s.Retiring(conf.RoleServer, 3) {
		t.Error("server 3 still retiring after its exit")
	}
	// A retiring server is needed until it exits; one that exited is not.
	if s.ReleaseJoiner(conf.RoleServer, 2) || !s.ReleaseJoiner(conf.RoleServer, 3) {
		t.Errorf("release of server 2 %v, of server 3 %v; want false (it hands its keys off), true", s.ReleaseJoiner(conf.RoleServer, 2), s.ReleaseJoiner(conf.RoleServer, 3))
	}
}

// TestScaleRefusals: the bounds, a job that has not started training,
// one without servers, one whose replicas need more servers, and one
// that is over.
func TestScaleRefusals(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	s.SetWorkers(1)
	s.SetReplicas(1)
	if err := s.Scale(3, 0); err == nil || !strings.Contains(err.Error(), "scale to 3 servers: the job has not started training yet") {
		t.Errorf("scale before any view: %v", err)
	}
	view(t, s, 0, 2)
	tests := []struct {
		servers, workers int
		want             string
	}{
		{0, 0, "scale: no number of servers or workers asked for"},
		{-1, 0, "scale to -1 servers: want 1 to 64"},
		{65, 0, "scale to 65 servers: want 1 to 64"},
		{0, -1, "scale to -1 workers: want 1 to 256"},
		{2, 257, "scale to 257 workers: want 1 to 256"},
		{1, 0, "scale to 1 servers: the job keeps 1 replicas of each server's tables, which needs at least 2 servers"},
		{1, 3, "scale to 1 servers and 3 workers: the job keeps 1 replicas"},
	}
	for _, tt := range tests {
		if err := s.Scale(tt.servers, tt.workers); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("scale to %d servers, %d workers: %v, want it to say %q", tt.servers, tt.workers, err, tt.want)
		}
	}
	if got, gotW := s.ScaleTarget(), s.WorkersTarget(); got != 2 || gotW != 1 {
		t.Errorf("targets %d servers, %d workers after refusals, want 2 and 1", got, gotW)
	}
	if err := s.Scale(0, MaxScaleWorkers); err != nil {
		t.Errorf("scale to %d workers: %v", MaxScaleWorkers, err)
	}
	if err := s.Scale(MaxScaleServers, 0); err != nil {
		t.Errorf("scale to %d: %v", MaxScaleServers, err)
	}
	s.Finish(Succeeded, "done")
	if err := s.Scale(3, 0); err == nil || !strings.Contains(err.Error(), "the job is over") {
		t.Errorf("scale of a job that is over: %v", err)
	}

	none := NewState(nil, time.Now())
	none.SetServers(0)
	none.SetWorkers(2)
	none.View(0)
	if err := none.Scale(2, 0); err == nil || !strings.Contains(err.Error(), "the job has no servers") {
		t.Errorf("scale of a job without servers: %v", err)
	}
	if err := none.Scale(0, 3); err != nil {
		t.Errorf("scale of a job without servers to 3 workers: %v", err)
	}
}

// TestScaleBackCancels: a target equal to the current count cancels a
// change not yet made; the launcher hears of the newest target only.
func TestScaleBackCancels(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	view(t, s, 0, 2)
	for _, n := range []int{3, 4} {
		if err := s.Scale(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-s.ScaleRequests(); got.Servers != 4 {
		t.Fatalf("the launcher heard of %d servers, want the newest target 4", got.Servers)
	}
	joined(s, 2)
	joined(s, 3)
	if err := s.Scale(2, 0); err != nil {
		t.Fatal(err)
	}
	view(t, s, 1, 2)
	if !s.ReleaseJoiner(conf.RoleServer, 3) {
		t.Error("server 3, started for a target since cancelled, is still needed")
	}
	if s.ReleaseJoiner(conf.RoleServer, 1) {
		t.Error("server 1 of 2 released")
	}
	// Released: a view does not take it in again until it joins anew.
	if err := s.Scale(4, 0); err != nil {
		t.Fatal(err)
	}
	view(t, s, 2, 2)
	joined(s, 3)
	view(t, s, 3, 4)
	want := []string{"scale: servers: 2 → 3 requested at epoch 0", "scale: servers: 2 → 4 requested at epoch 0",
		"scale: servers: 2 requested at epoch 0, as many as the job has: no change pending",
		"scale: servers: 2 → 4 requested at epoch 1", "scaling: servers 2 → 4 from epoch 3"}
	if got := scaleEvents(s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRewindForgetsTheViews: a job started again from a checkpoint
// decides the epochs after it anew, with the servers that wrote the
// checkpoint, towards the target that stands; training had started, so
// scaling is still allowed.
func TestRewindForgetsTheViews(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	view(t, s, 0, 2)
	if err := s.Scale(3, 0); err != nil {
		t.Fatal(err)
	}
	joined(s, 2)
	view(t, s, 1, 3)
	view(t, s, 2, 3)
	s.Rewind(1)
	s.SetServers(2) // the checkpoint of epoch 1 was written by 2 servers
	if got := s.ScaleTarget(); got != 3 {
		t.Fatalf("target %d after the restart, want 3 still", got)
	}
	view(t, s, 0, 2)
	view(t, s, 1, 2) // server 2 must join again
	joined(s, 2)
	view(t, s, 2, 3)
	if err := s.Scale(2, 0); err != nil {
		t.Errorf("scale after a restart: %v", err)
	}
}

// serveOverTLS serves a job of one server and one worker over TLS with
// the secret "s3cret" until t ends, and returns a context bounded for the
// test, the job's state, a client that knows the secret and a maker of
// clients that know another.
func serveOverTLS(t *testing.T) (context.Context, *State, *Client, func(secret string) *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
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
	st.SetServers(1)
	st.SetWorkers(1)
	svc, err := Serve(ctx, "127.0.0.1:0", st, "s3cret", quietLog(), WithTLS(stls))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	client := func(secret string) *Client {
		c := NewClient(svc.Addr(), secret, WithTLS(ctls))
		t.Cleanup(func() { c.Close() })
		return c
	}
	return ctx, st, client("s3cret"), client
}

// TestUnresponsiveReport: the report that a server or worker (or the
// scheduler) went silent reaches the launcher (State.Unresponsive) and
// the job's events; a report of a task the job has no such name for is
// refused.
func TestUnresponsiveReport(t *testing.T) {
	t.Parallel()
	ctx, st, c, _ := serveOverTLS(t)
	var re *RemoteError
	if err := c.ReportEvent(ctx, Event{Kind: EventUnresponsive, Task: "scheduler 1"}); !errors.As(err, &re) {
		t.Fatalf("a second scheduler reported unresponsive: %v, want a RemoteError", err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventUnresponsive, Task: "worker 0", Detail: "no heartbeat for 10s", Took: 10200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-st.Reports():
		if e.Task != "worker 0" || e.Took != 10200*time.Millisecond || e.Detail != "no heartbeat for 10s" || e.At.IsZero() {
			t.Errorf("the launcher got %+v", e)
		}
	default:
		t.Fatal("the report did not reach the launcher")
	}
	// The same silence reported by another node is listed and delivered
	// once; a later one again.
	if err := c.ReportEvent(ctx, Event{Kind: EventUnresponsive, Task: "worker 0", Detail: "no heartbeat for 10s", Took: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-st.Reports():
		t.Errorf("the same silence delivered twice: %+v", e)
	default:
	}
	st.AddEvent(Event{At: time.Now().Add(time.Minute), Kind: EventUnresponsive, Task: "worker 0", Took: 10 * time.Second})
	select {
	case <-st.Reports():
	default:
		t.Error("a later silence of the same task was not delivered")
	}
	if evs := st.Status().Events; len(evs) != 2 || evs[0].Kind != EventUnresponsive || evs[1].Kind != EventUnresponsive {
		t.Errorf("the job's events: %+v; want the two silences", evs)
	}
}

// TestStalledReport: the report that a live server or worker held up the
// others reaches the launcher and the job's events once, though every
// server that waited for it reports it; the scheduler cannot be reported
// stalled.
func TestStalledReport(t *testing.T) {
	t.Parallel()
	ctx, st, c, _ := serveOverTLS(t)
	var re *RemoteError
	if err := c.ReportEvent(ctx, Event{Kind: EventStalled, Task: "scheduler 0"}); !errors.As(err, &re) || !strings.Contains(re.Error(), "is reported stalled") {
		t.Fatalf("the scheduler reported stalled: %v, want a RemoteError saying who may be", err)
	}
	for server := range 2 {
		detail := fmt.Sprintf("table w on server %d held a request 3s for it", server)
		if err := c.ReportEvent(ctx, Event{Kind: EventStalled, Task: "worker 1", Detail: detail, Took: 3*time.Second + time.Duration(server)*time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case e := <-st.Reports():
		if e.Kind != EventStalled || e.Task != "worker 1" || !strings.Contains(e.Detail, "server 0") {
			t.Errorf("the launcher got %+v", e)
		}
	default:
		t.Fatal("the report did not reach the launcher")
	}
	select {
	case e := <-st.Reports():
		t.Errorf("the same stall delivered twice: %+v", e)
	default:
	}
	if evs := st.Status().Events; len(evs) != 1 || evs[0].Kind != EventStalled {
		t.Errorf("the job's events: %+v; want the one stall", evs)
	}
}

// TestScaleOverTCP: workers ask for views, a server reports it joined
// and ps-submit asks for more servers over the tracker RPC, on TLS; a
// refusal says why, and a wrong secret neither scales nor learns a view.
func TestScaleOverTCP(t *testing.T) {
	t.Parallel()
	ctx, st, c, client := serveOverTLS(t)

	var re *RemoteError
	if err := c.Scale(ctx, 2, 0); !errors.As(err, &re) || !strings.Contains(err.Error(), "not started training yet") {
		t.Fatalf("scale before training: %v, want a RemoteError saying so", err)
	}
	if n, w, err := c.View(ctx, 0); err != nil || n != 1 || w != 1 {
		t.Fatalf("view of epoch 0: %d servers, %d workers, %v; want 1 and 1", n, w, err)
	}
	if err := c.Scale(ctx, 100, 0); !errors.As(err, &re) || !strings.Contains(err.Error(), "scale to 100 servers: want 1 to 64") {
		t.Fatalf("scale to 100: %v", err)
	}
	if err := c.Scale(ctx, 2, 2); err != nil {
		t.Fatal(err)
	}
	if e, err := c.JoinEpoch(ctx, 1); err != nil || e != -1 {
		t.Fatalf("worker 1's epoch before it joined: %d %v, want -1", e, err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventJoined, Task: "scheduler 0"}); !errors.As(err, &re) {
		t.Fatalf("a scheduler's join: %v, want a RemoteError", err)
	}
	for _, task := range []string{"server 1", "worker 1"} {
		if err := c.ReportEvent(ctx, Event{Kind: EventJoined, Task: task, Detail: "ready"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, w, err := c.View(ctx, 1); err != nil || n != 2 || w != 2 {
		t.Fatalf("view of epoch 1: %d servers, %d workers, %v; want 2 and 2", n, w, err)
	}
	if e, err := c.JoinEpoch(ctx, 1); err != nil || e != 1 {
		t.Fatalf("worker 1's epoch: %d %v, want 1", e, err)
	}
	if _, err := c.JoinEpoch(ctx, -1); !errors.As(err, &re) {
		t.Fatalf("join epoch of worker -1: %v, want a RemoteError", err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventScaled, Task: "worker 0", Detail: "servers 1 → 2: moved 50.1% of the keys (501 of 1000)",
		Took: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.View(ctx, -1); !errors.As(err, &re) {
		t.Fatalf("view of epoch -1: %v, want a RemoteError", err)
	}
	remote, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if remote.Servers != 2 || remote.ServersTarget != 2 || remote.Workers != 2 || remote.WorkersTarget != 2 {
		t.Errorf("status over the RPC: servers %d target %d, workers %d target %d; want 2 of each", remote.Servers, remote.ServersTarget,
			remote.Workers, remote.WorkersTarget)
	}
	var kinds []string
	for _, e := range remote.Events {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{EventScale, EventScale, EventJoined, EventJoined, EventScaling, EventScaling, EventScaled}; strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("events %q, want %q", kinds, want)
	}

	bad := client("guess")
	if err := bad.Scale(ctx, 1, 1); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("scale with a wrong secret: %v, want ErrUnauthorized", err)
	}
	if n, w, err := bad.View(ctx, 2); !errors.Is(err, ErrUnauthorized) || n != 0 || w != 0 {
		t.Fatalf("view with a wrong secret: %d %d %v, want ErrUnauthorized", n, w, err)
	}
	if _, err := bad.JoinEpoch(ctx, 1); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("join epoch with a wrong secret: %v, want ErrUnauthorized", err)
	}
	if got, gotW := st.ScaleTarget(), st.WorkersTarget(); got != 2 || gotW != 2 {
		t.Errorf("targets %d servers, %d workers after a refused scale, want 2 and 2", got, gotW)
	}
}

// TestScaleWorkersOutWaitsForTheJoiners: more workers take effect only
// at the first epoch whose view finds every new worker joined; each
// joiner then learns that epoch as the one it begins at, and a worker
// of the job from its start joins at none.
func TestScaleWorkersOutWaitsForTheJoiners(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(1)
	s.SetWorkers(2)
	viewBoth(t, s, 0, 1, 2)
	if err := s.Scale(0, 4); err != nil {
		t.Fatal(err)
	}
	if got := <-s.ScaleRequests(); got != (Target{Servers: 1, Workers: 4}) {
		t.Fatalf("the launcher heard of %+v, want 1 server and 4 workers", got)
	}
	workerJoined(s, 2)
	viewBoth(t, s, 1, 1, 2) // worker 3 still missing
	joinEpoch(t, s, 2, -1)
	workerJoined(s, 3)
	viewBoth(t, s, 1, 1, 2) // every worker keeps epoch 1's answer
	viewBoth(t, s, 2, 1, 4)
	joinEpoch(t, s, 2, 2)
	joinEpoch(t, s, 3, 2)
	joinEpoch(t, s, 1, -1)
	viewBoth(t, s, 3, 1, 4)
	joinEpoch(t, s, 3, 2) // the epoch of the switch, not the newest
	st := s.Status()
	if st.Workers != 4 || st.WorkersTarget != 4 || st.Servers != 1 || st.ServersTarget != 1 {
		t.Errorf("status workers %d target %d, servers %d target %d; want 4, 4, 1, 1", st.Workers, st.WorkersTarget, st.Servers, st.ServersTarget)
	}
	want := []string{"scale: workers: 2 → 4 requested at epoch 0", "scaling: workers 2 → 4 from epoch 2"}
	if got := scaleEvents(s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestScaleServersAndWorkersApart: asked for more of both, the servers
// and the workers switch each at the first epoch its own joiners allow.
func TestScaleServersAndWorkersApart(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	s.SetWorkers(2)
	viewBoth(t, s, 0, 2, 2)
	if err := s.Scale(3, 3); err != nil {
		t.Fatal(err)
	}
	joined(s, 2)
	viewBoth(t, s, 1, 3, 2)
	workerJoined(s, 2)
	viewBoth(t, s, 2, 3, 3)
	joinEpoch(t, s, 2, 2)
	want := []string{"scale: servers: 2 → 3 requested at epoch 0", "scale: workers: 2 → 3 requested at epoch 0",
		"scaling: servers 2 → 3 from epoch 1", "scaling: workers 2 → 3 from epoch 2"}
	if got := scaleEvents(s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestScaleWorkersInAndBackAgain: fewer workers take effect at the next
// epoch; the worker left out retires until it exits, and begins at no
// epoch any more. Asked back before it exited, it must join anew: the
// view takes it in only once its new process joined, at a new epoch.
func TestScaleWorkersInAndBackAgain(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(1)
	s.SetWorkers(2)
	viewBoth(t, s, 0, 1, 2)
	if err := s.Scale(0, 3); err != nil {
		t.Fatal(err)
	}
	workerJoined(s, 2)
	viewBoth(t, s, 1, 1, 3)
	if err := s.Scale(0, 2); err != nil {
		t.Fatal(err)
	}
	viewBoth(t, s, 2, 1, 2)
	if !s.Retiring(conf.RoleWorker, 2) || s.Retiring(conf.RoleWorker, 1) {
		t.Errorf("worker 2 retiring %v, worker 1 %v; want true, false", s.Retiring(conf.RoleWorker, 2), s.Retiring(conf.RoleWorker, 1))
	}
	if s.Retiring(conf.RoleServer, 2) {
		t.Error("server 2 retiring: only a worker was left out")
	}
	joinEpoch(t, s, 2, -1)
	if s.ReleaseJoiner(conf.RoleWorker, 2) {
		t.Error("worker 2 released while it retires")
	}
	if err := s.Scale(0, 3); err != nil {
		t.Fatal(err)
	}
	viewBoth(t, s, 3, 1, 2) // its old process's join does not count
	s.Exited(conf.RoleWorker, 2)
	if s.Retiring(conf.RoleWorker, 2) {
		t.Error("worker 2 still retiring after its exit")
	}
	workerJoined(s, 2)
	viewBoth(t, s, 4, 1, 3)
	joinEpoch(t, s, 2, 4)
	if got := s.Workers(); got != 3 {
		t.Errorf("workers %d, want 3", got)
	}
}

// TestWorkersRestartForgetsTheJoins: a job that starts again decides the
// epochs after its checkpoint anew: a worker that began at a forgotten
// epoch begins at none until a new switch takes it in.
func TestWorkersRestartForgetsTheJoins(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(1)
	s.SetWorkers(1)
	viewBoth(t, s, 0, 1, 1)
	if err := s.Scale(0, 2); err != nil {
		t.Fatal(err)
	}
	workerJoined(s, 1)
	viewBoth(t, s, 2, 1, 2)
	joinEpoch(t, s, 1, 2)
	s.Rewind(1)
	joinEpoch(t, s, 1, -1)
	s.SetWorkers(2) // the job starts again with the workers it had
	viewBoth(t, s, 1, 1, 2)
	joinEpoch(t, s, 1, -1)
}
