package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// survivors lists the processes whose environment holds marker: the
// job's processes and everything they started.
func survivors(t *testing.T, marker string) []string {
	t.Helper()
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(marker)) {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			out = append(out, p+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

func runLocal(t *testing.T, ctx context.Context, spec job.JobSpec) (job.Result, error, string) {
	t.Helper()
	var out syncbuf.Buffer
	res, err := Run(ctx, spec, Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), StopGrace: time.Second})
	return res, err, out.String()
}

// TestRunLocalGivesEachTaskTheContract also checks that the job secret is
// not in any task's environment, but in a keys file only the user reads.
func TestRunLocalGivesEachTaskTheContract(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `echo "role=$DMLC_ROLE task=$DMLC_TASK_ID workers=$DMLC_NUM_WORKER servers=$DMLC_NUM_SERVER attempt=$DMLC_NUM_ATTEMPT cluster=$DMLC_JOB_CLUSTER tracker=${SPINDLE_TRACKER_ADDR:+set} secret=${SPINDLE_JOB_SECRET:+set} keys=$(stat -c %a $SPINDLE_JOB_KEYS) mine=$MINE"`
	res, err, out := runLocal(t, ctx, job.JobSpec{
		Command: []string{"/bin/sh", "-c", script}, NumWorkers: 2, NumServers: 1, MaxAttempts: 1,
		Env: []string{"MINE=all"}, WorkerEnv: []string{"MINE=workers"},
	})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job: %v %v\n%s", res.State, err, out)
	}
	for _, want := range []string{
		"[scheduler 0] role=scheduler task= workers=2 servers=1 attempt=0 cluster=local tracker=set secret= keys=600 mine=all",
		"[server 0] role=server task=0 workers=2 servers=1 attempt=0 cluster=local tracker=set secret= keys=600 mine=all",
		"[worker 0] role=worker task=0 workers=2 servers=1 attempt=0 cluster=local tracker=set secret= keys=600 mine=workers",
		"[worker 1] role=worker task=1 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunLocalRetriesAFailedWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `if [ "$DMLC_TASK_ID" = 1 ] && [ "$DMLC_NUM_ATTEMPT" = 0 ]; then echo failing once; exit 1; fi; echo fine`
	res, err, out := runLocal(t, ctx, job.JobSpec{Command: []string{"/bin/sh", "-c", script}, NumWorkers: 2, MaxAttempts: 2})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job: %v %v\n%s", res.State, err, out)
	}
	if !strings.Contains(out, "[worker 1#1] fine") {
		t.Errorf("no second attempt of worker 1 in:\n%s", out)
	}
	for _, tr := range res.Tasks {
		want := 1
		if tr.Rank == 1 {
			want = 2
		}
		if tr.Attempts != want || tr.ExitCode != 0 {
			t.Errorf("%s %d: %d attempts, exit %d; want %d attempts, exit 0", tr.Role, tr.Rank, tr.Attempts, tr.ExitCode, want)
		}
	}
}

// TestRunLocalStartsAgainWhenTheSchedulerFailsEarly: a scheduler that
// fails before any worker asked for input (here at once, as one that
// cannot bind its port would) takes every task back to the start; with
// nothing trained, nothing is lost, so this needs no checkpoint
// directory.
func TestRunLocalStartsAgainWhenTheSchedulerFailsEarly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The server and worker wait for a scheduler that runs (its second
	// attempt's mark): a scheduler that fails after every other task
	// exited 0 is not needed, and would not be started again.
	mark := filepath.Join(t.TempDir(), "scheduler-up")
	script := `if [ "$DMLC_ROLE" = scheduler ]; then
	  if [ "$DMLC_NUM_ATTEMPT" = 0 ]; then echo cannot bind; exit 3; fi
	  : > "$MARK"
	else
	  i=0; while [ ! -e "$MARK" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
	fi
	echo "run port=$DMLC_PS_ROOT_PORT"`
	res, err, out := runLocal(t, ctx, job.JobSpec{Command: []string{"/bin/sh", "-c", script}, Env: []string{"MARK=" + mark}, NumWorkers: 1, NumServers: 1, MaxAttempts: 2})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job: %v %v\n%s", res.State, err, out)
	}
	i := strings.Index(out, "[scheduler 0#1] run port=")
	if i < 0 {
		t.Fatalf("no second attempt of the scheduler in:\n%s", out)
	}
	port := strings.Fields(out[i+len("[scheduler 0#1] run port="):])[0]
	// The server ran again, beside the new scheduler: the whole job
	// started again.
	if !strings.Contains(out, "[server 0] run port="+port+"\n") {
		t.Errorf("server 0 did not run with the new scheduler (port %s):\n%s", port, out)
	}
}

