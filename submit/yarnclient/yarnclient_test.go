package yarnclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/yarn"
)

// buildPSSubmit builds cmd/ps-submit into a temporary directory.
func buildPSSubmit(t *testing.T) string {
	t.Helper()
	return hadooptest.Build(t, "github.com/spindle-ps/spindle/cmd/ps-submit")
}

var appIDRE = regexp.MustCompile(`application (application_\d+_\d+)`)

// submittedApp finds the application id ps-submit printed.
func submittedApp(t *testing.T, stderr string) yarn.ApplicationID {
	t.Helper()
	m := appIDRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("ps-submit printed no application id:\n%s", stderr)
	}
	id, err := yarn.ParseApplicationID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// testRM is a client of cl's ResourceManager, closed when the test ends.
func testRM(ctx context.Context, t *testing.T, cl *hadooptest.Cluster) *yarn.RMClient {
	t.Helper()
	rm, err := yarn.NewRMClient(ctx, cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	return rm
}

// checkStagingGone checks that app's staging directory was removed.
func checkStagingGone(t *testing.T, cl *hadooptest.Cluster, app yarn.ApplicationID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := "/user/" + cl.User + "/.spindle/" + app.String()
	if _, err := cl.FS.Stat(ctx, dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("staging directory %s: Stat = %v, want it gone", dir, err)
	}
}

// waitStagingGone waits, bounded, until app's staging directory is
// removed: the ApplicationMaster removes it as it ends, which YARN may
// report a moment before.
func waitStagingGone(t *testing.T, cl *hadooptest.Cluster, app yarn.ApplicationID) {
	t.Helper()
	dir := "/user/" + cl.User + "/.spindle/" + app.String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cl.FS.Stat(ctx, dir)
		cancel()
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("staging directory %s: Stat = %v 30s after the application ended, want it gone", dir, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAppState polls app's report, bounded by ctx, until it is terminal.
func waitAppState(t *testing.T, ctx context.Context, rm *yarn.RMClient, app yarn.ApplicationID) yarn.ApplicationReport {
	t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := rm.ApplicationReport(ctx, app)
		if err == nil && r.State.Terminal() {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("application %v not ended: last report %v %v, err %v: %v", app, r.State, r.FinalStatus, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// readAll reads the file name of fsys.
func readAll(ctx context.Context, fsys dfs.FileSystem, name string) ([]byte, error) {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// yarnAppList runs Hadoop's "yarn application -list -appStates ALL".
func yarnAppList(t *testing.T) (string, bool) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "minicluster.sh")
	if os.Getenv("SPINDLE_MINICLUSTER_DIR") == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, "yarn", "application", "-list", "-appStates", "ALL").Output()
	if err != nil {
		t.Logf("not checking with Hadoop's yarn CLI: %v", err)
		return "", false
	}
	return string(out), true
}

// TestHadoopSubmitYARN runs the ps-submit binary with --cluster yarn
// against the cluster: a job that succeeds, one that fails, and one
// stopped with SIGINT.
func TestHadoopSubmitYARN(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	rm, err := yarn.NewRMClient(context.Background(), cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	// The child runs in a directory without a copy of the command, so
	// ./ paths cannot be mistaken for shipped files.
	run := func(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = t.TempDir()
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		return cmd, &stderr
	}
	small := []string{"--worker-memory", "128m", "--server-memory", "128m"}

	t.Run("three_workers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx, append(append([]string{"--cluster", "yarn", "-n", "3", "--jobname", "spindle-test"}, small...),
			"--", "/bin/sh", "-c", "echo task $DMLC_TASK_ID")...)
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		if err != nil {
			t.Fatalf("ps-submit: %v", err)
		}
		app := submittedApp(t, out.String())
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded || r.Name != "spindle-test" || r.Type != ApplicationType {
			t.Errorf("report: name %q type %q state %v final %v, want spindle-test SPINDLE FINISHED SUCCEEDED", r.Name, r.Type, r.State, r.FinalStatus)
		}
		if list, ok := yarnAppList(t); ok {
			var line string
			for _, l := range strings.Split(list, "\n") {
				if strings.Contains(l, app.String()) {
					line = l
				}
			}
			for _, w := range []string{"spindle-test", "SPINDLE", "FINISHED", "SUCCEEDED"} {
				if !strings.Contains(line, w) {
					t.Errorf("yarn application -list line for %v is %q, want it to contain %q", app, line, w)
				}
			}
		}
		stdout := hadooptest.ContainerFiles(t, app.String(), "stdout")
		if len(stdout) == 0 {
			t.Logf("container stdout not on local disk; not checking it")
		}
		for i := 0; len(stdout) > 0 && i < 3; i++ {
			want, n := "task "+strconv.Itoa(i)+"\n", 0
			for _, s := range stdout {
				if s == want {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d containers printed %q, want 1: %q", n, want, stdout)
			}
		}
		checkStagingGone(t, cl, app)
	})

	t.Run("shipped_program", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx)
		for name, content := range map[string]string{"prog.sh": "#!/bin/sh\necho shipped $DMLC_TASK_ID $(cat data.txt)\n", "data.txt": "hello\n"} {
			if err := os.WriteFile(filepath.Join(cmd.Dir, name), []byte(content), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd.Args = append(append([]string{bin, "--cluster", "yarn", "-n", "1", "--files", "data.txt"}, small...), "--", "./prog.sh")
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		if err != nil {
			t.Fatalf("ps-submit: %v", err)
		}
		app := submittedApp(t, out.String())
		found := false
		for _, s := range hadooptest.ContainerFiles(t, app.String(), "stdout") {
			found = found || s == "shipped 0 hello\n"
		}
		if !found && os.Getenv("SPINDLE_MINICLUSTER_DIR") != "" {
			t.Errorf("no container printed %q", "shipped 0 hello\n")
		}
		checkStagingGone(t, cl, app)
	})

	// A task binary that links libzmq must load the copy shipped into its
	// container's lib/, not the one installed on the node.
	t.Run("shipped_libraries", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx)
		probe := filepath.Join(cmd.Dir, "zmqprobe")
		if b, err := exec.CommandContext(ctx, "go", "build", "-o", probe, "./internal/zmqprobe").CombinedOutput(); err != nil {
			t.Fatalf("build the probe: %v\n%s", err, b)
		}
		cmd.Args = append(append([]string{bin, "--cluster", "yarn", "-n", "1"}, small...), "--", probe)
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		if err != nil {
			t.Fatalf("ps-submit: %v", err)
		}
		app := submittedApp(t, out.String())
		var mapped string
		for _, s := range hadooptest.ContainerFiles(t, app.String(), "stdout") {
			if strings.HasPrefix(s, "libzmq ") {
				mapped = strings.TrimSpace(strings.TrimPrefix(s, "libzmq "))
			}
		}
		if mapped == "" {
			if os.Getenv("SPINDLE_MINICLUSTER_DIR") != "" {
				t.Fatal("the task printed no libzmq mapping")
			}
			return
		}
		// Localized files live under the NodeManager's usercache or
		// filecache, never under the system's library directories.
		if strings.HasPrefix(mapped, "/usr/") || strings.HasPrefix(mapped, "/lib") || !strings.Contains(mapped, "cache/") {
			t.Errorf("the task mapped libzmq from %s, not from its container's shipped copy", mapped)
		}
		t.Logf("the task mapped libzmq from %s", mapped)
		checkStagingGone(t, cl, app)
	})

	t.Run("fails_once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx, append(append([]string{"--cluster", "yarn", "-n", "2", "--max-attempts", "2", "--jobname", "spindle-test-retry"}, small...),
			"--", "/bin/sh", "-c", `if [ "$DMLC_TASK_ID" = 1 ] && [ "$DMLC_NUM_ATTEMPT" = 0 ]; then exit 1; fi; echo fine`)...)
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		if err != nil {
			t.Fatalf("ps-submit with a task that fails once: %v, want success", err)
		}
		app := submittedApp(t, out.String())
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil || r.FinalStatus != yarn.FinalSucceeded {
			t.Fatalf("report %+v %v, want SUCCEEDED", r, err)
		}
		checkStagingGone(t, cl, app)
	})

	t.Run("always_fails", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx, append(append([]string{"--cluster", "yarn", "-n", "1", "--jobname", "spindle-test-fail"}, small...),
			"--", "/bin/sh", "-c", "echo failing >&2; exit 3")...)
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("ps-submit: %v, want a non-zero exit status", err)
		}
		for _, w := range []string{"worker 0 failed", "exit status 3", "FAILED", "ps-submit logs application_"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("ps-submit's output does not contain %q", w)
			}
		}
		checkStagingGone(t, cl, submittedApp(t, out.String()))
	})

	// submitDetached runs ps-submit --detach and returns the application
	// id it printed on its standard output.
	submitDetached := func(t *testing.T, ctx context.Context, args ...string) yarn.ApplicationID {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{"--cluster", "yarn", "--detach", "-n", "1"}, small...), args...)...)
		cmd.Dir = t.TempDir()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		t.Logf("ps-submit --detach in %v:\n%s%s", took, stdout.String(), stderr.String())
		if err != nil {
			t.Fatalf("ps-submit --detach: %v", err)
		}
		if took > 30*time.Second {
			t.Errorf("ps-submit --detach took %v; it should not wait for the job", took)
		}
		id, err := yarn.ParseApplicationID(strings.TrimSpace(stdout.String()))
		if err != nil {
			t.Fatalf("ps-submit --detach printed %q, want the application id: %v", stdout.String(), err)
		}
		return id
	}
	psSubmit := func(t *testing.T, ctx context.Context, args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("ps-submit %q: %v", args, err)
		}
		t.Logf("ps-submit %s:\n%s", strings.Join(args, " "), out)
		return string(out), cmd.ProcessState.ExitCode()
	}
	// checkKept: after a kill, the job's final status says KILLED and
	// every one of its workers' output ("started-worker") was kept, for
	// ps-submit status and logs.
	checkKept := func(t *testing.T, ctx context.Context, app yarn.ApplicationID, workers int) {
		t.Helper()
		if out, code := psSubmit(t, ctx, "status", app.String()); code != 0 || !strings.Contains(out, "\n  state          KILLED\n") {
			t.Errorf("ps-submit status after the kill: exit %d, want 0 and the job's state KILLED", code)
		}
		if out, code := psSubmit(t, ctx, "logs", app.String()); code != 0 || strings.Count(out, "started-worker") != workers {
			t.Errorf("ps-submit logs after the kill: exit %d, want 0 and the output of %d workers", code, workers)
		}
	}

	t.Run("detach", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		app := submitDetached(t, ctx, "--jobname", "spindle-test-detach", "--", "sleep", "5")
		// The ResourceManager may not have accepted the application yet
		// (NEW, NEW_SAVING, SUBMITTED): ask again until it has, within
		// the test's bound.
		out, code := psSubmit(t, ctx, "status", app.String())
		for code == 0 && regexp.MustCompile(`state\s+(NEW|NEW_SAVING|SUBMITTED)\n`).MatchString(out) && ctx.Err() == nil {
			out, code = psSubmit(t, ctx, "status", app.String())
		}
		if code != 0 || !regexp.MustCompile(`state\s+(RUNNING|ACCEPTED)`).MatchString(out) || !strings.Contains(out, "spindle-test-detach") {
			t.Errorf("ps-submit status: exit %d, want 0 and the state RUNNING or ACCEPTED", code)
		}
		r := waitAppState(t, ctx, rm, app)
		if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded {
			t.Errorf("application %v ended %v %v, want FINISHED SUCCEEDED: %s", app, r.State, r.FinalStatus, r.Diagnostics)
		}
		waitStagingGone(t, cl, app)
		out, code = psSubmit(t, ctx, "status", app.String())
		if code != 0 || !regexp.MustCompile(`state\s+FINISHED`).MatchString(out) || !regexp.MustCompile(`final status\s+SUCCEEDED`).MatchString(out) {
			t.Errorf("ps-submit status after the end: exit %d, want 0, FINISHED and SUCCEEDED", code)
		}
		missing := yarn.ApplicationID{ClusterTimestamp: app.ClusterTimestamp, ID: app.ID + 1000}
		if out, code := psSubmit(t, ctx, "status", missing.String()); code != 1 || !strings.Contains(out, "not found") {
			t.Errorf("ps-submit status %v: exit %d, want 1 and not found", missing, code)
		}
	})

	t.Run("kill", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		marker := "spindle-detach-kill-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		// The output does not exist: the job makes it, and the kill
		// removes it, empty. The checkpoint directory was the user's.
		dir := cl.TempDir(t)
		output, ckpt := dir+"/model", dir+"/ckpt"
		if err := cl.FS.MkdirAll(ctx, ckpt, 0o755); err != nil {
			t.Fatal(err)
		}
		app := submitDetached(t, ctx, "--jobname", "spindle-test-detach-kill", "--output", cl.FS.URI(output), "--checkpoint-dir", cl.FS.URI(ckpt),
			"--", "/bin/sh", "-c", "echo started-$DMLC_ROLE; sleep 600; : "+marker)
		// Killed once the ApplicationMaster runs the tasks.
		for r, err := rm.ApplicationReport(ctx, app); err != nil || r.State != yarn.AppRunning || r.RPCPort <= 0; r, err = rm.ApplicationReport(ctx, app) {
			if err == nil && r.State.Terminal() || ctx.Err() != nil {
				t.Fatalf("application %v: %v %v, err %v; want it running", app, r.State, r.FinalStatus, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		for markedProcesses(marker) == 0 {
			if ctx.Err() != nil {
				t.Fatalf("application %v runs, but its task never started: %v", app, ctx.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The job is asked to end: its ApplicationMaster stops the
		// task, keeps its output and the job's status, and unregisters.
		out, code := psSubmit(t, ctx, "kill", app.String())
		if code != 0 || !strings.Contains(out, app.String()+" FINISHED KILLED") {
			t.Errorf("ps-submit kill: exit %d, want 0 and FINISHED KILLED:\n%s", code, out)
		}
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalKilled {
			t.Errorf("application %v is %v %v after ps-submit kill, want FINISHED KILLED", app, r.State, r.FinalStatus)
		}
		checkKept(t, ctx, app, 1)
		checkStagingGone(t, cl, app)
		if _, err := cl.FS.Stat(ctx, output); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the output the killed job made and left empty: Stat = %v, want it removed", err)
		}
		if _, err := cl.FS.Stat(ctx, ckpt); err != nil {
			t.Errorf("the user's checkpoint directory after the kill: %v, want it kept", err)
		}
		// Nor does a claim stay to keep a --resume out of it.
		if _, err := cl.FS.Stat(ctx, ckpt+"/"+claimFile); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the job's claim on the checkpoint directory after the kill: Stat = %v, want it removed", err)
		}
		if out, code := psSubmit(t, ctx, "kill", app.String()); code != 0 || !strings.Contains(out, "already ended") {
			t.Errorf("second ps-submit kill: exit %d, want 0 and already ended", code)
		}
		deadline := time.Now().Add(30 * time.Second)
		for markedProcesses(marker) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d task processes still running 30s after ps-submit kill", markedProcesses(marker))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	// A job with --overwrite over a complete model writes the new one
	// beside it. Its ApplicationMaster killed outright, before it could
	// clean up (as YARN does when it stops taking its time), the job
	// leaves the old model as it was and, once ps-submit kill has
	// removed what the job left, nothing beside it.
	t.Run("kill_over_a_model", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		dir := cl.TempDir(t)
		output, stage := dir+"/model", dir+"/.model.spindle-new"
		if err := cl.FS.MkdirAll(ctx, output, 0o755); err != nil {
			t.Fatal(err)
		}
		cl.WriteFile(t, output+"/part-00000", []byte("old"), dfs.CreateOptions{})
		cl.WriteFile(t, output+"/_SUCCESS", nil, dfs.CreateOptions{})
		app := submitDetached(t, ctx, "--jobname", "spindle-test-kill-overwrite", "--output", cl.FS.URI(output), "--overwrite",
			"--max-app-attempts", "1", "--", "/bin/sh", "-c", "sleep 600")
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		wait := func(what string, done func() bool) {
			t.Helper()
			for !done() {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatalf("%s: %v", what, ctx.Err())
				}
			}
		}
		wait("the ApplicationMaster never made "+stage, func() bool {
			_, err := cl.FS.Stat(ctx, stage)
			return err == nil
		})
		am := hadooptest.ContainerOf(app.String()) + "01_000001"
		if len(hadooptest.KillTask(t, am, "", 0)) == 0 {
			t.Fatalf("no process of %s to kill", am)
		}
		wait("the application did not end once its ApplicationMaster was killed", func() bool {
			r, err := rm.ApplicationReport(ctx, app)
			return err == nil && r.State.Terminal()
		})
		if out, code := psSubmit(t, ctx, "kill", app.String()); code != 0 || !strings.Contains(out, "already ended") {
			t.Errorf("ps-submit kill: exit %d, want 0 and already ended:\n%s", code, out)
		}
		checkStagingGone(t, cl, app)
		if _, err := cl.FS.Stat(ctx, stage); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the kill: Stat = %v, want it removed", stage, err)
		}
		for name, want := range map[string]string{"part-00000": "old", "_SUCCESS": ""} {
			if b, err := readAll(ctx, cl.FS, output+"/"+name); err != nil || string(b) != want {
				t.Errorf("the model's %s after the kill: %q, %v; want %q, as before", name, b, err, want)
			}
		}
	})

	t.Run("live_status", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd, out := run(t, ctx, append(append([]string{"--cluster", "yarn", "-n", "2", "-s", "1"}, small...), "--", "sleep", "8")...)
		err := cmd.Run()
		t.Logf("ps-submit:\n%s", out)
		if err != nil {
			t.Fatalf("ps-submit: %v", err)
		}
		if !strings.Contains(out.String(), "workers 2/2") {
			t.Errorf("ps-submit's output has no status line with %q", "workers 2/2")
		}
		checkStagingGone(t, cl, submittedApp(t, out.String()))
	})

	t.Run("sigint", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		marker := "spindle-submit-kill-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		cmd, out := run(t, ctx, append(append([]string{"--cluster", "yarn", "-n", "2", "--jobname", "spindle-test-kill"}, small...),
			"--", "/bin/sh", "-c", "echo started-$DMLC_ROLE; sleep 600; : "+marker)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for markedProcesses(marker) < 2 {
			select {
			case err := <-done:
				t.Fatalf("ps-submit ended before the tasks ran: %v\n%s", err, out)
			case <-ctx.Done():
				t.Fatalf("task processes did not start: %v", ctx.Err())
			case <-tick.C:
			}
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("ps-submit still running a minute after SIGINT:\n%s", out)
		}
		t.Logf("ps-submit:\n%s", out)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("ps-submit: %v, want a non-zero exit status", err)
		}
		app := submittedApp(t, out.String())
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalKilled {
			t.Errorf("application %v ended %v %v, want FINISHED KILLED (the job asked to end)", app, r.State, r.FinalStatus)
		}
		checkKept(t, ctx, app, 2)
		checkStagingGone(t, cl, app)
		deadline := time.Now().Add(30 * time.Second)
		for markedProcesses(marker) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d task processes still running 30s after ps-submit ended", markedProcesses(marker))
			}
			<-tick.C
		}
	})
}

