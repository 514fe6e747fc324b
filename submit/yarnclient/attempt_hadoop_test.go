package yarnclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

// TestHadoopSubmitYARNSecondAttempt: the ApplicationMaster of an
// application with attempts left is stopped by a signal, as a NodeManager
// that shuts down stops it. It stops its containers and leaves the
// application to YARN, which starts a second attempt; that attempt
// localizes its files from the staging directory, which the first left in
// place, runs the job again, and the application succeeds.
func TestHadoopSubmitYARNSecondAttempt(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)

	dir := t.TempDir()
	starts, release := filepath.Join(dir, "starts"), filepath.Join(dir, "release")
	script := fmt.Sprintf(`echo $DMLC_ROLE >> %s; while [ ! -e %s ]; do sleep 0.1; done; echo released`, starts, release)
	run := startSubmit(ctx, t, rm, bin, nil, "--cluster", "yarn", "-n", "1", "-s", "0", "--worker-memory", "128m",
		"--max-app-attempts", "2", "--", "/bin/sh", "-c", script)
	out, app := run.out, run.app
	waitStarts(ctx, t, rm, app, starts, 1, out)

	// The first attempt's AM is its first container.
	if pids := hadooptest.SignalTask(t, hadooptest.ContainerOf(app.String())+"01_000001", "", 0, syscall.SIGTERM); len(pids) != 1 {
		t.Fatalf("SIGTERM reached %d processes of the first attempt's ApplicationMaster, want 1", len(pids))
	}
	waitStarts(ctx, t, rm, app, starts, 2, out)

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := run.cmd.Wait()
	<-run.copied
	t.Logf("ps-submit:\n%s", out)
	if err != nil {
		t.Fatalf("ps-submit: %v", err)
	}
	r, err := rm.ApplicationReport(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded || r.CurrentAttempt.Attempt != 2 {
		t.Errorf("application %v ended %v %v in attempt %d, want FINISHED SUCCEEDED in attempt 2 (%s)",
			app, r.State, r.FinalStatus, r.CurrentAttempt.Attempt, r.Diagnostics)
	}
	if want := "RUNNING (attempt 2 of the ApplicationMaster)"; !strings.Contains(out.String(), want) {
		t.Errorf("ps-submit's output does not say %q", want)
	}
	checkStagingGone(t, cl, app)
}

// waitStarts waits until the file starts has n lines "worker" (the job's
// tasks append their role as they start), failing at once if app ends
// first.
func waitStarts(ctx context.Context, t *testing.T, rm *yarn.RMClient, app yarn.ApplicationID, starts string, n int, out fmt.Stringer) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(starts)
		if bytes.Count(b, []byte("worker\n")) >= n {
			return
		}
		if r, err := rm.ApplicationReport(ctx, app); err == nil && r.State.Terminal() {
			t.Fatalf("application %v ended %v %v (%s) before its worker started %d times:\n%s",
				app, r.State, r.FinalStatus, r.Diagnostics, n, out)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the worker did not start %d times:\n%s", n, out)
		case <-tick.C:
		}
	}
}
