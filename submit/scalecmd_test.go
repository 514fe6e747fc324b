package submit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job/web"
)

// TestParseScaleCommand: scale needs the job and --servers, --workers or
// both, takes --jobs-dir and the Kerberos login, and names what is
// wrong.
func TestParseScaleCommand(t *testing.T) {
	t.Parallel()
	c, err := parseJobCommand(cmdScale, []string{"local-20260101-000000-0001", "--servers", "4", "--workers=2", "--jobs-dir", "/j"})
	if err != nil || c.job != "local-20260101-000000-0001" || c.servers != 4 || c.workers != 2 || c.jobsDir != "/j" {
		t.Errorf("scale: %+v, %v", c, err)
	}
	c, err = parseJobCommand(cmdScale, []string{"--servers=3", "application_1700000000000_0001"})
	if err != nil || c.servers != 3 || c.workers != -1 {
		t.Errorf("scale without --workers: %+v, %v", c, err)
	}
	c, err = parseJobCommand(cmdScale, []string{"application_1700000000000_0001", "--workers", "5"})
	if err != nil || c.servers != -1 || c.workers != 5 {
		t.Errorf("scale without --servers: %+v, %v", c, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"local-20260101-000000-0001"}, "scale: missing --servers N or --workers N"},
		{[]string{"local-20260101-000000-0001", "--servers", "0"}, "scale: --servers 0: want at least 1"},
		{[]string{"local-20260101-000000-0001", "--workers", "-2"}, "scale: --workers -2: want at least 1"},
		{[]string{"local-20260101-000000-0001", "--servers"}, "scale: flag --servers needs a value"},
		{[]string{"local-20260101-000000-0001", "--servers", "four"}, `scale: --servers "four": want a number of servers`},
		{[]string{"local-20260101-000000-0001", "--servers", "4", "--workers", "x"}, `scale: --workers "x": want a number of workers`},
		{[]string{"--servers", "4"}, "scale: missing the job"},
		{nil, "scale: missing the job"},
		{[]string{"a", "b", "--servers", "4"}, "scale: want one job, got 2: a b"},
		{[]string{"a", "--servers", "4", "--task", "worker:0"}, "scale: unknown flag --task"},
	} {
		if _, err := parseJobCommand(cmdScale, tt.args); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("scale %q: %v, want it to say %q", tt.args, err, tt.want)
		}
	}
	if _, err := parseJobCommand(cmdStatus, []string{"a", "--servers", "4"}); err == nil || !strings.Contains(err.Error(), "status: unknown flag --servers") {
		t.Errorf("status --servers: %v", err)
	}
}

// TestScaleCommandErrors: usage errors exit 2, a job that cannot be
// found 1, each saying why.
func TestScaleCommandErrors(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	lookup := func(string) (string, bool) { return "", false }
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"scale", "local-20000101-000000-0000"}, 2, "ps-submit: scale: missing --servers N or --workers N, the number of servers or workers the job is to run with\nrun 'ps-submit --help' for usage\n"},
		{[]string{"scale", "application_x", "--servers", "2"}, 2, `ps-submit: scale: "application_x" is not an application id`},
		{[]string{"scale", "local-20000101-000000-0000", "--servers", "2", "--jobs-dir", jobs}, 1, "ps-submit: scale: no local job local-20000101-000000-0000: no job.json in " + filepath.Join(jobs, "local-20000101-000000-0000")},
		{[]string{"scale", "http://", "--servers", "2"}, 1, `ps-submit: scale: "http://" is not a status page's address`},
	} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), tt.args, strings.NewReader(""), &out, &errOut, lookup, nil)
		if code != tt.code || !strings.Contains(errOut.String(), tt.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d saying %q", tt.args, code, out.String(), errOut.String(), tt.code, tt.want)
		}
	}
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"scale", "--help"}, strings.NewReader(""), &out, &out, lookup, nil); code != 0 || !strings.Contains(out.String(), "scale JOB [--servers N] [--workers N]") {
		t.Errorf("scale --help: exit %d:\n%s", code, out.String())
	}
}

// TestScaleMessage: what ps-submit scale prints for the counts asked
// for, from those the job had.
func TestScaleMessage(t *testing.T) {
	t.Parallel()
	rep := web.ScaleReply{Servers: 2, Workers: 3}
	for _, tt := range []struct {
		servers, workers int
		want             string
	}{
		{4, -1, "scale requested: servers 2 → 4; it takes effect at the next epoch boundary"},
		{-1, 2, "scale requested: workers 3 → 2; it takes effect at the next epoch boundary"},
		{1, 4, "scale requested: servers 2 → 1, workers 3 → 4; it takes effect at the next epoch boundary"},
		{3, 3, "scale requested: servers 2 → 3, workers 3 (as many as the job has); it takes effect at the next epoch boundary"},
		{2, -1, "scale requested: servers 2, as many as the job has: no change pending"},
		{2, 3, "scale requested: servers 2 and workers 3, as many as the job has: no change pending"},
	} {
		if got := scaleMessage(jobCommand{servers: tt.servers, workers: tt.workers}, rep); got != tt.want {
			t.Errorf("--servers %d --workers %d: %q, want %q", tt.servers, tt.workers, got, tt.want)
		}
	}
}