// markedProcesses counts this machine's processes whose command line
// contains marker.
func markedProcesses(marker string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), marker) && strings.HasPrefix(string(b), "/bin/sh") {
			n++
		}
	}
	return n
}

func TestAMWebProxy(t *testing.T) {
	hc := conf.HadoopConf{"yarn.resourcemanager.webapp.address": "rm:18088"}
	none := func(string) (string, bool) { return "", false }
	o := amWebProxy(hc, none, "appattempt_1700000000000_0007_000002")
	if len(o.Hosts) != 1 || o.Hosts[0] != "rm:18088" || o.URIBase != "/proxy/application_1700000000000_0007" {
		t.Fatalf("from the attempt: %+v", o)
	}
	env := func(k string) (string, bool) {
		if k == "APPLICATION_WEB_PROXY_BASE" {
			return "/proxy/application_9_0001", true
		}
		return "", false
	}
	if o := amWebProxy(hc, env, "x"); o.URIBase != "/proxy/application_9_0001" {
		t.Fatalf("from the environment: %+v", o)
	}
	if o := amWebProxy(hc, none, "bogus"); o.URIBase != "" {
		t.Fatalf("from a bogus attempt id: %+v", o)
	}
}

// TestMaxAppAttempts: the AM counts its attempts as the ResourceManager
// does, from the request and the cluster's two bounds.
func TestMaxAppAttempts(t *testing.T) {
	for _, c := range []struct {
		requested int
		hc        conf.HadoopConf
		want      int
	}{
		{0, nil, 2},
		{1, nil, 1},
		{2, nil, 2},
		{5, nil, 2},
		{0, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "4"}, 4},
		{3, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "4"}, 3},
		{5, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "4"}, 4},
		{5, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "1", "yarn.resourcemanager.am.global.max-attempts": "6"}, 5},
		{9, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "1", "yarn.resourcemanager.am.global.max-attempts": "6"}, 6},
		{3, conf.HadoopConf{"yarn.resourcemanager.am.max-attempts": "many"}, 2},
	} {
		if got := maxAppAttempts(c.requested, c.hc); got != c.want {
			t.Errorf("maxAppAttempts(%d, %v) = %d, want %d", c.requested, c.hc, got, c.want)
		}
	}
}