func TestRunLocalFailsNamingTheTaskAndLeavesNoProcess(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("spindle-test-marker-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Worker 1 always fails; everyone else (and a grandchild) would run
	// for ten minutes.
	script := `if [ "$DMLC_TASK_ID" = 1 ]; then echo "cannot open data"; exit 3; fi; sleep 600 & wait`
	start := time.Now()
	res, err, out := runLocal(t, ctx, job.JobSpec{Command: []string{"/bin/sh", "-c", script}, Env: []string{"SPINDLE_TEST_MARKER=" + marker}, NumWorkers: 3, NumServers: 1, MaxAttempts: 2})
	took := time.Since(start)
	if res.State != tracker.Failed || err == nil {
		t.Fatalf("job: %v %v\n%s", res.State, err, out)
	}
	for _, want := range []string{"worker 1 failed", "exit code 3", "attempt 2 of 2", "cannot open data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took > 30*time.Second {
		t.Errorf("failing took %v", took)
	}
	if left := survivors(t, marker); len(left) > 0 {
		t.Fatalf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

func TestRunLocalStopsEverythingWhenInterrupted(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("spindle-test-marker-%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan error, 1)
	var res job.Result
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		var err error
		res, err = Run(ctx, job.JobSpec{Command: []string{"/bin/sh", "-c", `echo up; sleep 600 & wait`}, Env: []string{"SPINDLE_TEST_MARKER=" + marker}, NumWorkers: 2, MaxAttempts: 1},
			Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), StopGrace: time.Second,
				OnStatus: func(st tracker.Status) {
					for _, r := range st.Roles {
						if r.Role == conf.RoleWorker && r.Running == 2 {
							once.Do(func() { close(ready) })
						}
					}
				}})
		done <- err
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("workers never ran")
	}
	cancel()
	select {
	case err := <-done:
		if res.State != tracker.Killed || !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted job: %v %v", res.State, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the interrupt")
	}
	if left := survivors(t, marker); len(left) > 0 {
		t.Fatalf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

func TestRunLocalRefusesBadOutputBeforeStarting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	nonEmpty := filepath.Join(dir, "model")
	if err := os.MkdirAll(nonEmpty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "part-00000"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(dir, "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(dir, "started")
	cmd := []string{"/bin/sh", "-c", "touch " + started}
	type badInput struct {
		name, output, want string
		inputs             []string
	}
	tests := []badInput{
		{name: "non-empty output", output: nonEmpty, want: "Overwrite"},
		{name: "output is a file", output: aFile, want: "is a file"},
		{name: "output under a file", output: filepath.Join(aFile, "model"), want: aFile},
		{name: "missing input", output: filepath.Join(dir, "m1"), inputs: []string{filepath.Join(dir, "nope.libsvm")}, want: "nope.libsvm"},
		{name: "empty glob", output: filepath.Join(dir, "m2"), inputs: []string{filepath.Join(dir, "*.csv")}, want: "*.csv"},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nn := ln.Addr().String()
	ln.Close() // no NameNode listens there now
	tests = append(tests,
		badInput{name: "unreachable NameNode (input)", output: filepath.Join(dir, "m3"), inputs: []string{"hdfs://" + nn + "/data/*.libsvm"}, want: nn},
		badInput{name: "unreachable NameNode (output)", output: "hdfs://" + nn + "/models/m", want: nn},
	)
	for _, tt := range tests {
		start := time.Now()
		res, err := Run(ctx, job.JobSpec{Command: cmd, NumWorkers: 1, MaxAttempts: 1, Output: tt.output, Inputs: tt.inputs},
			Options{Environ: os.Environ(), Log: quietLog(), Planner: tracker.InputPlanner(dfs.NewResolver(conf.HadoopConf{}, ""))})
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s: took %v to fail", tt.name, d)
		}
		if err == nil || res.State != tracker.Failed || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v %v, want a failure naming %q", tt.name, res.State, err, tt.want)
		}
		if _, err := os.Stat(started); err == nil {
			t.Fatalf("%s: a task started", tt.name)
		}
	}
	// With --overwrite the old model goes.
	res, err := Run(ctx, job.JobSpec{Command: cmd, NumWorkers: 1, MaxAttempts: 1, Output: nonEmpty, Overwrite: true, NumServers: 0},
		Options{Environ: os.Environ(), Log: quietLog()})
	if err == nil || !strings.Contains(err.Error(), "incomplete") {
		// No server wrote a part: the commit must say the model is
		// incomplete rather than keep the old part.
		t.Fatalf("overwrite: %v %v, want the commit to find no part", res.State, err)
	}
	if _, err := os.Stat(filepath.Join(nonEmpty, "part-00000")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("--overwrite kept the old part")
	}
}

func TestRunLocalCheckpointDirChecks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	used := filepath.Join(dir, "used")
	if err := os.MkdirAll(filepath.Join(used, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"/bin/true"}
	tests := []struct {
		name string
		spec job.JobSpec
		want string
	}{
		{"resume without checkpoints", job.JobSpec{CheckpointDir: filepath.Join(dir, "empty"), Resume: true}, "no usable checkpoint"},
		{"resume from a dir of uncommitted ones", job.JobSpec{CheckpointDir: used, Resume: true}, "no usable checkpoint"},
		{"fresh job over old checkpoints", job.JobSpec{CheckpointDir: used}, "Overwrite"},
		{"resume without a dir", job.JobSpec{Resume: true}, "CheckpointDir"},
	}
	for _, tt := range tests {
		spec := tt.spec
		spec.Command, spec.NumWorkers, spec.MaxAttempts = cmd, 1, 1
		res, err := Run(ctx, spec, Options{Environ: os.Environ(), Log: quietLog()})
		if err == nil || res.State != tracker.Failed || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v %v, want a failure mentioning %q", tt.name, res.State, err, tt.want)
		}
	}
}

// TestRunLocalNodesTalkInAPrivateIPCDir checks that every task is told to
// bind Unix sockets in one directory of the job's, which only the user
// may enter and which is gone after the job; and that a job that sets
// DMLC_LOCAL keeps its setting.
func TestRunLocalNodesTalkInAPrivateIPCDir(t *testing.T) {
	t.Parallel()
	script := `echo "local=$DMLC_LOCAL dir=$SPINDLE_IPC_DIR mode=$(stat -c %a "$SPINDLE_IPC_DIR" 2>/dev/null)"`
	run := func(env []string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err, out := runLocal(t, ctx, job.JobSpec{Command: []string{"/bin/sh", "-c", script}, NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Env: env})
		if err != nil || res.State != tracker.Succeeded {
			t.Fatalf("job: %v %v\n%s", res.State, err, out)
		}
		return out
	}
	out := run(nil)
	dirs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, rest, _ := strings.Cut(line, "] ")
		var local, dir, mode string
		if _, err := fmt.Sscanf(rest, "local=%s dir=%s mode=%s", &local, &dir, &mode); err != nil || local != "1" || mode != "700" {
			t.Errorf("task %q: want local=1 and a directory of mode 700", line)
		}
		dirs[dir] = true
	}
	if len(dirs) != 1 {
		t.Fatalf("the tasks were told %d directories, want 1:\n%s", len(dirs), out)
	}
	for dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the job: %v, want it gone", dir, err)
		}
	}
	if out := run([]string{"DMLC_LOCAL=0"}); strings.Count(out, "local=0 ") != 4 {
		t.Errorf("with DMLC_LOCAL=0 in the job's environment:\n%s", out)
	}
}