// elasticJob is a local job of trainsim --elastic run through ps-submit,
// as a scale test drives it.
type elasticJob struct {
	t      *testing.T
	ctx    context.Context
	jobs   string
	until  string
	lookup func(string) (string, bool)
	// out and errOut are ps-submit's output; done is closed once it
	// returned, with code its exit status.
	out, errOut *syncbuf.Buffer
	done        chan struct{}
	code        int
	tick        *time.Ticker
	// id and page are the job's id and its status page's address.
	id, page string
}

// startElasticJob runs a local job of workers workers and servers
// servers whose workers ask for each epoch's servers and workers, until
// told to stop (finish), and returns it once worker 0 began epoch 0.
func startElasticJob(t *testing.T, workers, servers int) *elasticJob {
	t.Helper()
	bin := buildTrainsim(t)
	dir := t.TempDir()
	input := filepath.Join(dir, "train.txt")
	var sb strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&sb, "line %d of the input\n", i)
	}
	if err := os.WriteFile(input, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": filepath.Join(dir, "home")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	j := &elasticJob{t: t, ctx: ctx, jobs: filepath.Join(dir, "jobs"), until: filepath.Join(dir, "stop"),
		lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		out:    &syncbuf.Buffer{}, errOut: &syncbuf.Buffer{}, done: make(chan struct{}), tick: time.NewTicker(100 * time.Millisecond)}
	t.Cleanup(func() {
		_ = os.WriteFile(j.until, nil, 0o644)
		select { // the job ends once told to; a stuck one, with the context
		case <-j.done:
		case <-ctx.Done():
		}
		cancel()
		j.tick.Stop()
	})
	go func() {
		defer close(j.done)
		j.code = Main(ctx, []string{"--jobs-dir", j.jobs, "-n", fmt.Sprint(workers), "-s", fmt.Sprint(servers), "--input", input,
			"--split-size", "512", "--", bin, "--elastic", "--until", j.until, "--pace", "10ms"},
			strings.NewReader(""), j.out, j.errOut, j.lookup, os.Environ())
	}()
	j.waitFor("the job's start", func() bool {
		m := localJobRE.FindStringSubmatch(j.errOut.String())
		if m != nil {
			j.id, j.page = m[1], m[2]
		}
		return m != nil && strings.Contains(j.out.String(), fmt.Sprintf("[worker 0] worker 0 epoch 0 servers %d workers %d\n", servers, workers))
	})
	return j
}

// cmd runs ps-submit with args and returns its exit status and output.
func (j *elasticJob) cmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(j.ctx, args, strings.NewReader(""), &out, &errOut, j.lookup, nil)
	return code, out.String(), errOut.String()
}

// status is what ps-submit status prints of the job.
func (j *elasticJob) status() string {
	_, out, _ := j.cmd("status", j.id, "--jobs-dir", j.jobs)
	return out
}

// waitFor polls until cond holds, and fails the test when the job ends
// first or the test's time is up.
func (j *elasticJob) waitFor(what string, cond func() bool) {
	j.t.Helper()
	for !cond() {
		select {
		case <-j.ctx.Done():
			j.t.Fatalf("%s never happened; ps-submit's output:\n%s\n%s", what, j.errOut.String(), j.out.String())
		case <-j.done:
			j.t.Fatalf("the job ended (exit %d) before %s:\n%s", j.code, what, j.errOut.String())
		case <-j.tick.C:
		}
	}
}

// finish tells the job's workers to stop after their epoch and returns
// ps-submit's standard error once the job succeeded.
func (j *elasticJob) finish() string {
	j.t.Helper()
	if err := os.WriteFile(j.until, nil, 0o644); err != nil {
		j.t.Fatal(err)
	}
	select {
	case <-j.done:
		if j.code != 0 {
			j.t.Fatalf("job: exit %d:\n%s", j.code, j.errOut.String())
		}
	case <-j.ctx.Done():
		j.t.Fatal("the job did not end once told to")
	}
	return j.errOut.String()
}

