package submit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/submit/yarnclient"
)

// buildTrainsim builds the test trainer that takes shards and reports
// metrics.
func buildTrainsim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trainsim")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/spindle-ps/spindle/internal/testprog/trainsim").CombinedOutput()
	if err != nil {
		t.Fatalf("build trainsim: %v\n%s", err, out)
	}
	return bin
}

var localJobRE = regexp.MustCompile(`job (local-\d{8}-\d{6}-[0-9a-f]{4}): status page (http://\S+)`)

// TestLogsAndStatusOfALocalJob runs a local job through ps-submit and
// reads its tasks' output and its status with "ps-submit logs" and
// "ps-submit status", while it runs (--follow included) and after it
// ended.
func TestLogsAndStatusOfALocalJob(t *testing.T) {
	t.Parallel()
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
	until := filepath.Join(dir, "stop")
	jobs := filepath.Join(dir, "jobs")
	env := map[string]string{"HOME": filepath.Join(dir, "home")}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var jobOut, jobErr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--jobs-dir", jobs, "-n", "2", "--max-attempts", "2", "--input", input, "--split-size", "512",
			"--", bin, "--until", until, "--pace", "10ms", "--fail-worker", "1"},
			strings.NewReader(""), &jobOut, &jobErr, lookup, os.Environ())
	}()
	defer func() {
		_ = os.WriteFile(until, nil, 0o644)
	}()
	cmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errOut, lookup, nil)
		return code, out.String(), errOut.String()
	}
	// Wait for the job's id, then for both workers' output, worker 1's
	// second launch included.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	id := ""
	var out, errOut string
	for ready := false; !ready; {
		select {
		case <-ctx.Done():
			t.Fatalf("the job never ran both workers: id %q, logs %q %q; ps-submit's output:\n%s", id, out, errOut, jobErr.String())
		case code := <-done:
			t.Fatalf("the job ended early, exit %d:\n%s", code, jobErr.String())
		case <-tick.C:
		}
		if id == "" {
			m := localJobRE.FindStringSubmatch(jobErr.String())
			if m == nil {
				continue
			}
			id = m[1]
		}
		_, out, errOut = cmd("logs", id, "--jobs-dir", jobs)
		ready = strings.Contains(out, "==> worker 0 stdout (launch 0, ") && strings.Contains(out, "==> worker 1 stdout (launch 1, ") &&
			strings.Contains(out, "worker 1 epoch ")
		if ready {
			// And metrics from both workers, their speeds too.
			_, st, _ := cmd("status", id, "--jobs-dir", jobs)
			ready = strings.Contains(st, "loss=") && strings.Contains(st, "auc=") && strings.Contains(st, "/s (")
		}
	}
	if !strings.Contains(jobErr.String(), filepath.Join(jobs, id, "logs")) {
		t.Errorf("ps-submit did not say where the output is:\n%s", jobErr.String())
	}
	// One task, while the job runs: its output only.
	code, out, errOut := cmd("logs", id, "--jobs-dir", jobs, "--task", "worker:0")
	if code != 0 || !strings.Contains(out, "==> worker 0 stdout (launch 0, "+filepath.Join(jobs, id, "logs", "worker-0.0.stdout")+") <==\nworker 0 epoch 0 shard ") ||
		strings.Contains(out, "worker 1") {
		t.Errorf("logs --task worker:0: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	code, out, errOut = cmd("status", id, "--jobs-dir", jobs)
	for _, want := range []string{"local job " + id, "state          RUNNING", "metrics        epoch ", "loss=", "  loss, AUC      loss ", ", AUC 0.", "worker 0 ", "worker 1 ",
		"\n    EPOCH  REPORTED     LOSS     AUC      EXAMPLES\n",
		"    worker 1     running          1        1  127.0.0.1        exit code 3",
		"  events:\n", "  worker 1     exited: exit code 3\n", " s: running again (attempt 1) in 127.0.0.1\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status: exit %d, stderr %q, stdout lacks %q:\n%s", code, errOut, want, out)
		}
	}
	if !regexp.MustCompile(`\n    \d\d:\d\d:\d\d\.\d{3}  worker 1     back after \d+\.\d{3} s: `).MatchString(out) {
		t.Errorf("status does not say when worker 1 was back and after how long:\n%s", out)
	}

	// Following worker 1 until the job ends.
	var follow syncbuf.Buffer
	followed := make(chan int, 1)
	go func() {
		followed <- Main(ctx, []string{"logs", id, "--jobs-dir", jobs, "--task", "worker-1", "--follow"}, strings.NewReader(""), &follow, &follow, lookup, nil)
	}()
	for !strings.Contains(follow.String(), "==> worker 1 stdout (launch 1, ") {
		select {
		case <-ctx.Done():
			t.Fatalf("logs --follow printed nothing: %q", follow.String())
		case <-tick.C:
		}
	}
	if err := os.WriteFile(until, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("job: exit %d:\n%s", code, jobErr.String())
		}
	case <-ctx.Done():
		t.Fatal("the job did not end once told to")
	}
	select {
	case code := <-followed:
		if code != 0 || !strings.Contains(follow.String(), "==> worker 1 stderr (launch 1, ") || !strings.Contains(follow.String(), "worker 1: done after ") {
			t.Errorf("logs --follow: exit %d, output:\n%s", code, follow.String())
		}
	case <-ctx.Done():
		t.Fatalf("logs --follow did not end with the job: %q", follow.String())
	}

	// After the job: the output and the final status are still there.
	code, out, errOut = cmd("logs", id, "--jobs-dir", jobs, "--task", "worker:1")
	if code != 0 || !strings.Contains(out, "==> worker 1 stderr (launch 1, ") || !strings.Contains(out, "worker 1: done after ") ||
		strings.Contains(out, "failing on purpose") {
		t.Errorf("logs --task worker:1 after the job: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	// A task the job does not have: the error says which have output.
	// Followed, once the job is over, the same.
	for _, follow := range [][]string{nil, {"--follow"}} {
		code, _, errOut = cmd(append([]string{"logs", id, "--jobs-dir", jobs, "--task", "worker:7"}, follow...)...)
		if want := "no output of worker 7 in job " + id + "; there is output of worker 0, worker 1\n"; code != 1 || !strings.HasSuffix(errOut, want) {
			t.Errorf("logs --task worker:7 %s after the job: exit %d, stderr %q; want it to end %q", follow, code, errOut, want)
		}
	}
	code, out, errOut = cmd("status", filepath.Join(jobs, id))
	if code != 0 || !strings.Contains(out, "state          SUCCEEDED") || !strings.Contains(out, "not answering: the job is over") ||
		!strings.Contains(out, "    worker 0     succeeded") {
		t.Errorf("status after the job: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if code, _, errOut = cmd("logs", "local-20000101-000000-0000", "--jobs-dir", jobs); code != 1 || !strings.Contains(errOut, "no local job local-20000101-000000-0000") {
		t.Errorf("logs of an unknown job: exit %d, stderr %q", code, errOut)
	}
}

func TestPruneLocalJobsKeepsTheNewestAndTheRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mk := func(id, state string) {
		d := filepath.Join(dir, id)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if state != "" {
			if err := os.WriteFile(filepath.Join(d, "status.json"), []byte(`{"state":"`+state+`"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("local-20260101-000000-0001", "SUCCEEDED")
	mk("local-20260101-000000-0002", "RUNNING")
	mk("local-20260102-000000-0003", "FAILED")
	mk("local-20260103-000000-0004", "KILLED")
	mk("local-20260104-000000-0005", "")
	mk("mine", "SUCCEEDED")
	l := logrus.New()
	l.Out = io.Discard
	pruneLocalJobs(dir, 1, logrus.NewEntry(l))
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := "local-20260101-000000-0002 local-20260103-000000-0004 local-20260104-000000-0005 mine"
	if got := strings.Join(left, " "); got != want {
		t.Errorf("left %s, want %s", got, want)
	}
}

// TestParseJobCommandLogin: status and logs take the Kerberos login of
// the other subcommands, both or neither.
func TestParseJobCommandLogin(t *testing.T) {
	t.Parallel()
	c, err := parseJobCommand(cmdLogs, []string{"application_1700000000000_0001", "--task", "worker:1", "--principal", "alice@EXAMPLE.COM", "--keytab=/k/alice.keytab", "-f"})
	if err != nil || c.job != "application_1700000000000_0001" || c.task == nil || !c.follow ||
		c.login != (yarnclient.Login{Principal: "alice@EXAMPLE.COM", Keytab: "/k/alice.keytab"}) {
		t.Errorf("logs: %+v, %v", c, err)
	}
	if _, err := parseJobCommand(cmdStatus, []string{"application_1700000000000_0001", "--keytab", "/k/alice.keytab"}); err == nil || !strings.Contains(err.Error(), "status: --principal and --keytab go together") {
		t.Errorf("status with a keytab alone: %v", err)
	}
}

// TestWriteEventsWithoutDetail: an event that carries no detail (a
// server that joined) ends with its kind, not a dangling colon.
// TestWriteEpochs: status lists the newest epochs, each with when its
// last report came, its loss and AUC and its examples, a dash for what
// it lacks.
func TestWriteEpochs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 7, 23, 2, 192e6, time.Local)
	loss, auc := 0.3894, 0.81234
	var epochs []web.EpochPoint
	for e := range maxEpochsShown + 2 {
		epochs = append(epochs, web.EpochPoint{Epoch: e, At: at, Loss: &loss, Metrics: map[string]float64{"examples_count": 400000}})
	}
	epochs[len(epochs)-1].AUC = &auc
	epochs[len(epochs)-2].Metrics = nil
	var b strings.Builder
	writeEpochs(&b, epochs)
	want := "  epochs (the newest 10 of 12):\n    EPOCH  REPORTED     LOSS     AUC      EXAMPLES\n" +
		"    2      07:23:02.192 0.3894   –        400000\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("writeEpochs begins\n%q\nwant\n%q", b.String(), want)
	}
	if end := "    10     07:23:02.192 0.3894   –        –\n    11     07:23:02.192 0.3894   0.8123   400000\n"; !strings.HasSuffix(b.String(), end) {
		t.Errorf("writeEpochs ends\n%q\nwant\n%q", b.String(), end)
	}
	b.Reset()
	if writeEpochs(&b, nil); b.Len() != 0 {
		t.Errorf("writeEpochs of none: %q", b.String())
	}
}

func TestWriteEventsWithoutDetail(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 7, 23, 2, 192e6, time.Local)
	var b strings.Builder
	writeEvents(&b, []web.Event{{At: at, Kind: "joined", Task: "server 2"}, {At: at, Kind: "exited", Task: "worker 1", Detail: "exit code 3"}})
	want := "  events:\n    07:23:02.192  server 2     joined\n    07:23:02.192  worker 1     exited: exit code 3\n"
	if b.String() != want {
		t.Errorf("writeEvents:\n%q\nwant\n%q", b.String(), want)
	}
}