// TestPlanShowsWhatTheLauncherAdds checks that a dry run shows the ipc
// settings a local job's tasks get, and each bound task's CPU and
// GOMAXPROCS; and none of what the inherited environment or the job
// sets itself.
func TestPlanShowsWhatTheLauncherAdds(t *testing.T) {
	t.Parallel()
	cpus, err := ownCPUs()
	if err != nil {
		t.Fatal(err)
	}
	spec := job.JobSpec{Command: []string{"prog"}, NumWorkers: 2, NumServers: 2, MaxAttempts: 1}
	plan, err := Plan(spec, Options{CPUBind: CPUBindCores})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		wantCPU, wantEnv := -1, []string{"DMLC_LOCAL=1", "SPINDLE_IPC_DIR=" + PlanIPCDir}
		if p.Role != conf.RoleScheduler {
			wantCPU, wantEnv = cpus[p.Rank%len(cpus)], append(wantEnv, "GOMAXPROCS=2")
		}
		for _, kv := range wantEnv {
			if !slices.Contains(p.Env, kv) {
				t.Errorf("%s %d: env %v lacks %s", p.Role, p.Rank, p.Env, kv)
			}
		}
		if p.CPU != wantCPU || !slices.IsSorted(p.Env) || (p.Role == conf.RoleScheduler && slices.Contains(p.Env, "GOMAXPROCS=2")) {
			t.Errorf("%s %d: CPU %d, env %v; want CPU %d, GOMAXPROCS=2 only when bound, sorted", p.Role, p.Rank, p.CPU, p.Env, wantCPU)
		}
	}

	plan, err = Plan(spec, Options{Environ: []string{"GOMAXPROCS=4", "DMLC_LOCAL=0"}, CPUBind: CPUBindNone})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		if p.CPU != -1 || slices.ContainsFunc(p.Env, func(kv string) bool {
			return strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "DMLC_LOCAL=") || strings.HasPrefix(kv, "SPINDLE_IPC_DIR=")
		}) {
			t.Errorf("%s %d with GOMAXPROCS and DMLC_LOCAL inherited, not bound: CPU %d, env %v", p.Role, p.Rank, p.CPU, p.Env)
		}
	}

	spec.Env = []string{"DMLC_LOCAL=0"}
	if plan, err = Plan(spec, Options{CPUBind: CPUBindNone}); err != nil {
		t.Fatal(err)
	}
	for _, p := range plan {
		if slices.Contains(p.Env, "DMLC_LOCAL=1") || !slices.Contains(p.Env, "DMLC_LOCAL=0") {
			t.Errorf("%s %d with the job's DMLC_LOCAL=0: env %v", p.Role, p.Rank, p.Env)
		}
	}
}
