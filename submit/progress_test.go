package submit

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

var (
	allUp = []tracker.RoleStatus{
		{Role: "scheduler", Want: 1, Running: 1},
		{Role: "server", Want: 2, Running: 2},
		{Role: "worker", Want: 2, Running: 2},
	}
	lrMetrics = map[string]float64{"loss_sum": 69.31472, "examples_count": 100, "test_auc": 0.712345, "test_logloss": 0.65, "lr": 0.1, "updates_count": 1200}
)

func TestStatusLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		st   tracker.Status
		want string
	}{
		{"nothing yet", tracker.Status{State: tracker.Running}, ""},
		{"processes", tracker.Status{Roles: allUp}, "workers 2/2 servers 2/2 scheduler 1/1"},
		{"restarts and done", tracker.Status{Roles: []tracker.RoleStatus{
			{Role: "worker", Want: 3, Running: 1, Restarts: 1, Succeeded: 2},
			{Role: "server", Want: 1, Running: 1, Restarts: 2},
		}}, "workers 1/3 (2 done, 1 restart) servers 1/1 (2 restarts)"},
		{"epoch, shards and metrics", tracker.Status{Roles: allUp, Epoch: 1, ShardsDone: 3, ShardsTotal: 8, Metrics: lrMetrics, MetricsEpoch: 1},
			"workers 2/2 servers 2/2 scheduler 1/1 · epoch 1 · shards 3/8 · loss=0.6931 auc=0.7123 logloss=0.65 lr=0.1 updates_count=1200"},
		{"metrics of the previous epoch", tracker.Status{Roles: allUp, Epoch: 2, ShardsDone: 0, ShardsTotal: 8, Metrics: map[string]float64{"test_auc": 0.8}, MetricsEpoch: 1},
			"workers 2/2 servers 2/2 scheduler 1/1 · epoch 2 · shards 0/8 · auc=0.8 (epoch 1)"},
		{"metrics without inputs", tracker.Status{Roles: allUp[2:], Metrics: map[string]float64{"loss_sum": 3.5, "big": 12345.678, "tiny": 0.000123456}, MetricsEpoch: 4},
			"workers 2/2 · big=12345.7 loss_sum=3.5 tiny=0.0001235 (epoch 4)"},
		{"bytes on the wire", tracker.Status{Roles: allUp[2:], Metrics: map[string]float64{"bytes_to_servers_sum": 53025412, "bytes_from_servers_sum": 900, "bytes_x": 2048}, MetricsEpoch: 1},
			"workers 2/2 · bytes_from_servers=900B bytes_to_servers=50.6MiB bytes_x=2048 (epoch 1)"},
		{"loss without examples", tracker.Status{Roles: allUp[2:], Metrics: map[string]float64{"loss_sum": 3, "examples_count": 0}, MetricsEpoch: 0},
			"workers 2/2 · examples_count=0 loss_sum=3 (epoch 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(statusParts(tt.st).all(), " · "); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                         { return c.t }
func (c *clock) advance(d time.Duration)                { c.t = c.t.Add(d) }
func newClock() *clock                                  { return &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)} }
func shards(done int, st tracker.Status) tracker.Status { st.ShardsDone = done; return st }

// step is one call of the launcher's OnStatus, after a pause.
type step struct {
	after time.Duration
	st    tracker.Status
}

func running(roles ...tracker.RoleStatus) tracker.Status {
	return tracker.Status{State: tracker.Running, Roles: roles, ShardsTotal: 4, MetricsEpoch: -1}
}

var progressSteps = func() []step {
	w := func(running, restarts int) tracker.RoleStatus {
		return tracker.RoleStatus{Role: "worker", Want: 2, Running: running, Restarts: restarts}
	}
	epoch1 := running(w(2, 1))
	epoch1.Epoch, epoch1.Metrics, epoch1.MetricsEpoch = 1, map[string]float64{"test_auc": 0.75}, 0
	return []step{
		{0, running(w(1, 0))},                           // first report
		{200 * time.Millisecond, running(w(2, 0))},      // a process more, soon after
		{time.Second, running(w(2, 0))},                 // no change
		{time.Second, shards(1, running(w(2, 0)))},      // shards only
		{time.Second, shards(1, running(w(2, 1)))},      // a restart
		{time.Second, shards(2, running(w(2, 1)))},      // shards only, too soon for a plain line
		{11 * time.Second, shards(3, running(w(2, 1)))}, // shards only, 10 s on
		{300 * time.Millisecond, epoch1},                // new epoch and metrics
		{time.Second, tracker.Status{State: tracker.Succeeded, Roles: []tracker.RoleStatus{{Role: "worker", Want: 2, Succeeded: 2}}}},
	}
}()

func TestProgressPlain(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := newClock()
	p := newProgress(&out, false, c.now)
	for _, s := range progressSteps {
		c.advance(s.after)
		p.update(s.st)
	}
	p.finish()
	want := "workers 1/2 · epoch 0 · shards 0/4\n" +
		"workers 2/2 · epoch 0 · shards 0/4\n" +
		"workers 2/2 (1 restart) · epoch 0 · shards 1/4\n" +
		"workers 2/2 (1 restart) · epoch 0 · shards 3/4\n" +
		"workers 2/2 (1 restart) · epoch 1 · shards 0/4 · auc=0.75 (epoch 0)\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if p.around(&out) != io.Writer(&out) {
		t.Error("around wraps a stream off a terminal")
	}
}

func TestProgressTerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := newClock()
	p := newProgress(&out, true, c.now)
	for _, s := range progressSteps {
		c.advance(s.after)
		p.update(s.st)
	}
	p.finish()
	want := "\r\033[Kworkers 1/2 · epoch 0 · shards 0/4" +
		// 200 ms later: too soon to redraw.
		"\r\033[Kworkers 2/2 · epoch 0 · shards 0/4" +
		"\r\033[Kworkers 2/2 · epoch 0 · shards 1/4" +
		"\r\033[Kworkers 2/2 (1 restart) · epoch 0 · shards 1/4" +
		"\r\033[Kworkers 2/2 (1 restart) · epoch 0 · shards 2/4" +
		"\r\033[Kworkers 2/2 (1 restart) · epoch 0 · shards 3/4" +
		// 300 ms later: too soon; the next report would show it.
		"\r\033[K" // finish clears the line
	if got := out.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestProgressAroundOtherOutput(t *testing.T) {
	t.Parallel()
	var term bytes.Buffer
	c := newClock()
	p := newProgress(&term, true, c.now)
	tasks := p.around(&term)
	io.WriteString(tasks, "[worker 0] before\n")
	p.update(running(tracker.RoleStatus{Role: "worker", Want: 1, Running: 1}))
	io.WriteString(tasks, "[worker 0] during\n")
	p.finish()
	io.WriteString(tasks, "[worker 0] after\n")
	want := "[worker 0] before\n" +
		"\r\033[Kworkers 1/1 · epoch 0 · shards 0/4" +
		"\r\033[K[worker 0] during\nworkers 1/1 · epoch 0 · shards 0/4" +
		"\r\033[K" +
		"[worker 0] after\n"
	if got := term.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  job.Result
		want string
	}{
		{"succeeded", job.Result{
			State: tracker.Succeeded, Wall: 12345 * time.Millisecond, Output: "/tmp/model",
			Tasks: []job.TaskResult{
				{Role: "worker", Rank: 1, Attempts: 1}, {Role: "worker", Rank: 0, Attempts: 1},
				{Role: "server", Rank: 0, Attempts: 1}, {Role: "scheduler", Attempts: 1}, {Role: "server", Rank: 1, Attempts: 1},
			},
			Status: tracker.Status{Metrics: lrMetrics, MetricsEpoch: 4},
		}, "job spindle:ps-lr SUCCEEDED after 12.3s\n" +
			"  exit codes  scheduler 0 · servers 0 0 · workers 0 0\n" +
			"  model       /tmp/model\n" +
			"  metrics     loss=0.6931 auc=0.7123 logloss=0.65 lr=0.1 updates_count=1200 (epoch 4)\n"},
		{"a worker started again and stopped once the servers wrote the model", job.Result{
			State: tracker.Succeeded, Wall: 25900 * time.Millisecond,
			Tasks: []job.TaskResult{{Role: "worker", Rank: 0, Attempts: 2, ExitCode: -1}, {Role: "worker", Rank: 1, Attempts: 2}},
		}, "job spindle:ps-lr SUCCEEDED after 25.9s\n" +
			"  exit codes  workers stopped 0 (attempts 2 2)\n"},
		{"failed after retries", job.Result{
			State: tracker.Failed, Wall: 245 * time.Second,
			Tasks: []job.TaskResult{{Role: "worker", Rank: 0, Attempts: 3, ExitCode: 3}, {Role: "worker", Rank: 1, Attempts: 1, ExitCode: -1}},
		}, "job spindle:ps-lr FAILED after 4m5s\n" +
			"  exit codes  workers 3 killed (attempts 3 1)\n"},
		{"a task not started", job.Result{
			State: tracker.Failed, Wall: 5 * time.Millisecond,
			Tasks: []job.TaskResult{{Role: "scheduler", Attempts: 1, ExitCode: -1}, {Role: "worker", Rank: 0, Attempts: 1, ExitCode: -1, NotStarted: true},
				{Role: "worker", Rank: 1, Attempts: 1, NotStarted: true}},
		}, "job spindle:ps-lr FAILED after 5ms\n" +
			"  exit codes  scheduler killed · workers unstarted unstarted\n"},
		{"resumed", job.Result{
			State: tracker.Succeeded, Wall: 3 * time.Second, Output: "/tmp/model", ResumedFrom: "file:///tmp/ckpt/4",
		}, "job spindle:ps-lr SUCCEEDED after 3s\n" +
			"  model       /tmp/model\n" +
			"  resumed     from file:///tmp/ckpt/4\n"},
		{"started again", job.Result{
			State: tracker.Succeeded, Wall: 3 * time.Second, Restarts: 2, ResumedFrom: "file:///tmp/ckpt/4",
		}, "job spindle:ps-lr SUCCEEDED after 3s\n" +
			"  restarts    2 (the whole job started again), the last from file:///tmp/ckpt/4\n"},
		{"started again from the start", job.Result{State: tracker.Failed, Wall: 3 * time.Second, Restarts: 1},
			"job spindle:ps-lr FAILED after 3s\n" +
				"  restarts    1 (the whole job started again), the last from the start\n"},
		{"killed at once", job.Result{State: tracker.Killed, Wall: 850 * time.Microsecond * 1000}, "job spindle:ps-lr KILLED after 850ms\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := writeSummary(&out, "spindle:ps-lr", tt.res); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
