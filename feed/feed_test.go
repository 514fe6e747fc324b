package feed

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

func resolver(t *testing.T) *dfs.Resolver {
	t.Helper()
	r, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// writeFiles writes files part-0 … part-(len(sizes)-1) under a new
// directory, file i holding sizes[i] libsvm records whose feature key
// is 1000·i + j (j-th record), and bad[i] malformed lines after them.
func writeFiles(t *testing.T, sizes, bad []int) string {
	t.Helper()
	dir := t.TempDir()
	for i, n := range sizes {
		var b strings.Builder
		for j := range n {
			weight := ""
			if i == 1 && j%3 == 2 { // the second file weighs some of its records
				weight = fmt.Sprintf(":%d.5", j)
			}
			fmt.Fprintf(&b, "%d%s %d:1\n", j%2, weight, 1000*i+j+1)
		}
		if bad != nil {
			for range bad[i] {
				b.WriteString("label? 1:1\n")
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shards plans the files of dir, one shard each.
func shards(t *testing.T, res *dfs.Resolver, dir string) []tracker.Shard {
	t.Helper()
	sh, err := tracker.InputPlanner(res)(context.Background(), []string{dir}, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// fakeTracker serves a fixed plan and records the shards reported done.
type fakeTracker struct {
	plan    []tracker.Shard
	plans   int
	done    []int64
	recs    []int64
	metrics []map[string]float64 // with each shard done
	events  []tracker.Event
}

func (f *fakeTracker) ReportEvent(_ context.Context, e tracker.Event) error {
	f.events = append(f.events, e)
	return nil
}

func (f *fakeTracker) DoneShards(context.Context, int) (map[int64]int64, error) {
	out := map[int64]int64{}
	for i, id := range f.done {
		out[id] = f.recs[i]
	}
	return out, nil
}

func (f *fakeTracker) Plan(context.Context) ([]tracker.Shard, error) {
	f.plans++
	return f.plan, nil
}

func (f *fakeTracker) NextShard(context.Context, int, int, int) (tracker.Shard, tracker.Dispatch, time.Duration, error) {
	return tracker.Shard{}, 0, 0, errors.New("fakeTracker: no NextShard in synchronous mode")
}

func (f *fakeTracker) ShardDone(_ context.Context, _ int, id int64, _, _ int, n int64, m map[string]float64) error {
	f.done = append(f.done, id)
	f.recs = append(f.recs, n)
	f.metrics = append(f.metrics, m)
	return nil
}

// key is the file and record index a test record stands for.
func key(ex records.Example) uint64 { return ex.Keys[0] - 1 }

func TestSyncShareOfThePlan(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	sizes := []int{3, 5, 1, 4, 2}
	plan := shards(t, res, writeFiles(t, sizes, nil))
	for _, tc := range []struct {
		rank, workers, batch int
		shards               []int64
		steps                int // batches per epoch
	}{
		{0, 1, 2, []int64{0, 1, 2, 3, 4}, 2 + 3 + 1 + 2 + 1},
		{0, 2, 2, []int64{0, 2, 4}, 2 + 1 + 1},
		{1, 2, 2, []int64{1, 3}, 3 + 2},
		{1, 2, 100, []int64{1, 3}, 2},
		{2, 3, 1, []int64{2}, 1},
		{4, 5, 3, []int64{4}, 1},
	} {
		t.Run(fmt.Sprintf("rank%d-of-%d-batch%d", tc.rank, tc.workers, tc.batch), func(t *testing.T) {
			ft := &fakeTracker{plan: plan}
			// Each shard goes with the examples stepped since the one
			// before.
			var stepped, taken int
			take := func() map[string]float64 {
				defer func() { taken = stepped }()
				return map[string]float64{"examples_count": float64(stepped - taken)}
			}
			fd, err := New(Options{Tracker: ft, Resolver: res, Rank: tc.rank, Workers: tc.workers, Format: records.FormatLibSVM, Batch: tc.batch,
				ShardMetrics: take})
			if err != nil {
				t.Fatal(err)
			}
			for epoch := range 2 {
				var got []uint64
				step := 0
				st, err := fd.Epoch(context.Background(), epoch, func(_ context.Context, b Batch) error {
					if b.Epoch != epoch || b.Step != step {
						t.Errorf("batch at epoch %d step %d, want %d %d", b.Epoch, b.Step, epoch, step)
					}
					if len(b.Examples) == 0 || len(b.Examples) > tc.batch {
						t.Errorf("batch of %d examples", len(b.Examples))
					}
					step++
					stepped += len(b.Examples)
					for _, ex := range b.Examples {
						got = append(got, key(ex))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var want []uint64
				for _, id := range tc.shards {
					for j := range sizes[id] {
						want = append(want, uint64(1000*int(id)+j))
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("epoch %d read %v, want %v", epoch, got, want)
				}
				if step != tc.steps {
					t.Errorf("epoch %d: %d steps, want %d", epoch, step, tc.steps)
				}
				if st.Records != int64(len(want)) || st.Shards != len(tc.shards) || st.Bad != 0 {
					t.Errorf("epoch %d: stats %+v, want %d records in %d shards", epoch, st, len(want), len(tc.shards))
				}
			}
			if want := append(slices.Clone(tc.shards), tc.shards...); !slices.Equal(ft.done, want) {
				t.Errorf("shards done %v, want %v", ft.done, want)
			}
			for i, id := range ft.done {
				if got := ft.metrics[i]["examples_count"]; got != float64(sizes[id]) {
					t.Errorf("shard %d done with examples_count %v, want its %d records", id, got, sizes[id])
				}
			}
			if ft.plans != 1 {
				t.Errorf("asked for the plan %d times, want once", ft.plans)
			}
		})
	}
}

// TestSyncResumeSkipsAppliedBatches: a worker that replaces a dead one
// hands over only the batches after those the dead worker's pushes
// reached, numbered as the dead worker numbered them, reading again only
// the shards not yet done or not wholly received and reporting each with
// all its records; the next epoch is read whole; an epoch the dead worker
// had finished is not read at all.
func TestSyncResumeSkipsAppliedBatches(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	sizes := []int{3, 5, 1, 4, 2}
	plan := shards(t, res, writeFiles(t, sizes, nil))
	// Rank 1 of 2, batches of 2: shard 1 (5 records: steps 0–2), shard 3
	// (4 records: steps 3–4).
	ft := &fakeTracker{plan: plan}
	fd, err := New(Options{Tracker: ft, Resolver: res, Rank: 1, Workers: 2, Format: records.FormatLibSVM, Batch: 2,
		Resume: &psnode.SyncResume{Epoch: 1, Batches: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for epoch, want := range [][]int{{0, 1, 2, 3, 4}, {2, 3, 4}} {
		var steps []int
		var first uint64
		st, err := fd.Epoch(context.Background(), epoch, func(_ context.Context, b Batch) error {
			if len(steps) == 0 {
				first = key(b.Examples[0])
			}
			steps = append(steps, b.Step)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(steps, want) {
			t.Errorf("epoch %d handed over steps %v, want %v", epoch, steps, want)
		}
		skipped := []int64{0, 4}[epoch]
		if st.Records != 9 || st.Skipped != skipped || st.Shards != 2 {
			t.Errorf("epoch %d: stats %+v, want 9 records, %d skipped, 2 shards", epoch, st, skipped)
		}
		// The third batch of epoch 1 starts at shard 1's fifth record.
		if wantFirst := []uint64{1000, 1004}[epoch]; first != wantFirst {
			t.Errorf("epoch %d's first batch starts at key %d, want %d", epoch, first, wantFirst)
		}
	}
	if want := []int64{5, 4, 5, 4}; !slices.Equal(ft.recs, want) {
		t.Errorf("shards reported with %v records, want %v", ft.recs, want)
	}
	// The rejoin is one of the job's events, reported once.
	if len(ft.events) != 1 || ft.events[0].Kind != tracker.EventRejoined || ft.events[0].Task != "worker 1" ||
		ft.events[0].Detail != "at batch 2 of epoch 1 (the servers had the dead worker's batches before it)" || ft.events[0].Took <= 0 {
		t.Errorf("events %+v, want worker 1's rejoin once", ft.events)
	}

	// A shard the tracker has as done, all of whose batches were
	// received, is not read again: shard 1's 5 records are 3 batches.
	ft = &fakeTracker{plan: plan, done: []int64{1}, recs: []int64{5}}
	fd, err = New(Options{Tracker: ft, Resolver: res, Rank: 1, Workers: 2, Format: records.FormatLibSVM, Batch: 2,
		Resume: &psnode.SyncResume{Epoch: 1, Batches: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	st, err := fd.Epoch(context.Background(), 1, func(_ context.Context, b Batch) error {
		steps = append(steps, b.Step)
		return nil
	})
	if err != nil || !slices.Equal(steps, []int{3, 4}) || st.Records != 9 || st.Skipped != 5 || st.Shards != 1 {
		t.Errorf("resumed after a done shard: steps %v, stats %+v (%v); want steps [3 4], 9 records, 5 skipped, 1 shard read", steps, st, err)
	}
	if want := []int64{1, 3}; !slices.Equal(ft.done, want) {
		t.Errorf("shards reported done %v, want %v (shard 1 not again)", ft.done, want)
	}

	ft = &fakeTracker{plan: plan}
	fd, err = New(Options{Tracker: ft, Resolver: res, Rank: 1, Workers: 2, Format: records.FormatLibSVM, Batch: 2,
		Resume: &psnode.SyncResume{Epoch: 3, Batches: psnode.AllBatches}})
	if err != nil {
		t.Fatal(err)
	}
	st, err = fd.Epoch(context.Background(), 3, func(context.Context, Batch) error {
		return errors.New("a batch of an epoch the dead worker finished")
	})
	if err != nil || !reflect.DeepEqual(st, Stats{}) || len(ft.done) != 0 {
		t.Errorf("finished epoch: %+v %v, shards done %v; want nothing read", st, err, ft.done)
	}
}

// TestBadRecordBudgetAcrossShards: a worker's budget of malformed
// records spans its shards; a record skipped in one epoch and met again
// in the next counts once, and is reported once, with its line.
func TestBadRecordBudgetAcrossShards(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	plan := shards(t, res, writeFiles(t, []int{2, 2, 2}, []int{1, 2, 1}))
	for _, tc := range []struct {
		max    int
		failSh int64 // the shard of epoch 0 that fails; -1 for none
	}{
		{max: 0, failSh: 0},
		{max: 3, failSh: 2},
		{max: 4, failSh: -1},
	} {
		t.Run(fmt.Sprint("max", tc.max), func(t *testing.T) {
			fd, err := New(Options{Tracker: &fakeTracker{plan: plan}, Resolver: res, Workers: 1, Format: records.FormatLibSVM, Batch: 10, MaxBadRecords: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			nop := func(context.Context, Batch) error { return nil }
			for epoch := range 3 {
				st, err := fd.Epoch(context.Background(), epoch, nop)
				if tc.failSh >= 0 {
					want := fmt.Sprintf("epoch 0: shard %d (", tc.failSh)
					if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), plan[tc.failSh].URI+", line ") {
						t.Fatalf("epoch %d: error %v, want one naming %q and %s with a line", epoch, err, want, plan[tc.failSh].URI)
					}
					// The launcher does not start the worker again for it.
					if got := ExitStatus(err); got != conf.ExitBadInput {
						t.Errorf("a worker ending on %v exits %d, want %d", err, got, conf.ExitBadInput)
					}
					return
				}
				if err != nil {
					t.Fatalf("epoch %d: %v", epoch, err)
				}
				if st.Bad != 4 || st.Records != 6 {
					t.Errorf("epoch %d: stats %+v, want 4 bad of 6 records", epoch, st)
				}
				wantSamples := 0
				if epoch == 0 {
					wantSamples = 4
				}
				if len(st.BadSamples) != wantSamples {
					t.Errorf("epoch %d: %d records reported, want %d (each once)", epoch, len(st.BadSamples), wantSamples)
				}
				for _, e := range st.BadSamples {
					if e.Line < 1 {
						t.Errorf("a skipped record is reported without its line: %v", e)
					}
				}
			}
			if fd.Bad() != 4 {
				t.Errorf("%d bad records overall, want 4 (each counted once)", fd.Bad())
			}
		})
	}
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// TestAsyncOverTheTracker runs workers against a real tracker over
// loopback: every record is read once per epoch, whoever reads it, and
// every shard is reported done; each worker's last word in an epoch is
// Idle, which never comes twice without a batch between.
func TestAsyncOverTheTracker(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	sizes := []int{3, 1, 4, 1, 5, 9, 2}
	plan := shards(t, res, writeFiles(t, sizes, nil))
	for _, workers := range []int{1, 3} {
		t.Run(fmt.Sprint(workers, "workers"), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := tracker.NewState(slices.Clone(plan), time.Now())
			svc, err := tracker.Serve(ctx, "127.0.0.1:0", st, "s", quietLog())
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			const epochs = 2
			var (
				mu     sync.Mutex
				seen   = map[[2]int]int{} // (epoch, record) → times read
				shards = make([]int, workers)
				hooks  = make([][]int, workers)
				events = make([][]string, workers) // "b<epoch>" a batch, "i<epoch>" Idle
			)
			var wg sync.WaitGroup
			errs := make([]error, workers)
			for rank := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := tracker.NewClient(svc.Addr(), "s")
					defer c.Close()
					fd, err := New(Options{
						Tracker: c, Resolver: res, Rank: rank, Workers: workers, Format: records.FormatLibSVM, Batch: 2, Async: true,
						AfterShard: func(n int) { hooks[rank] = append(hooks[rank], n) },
						Idle: func(_ context.Context, epoch int) error {
							events[rank] = append(events[rank], fmt.Sprint("i", epoch))
							return nil
						},
					})
					if err != nil {
						errs[rank] = err
						return
					}
					for epoch := range epochs {
						s, err := fd.Epoch(ctx, epoch, func(_ context.Context, b Batch) error {
							events[rank] = append(events[rank], fmt.Sprint("b", b.Epoch))
							mu.Lock()
							defer mu.Unlock()
							for _, ex := range b.Examples {
								seen[[2]int{b.Epoch, int(key(ex))}]++
							}
							return nil
						})
						if err != nil {
							errs[rank] = err
							return
						}
						shards[rank] += s.Shards
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			total := 0
			for epoch := range epochs {
				for i, n := range sizes {
					for j := range n {
						if got := seen[[2]int{epoch, 1000*i + j}]; got != 1 {
							t.Errorf("epoch %d: record %d of file %d read %d times, want once", epoch, j, i, got)
						}
						total++
					}
				}
			}
			if len(seen) != total {
				t.Errorf("read %d distinct records, want %d", len(seen), total)
			}
			all := 0
			for rank, n := range shards {
				all += n
				if want := seq(n); !slices.Equal(hooks[rank], want) {
					t.Errorf("worker %d: hook saw %v, want %v", rank, hooks[rank], want)
				}
			}
			for rank, ev := range events {
				last := map[int]string{}
				for i, e := range ev {
					last[int(e[1]-'0')] = e
					if i > 0 && e[0] == 'i' && ev[i-1] == e {
						t.Errorf("worker %d: Idle twice in a row (%v)", rank, ev)
					}
				}
				for epoch := range epochs {
					if want := fmt.Sprint("i", epoch); last[epoch] != want {
						t.Errorf("worker %d: epoch %d ends with %q, want %q (%v)", rank, epoch, last[epoch], want, ev)
					}
				}
			}
			if all != epochs*len(plan) {
				t.Errorf("%d shards read, want %d", all, epochs*len(plan))
			}
			// The tracker holds every shard done: the next epoch's first
			// ask gets one, the finished epoch's says it is done.
			c := tracker.NewClient(svc.Addr(), "s")
			defer c.Close()
			if _, d, _, err := c.NextShard(ctx, epochs-1, 0, 0); err != nil || d != tracker.EpochDone {
				t.Errorf("epoch %d after the workers: %v %v, want EpochDone", epochs-1, d, err)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestEpochStopsOnTheModelsError(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	ft := &fakeTracker{plan: shards(t, res, writeFiles(t, []int{4, 4}, nil))}
	fd, err := New(Options{Tracker: ft, Resolver: res, Workers: 1, Format: records.FormatLibSVM, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	calls := 0
	_, err = fd.Epoch(context.Background(), 0, func(context.Context, Batch) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 || len(ft.done) != 0 {
		t.Errorf("got %v after %d calls, %v done; want boom after 1, none done", err, calls, ft.done)
	}
}

func TestNewChecksOptions(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	ok := Options{Tracker: &fakeTracker{}, Resolver: res, Rank: 1, Workers: 2, Batch: 1}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"tracker", func(o *Options) { o.Tracker = nil }, "no tracker"},
		{"resolver", func(o *Options) { o.Resolver = nil }, "no resolver"},
		{"rank", func(o *Options) { o.Rank = 2 }, "rank 2 of 2"},
		{"workers", func(o *Options) { o.Workers = 0 }, "of 0 workers"},
		{"batch", func(o *Options) { o.Batch = 0 }, "batch 0"},
		{"bad", func(o *Options) { o.MaxBadRecords = -1 }, "max bad records -1"},
		{"cache", func(o *Options) { o.CacheBytes = -1 }, "cache of -1 bytes"},
	} {
		o := ok
		tc.edit(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestDieAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec          string
		rank, attempt int
		hook          bool
		err           bool
	}{
		{"", 0, 0, false, false},
		{"1:2", 1, 0, true, false},
		{"1:2", 0, 0, false, false},
		{"1:2", 1, 1, false, false},
		{"1", 1, 0, false, true},
		{"x:2", 1, 0, false, true},
		{"1:y", 1, 0, false, true},
	} {
		h, err := DieAfter(tc.spec, tc.rank, tc.attempt)
		if (err != nil) != tc.err || (h != nil) != tc.hook {
			t.Errorf("DieAfter(%q, %d, %d): hook %v, error %v; want hook %v, error %v", tc.spec, tc.rank, tc.attempt, h != nil, err, tc.hook, tc.err)
		}
	}
}

func TestReadAll(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	dir := writeFiles(t, []int{3, 0, 2}, []int{0, 0, 1})
	empty := t.TempDir()
	for _, tc := range []struct {
		name, uri string
		bad       int
		want      []uint64
		err       string
	}{
		{"glob", filepath.Join(dir, "part-[01]"), 0, []uint64{0, 1, 2}, ""},
		{"file", filepath.Join(dir, "part-0"), 0, []uint64{0, 1, 2}, ""},
		{"directory", dir, 1, []uint64{0, 1, 2, 2000, 2001}, ""},
		{"bad record", dir, 0, nil, filepath.Join(dir, "part-2")},
		{"empty", filepath.Join(dir, "part-1"), 0, nil, "holds no records"},
		{"empty directory", empty, 0, nil, empty},
	} {
		got, err := ReadAll(context.Background(), res, tc.uri, records.Options{Format: records.FormatLibSVM, MaxBadRecords: tc.bad})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var keys []uint64
		for _, ex := range got {
			keys = append(keys, key(ex))
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("%s: read %v, want %v", tc.name, keys, tc.want)
		}
	}
}

func TestTablesOptions(t *testing.T) {
	t.Parallel()
	res := resolver(t)
	dir := t.TempDir()
	tc := tracker.NewClient("127.0.0.1:1", "s")
	defer tc.Close()
	for _, c := range []struct {
		name                string
		job                 conf.Job
		tc                  *tracker.Client
		ckpt, commit, model bool
		interval, resume    string
	}{
		{name: "nothing", job: conf.Job{CheckpointInterval: "2"}},
		{name: "checkpoints", job: conf.Job{CheckpointDir: dir, CheckpointInterval: "2"}, tc: tc, ckpt: true, commit: true, interval: "2"},
		{name: "resume only", job: conf.Job{ResumeFrom: dir + "/3"}, ckpt: true, resume: dir + "/3"},
		{name: "model", job: conf.Job{Output: filepath.Join(dir, "model")}, model: true},
	} {
		o, err := TablesOptions(c.job, res, c.tc, "text")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if (o.Checkpoints != nil) != c.ckpt || (o.Committer != nil) != c.commit || (o.Model != nil) != c.model ||
			o.CheckpointInterval != c.interval || o.ResumeFrom != c.resume {
			t.Errorf("%s: got %+v", c.name, o)
		}
	}
	if _, err := TablesOptions(conf.Job{Output: filepath.Join(dir, "m")}, res, nil, "yaml"); err == nil {
		t.Error("model format yaml: no error")
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("x"), 1},
		{fmt.Errorf("epoch 2: %w", psnode.ErrSyncWorkerDied), conf.ExitRestartJob},
		{fmt.Errorf("epoch 2: %w", records.ErrSyntax), conf.ExitBadInput},
		{fmt.Errorf("open: %w", dfs.ErrProtectedReads), conf.ExitBadInput},
	} {
		if got := ExitStatus(tc.err); got != tc.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestCutShortGzipIsBadInput: an epoch over a gzip file cut short fails
// naming the file, with the status that tells the launcher not to start
// the worker again (it would meet the same end).
func TestCutShortGzipIsBadInput(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for j := range 5000 {
		fmt.Fprintf(zw, "%d %d:1\n", j%2, j+1)
	}
	zw.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part-0.gz"), gz.Bytes()[:gz.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	res := resolver(t)
	fd, err := New(Options{Tracker: &fakeTracker{plan: shards(t, res, dir)}, Resolver: res, Workers: 1, Format: records.FormatLibSVM, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fd.Epoch(context.Background(), 0, func(context.Context, Batch) error { return nil })
	if got := ExitStatus(err); got != conf.ExitBadInput || !strings.Contains(err.Error(), "part-0.gz") {
		t.Errorf("epoch over a gzip file cut short: %v, exit status %d; want %d, naming the file", err, got, conf.ExitBadInput)
	}
}

// TestCacheKeepsShards reads three epochs of a plan of four files, one
// of them with a malformed record and one with weighted records among
// others, with a cache that holds every clean
// shard, one that holds some and one that holds none: each epoch hands over the
// same batches as the first, the kept shards come from the cache (their
// files are gone after the first epoch), the shard with the bad record is
// read again and its record counted every epoch, and nothing is kept past
// the budget: a shard that does not fit is read again, a later one that
// does is kept.
func TestCacheKeepsShards(t *testing.T) {
	t.Parallel()
	// A shard of n one-key records costs n·(exampleBytes+12) bytes.
	per := exampleBytes + 12
	for _, tc := range []struct {
		name   string
		budget int64
		kept   []int // files kept after the first epoch
	}{
		{"all", 1 << 20, []int{0, 1, 3}},
		{"what fits", 30 * per, []int{0, 3}}, // part-1's 12 records do not fit after part-0's 25
		{"none fits", 2 * per, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := resolver(t)
			dir := writeFiles(t, []int{25, 12, 7, 3}, []int{0, 0, 1, 0})
			plan := shards(t, res, dir)
			fd, err := New(Options{Tracker: &fakeTracker{plan: plan}, Resolver: res, Workers: 1, Format: records.FormatLibSVM,
				Batch: 10, MaxBadRecords: 10, CacheBytes: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			var first []string
			for epoch := range 3 {
				var got []string
				st, err := fd.Epoch(context.Background(), epoch, func(_ context.Context, b Batch) error {
					keys := make([]string, len(b.Examples))
					for i, ex := range b.Examples {
						keys[i] = fmt.Sprint(key(ex), ex.Label, ex.Weight, ex.Vals)
					}
					got = append(got, fmt.Sprintf("step %d: %v", b.Step, keys))
					return nil
				})
				if err != nil {
					t.Fatalf("epoch %d: %v", epoch, err)
				}
				wantCached := 0
				if epoch > 0 {
					wantCached = len(tc.kept)
				}
				if st.Records != 47 || st.Bad != 1 || st.Shards != 4 || st.Cached != wantCached {
					t.Errorf("epoch %d: stats %+v, want 47 records, 1 bad, 4 shards, %d cached", epoch, st, wantCached)
				}
				if epoch == 0 {
					first = got
					for _, i := range tc.kept {
						if err := os.Remove(filepath.Join(dir, fmt.Sprintf("part-%d", i))); err != nil {
							t.Fatal(err)
						}
					}
				} else if !slices.Equal(got, first) {
					t.Errorf("epoch %d handed over\n%v\nwant the first epoch's\n%v", epoch, got, first)
				}
			}
			if fd.cache.used > tc.budget {
				t.Errorf("the cache holds %d bytes, past its budget of %d", fd.cache.used, tc.budget)
			}
			if fd.Bad() != 1 {
				t.Errorf("%d bad records overall, want 1 (met every epoch, counted once)", fd.Bad())
			}
		})
	}
}

// TestStartTaskNamesTheBadVariable: a task whose environment does not
// make a configuration starts nothing and says which variable is wrong;
// the example jobs' tests start tasks that do.
func TestStartTaskNamesTheBadVariable(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DMLC_ROLE": "worker", "DMLC_NUM_WORKER": "two", "DMLC_NUM_SERVER": "1", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	task, err := StartTask(t.Context(), lookup, nil, logrus.NewEntry(logrus.New()))
	if err == nil {
		task.Close()
		t.Fatal("StartTask with DMLC_NUM_WORKER=two: no error")
	}
	if task != nil || !strings.Contains(err.Error(), "DMLC_NUM_WORKER") {
		t.Errorf("StartTask = %v, %v; want no task and an error naming DMLC_NUM_WORKER", task, err)
	}
}

// TestOpenEpoch: a worker of an asynchronous job begins at the first
// epoch whose shards are not all done, as the tracker counts them.
func TestOpenEpoch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := resolver(t)
	plan := shards(t, res, writeFiles(t, []int{1, 1, 1}, nil))
	st := tracker.NewState(slices.Clone(plan), time.Now())
	svc, err := tracker.Serve(ctx, "127.0.0.1:0", st, "s", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	c := tracker.NewClient(svc.Addr(), "s")
	defer c.Close()
	open := func(first, epochs int) int {
		t.Helper()
		e, err := OpenEpoch(ctx, c, first, epochs)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// doShards reads n shards of epoch e.
	doShards := func(e, n int) {
		t.Helper()
		for range n {
			sh, d, _, err := c.NextShard(ctx, e, 0, 0)
			if err != nil || d != tracker.Given {
				t.Fatalf("epoch %d: next shard: %v %v", e, d, err)
			}
			if err := c.ShardDone(ctx, e, sh.ID, 0, 0, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e := open(0, 5); e != 0 {
		t.Errorf("a new job opens at epoch %d, want 0", e)
	}
	doShards(0, 3)
	doShards(1, 3)
	doShards(2, 1)
	if e := open(0, 5); e != 2 {
		t.Errorf("after epochs 0 and 1 and a shard of 2: epoch %d, want 2", e)
	}
	if e := open(3, 5); e != 3 {
		t.Errorf("resumed at 3: epoch %d, want 3", e)
	}
	if e := open(0, 2); e != 2 {
		t.Errorf("every one of 2 epochs done: epoch %d, want 2 (none left)", e)
	}
}
