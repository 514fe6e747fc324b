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
)

// TestParseScaleCommand: scale needs the job and --servers, takes
// --workers, --jobs-dir and the Kerberos login, and names what is wrong.
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
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"local-20260101-000000-0001"}, "scale: missing --servers N"},
		{[]string{"local-20260101-000000-0001", "--servers"}, "scale: flag --servers needs a value"},
		{[]string{"local-20260101-000000-0001", "--servers", "four"}, `scale: --servers "four": want a number of servers`},
		{[]string{"local-20260101-000000-0001", "--servers", "4", "--workers", "x"}, `scale: --workers "x": want a number of workers`},
		{[]string{"--servers", "4"}, "scale: missing the job"},
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
		{[]string{"scale", "local-20000101-000000-0000"}, 2, "ps-submit: scale: missing --servers N, the number of servers the job is to run with\nrun 'ps-submit --help' for usage\n"},
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
	if code := Main(t.Context(), []string{"scale", "--help"}, strings.NewReader(""), &out, &out, lookup, nil); code != 0 || !strings.Contains(out.String(), "scale JOB --servers N") {
		t.Errorf("scale --help: exit %d:\n%s", code, out.String())
	}
}

// TestScaleALocalJob runs a local job whose workers ask for each
// epoch's servers (trainsim --elastic) and scales it with "ps-submit
// scale": out by its id (a new server starts, told to join, and the
// workers switch once it joined), then in by its status page's address
// (the server retires and exits 0, the job goes on); the job succeeds.
// Refusals say why and exit 1.
func TestScaleALocalJob(t *testing.T) {
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
	var jobOut, jobErr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--jobs-dir", jobs, "-n", "1", "-s", "1", "--input", input, "--split-size", "512",
			"--", bin, "--elastic", "--until", until, "--pace", "10ms"},
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
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// waitFor polls until cond holds, the job ends or the test's time is
	// up.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s never happened; ps-submit's output:\n%s\n%s", what, jobErr.String(), jobOut.String())
			case code := <-done:
				t.Fatalf("the job ended (exit %d) before %s:\n%s", code, what, jobErr.String())
			case <-tick.C:
			}
		}
	}
	var id, page string
	waitFor("the job's start", func() bool {
		m := localJobRE.FindStringSubmatch(jobErr.String())
		if m != nil {
			id, page = m[1], m[2]
		}
		return m != nil && strings.Contains(jobOut.String(), "[worker 0] worker 0 epoch 0 servers 1")
	})

	// Refusals: a job's refusal, and workers.
	if code, out, errOut := cmd("scale", id, "--jobs-dir", jobs, "--servers", "100"); code != 1 || out != "" ||
		errOut != "ps-submit: scale: the job refused: scale to 100 servers: want 1 to 64\n" {
		t.Errorf("scale to 100: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := cmd("scale", id, "--jobs-dir", jobs, "--servers", "2", "--workers", "3"); code != 1 ||
		errOut != "ps-submit: scale: --workers 3: scaling workers is not supported yet (the job has 1 workers)\n" {
		t.Errorf("scale --workers 3: exit %d, stderr %q", code, errOut)
	}

	// Out, by the job's id.
	code, out, errOut := cmd("scale", id, "--jobs-dir", jobs, "--servers", "2", "--workers", "1")
	if code != 0 || out != "scale requested: servers 1 → 2; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 2: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	waitFor("the switch to 2 servers", func() bool {
		return strings.Contains(jobOut.String(), "[server 1] server 1: joining 2 servers") &&
			strings.Contains(jobOut.String(), " servers 2\n")
	})
	code, out, errOut = cmd("status", id, "--jobs-dir", jobs)
	for _, want := range []string{"  servers        2\n", "    server 1     running ", "job          scale: servers: 1 → 2 requested at epoch ",
		"server 1     joined: ready", "job          scaling: servers 1 → 2 from epoch ", "worker 0     scaled: servers 1 → 2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status after scaling out: exit %d, stderr %q, stdout lacks %q:\n%s", code, errOut, want, out)
		}
	}

	// In, by the status page's address: server 1 retires, the job goes on.
	code, out, errOut = cmd("scale", page, "--servers", "1")
	if code != 0 || out != "scale requested: servers 2 → 1; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 1 by %s: exit %d, stdout %q, stderr %q", page, code, out, errOut)
	}
	waitFor("server 1's retirement", func() bool {
		_, out, _ := cmd("status", id, "--jobs-dir", jobs)
		return strings.Contains(out, "    server 1     retired ")
	})
	if code, out, _ := cmd("status", id, "--jobs-dir", jobs); code != 0 || !strings.Contains(out, "state          RUNNING") || !strings.Contains(out, "  servers        1\n") {
		t.Errorf("status once server 1 retired: exit %d:\n%s", code, out)
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
	if !strings.Contains(jobErr.String(), "  servers     1 at the end, as the job scaled; server 1 left it (exit codes above)\n") {
		t.Errorf("the job's summary does not say server 1 left:\n%s", jobErr.String())
	}
	if code, _, errOut := cmd("scale", id, "--jobs-dir", jobs, "--servers", "2"); code != 1 || !strings.Contains(errOut, "ps-submit: scale: the job's status page does not answer (is the job over?") {
		t.Errorf("scale of a job that is over: exit %d, stderr %q", code, errOut)
	}
}
