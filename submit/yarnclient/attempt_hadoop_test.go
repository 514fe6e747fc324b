package yarnclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// TestHadoopSubmitYARNKilledFromOutside: a detached application with
// attempts left is killed as "yarn application -kill" kills it. Its
// ApplicationMaster, stopped by a signal, keeps the staging directory for
// a next attempt that never comes; the next submission finds the
// application ended and removes it. The applications are a user's of
// their own, whose staging directories no other test's submission
// sweeps.
func TestHadoopSubmitYARNKilledFromOutside(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)
	const user = "spindle-sweep-test"
	env := []string{"HADOOP_USER_NAME=" + user}

	starts := filepath.Join(t.TempDir(), "starts")
	script := fmt.Sprintf(`echo $DMLC_ROLE >> %s; sleep 600`, starts)
	run := startSubmit(ctx, t, rm, bin, env, "--cluster", "yarn", "--detach", "-n", "1", "-s", "0", "--worker-memory", "128m",
		"--max-app-attempts", "2", "--", "/bin/sh", "-c", script)
	if err := run.cmd.Wait(); err != nil {
		<-run.copied
		t.Fatalf("ps-submit --detach: %v\n%s", err, run.out)
	}
	<-run.copied
	app := run.app
	waitStarts(ctx, t, rm, app, starts, 1, run.out)

	if _, err := rm.Kill(ctx, app); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if r.State.Terminal() {
			if r.State != yarn.AppKilled {
				t.Fatalf("application %v ended %v after the kill, want KILLED", app, r.State)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("application %v still %v after the kill", app, r.State)
		case <-time.After(200 * time.Millisecond):
		}
	}
	staging := "/user/" + user + "/.spindle/" + app.String()
	if _, err := cl.FS.Stat(ctx, staging); err != nil {
		t.Fatalf("the killed application's staging directory %s: %v; the sweep this test checks has nothing left to do", staging, err)
	}

	next := startSubmit(ctx, t, rm, bin, env, "--cluster", "yarn", "--detach", "-n", "1", "-s", "0", "--worker-memory", "128m",
		"--", "/bin/true")
	err := next.cmd.Wait()
	<-next.copied
	t.Logf("the next ps-submit:\n%s", next.out)
	if err != nil {
		t.Fatalf("ps-submit: %v", err)
	}
	if want := "removed the staging directory of " + app.String() + ", which ended KILLED"; !strings.Contains(next.out.String(), want) {
		t.Errorf("the next ps-submit does not say %q", want)
	}
	if _, err := cl.FS.Stat(ctx, staging); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("staging directory %s: Stat = %v, want it gone", staging, err)
	}
}