// TestScaleALocalJob runs a local job whose workers ask for each
// epoch's servers (trainsim --elastic) and scales it with "ps-submit
// scale": out by its id (a new server starts, told to join, and the
// workers switch once it joined), then in by its status page's address
// (the server retires and exits 0, the job goes on); the job succeeds.
// Refusals say why and exit 1.
func TestScaleALocalJob(t *testing.T) {
	t.Parallel()
	j := startElasticJob(t, 1, 1)
	id, jobs := j.id, j.jobs
	if code, out, errOut := j.cmd("scale", id, "--jobs-dir", jobs, "--servers", "100"); code != 1 || out != "" ||
		errOut != "ps-submit: scale: the job refused: scale to 100 servers: want 1 to 64\n" {
		t.Errorf("scale to 100: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Out, by the job's id; its one worker asked for again.
	code, out, errOut := j.cmd("scale", id, "--jobs-dir", jobs, "--servers", "2", "--workers", "1")
	if code != 0 || out != "scale requested: servers 1 → 2, workers 1 (as many as the job has); it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Worker 0 prints the epoch's view before it reports the change to
	// the tracker: the status has it once the report arrived.
	j.waitFor("the switch to 2 servers", func() bool {
		return strings.Contains(j.out.String(), "[server 1] server 1: joining 2 servers") &&
			strings.Contains(j.out.String(), " servers 2 workers 1\n") &&
			strings.Contains(j.status(), "worker 0     scaled: ")
	})
	out = j.status()
	for _, want := range []string{"  servers        2\n", "  workers        1\n", "    server 1     running ", "job          scale: servers: 1 → 2 requested at epoch ",
		"server 1     joined: ready", "job          scaling: servers 1 → 2 from epoch ", "worker 0     scaled: servers 1 → 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status after scaling out lacks %q:\n%s", want, out)
		}
	}

	// In, by the status page's address: server 1 retires, the job goes on.
	code, out, errOut = j.cmd("scale", j.page, "--servers", "1")
	if code != 0 || out != "scale requested: servers 2 → 1; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 1 by %s: exit %d, stdout %q, stderr %q", j.page, code, out, errOut)
	}
	j.waitFor("server 1's retirement", func() bool { return strings.Contains(j.status(), "    server 1     retired ") })
	if out := j.status(); !strings.Contains(out, "state          RUNNING") || !strings.Contains(out, "  servers        1\n") {
		t.Errorf("status once server 1 retired:\n%s", out)
	}
	summary := j.finish()
	if !strings.Contains(summary, "  servers     1 at the end, as the job scaled; server 1 left it (exit codes above)\n") {
		t.Errorf("the job's summary does not say server 1 left:\n%s", summary)
	}
	if strings.Contains(summary, "  workers     ") {
		t.Errorf("the job's summary has a line of workers, which did not change:\n%s", summary)
	}
	if code, _, errOut := j.cmd("scale", id, "--jobs-dir", jobs, "--servers", "2"); code != 1 || errOut != "ps-submit: scale: job "+id+" has ended (SUCCEEDED): only a running job scales\n" {
		t.Errorf("scale of a job that is over: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := j.cmd("scale", j.page, "--servers", "2"); code != 1 || !strings.Contains(errOut, "ps-submit: scale: the job's status page does not answer (is the job over?") {
		t.Errorf("scale by the address of a job that is over: exit %d, stderr %q", code, errOut)
	}
}

