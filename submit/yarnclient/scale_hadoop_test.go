package yarnclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/yarn"
)

// TestHadoopScaleYARN scales a YARN job whose workers ask for each
// epoch's servers and workers (trainsim --elastic) with "ps-submit
// scale APP_ID": out by a server and a worker, for which the
// ApplicationMaster asks for one more container each and starts them
// told to join, then in, both retiring; the application succeeds. A
// refusal of the job says why.
func TestHadoopScaleYARN(t *testing.T) {
	cl := hadooptest.Connect(t)
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
	out, errOut, err := run("--cluster", "yarn", "--detach", "-n", "1", "-s", "1", "--jobname", "spindle-scale",
		"--worker-memory", "128m", "--server-memory", "128m", "--input", cl.FS.URI(input), "--split-size", "512",
		"--", trainsim, "--elastic", "--until", until, "--pace", "20ms")
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
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	// waitStatus polls the job's status until cond holds.
	waitStatus := func(what string, cond func(st *web.Status) bool) *web.Status {
		t.Helper()
		for {
			r, st, _, err := JobStatus(ctx, app, os.LookupEnv, Login{})
			if err != nil {
				t.Fatal(err)
			}
			if r.State.Terminal() {
				t.Fatalf("application ended %v %v before %s: %s", r.State, r.FinalStatus, what, r.Diagnostics)
			}
			if st != nil && cond(st) {
				return st
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never happened: %+v", what, st)
			case <-tick.C:
			}
		}
	}
	taskOf := func(st *web.Status, name string) web.Task {
		for _, task := range st.Tasks {
			if task.Task == name {
				return task
			}
		}
		return web.Task{}
	}
	waitStatus("training", func(st *web.Status) bool { return st.State == "RUNNING" && len(st.Epochs) > 0 })

	if _, errOut, err := run("scale", app.String(), "--servers", "65"); err == nil || !strings.Contains(errOut, "ps-submit: scale: the job refused: scale to 65 servers: want 1 to 64") {
		t.Errorf("scale to 65: %v, stderr %q", err, errOut)
	}
	if _, errOut, err := run("scale", app.String(), "--workers", "257"); err == nil || !strings.Contains(errOut, "ps-submit: scale: the job refused: scale to 257 workers: want 1 to 256") {
		t.Errorf("scale to 257 workers: %v, stderr %q", err, errOut)
	}
	out, errOut, err = run("scale", app.String(), "--servers", "2", "--workers", "2")
	if err != nil || out != "scale requested: servers 1 → 2, workers 1 → 2; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 2: %v, stdout %q, stderr %q", err, out, errOut)
	}
	st := waitStatus("the switch to 2 servers and 2 workers", func(st *web.Status) bool { return st.Servers == 2 && st.Workers == 2 })
	for _, task := range []string{"server 1", "worker 1"} {
		if got := taskOf(st, task); !strings.HasPrefix(got.Container, "container_") {
			t.Errorf("%s %+v: want it in a container of its own", task, got)
		}
	}
	var kinds []string
	for _, e := range st.Events {
		if e.Kind != "scaled" {
			kinds = append(kinds, e.Task+" "+e.Kind)
		}
	}
	got := strings.Join(kinds, ", ")
	for _, want := range []string{" scale,  scale,", "server 1 joined", "worker 1 joined", " scaling"} {
		if !strings.Contains(got, want) {
			t.Errorf("events %s, want the requests, the joins and the switches (%q)", got, want)
		}
	}

	out, errOut, err = run("scale", app.String(), "--servers", "1", "--workers", "1")
	if err != nil || out != "scale requested: servers 2 → 1, workers 2 → 1; it takes effect at the next epoch boundary\n" {
		t.Fatalf("scale to 1: %v, stdout %q, stderr %q", err, out, errOut)
	}
	waitStatus("the retirement of server 1 and worker 1", func(st *web.Status) bool {
		return taskOf(st, "server 1").State == "retired" && taskOf(st, "worker 1").State == "retired"
	})
	if err := os.WriteFile(until, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := waitAppState(t, ctx, rm, app)
	if r.FinalStatus != yarn.FinalSucceeded {
		t.Fatalf("application ended %v %v: %s", r.State, r.FinalStatus, r.Diagnostics)
	}
}
