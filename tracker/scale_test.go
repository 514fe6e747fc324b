package tracker

import (
	"context"
	"errors"
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
	if got := s.View(epoch); got != want {
		t.Fatalf("view of epoch %d: %d servers, want %d", epoch, got, want)
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
	if err := s.Scale(4); err != nil {
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
	if err := s.Scale(2); err != nil {
		t.Fatal(err)
	}
	view(t, s, 0, 4)
	view(t, s, 1, 2)
	for r, want := range []bool{false, false, true, true} {
		if got := s.Retiring(r); got != want {
			t.Errorf("server %d retiring %v, want %v", r, got, want)
		}
	}
	s.ServerExited(3)
	if s.Retiring(3) {
		t.Error("server 3 still retiring after its exit")
	}
	// A retiring server is needed until it exits; one that exited is not.
	if s.ReleaseJoiner(2) || !s.ReleaseJoiner(3) {
		t.Errorf("release of server 2 %v, of server 3 %v; want false (it hands its keys off), true", s.ReleaseJoiner(2), s.ReleaseJoiner(3))
	}
}

// TestScaleRefusals: the bounds, a job that has not started training,
// one without servers, one whose replicas need more servers, and one
// that is over.
func TestScaleRefusals(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.SetServers(2)
	s.SetReplicas(1)
	if err := s.Scale(3); err == nil || !strings.Contains(err.Error(), "scale to 3 servers: the job has not started training yet") {
		t.Errorf("scale before any view: %v", err)
	}
	view(t, s, 0, 2)
	tests := []struct {
		servers int
		want    string
	}{
		{0, "scale to 0 servers: want 1 to 64"},
		{-1, "scale to -1 servers: want 1 to 64"},
		{65, "scale to 65 servers: want 1 to 64"},
		{1, "scale to 1 servers: the job keeps 1 replicas of each server's tables, which needs at least 2 servers"},
	}
	for _, tt := range tests {
		if err := s.Scale(tt.servers); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("scale to %d: %v, want it to say %q", tt.servers, err, tt.want)
		}
	}
	if got := s.ScaleTarget(); got != 2 {
		t.Errorf("target %d after refusals, want 2", got)
	}
	if err := s.Scale(MaxScaleServers); err != nil {
		t.Errorf("scale to %d: %v", MaxScaleServers, err)
	}
	s.Finish(Succeeded, "done")
	if err := s.Scale(3); err == nil || !strings.Contains(err.Error(), "the job is over") {
		t.Errorf("scale of a job that is over: %v", err)
	}

	none := NewState(nil, time.Now())
	none.SetServers(0)
	none.View(0)
	if err := none.Scale(2); err == nil || !strings.Contains(err.Error(), "the job has no servers") {
		t.Errorf("scale of a job without servers: %v", err)
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
		if err := s.Scale(n); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-s.ScaleRequests(); got != 4 {
		t.Fatalf("the launcher heard of %d servers, want the newest target 4", got)
	}
	joined(s, 2)
	joined(s, 3)
	if err := s.Scale(2); err != nil {
		t.Fatal(err)
	}
	view(t, s, 1, 2)
	if !s.ReleaseJoiner(3) {
		t.Error("server 3, started for a target since cancelled, is still needed")
	}
	if s.ReleaseJoiner(1) {
		t.Error("server 1 of 2 released")
	}
	// Released: a view does not take it in again until it joins anew.
	if err := s.Scale(4); err != nil {
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
	if err := s.Scale(3); err != nil {
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
	if err := s.Scale(2); err != nil {
		t.Errorf("scale after a restart: %v", err)
	}
}

// TestScaleOverTCP: workers ask for views, a server reports it joined
// and ps-submit asks for more servers over the tracker RPC, on TLS; a
// refusal says why, and a wrong secret neither scales nor learns a view.
func TestScaleOverTCP(t *testing.T) {
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
	st.SetServers(1)
	svc, err := Serve(ctx, "127.0.0.1:0", st, "s3cret", quietLog(), WithTLS(stls))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	c := NewClient(svc.Addr(), "s3cret", WithTLS(ctls))
	defer c.Close()

	var re *RemoteError
	if err := c.Scale(ctx, 2); !errors.As(err, &re) || !strings.Contains(err.Error(), "not started training yet") {
		t.Fatalf("scale before training: %v, want a RemoteError saying so", err)
	}
	if n, err := c.View(ctx, 0); err != nil || n != 1 {
		t.Fatalf("view of epoch 0: %d %v, want 1", n, err)
	}
	if err := c.Scale(ctx, 100); !errors.As(err, &re) || !strings.Contains(err.Error(), "scale to 100 servers: want 1 to 64") {
		t.Fatalf("scale to 100: %v", err)
	}
	if err := c.Scale(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventJoined, Task: "worker 1"}); !errors.As(err, &re) {
		t.Fatalf("a worker's join: %v, want a RemoteError", err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventJoined, Task: "server 1", Detail: "ready"}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.View(ctx, 1); err != nil || n != 2 {
		t.Fatalf("view of epoch 1: %d %v, want 2", n, err)
	}
	if err := c.ReportEvent(ctx, Event{Kind: EventScaled, Task: "worker 0", Detail: "servers 1 → 2: moved 50.1% of the keys (501 of 1000)",
		Took: 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.View(ctx, -1); !errors.As(err, &re) {
		t.Fatalf("view of epoch -1: %v, want a RemoteError", err)
	}
	remote, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if remote.Servers != 2 || remote.ServersTarget != 2 {
		t.Errorf("status over the RPC: servers %d target %d, want 2 and 2", remote.Servers, remote.ServersTarget)
	}
	var kinds []string
	for _, e := range remote.Events {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{EventScale, EventJoined, EventScaling, EventScaled}; strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("events %q, want %q", kinds, want)
	}

	bad := NewClient(svc.Addr(), "guess", WithTLS(ctls))
	defer bad.Close()
	if err := bad.Scale(ctx, 1); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("scale with a wrong secret: %v, want ErrUnauthorized", err)
	}
	if n, err := bad.View(ctx, 2); !errors.Is(err, ErrUnauthorized) || n != 0 {
		t.Fatalf("view with a wrong secret: %d %v, want ErrUnauthorized", n, err)
	}
	if got := st.ScaleTarget(); got != 2 {
		t.Errorf("target %d after a refused scale, want 2", got)
	}
}