// TestScaleWorkersOfALocalJob scales the workers of a running local job
// with "ps-submit scale": from 2 to 3 by its id, with a server more in
// the same request (the new worker starts told to join, waits for the
// epoch that takes it in and reads from there; the servers and the
// workers switch each once its own newcomer is ready), then back to 2
// by its status page's address (worker 2 stops before an epoch and
// exits 0, the job goes on); the job succeeds once the two workers
// finish. A refusal says why.
func TestScaleWorkersOfALocalJob(t *testing.T) {
	t.Parallel()
	j := startElasticJob(t, 2, 1)
	id, jobs := j.id, j.jobs
	if code, out, errOut := j.cmd("scale", id, "--jobs-dir", jobs, "--workers", "300"); code != 1 || out != "" ||
		errOut != "ps-submit: scale: the job refused: scale to 300 workers: want 1 to 256\n" {
		t.Errorf("scale to 300 workers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Out, by the job's id.
	code, out, errOut := j.cmd("scale", id, "--jobs-dir", jobs, "--servers", "2", "--workers", "3")
	if code != 0 || out != "scale requested: servers 1 → 2, workers 2 → 3; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 3 workers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	j.waitFor("worker 2's first epoch", func() bool {
		return strings.Contains(j.out.String(), "[worker 2] worker 2: joining 3 workers") &&
			strings.Contains(j.out.String(), "[worker 2] worker 2: begins at epoch ") &&
			strings.Contains(j.out.String(), "[worker 2] worker 2 epoch ") &&
			strings.Contains(j.status(), "worker 0     scaled: ")
	})
	out = j.status()
	for _, want := range []string{"  servers        2\n", "  workers        3\n", "    worker 2     running ",
		"job          scale: workers: 2 → 3 requested at epoch ", "worker 2     joined: ready", "job          scaling: workers 2 → 3 from epoch ",
		"job          scaling: servers 1 → 2 from epoch ", "worker 0     scaled: "} {
		if !strings.Contains(out, want) {
			t.Errorf("status after scaling out lacks %q:\n%s", want, out)
		}
	}
	// Worker 2 begins at the epoch of the switch, which every worker
	// learns as 3 workers.
	var begins int
	if _, err := fmt.Sscanf(after(j.out.String(), "[worker 2] worker 2: begins at epoch "), "%d", &begins); err != nil {
		t.Fatalf("worker 2's first epoch: %v", err)
	}
	for _, w := range []int{0, 1, 2} {
		line := fmt.Sprintf("[worker %d] worker %d epoch %d servers ", w, w, begins)
		j.waitFor(line, func() bool { return strings.Contains(j.out.String(), line) })
		if got := after(j.out.String(), line); !strings.HasPrefix(got, "2 workers 3\n") && !strings.HasPrefix(got, "1 workers 3\n") {
			t.Errorf("worker %d's view of epoch %d: servers %q, want 3 workers", w, begins, got)
		}
	}

	// In, by the status page's address: worker 2 retires, the job goes on.
	code, out, errOut = j.cmd("scale", j.page, "--workers", "2")
	if code != 0 || out != "scale requested: workers 3 → 2; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 2 workers by %s: exit %d, stdout %q, stderr %q", j.page, code, out, errOut)
	}
	j.waitFor("worker 2's retirement", func() bool { return strings.Contains(j.status(), "    worker 2     retired ") })
	if !strings.Contains(j.out.String(), "[worker 2] worker 2: retired before epoch ") {
		t.Errorf("worker 2 did not say it retired:\n%s", j.out.String())
	}
	if out := j.status(); !strings.Contains(out, "state          RUNNING") || !strings.Contains(out, "  workers        2\n") {
		t.Errorf("status once worker 2 retired:\n%s", out)
	}
	summary := j.finish()
	for _, want := range []string{"  workers     2 at the end, as the job scaled; worker 2 left it (exit codes above)\n",
		"  servers     2 at the end, as the job scaled\n"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the job's summary lacks %q:\n%s", want, summary)
		}
	}
}

// after is what follows the last occurrence of sep in s, "" without one.
func after(s, sep string) string {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return ""
	}
	return s[i+len(sep):]
}

// TestKillALocalJob kills a running local job with "ps-submit kill" by
// its id: every task stops, the ps-submit that runs the job prints its
// summary, KILLED, and exits 1, and kill says how the job ended. A
// second kill finds it over; one by the page's address of a job that is
// over says the page does not answer.
func TestKillALocalJob(t *testing.T) {
	t.Parallel()
	j := startElasticJob(t, 2, 1)
	code, out, errOut := j.cmd("kill", j.id, "--jobs-dir", j.jobs)
	if code != 0 || out != fmt.Sprintf("ps-submit: job %s KILLED\n", j.id) {
		t.Fatalf("kill: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	select {
	case <-j.done:
	case <-j.ctx.Done():
		t.Fatal("the job's ps-submit did not return once the job was killed")
	}
	summary := j.errOut.String()
	if j.code != 1 || !strings.Contains(summary, web.KillReason) || !strings.Contains(summary, "job spindle:") ||
		!strings.Contains(summary, " KILLED after ") || !strings.Contains(summary, " · servers killed · workers killed killed\n") {
		t.Errorf("the killed job's ps-submit: exit %d:\n%s", j.code, summary)
	}
	if out := j.status(); !strings.Contains(out, "  state          KILLED\n") {
		t.Errorf("status of the killed job:\n%s", out)
	}
	code, out, errOut = j.cmd("kill", j.id, "--jobs-dir", j.jobs)
	if code != 0 || out != fmt.Sprintf("ps-submit: job %s had already ended: KILLED\n", j.id) {
		t.Errorf("kill of a job that is over: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = j.cmd("kill", j.page)
	if code != 1 || !strings.Contains(errOut, "ps-submit: kill: the job's status page does not answer (is the job over?") {
		t.Errorf("kill by the address of a job that is over: exit %d, stderr %q", code, errOut)
	}
}
