package tracker

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func shards(n int) []Shard {
	out := make([]Shard, n)
	for i := range out {
		out[i] = Shard{URI: "file:///data", Start: int64(i) * 100, Length: 100}
	}
	return out
}

func next(t *testing.T, s *State, epoch, worker, attempt int) (Shard, Dispatch) {
	t.Helper()
	sh, d, err := s.NextShard(epoch, worker, attempt)
	if err != nil {
		t.Fatal(err)
	}
	return sh, d
}

func TestDispatchEachShardOncePerEpoch(t *testing.T) {
	t.Parallel()
	s := NewState(shards(5), time.Now())
	seen := map[int64]bool{}
	for i := 0; i < 5; i++ {
		sh, d := next(t, s, 0, i%2, 0)
		if d != Given || seen[sh.ID] {
			t.Fatalf("dispatch %d: %v %+v (seen %v)", i, d, sh, seen)
		}
		seen[sh.ID] = true
	}
	if _, d := next(t, s, 0, 0, 0); d != Wait {
		t.Fatalf("all handed out, none done: got %v, want Wait", d)
	}
	for id := range seen {
		if err := s.ShardDone(0, id, 0, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, d := next(t, s, 0, 1, 0); d != EpochDone {
		t.Fatalf("got %v, want EpochDone", d)
	}
	if _, d := next(t, s, 1, 1, 0); d != Given {
		t.Fatalf("epoch 1 starts afresh: got %v", d)
	}
	if got := s.Status().EpochRecords[0]; got != 50 {
		t.Fatalf("epoch 0 records %d, want 50", got)
	}
}

func TestLostWorkersShardsAreRequeued(t *testing.T) {
	t.Parallel()
	s := NewState(shards(3), time.Now())
	a, _ := next(t, s, 0, 0, 0) // worker 0 takes shard 0
	b, _ := next(t, s, 0, 1, 0) // worker 1 takes shard 1
	if err := s.ShardDone(0, a.ID, 0, 0, 7); err != nil {
		t.Fatal(err)
	}
	s.WorkerLost(1)
	got, d := next(t, s, 0, 0, 0)
	if d != Given || got.ID != b.ID {
		t.Fatalf("after worker 1 was lost, next shard is %+v (%v), want its shard %d first", got, d, b.ID)
	}
	// The lost worker's late report counts once; the new reader's is a
	// duplicate.
	if err := s.ShardDone(0, b.ID, 1, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.ShardDone(0, b.ID, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if got := s.Status().EpochRecords[0]; got != 12 {
		t.Fatalf("records %d, want 12 (each shard once)", got)
	}
}

// TestStalledShards: a worker that holds a shard for the stall timeout
// while another has waited that long for the epoch's last shards is
// reported stalled, once per shard it holds; not before either has
// lasted the timeout, nor once its shard is done.
func TestStalledShards(t *testing.T) {
	t.Parallel()
	const limit = time.Minute
	s := NewState(shards(3), time.Now())
	held, _ := next(t, s, 0, 1, 0)
	done, _ := next(t, s, 0, 0, 0)
	if err := s.ShardDone(0, done.ID, 0, 0, 10); err != nil {
		t.Fatal(err)
	}
	held2, _ := next(t, s, 0, 1, 0)
	if _, d, err := s.NextShard(0, 0, 0); err != nil || d != Wait {
		t.Fatalf("worker 0 with no shard left: %v, %v; want Wait", d, err)
	}
	if evs := s.StalledShards(time.Now(), limit); len(evs) != 0 {
		t.Errorf("at once: %+v, want no stall", evs)
	}
	later := time.Now().Add(limit + time.Second)
	evs := s.StalledShards(later, limit)
	if len(evs) != 2 {
		t.Fatalf("after the timeout: %+v, want worker 1 stalled on shards %d and %d", evs, held.ID, held2.ID)
	}
	for _, e := range evs {
		if e.Kind != EventStalled || e.Task != "worker 1" || e.Took < limit || !strings.Contains(e.Detail, "worker 0 waited") {
			t.Errorf("stall event %+v; want worker 1, took at least %v, naming the worker that waited", e, limit)
		}
	}
	for _, id := range []int64{held.ID, held2.ID} {
		if err := s.ShardDone(0, id, 1, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	if evs := s.StalledShards(later, limit); len(evs) != 0 {
		t.Errorf("once the shards are done: %+v, want no stall", evs)
	}
	// A worker that waits for more while it holds a shard is reading:
	// its own wait does not make it stalled.
	s = NewState(shards(2), time.Now())
	next(t, s, 0, 0, 0)
	next(t, s, 0, 0, 0)
	if _, d, err := s.NextShard(0, 0, 0); err != nil || d != Wait {
		t.Fatalf("worker 0 holding every shard: %v, %v; want Wait", d, err)
	}
	if evs := s.StalledShards(later, limit); len(evs) != 0 {
		t.Errorf("the holder waits for more: %+v, want no stall", evs)
	}
}

func TestRestartedWorkerGivesBackItsShards(t *testing.T) {
	t.Parallel()
	s := NewState(shards(2), time.Now())
	a, _ := next(t, s, 0, 0, 0)
	// Attempt 1 of worker 0 asks: attempt 0's shard is read again first.
	got, _ := next(t, s, 0, 0, 1)
	if got.ID != a.ID {
		t.Fatalf("restarted worker got shard %d, want %d back", got.ID, a.ID)
	}
	if _, _, err := s.NextShard(0, 0, 0); err == nil {
		t.Fatal("the replaced attempt 0 was still served")
	}
}

// TestRewindReadsTheLaterEpochsAnew: a job started again from the
// checkpoint after epoch 0 reads every shard of epoch 1 again, and counts
// its records once, as if the first run of epoch 1 never happened.
func TestRewindReadsTheLaterEpochsAnew(t *testing.T) {
	t.Parallel()
	s := NewState(shards(2), time.Now())
	for e := 0; e < 2; e++ {
		for w := 0; w < 2; w++ {
			sh, _ := next(t, s, e, w, 0)
			if e == 1 && w == 1 {
				break // the run is lost while worker 1 reads epoch 1
			}
			if err := s.ShardDone(e, sh.ID, w, 0, 10); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.ReportMetrics(e, 0, map[string]float64{"loss_sum": float64(e + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Rewind(1)
	st := s.Status()
	if st.EpochRecords[0] != 20 || st.EpochRecords[1] != 0 || st.MetricsEpoch != 0 {
		t.Fatalf("after rewinding to epoch 1: records %v, metrics of epoch %d; want epoch 0's kept, epoch 1 forgotten", st.EpochRecords, st.MetricsEpoch)
	}
	for w := 0; w < 2; w++ {
		sh, d := next(t, s, 1, w, 0)
		if d != Given {
			t.Fatalf("worker %d after the rewind: %v, want a shard", w, d)
		}
		if err := s.ShardDone(1, sh.ID, w, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, d := next(t, s, 1, 0, 0); d != EpochDone {
		t.Fatalf("got %v, want EpochDone", d)
	}
	if got := s.Status().EpochRecords[1]; got != 20 {
		t.Fatalf("epoch 1 records %d after the rewind, want 20 (each shard once)", got)
	}
}

func TestMetricsAggregate(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	_ = s.ReportMetrics(0, 1, map[string]float64{"loss_sum": 3, "examples_count": 10, "test_auc": 0.6})
	_ = s.ReportMetrics(0, 0, map[string]float64{"loss_sum": 1, "examples_count": 10, "test_auc": 0.7})
	_ = s.ReportMetrics(1, 0, map[string]float64{"loss_sum": 2})
	st := s.Status()
	if st.MetricsEpoch != 1 || st.Metrics["loss_sum"] != 2 {
		t.Fatalf("latest epoch metrics %d %v", st.MetricsEpoch, st.Metrics)
	}
	_ = s.ReportMetrics(1, 1, map[string]float64{"loss_sum": 5, "test_auc": 0.9})
	if m := s.Status().Metrics; m["loss_sum"] != 7 || m["test_auc"] != 0.9 {
		t.Fatalf("aggregate %v, want loss_sum 7 and worker 1's test_auc", m)
	}
}

// TestShardMetrics: the sums a shard is reported done with count once
// towards its epoch's metrics, beside the workers' reports, so that those
// of a worker that died before its report are kept; an epoch shows once a
// worker reported it, and a rewind forgets them with the epoch.
func TestShardMetrics(t *testing.T) {
	t.Parallel()
	s := NewState(shards(3), time.Now())
	part := func(n float64) map[string]float64 { return map[string]float64{"examples_count": n, "loss_sum": n / 2} }
	// Worker 1 reports shard 0 done, then dies; worker 0 reports shard 0
	// again (it was thought dead) and reads the other two.
	if err := s.ShardDoneOfRun(-1, 0, 0, 1, 0, 10, part(10)); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.MetricsEpoch != -1 || len(st.EpochMetrics) != 0 {
		t.Fatalf("metrics of epoch %d (%v) before any worker's report, want none", st.MetricsEpoch, st.EpochMetrics)
	}
	for id := int64(0); id < 3; id++ {
		if err := s.ShardDoneOfRun(-1, 0, id, 0, 0, 10, part(10)); err != nil {
			t.Fatal(err)
		}
	}
	// The epoch's report brings the rest of worker 0's.
	if err := s.ReportMetrics(0, 0, map[string]float64{"examples_count": 1, "loss_sum": 0.5, "test_auc": 0.7}); err != nil {
		t.Fatal(err)
	}
	m := s.Status().EpochMetrics[0]
	if m["examples_count"] != 31 || m["loss_sum"] != 15.5 || m["test_auc"] != 0.7 {
		t.Fatalf("epoch 0's metrics %v, want examples_count 31 (10 a shard once, and 1), loss_sum 15.5, test_auc 0.7", m)
	}
	// Epoch 1: worker 0 reads a shard, then the job starts again from
	// the checkpoint before epoch 1.
	if err := s.ShardDoneOfRun(-1, 1, 0, 0, 0, 10, part(10)); err != nil {
		t.Fatal(err)
	}
	_ = s.ReportMetrics(1, 0, map[string]float64{"examples_count": 0})
	s.Rewind(1)
	_ = s.ReportMetrics(1, 0, map[string]float64{"examples_count": 3})
	if got := s.Status().EpochMetrics[1]["examples_count"]; got != 3 {
		t.Fatalf("epoch 1 after the rewind counts %v examples, want 3 (the shard of the run before forgotten)", got)
	}
	// Only sums and counts go with a shard, and a bounded number.
	many := map[string]float64{}
	for i := range maxMetrics + 1 {
		many[fmt.Sprintf("m%d_sum", i)] = 1
	}
	for _, bad := range []map[string]float64{{"test_auc": 0.5}, many} {
		if err := s.ShardDoneOfRun(-1, 1, 1, 0, 0, 10, bad); err == nil {
			t.Errorf("shard done with %d metrics, %v...: accepted", len(bad), slices.Collect(maps.Keys(bad))[:1])
		}
	}
	for i := range maxMetrics + 1 {
		err := s.ShardDoneOfRun(-1, 2, 0, 0, 0, 10, map[string]float64{fmt.Sprintf("m%d_sum", i): 1})
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		// Only the first report of the shard counts: the later ones are
		// not added, and their names not checked against the epoch's.
		if i > 0 && err != nil {
			t.Fatalf("shard 0 of epoch 2 reported again with metric %d: %v", i, err)
		}
	}
	// Epoch 2's shards have reported one name; shard 1 brings the rest.
	m = map[string]float64{}
	for i := range maxMetrics - 1 {
		m[fmt.Sprintf("s%d_sum", i)] = 1
	}
	if err := s.ShardDoneOfRun(-1, 2, 1, 0, 0, 10, m); err != nil {
		t.Fatalf("epoch 2's shards reporting %d names: %v", maxMetrics, err)
	}
	if err := s.ShardDoneOfRun(-1, 2, 2, 0, 0, 10, map[string]float64{"m0_sum": 1, "one_more_sum": 1}); err == nil {
		t.Errorf("epoch 2's shards reported %d distinct names: accepted", maxMetrics+1)
	}
	if got := s.Status().EpochRecords[2]; got != 20 {
		t.Errorf("epoch 2 counts %d records, want 20: a shard refused for its metrics is not done", got)
	}
}

func TestBadRequestsAreRefused(t *testing.T) {
	t.Parallel()
	s := NewState(shards(1), time.Now())
	tests := []struct {
		name string
		err  error
	}{
		{"negative epoch", func() error { _, _, err := s.NextShard(-1, 0, 0); return err }()},
		{"huge epoch", func() error { _, _, err := s.NextShard(1<<30, 0, 0); return err }()},
		{"no such shard", s.ShardDone(0, 9, 0, 0, 1)},
		{"negative records", s.ShardDone(0, 0, 0, 0, -1)},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

// TestFollowing: EventFollows counts each task once, whatever it
// reports again, and is not listed among the events; the servers'
// EventReplicated is counted apart.
func TestFollowing(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	for _, task := range []string{"server 0", "worker 0", "worker 1", "worker 0"} {
		s.AddEvent(Event{At: time.Now(), Kind: EventFollows, Task: task})
	}
	s.AddEvent(Event{At: time.Now(), Kind: EventReplicated, Task: "server 0"})
	if n := s.Following(); n != 3 {
		t.Fatalf("%d tasks follow the scheduler, want 3", n)
	}
	if n := s.Replicated(); n != 1 {
		t.Fatalf("%d servers replicated, want 1", n)
	}
	if ev := s.Status().Events; len(ev) != 0 {
		t.Fatalf("events %+v, want none listed", ev)
	}
}

// TestDiedUnfinished: a task's process died without leaving when the
// scheduler's EventDied names the incarnation of the task's last
// EventFollows, whichever came first; the death of an earlier process
// does not count against the next, and only deaths that count reach the
// launcher. Neither kind is listed among the events.
func TestDiedUnfinished(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	add := func(kind, task, inc string) { s.AddEvent(Event{At: time.Now(), Kind: kind, Task: task, Detail: inc}) }
	delivered := func() []string {
		var out []string
		for {
			select {
			case e := <-s.Reports():
				out = append(out, e.Kind+" "+e.Task+" "+e.Detail)
			default:
				return out
			}
		}
	}
	add(EventDied, "worker 1", "5") // before any EventFollows: nothing to judge
	if s.DiedUnfinished("worker 1") {
		t.Error("a death before the task followed the scheduler counts")
	}
	add(EventFollows, "worker 1", "5")
	if !s.DiedUnfinished("worker 1") {
		t.Error("the death of the process that followed last does not count when it came first")
	}
	add(EventFollows, "worker 1", "6") // its successor
	add(EventDied, "worker 1", "5")    // the first process's death, told again late
	if s.DiedUnfinished("worker 1") {
		t.Error("an earlier process's death counts against its successor")
	}
	add(EventFollows, "worker 0", "7")
	add(EventDied, "worker 0", "7")
	if !s.DiedUnfinished("worker 0") || s.DiedUnfinished("server 0") {
		t.Error("worker 0's death not counted, or server 0's counted without one")
	}
	if got, want := delivered(), []string{"died worker 0 7"}; !slices.Equal(got, want) {
		t.Errorf("delivered to the launcher %q, want %q", got, want)
	}
	if ev := s.Status().Events; len(ev) != 0 {
		t.Errorf("events %+v, want none listed", ev)
	}
}

// TestRegistering: a scheduler waits for the nodes from its
// EventRegistering until a server or worker follows it; a report older
// than the scheduler's launch is another's.
func TestRegistering(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	t0 := time.Now()
	if s.Registering(t0) {
		t.Fatal("registering before any report")
	}
	s.AddEvent(Event{At: t0.Add(time.Second), Kind: EventFollows, Task: "worker 0", Detail: "1"}) // an earlier round's
	s.AddEvent(Event{At: t0.Add(2 * time.Second), Kind: EventRegistering, Task: "scheduler 0"})
	if !s.Registering(t0) {
		t.Error("not registering after the scheduler's report")
	}
	if s.Registering(t0.Add(3 * time.Second)) {
		t.Error("registering for a scheduler launched after the report")
	}
	select {
	case e := <-s.Reports():
		if e.Kind != EventRegistering {
			t.Errorf("delivered %+v, want the registering report", e)
		}
	default:
		t.Error("the registering report did not reach the launcher")
	}
	s.AddEvent(Event{At: t0.Add(3 * time.Second), Kind: EventFollows, Task: "worker 1", Detail: "2"})
	if s.Registering(t0) {
		t.Error("still registering once a worker follows the scheduler")
	}
	if ev := s.Status().Events; len(ev) != 0 {
		t.Errorf("events %+v, want none listed", ev)
	}
}

// TestRebuiltTookFromExit: a replacement scheduler's rebuild lasted, as
// the job sees it, from the dead scheduler's exit, and its detail keeps
// what the scheduler measured; without an exit the reported Took stands.
func TestRebuiltTookFromExit(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	s.AddEvent(Event{At: time.Now(), Kind: EventRebuilt, Task: "scheduler 0", Detail: "rebuilt", Took: 300 * time.Millisecond})
	exit := time.Now().Add(-2 * time.Second)
	s.AddEvent(Event{At: exit, Kind: EventExited, Task: "scheduler 0", Detail: "exit code 137"})
	s.AddEvent(Event{At: exit.Add(time.Second), Kind: EventExited, Task: "worker 0", Detail: "exit code 1"})
	at := time.Now()
	s.AddEvent(Event{At: at, Kind: EventRebuilt, Task: "scheduler 0", Detail: "node table of 3 nodes rebuilt", Took: 250 * time.Millisecond})
	ev := s.Status().Events
	if len(ev) != 4 {
		t.Fatalf("events %+v, want 4 listed", ev)
	}
	if ev[0].Took != 300*time.Millisecond || ev[0].Detail != "rebuilt" {
		t.Errorf("a rebuild with no exit before it %+v, want its own Took and detail", ev[0])
	}
	if e := ev[3]; e.Kind != EventRebuilt || e.Took != at.Sub(exit) || e.Detail != "node table of 3 nodes rebuilt (the rebuild 250ms)" {
		t.Errorf("rebuild %+v, want Took %v from the scheduler's exit and the rebuild's own time in the detail", e, at.Sub(exit))
	}
}

// TestScheduler: the scheduler's address is what the launcher set last.
func TestScheduler(t *testing.T) {
	t.Parallel()
	s := NewState(nil, time.Now())
	if a := s.Scheduler(); a != "" {
		t.Fatalf("scheduler %q before any placement", a)
	}
	s.SetScheduler("node-1:9000")
	s.SetScheduler("node-2:9001")
	if a := s.Scheduler(); a != "node-2:9001" {
		t.Fatalf("scheduler %q, want node-2:9001", a)
	}
	s.SetScheduler("")
	if a := s.Scheduler(); a != "" {
		t.Fatalf("scheduler %q after its exit, want none", a)
	}
}

// TestWaitShardWakesWhenShardsMove: a worker that ran out of shards waits
// in WaitShard, and learns as soon as it is so that the epoch is done,
// or gets the shard of a worker lost meanwhile; with nothing moving it is
// told Wait once the wait is over. The waits are a minute long: a worker
// not woken would make the test fail, not pass slowly.
func TestWaitShardWakesWhenShardsMove(t *testing.T) {
	t.Parallel()
	s := NewState(shards(2), time.Now())
	a, _ := next(t, s, 0, 0, 0)
	b, _ := next(t, s, 0, 1, 0)
	type answer struct {
		sh Shard
		d  Dispatch
	}
	wait := func(worker int) chan answer {
		c := make(chan answer, 1)
		go func() {
			sh, d, err := s.WaitShard(t.Context(), -1, 0, worker, 0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			c <- answer{sh, d}
		}()
		// Until it waits: what follows must wake it.
		for s.waiting.Load() == 0 && len(c) == 0 {
			runtime.Gosched()
		}
		return c
	}
	// Worker 0 is done with its shard and waits; worker 1 is lost, and
	// its shard goes to worker 0.
	if err := s.ShardDone(0, a.ID, 0, 0, 3); err != nil {
		t.Fatal(err)
	}
	c := wait(0)
	s.WorkerLost(1)
	if got := <-c; got.d != Given || got.sh.ID != b.ID {
		t.Fatalf("after worker 1 was lost: %v %+v, want its shard %d", got.d, got.sh, b.ID)
	}
	// Worker 1's new process waits; worker 0 reads the last shard.
	c = wait(1)
	if err := s.ShardDone(0, b.ID, 0, 0, 4); err != nil {
		t.Fatal(err)
	}
	if got := <-c; got.d != EpochDone {
		t.Fatalf("after the last shard was done: %v, want EpochDone", got.d)
	}
	// Nothing moves: Wait, once the wait is over.
	if _, d := next(t, s, 1, 0, 0); d != Given {
		t.Fatal("epoch 1: no shard")
	}
	next(t, s, 1, 0, 0)
	if _, d, err := s.WaitShard(t.Context(), -1, 1, 1, 0, time.Millisecond); err != nil || d != Wait {
		t.Fatalf("nothing moved: %v %v, want Wait", d, err)
	}
}

// TestRewindEndsTheRunsCalls: when the whole job starts again, a call of
// a process of the run before that was still waiting for a shard, or
// that reports one done, is refused: it takes no shard of the new run
// (the new process of its rank, which the tracker cannot tell from it,
// would never read it, and the epoch would wait for it) and marks none
// done (its pushes went to servers since restored from a checkpoint).
func TestRewindEndsTheRunsCalls(t *testing.T) {
	t.Parallel()
	s := NewState(shards(2), time.Now())
	if _, d, err := s.WaitShard(t.Context(), 0, 0, 0, 0, time.Minute); err != nil || d != Given {
		t.Fatalf("run 0, worker 0: %v %v", d, err)
	}
	held, _, err := s.WaitShard(t.Context(), 0, 0, 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Worker 0 of run 0 waits for the epoch's last shard.
	errc := make(chan error, 1)
	go func() {
		sh, d, err := s.WaitShard(t.Context(), 0, 0, 0, 0, time.Minute)
		if err == nil {
			err = fmt.Errorf("got %v %+v", d, sh)
		}
		errc <- err
	}()
	for s.waiting.Load() == 0 {
		runtime.Gosched()
	}
	if !s.EndRun(t.Context()) {
		t.Fatal("EndRun waited in vain")
	}
	s.Rewind(0)
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "the whole job started again since (run 1)") {
		t.Fatalf("run 0's waiting call after the rewind: %v; want it refused", err)
	}
	if err := s.ShardDoneOfRun(0, 0, held.ID, 1, 0, 10, nil); err == nil {
		t.Fatal("run 0's report of a shard done after the rewind was taken")
	}
	// Run 1 reads both shards.
	if s.Run() != 1 {
		t.Fatalf("run %d after the first run ended, want 1", s.Run())
	}
	for w := range 2 {
		sh, d, err := s.WaitShard(t.Context(), 1, 0, w, 0, time.Minute)
		if err != nil || d != Given {
			t.Fatalf("run 1, worker %d: %v %v", w, d, err)
		}
		if err := s.ShardDoneOfRun(1, 0, sh.ID, w, 0, 5, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Status(); st.ShardsDone != 2 || st.EpochRecords[0] != 10 {
		t.Fatalf("run 1: %d shards done, %d records; want 2, 10", st.ShardsDone, st.EpochRecords[0])
	}
}

// TestEndRunAndCheckpointCommits: ending a run waits for a checkpoint
// commit under way, and refuses those of the run after it, so that the
// checkpoint the launcher then starts the job again from is the newest
// there will be of that run.
func TestEndRunAndCheckpointCommits(t *testing.T) {
	t.Parallel()
	s := NewState(shards(2), time.Now())
	var committed []int
	inCommit, release := make(chan struct{}), make(chan struct{})
	s.SetCheckpointCommitter(func(_ context.Context, c CheckpointInfo) error {
		if c.N == 2 {
			close(inCommit)
			<-release
		}
		committed = append(committed, c.N)
		return nil
	})
	if err := s.CommitCheckpoint(t.Context(), CheckpointInfo{N: 1, Run: 0}); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 2 is being committed as the run ends.
	errc := make(chan error, 1)
	go func() { errc <- s.CommitCheckpoint(t.Context(), CheckpointInfo{N: 2, Run: 0}) }()
	<-inCommit
	ended := make(chan bool, 1)
	go func() { ended <- s.EndRun(t.Context()) }()
	for s.Run() != 1 {
		runtime.Gosched()
	}
	select {
	case <-ended:
		t.Fatal("the run ended while a checkpoint was being committed")
	default:
	}
	close(release)
	if err := <-errc; err != nil || !<-ended {
		t.Fatalf("commit under way: %v", err)
	}
	// One of the run that ended, come late, is refused; the new run's is
	// committed.
	if err := s.CommitCheckpoint(t.Context(), CheckpointInfo{N: 3, Run: 0}); err == nil || !strings.Contains(err.Error(), "started again since (run 1)") {
		t.Fatalf("run 0's commit after its end: %v; want it refused", err)
	}
	if err := s.CommitCheckpoint(t.Context(), CheckpointInfo{N: 3, Run: 1}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(committed, []int{1, 2, 3}) {
		t.Fatalf("committed %v, want 1, 2, 3", committed)
	}
	// A commit that never ends holds EndRun only as long as its context.
	s.SetCheckpointCommitter(func(ctx context.Context, _ CheckpointInfo) error { <-ctx.Done(); return ctx.Err() })
	cctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() { _ = s.CommitCheckpoint(cctx, CheckpointInfo{N: 4, Run: 1}) }()
	for len(s.committing) == 0 {
		runtime.Gosched()
	}
	ectx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if s.EndRun(ectx) {
		t.Fatal("EndRun reported a commit that never ends as finished")
	}
}

// TestProgress: a job's progress counts the epochs done and the shards of
// the current one against the epochs planned, and is whole only once it
// succeeded: a job that trained every epoch still writes its model.
func TestProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   Status
		want float64
		ok   bool
	}{
		{Status{State: Running, Epoch: 2, ShardsDone: 3, ShardsTotal: 4}, 0, false},
		{Status{State: Running, EpochsPlanned: 4}, 0, true},
		{Status{State: Running, Epoch: 2, ShardsDone: 3, ShardsTotal: 4, EpochsPlanned: 4}, 0.6875, true},
		{Status{State: Running, Epoch: 3, ShardsDone: 4, ShardsTotal: 4, EpochsPlanned: 4}, 0.99, true},
		{Status{State: Running, Epoch: 4, EpochsPlanned: 4}, 0.99, true},                                // writing the model
		{Status{State: Running, Epoch: 9, ShardsDone: 4, ShardsTotal: 4, EpochsPlanned: 4}, 0.99, true}, // planned fewer than it runs
		{Status{State: Succeeded, Epoch: 0}, 1, true},
	} {
		if p, ok := tc.st.Progress(); p != tc.want || ok != tc.ok {
			t.Errorf("%+v: progress %v, %v; want %v, %v", tc.st, p, ok, tc.want, tc.ok)
		}
	}
	s := NewState(nil, time.Now())
	for _, n := range []int{0, -1, MaxEpochs + 1} {
		if err := s.PlanEpochs(n); err == nil {
			t.Errorf("PlanEpochs(%d) took it", n)
		}
	}
	if err := s.PlanEpochs(30); err != nil || s.Status().EpochsPlanned != 30 {
		t.Errorf("PlanEpochs(30): %v, status says %d", err, s.Status().EpochsPlanned)
	}
}
