package yarnclient

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/browsertest"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/yarn"
)

var yarnScreenshot = flag.String("screenshot", "", "save the YARN job's status page, through the ResourceManager's proxy, as this PNG")

// TestHadoopStatusPageLogsAndStatus runs a job on YARN whose worker 1
// fails once and starts again, and, while it runs: loads its status page
// through the ResourceManager's web proxy in headless Chromium and checks
// the charts drew their series, reads a running task's output with
// "ps-submit logs" (from its NodeManager) and the job's progress with
// "ps-submit status"; then, once it is over, reads a task's output again
// (from HDFS, where the ApplicationMaster kept it) and the final status.
func TestHadoopStatusPageLogsAndStatus(t *testing.T) {
	cl := hadooptest.Connect(t)
	b := browsertest.New(t)
	bin := buildPSSubmit(t)
	trainsim := hadooptest.Build(t, "github.com/spindle-ps/spindle/internal/testprog/trainsim")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)

	input := cl.TempDir(t) + "/train.txt"
	var sb strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&sb, "line %d of the input\n", i)
	}
	if err := dfs.WriteAtomic(ctx, cl.FS, input, func(w io.Writer) error { _, err := io.WriteString(w, sb.String()); return err }); err != nil {
		t.Fatal(err)
	}
	// The NodeManagers run on this machine: the tasks see this file.
	until := filepath.Join(t.TempDir(), "stop")
	t.Cleanup(func() { _ = os.WriteFile(until, nil, 0o644) })
	run := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = t.TempDir()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := run("--cluster", "yarn", "--detach", "-n", "2", "--max-attempts", "2", "--jobname", "spindle-page",
		"--worker-memory", "128m", "--input", cl.FS.URI(input), "--split-size", "512",
		"--", trainsim, "--until", until, "--pace", "20ms", "--fail-worker", "1", "--plan-epochs", "100")
	if err != nil {
		t.Fatalf("ps-submit: %v\n%s", err, errOut)
	}
	app, err := yarn.ParseApplicationID(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("ps-submit --detach printed %q: %v\n%s", out, err, errOut)
	}
	t.Cleanup(func() {
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if r, err := rm.ApplicationReport(kctx, app); err == nil && !r.State.Terminal() {
			_, _ = rm.Kill(kctx, app)
		}
	})
	lookup := os.LookupEnv

	// Wait until the job has what the page should show.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var r yarn.ApplicationReport
	var st *web.Status
	var stErr error
	for ready := false; !ready; {
		select {
		case <-ctx.Done():
			t.Fatalf("the job never had 3 epochs, both workers' speeds, worker 1's restart and the training's progress in its YARN report: %v %v %+v %v", r.State, r.Progress, st, stErr)
		case <-tick.C:
		}
		if r, st, stErr, err = JobStatus(ctx, app, lookup, Login{}); err != nil {
			t.Fatal(err)
		}
		if r.State.Terminal() {
			t.Fatalf("application ended %v %v: %s", r.State, r.FinalStatus, r.Diagnostics)
		}
		if st == nil {
			continue
		}
		// The ApplicationMaster reports the training's progress: 3 of
		// the 100 epochs planned, or more.
		ready = len(st.Epochs) >= 3 && len(st.Speed.Workers) == 2 && len(st.Speed.Times) >= 3 && r.Progress >= 0.03
		for _, task := range st.Tasks {
			if task.Task == "worker 1" && (task.Restarts != 1 || task.State != "running") {
				ready = false
			}
		}
	}

	// The page, through the ResourceManager's proxy.
	u, err := trackingURL(cl.Conf, r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u, "/proxy/"+app.String()) {
		t.Errorf("tracking URL %s is not the ResourceManager's proxy", u)
	}
	dom, err := b.LoadDrawn(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, series string
	}{{"chart-epoch", "loss,AUC"}, {"chart-time", "loss,AUC"}, {"chart-speed", "worker 0,worker 1"}} {
		if s, n, ok := browsertest.Figure(dom, c.id); !ok || s != c.series || n < 3 {
			t.Errorf("%s: series %q, %d points (found %v); want %s and 3 or more", c.id, s, n, ok, c.series)
		}
	}
	for _, want := range []string{`data-state="RUNNING"`, ">worker 1<", `<tr class="running" data-task="worker 1"><td>worker 1</td><td>running</td><td class="num">1</td><td class="num">1</td>`,
		"<td>container_", `href="logs/worker/0/stdout"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page has no %s:\n%s", want, dom)
		}
	}
	shot := filepath.Join(t.TempDir(), "status-page-yarn.png")
	if *yarnScreenshot != "" {
		shot = *yarnScreenshot
	}
	if err := b.Screenshot(ctx, u, shot); err != nil {
		t.Error(err)
	}

	// A running task's output, from its NodeManager (worker 1's first
	// attempt may have read all of epoch 0 before worker 0 started).
	out, errOut, err = run("logs", app.String(), "--task", "worker:0")
	if err != nil || !strings.Contains(out, "==> worker 0 stdout (launch 0, container_") || !strings.Contains(out, "<==\nworker 0 epoch ") ||
		strings.Contains(out, "worker 1") || strings.Contains(out, "LogContents") {
		t.Errorf("logs --task worker:0 while it runs: %v, stderr %q, stdout:\n%s", err, errOut, out)
	}
	out, errOut, err = run("status", app.String())
	for _, want := range []string{"application " + app.String(), "  state          RUNNING", "job spindle-page", "loss=", "  loss, AUC      loss ", ", AUC 0.",
		" shards done; 100 epochs planned, ",
		"    worker 1     running          1        1  "} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("status while it runs: %v, stderr %q, stdout lacks %q:\n%s", err, errOut, want, out)
		}
	}

	// The end, and the output once the application is over.
	if err := os.WriteFile(until, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r = waitAppState(t, ctx, rm, app); r.FinalStatus != yarn.FinalSucceeded {
		t.Fatalf("application ended %v %v: %s", r.State, r.FinalStatus, r.Diagnostics)
	}
	out, errOut, err = run("logs", app.String(), "--task", "worker:1")
	if err != nil || !strings.Contains(out, "==> worker 1 stderr (launch 1, hdfs://") || !strings.Contains(out, "worker 1: done after ") {
		t.Errorf("logs --task worker:1 after the end: %v, stderr %q, stdout:\n%s", err, errOut, out)
	}
	out, errOut, err = run("logs", app.String())
	if err != nil || !strings.Contains(out, "==> worker 0 stdout (launch 0, hdfs://") || !strings.Contains(out, "worker 0: done after ") {
		t.Errorf("logs after the end: %v, stderr %q, stdout:\n%s", err, errOut, out)
	}
	out, errOut, err = run("status", app.String())
	for _, want := range []string{"  final status   SUCCEEDED", "job spindle-page", "  state          SUCCEEDED", "    worker 1     succeeded        1        1  "} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("status after the end: %v, stderr %q, stdout lacks %q:\n%s", err, errOut, want, out)
		}
	}
}
