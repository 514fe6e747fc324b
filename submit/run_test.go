package submit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// withRunner replaces the local launcher.
func withRunner(f func(context.Context, job.JobSpec, local.Options) (job.Result, error)) Option {
	return func(o *Options) { o.runLocal = f }
}

// noRun fails the test if the job is started.
func noRun(t *testing.T) Option {
	return withRunner(func(context.Context, job.JobSpec, local.Options) (job.Result, error) {
		t.Error("the job was started")
		return job.Result{}, errors.New("not to be started")
	})
}

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"--help", []string{"--help"}},
		{"-h", []string{"-h"}},
		{"help with other flags", []string{"-n", "2", "--help", "--", "./prog"}},
		{"help despite bad values", []string{"-n", "abc", "--worker-memory", "3x", "--help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runMain(t, nil, tt.args, noRun(t))
			if code != 0 || stderr != "" {
				t.Fatalf("exit status %d, stderr %q; want 0 and nothing", code, stderr)
			}
			for _, want := range []string{
				"Usage: ps-submit [flags] [--] command [arg...]",
				"Examples:",
				"ps-submit --cluster local -n 2 -s 2 --input data/train.libsvm --output /tmp/model -- ./ps-lr",
				"ps-submit --cluster yarn ",
				"./test_kv_app",
				"-n, --num-workers N",
				"-s, --num-servers N",
				"-h, --help",
				`--queue QUEUE` + "\n        YARN QUEUE to submit to (default \"default\")",
				"--max-attempts N\n        run each task at most N times in all, the first attempt included (one that exits 65, its input or arguments at fault, is not started again) (default 3)",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("help lacks %q:\n%s", want, stdout)
				}
			}
			NewOptions(Streams{}, nil, nil).flagSet().VisitAll(func(f *flag.Flag) {
				if _, alias := aliases[f.Name]; !alias && !strings.Contains(stdout, "--"+f.Name) {
					t.Errorf("help lacks --%s", f.Name)
				}
			})
		})
	}
}

func TestHelpGroupsHoldEveryFlagOnce(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, g := range helpGroups {
		for _, name := range g.flags {
			seen[name]++
		}
	}
	fs := NewOptions(Streams{}, nil, nil).flagSet()
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := aliases[f.Name]; alias {
			return
		}
		if seen[f.Name] != 1 {
			t.Errorf("--%s is in %d help groups, want 1", f.Name, seen[f.Name])
		}
		delete(seen, f.Name)
	})
	for name := range seen {
		t.Errorf("help group names --%s, which is not a flag", name)
	}
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	secrets := []string{"tok-value-1", "sec-value-2", "pw-value-3"}
	code, stdout, stderr := runMain(t, nil, []string{"--dry-run", "-n", "2", "-s", "2",
		"--env", "MY_TOKEN=" + secrets[0], "--env", "SPINDLE_JOB_SECRET=" + secrets[1], "--worker-env", "DB_PASSWORD=" + secrets[2],
		"--env", "PLAIN=visible", "--input", "data/*.libsvm", "--output", "/tmp/model", "--checkpoint-dir", "/tmp/ckpt",
		"--checkpoint-interval", "2", "--", "./ps-lr", "--epochs", "5"}, noRun(t))
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"job spindle:ps-lr\n",
		"  command              ./ps-lr --epochs 5\n",
		"  worker-memory        1024 MB\n",
		"  split-size           8388608 bytes (8m)\n",
		"  input                data/*.libsvm\n",
		"  env                  MY_TOKEN=<redacted>\n",
		"\nscheduler 0\n", "\nserver 0\n", "\nserver 1\n", "\nworker 0\n", "\nworker 1\n",
		"DMLC_ROLE=scheduler\n", "DMLC_ROLE=server\n", "DMLC_ROLE=worker\n",
		"env      PLAIN=visible\n",
		"env      SPINDLE_JOB_SECRET=<redacted>\n",
		"env      DB_PASSWORD=<redacted>\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	for _, s := range secrets {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("dry run shows the secret %q:\n%s", s, stdout)
		}
	}
	// Every option is in the resolved job.
	NewOptions(Streams{}, nil, nil).flagSet().VisitAll(func(f *flag.Flag) {
		if _, alias := aliases[f.Name]; alias || f.Name == "help" || f.Name == "dry-run" || f.Name == "jobname" {
			return
		}
		if !strings.Contains(stdout, "\n  "+f.Name+" ") {
			t.Errorf("dry run lacks option %s:\n%s", f.Name, stdout)
		}
	})
}

func TestDryRunRedactsWhatThePlanShows(t *testing.T) {
	t.Parallel()
	plan := func(job.JobSpec, local.Options) ([]job.TaskPlan, error) {
		return []job.TaskPlan{{Role: "worker", Rank: 0, CPU: -1, Command: []string{"./prog", "a b"}, Env: []string{
			"SPINDLE_JOB_SECRET=raw-1", "AWS_SECRET_ACCESS_KEY=raw-2", "github_token=raw-3", "Z=1", "DMLC_ROLE=worker",
		}}}, nil
	}
	code, stdout, stderr := runMain(t, nil, []string{"--dry-run", "-n", "1", "./prog", "a b"},
		noRun(t), func(o *Options) { o.planLocal = plan })
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	want := `
worker 0
  command  ./prog 'a b'
  env      AWS_SECRET_ACCESS_KEY=<redacted>
  env      DMLC_ROLE=worker
  env      SPINDLE_JOB_SECRET=<redacted>
  env      Z=1
  env      github_token=<redacted>
`
	if !strings.HasSuffix(stdout, want) {
		t.Errorf("dry run ends with\n%s\nwant\n%s", stdout, want)
	}
	if strings.Contains(stdout, "raw-") {
		t.Errorf("dry run shows a secret:\n%s", stdout)
	}
}

// TestYARNDryRun: a dry run on YARN names the application, every
// container and every file that would be staged, redacts secrets, and
// needs no cluster.
func TestYARNDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	extra := filepath.Join(dir, "extra.txt")
	arch := filepath.Join(dir, "dict.tar.gz")
	for p, body := range map[string]string{prog: "#!/bin/sh\necho hi\n", extra: "x", arch: "not unpacked by a dry run"} {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := "tok-value-9"
	code, stdout, stderr := runMain(t, nil, []string{"--cluster", "yarn", "--dry-run", "-n", "2", "-s", "1",
		"--files", extra, "--archives", arch + "#words", "--env", "API_TOKEN=" + secret, "--allocation-timeout", "1m",
		"--", prog, "a b"}, noRun(t))
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"YARN application spindle:prog", "staging  hdfs:///user/",
		"container application-master: 512 MB, 1 vcores", "command  ./ps-submit am job.json",
		"container scheduler 0: priority 0, 1024 MB", "container server 0: priority 1", "container worker 0: priority 2", "container worker 1: priority 2",
		"command  './prog' 'a b' 1><LOG_DIR>/stdout", "resource prog\n", "resource extra.txt\n", "resource words\n",
		"words                    ARCHIVE  25 bytes", "extra.txt                FILE     1 bytes",
		"env      API_TOKEN=<redacted>\n", "env      SPINDLE_JOB_SECRET=<redacted>\n",
		"env      DMLC_PS_ROOT_URI=<scheduler-node>\n", "env      DMLC_PS_ROOT_PORT=<scheduler-port>\n",
		"env      SPINDLE_REGISTER_TIMEOUT=180\n", "env      LD_LIBRARY_PATH=./lib\n",
		"job.json", "(written at submission)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Errorf("dry run shows the secret:\n%s", stdout)
	}
}

// TestYARNWithoutResourceManager: with no ResourceManager to reach, a
// YARN submission fails promptly and says where it tried.
func TestYARNWithoutResourceManager(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := nettest.FreePort(t) // nobody listens there
	site := fmt.Sprintf(`<configuration>
<property><name>yarn.resourcemanager.address</name><value>127.0.0.1:%d</value></property>
<property><name>yarn.client.failover-max-attempts</name><value>1</value></property>
</configuration>`, port)
	if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	var stdout, stderr bytes.Buffer
	code := Main(ctx, []string{"--cluster", "yarn", "-n", "1", "--", "/bin/true"}, nil, &stdout, &stderr,
		func(k string) (string, bool) {
			if k == "HADOOP_CONF_DIR" {
				return dir, true
			}
			return "", false
		}, nil)
	if code != 1 || !strings.Contains(stderr.String(), fmt.Sprint(port)) {
		t.Errorf("exit %d after %v, stderr %q; want 1 naming port %d", code, time.Since(start), stderr.String(), port)
	}
}

func TestRunHandsTheJobToTheLauncher(t *testing.T) {
	t.Parallel()
	var gotSpec job.JobSpec
	var gotOpts local.Options
	planned := false
	planner := func(context.Context, []string, int64) ([]tracker.Shard, error) { planned = true; return nil, nil }
	run := func(ctx context.Context, spec job.JobSpec, opts local.Options) (job.Result, error) {
		gotSpec, gotOpts = spec, opts
		_, _ = opts.Planner(ctx, spec.Inputs, spec.SplitSize)
		opts.Log.Debug("launcher debug message")
		fmt.Fprintln(opts.Stdout, "[worker 0] hello")
		opts.OnStatus(tracker.Status{State: tracker.Running, Roles: []tracker.RoleStatus{{Role: "worker", Want: 1, Running: 1}}})
		return job.Result{State: tracker.Succeeded, Output: spec.Output, Wall: 1500 * time.Millisecond,
			Tasks: []job.TaskResult{{Role: "worker", Attempts: 1}}}, nil
	}
	var stdout, stderr bytes.Buffer
	environ := []string{"PATH=/bin", "FOO=bar"}
	code := Main(context.Background(), []string{"-n", "1", "--log-level", "DEBUG", "--output", "/tmp/m", "--worker-memory", "2g",
		"--input", "in.txt", "--split-size", "1m", "--cpu-bind", "cores", "--", "./prog"},
		strings.NewReader(""), &stdout, &stderr, func(string) (string, bool) { return "", false }, environ,
		WithPlanner(planner), withRunner(run))
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if gotSpec.Name != "spindle:prog" || gotSpec.WorkerMemoryMB != 2048 || gotSpec.SplitSize != 1<<20 ||
		gotSpec.Output != "/tmp/m" || gotSpec.LogLevel != "debug" || len(gotSpec.Inputs) != 1 {
		t.Errorf("spec %+v", gotSpec)
	}
	if strings.Join(gotOpts.Environ, " ") != "PATH=/bin FOO=bar" {
		t.Errorf("environ %q, want the injected one", gotOpts.Environ)
	}
	if !planned {
		t.Error("the planner given with WithPlanner was not passed on")
	}
	if gotOpts.CPUBind != local.CPUBindCores {
		t.Errorf("CPU binding %v, want --cpu-bind's cores", gotOpts.CPUBind)
	}
	if gotOpts.Log.Logger.GetLevel() != logrus.DebugLevel {
		t.Errorf("log level %v, want debug", gotOpts.Log.Logger.GetLevel())
	}
	if stdout.String() != "[worker 0] hello\n" {
		t.Errorf("standard output %q, want the task's line", stdout.String())
	}
	for _, want := range []string{"launcher debug message", "workers 1/1\n", "job spindle:prog SUCCEEDED after 1.5s\n", "  model       /tmp/m\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("standard error lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		res      job.Result
		err      error
		level    string
		code     int
		want     []string
		dontWant []string
	}{
		{"succeeded", job.Result{State: tracker.Succeeded}, nil, "info", 0, []string{"SUCCEEDED"}, []string{"ps-submit:"}},
		{"failed", job.Result{State: tracker.Failed, Tasks: []job.TaskResult{{Role: "worker", Attempts: 3, ExitCode: 3}}},
			errors.New("worker 0 failed: exit code 3 on attempt 3 of 3; its last lines:\n    oops"), "info", 1,
			[]string{"ps-submit: worker 0 failed: exit code 3 on attempt 3 of 3; its last lines:\n    oops\njob spindle:prog FAILED", "workers 3 (attempts 3)"}, nil},
		{"killed", job.Result{State: tracker.Killed}, fmt.Errorf("job: stopped: %w", context.Canceled), "info", 1,
			[]string{"ps-submit: job: stopped: context canceled\n", "KILLED"}, nil},
		{"ended without success or error", job.Result{State: tracker.Failed, Status: tracker.Status{Diagnostics: "lost"}}, nil, "info", 1,
			[]string{"ps-submit: job ended FAILED: lost\n"}, nil},
		{"launcher warnings at warn", job.Result{State: tracker.Succeeded}, nil, "warn", 0, []string{"a warning"}, []string{"an info"}},
		{"launcher info hidden at error", job.Result{State: tracker.Succeeded}, nil, "ERROR", 0, nil, []string{"a warning", "an info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := func(_ context.Context, _ job.JobSpec, opts local.Options) (job.Result, error) {
				opts.Log.Info("an info")
				opts.Log.Warn("a warning")
				return tt.res, tt.err
			}
			code, _, stderr := runMain(t, nil, []string{"-n", "1", "--log-level", tt.level, "./prog"}, withRunner(run))
			if code != tt.code {
				t.Errorf("exit status %d, want %d", code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("standard error lacks %q:\n%s", w, stderr)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(stderr, w) {
					t.Errorf("standard error has %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// The tests below run real jobs through local.Run.

func TestEndToEndLocalJob(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to run tasks with")
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		wantOut    []string
		wantErr    []string
		notWantOut []string
	}{
		{"plain workers", []string{"-n", "2", "--", "/bin/sh", "-c", "echo hello $DMLC_TASK_ID"}, 0,
			[]string{"[worker 0] hello 0\n", "[worker 1] hello 1\n"},
			[]string{"job spindle:sh SUCCEEDED after ", "  exit codes  workers 0 0\n"}, []string{"scheduler"}},
		{"no servers, a scheduler", []string{"-n", "2", "-s", "0", "--", "/bin/sh", "-c", "echo role $DMLC_ROLE $DMLC_NUM_SERVER $DMLC_NUM_WORKER"}, 0,
			[]string{"[scheduler 0] role scheduler 0 2\n", "[worker 0] role worker 0 2\n", "[worker 1] role worker 0 2\n"},
			[]string{"  exit codes  scheduler 0 · workers 0 0\n"}, []string{"server"}},
		{"scheduler, servers and workers", []string{"-n", "2", "-s", "1", "/bin/sh", "-c", "echo role $DMLC_ROLE $DMLC_NUM_SERVER $DMLC_NUM_WORKER"}, 0,
			[]string{"[scheduler 0] role scheduler 1 2\n", "[server 0] role server 1 2\n", "[worker 1] role worker 1 2\n"},
			[]string{"  exit codes  scheduler 0 · servers 0 · workers 0 0\n"}, nil},
		{"inherited and given environment", []string{"-n", "1", "--env", "GIVEN=yes", "--worker-env", "W=w", "--",
			"/bin/sh", "-c", "echo $INHERITED $GIVEN $W"}, 0,
			[]string{"[worker 0] from-environ yes w\n"}, nil, nil},
		{"a failing task, retried", []string{"-n", "1", "--max-attempts", "2", "--", "/bin/sh", "-c", "echo oops; exit 3"}, 1,
			[]string{"[worker 0] oops\n", "[worker 0#1] oops\n"},
			[]string{"ps-submit: worker 0 failed: exit code 3 on attempt 2 of 2", "    oops\n", "job spindle:sh FAILED after ",
				"  exit codes  workers 3 (attempts 2)\n"}, nil},
		{"a missing program", []string{"-n", "1", "--max-attempts", "1", "--", "/nonexistent/prog"}, 1,
			nil, []string{"ps-submit: ", "/nonexistent/prog", "FAILED"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			environ := []string{"PATH=" + os.Getenv("PATH"), "INHERITED=from-environ"}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := Main(ctx, tt.args, strings.NewReader(""), &stdout, &stderr, func(string) (string, bool) { return "", false }, environ)
			if code != tt.code {
				t.Errorf("exit status %d, want %d", code, tt.code)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("standard output lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.notWantOut {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("standard output has %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("standard error lacks %q:\n%s", w, stderr.String())
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
}

func TestEndToEndInterrupt(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to run tasks with")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var stdout bytes.Buffer
	out := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("sleeping")) {
			select {
			case <-started:
			default:
				close(started)
			}
		}
		return stdout.Write(p)
	})
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"-n", "2", "--", "/bin/sh", "-c", "echo sleeping; exec sleep 60"}, strings.NewReader(""), out, &stderr,
			func(string) (string, bool) { return "", false }, []string{"PATH=" + os.Getenv("PATH")})
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the tasks did not start")
	}
	begin := time.Now()
	cancel() // as SIGINT does through signal.NotifyContext
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Main did not return after its context was cancelled")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("stopping took %v", d)
	}
	for _, w := range []string{"ps-submit: job: stopped: context canceled\n", "job spindle:sh KILLED after "} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("standard error lacks %q:\n%s", w, stderr.String())
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestLocalDryRunShowsCPUsAndIPC: a local dry run shows the CPU of each
// bound server and worker, and what the launcher adds to every task's
// environment.
func TestLocalDryRunShowsCPUsAndIPC(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runMain(t, nil, []string{"--dry-run", "-n", "2", "-s", "2", "--cpu-bind", "cores", "./prog"}, noRun(t))
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"\nscheduler 0\n  command  ./prog\n  env      ",
		"\nserver 1\n  command  ./prog\n  cpu      ",
		"\nworker 0\n  command  ./prog\n  cpu      ",
		"  env      GOMAXPROCS=2\n",
		"  env      DMLC_LOCAL=1\n",
		"  env      SPINDLE_IPC_DIR=<ipc-dir>\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}

// TestYARNPathsNeedAScheme checks that a job on YARN refuses an input,
// output or checkpoint directory that names no file system, each by its
// flag, before anything is staged or submitted: such a path is this
// machine's, which the containers do not see. So is a command given as a
// relative path that is not here to ship.
func TestYARNPathsNeedAScheme(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runMain(t, nil, []string{"--cluster", "yarn", "--dry-run", "-n", "1", "-s", "1",
		"--input", "data/train.libsvm", "--input", "hdfs:///data/more.libsvm", "--input", "file:///shared/extra.libsvm",
		"--output", "/tmp/model", "--checkpoint-dir", "hdfs:///ckpt", "--", "./ps-lr"}, noRun(t))
	for _, want := range []string{"--input data/train.libsvm: a path without a scheme", "--output /tmp/model: a path without a scheme",
		"give hdfs:///path for HDFS, or file:///path",
		`command ./ps-lr: no such file here to ship, and no --files or --archives entry named "ps-lr" provides it`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, fine := range []string{"more.libsvm", "extra.libsvm", "ckpt"} {
		if strings.Contains(stderr, fine) {
			t.Errorf("stderr names %s, which has a scheme:\n%s", fine, stderr)
		}
	}
	if code != 2 || stdout != "" {
		t.Errorf("exit status %d, stdout %q; want 2 and nothing", code, stdout)
	}
}

func TestReportLine(t *testing.T) {
	t.Parallel()
	app := yarn.ApplicationID{ClusterTimestamp: 1795850272794, ID: 3}
	for _, tc := range []struct {
		r    yarn.ApplicationReport
		want string
	}{
		{yarn.ApplicationReport{ID: app, State: yarn.AppAccepted}, "ps-submit: application application_1795850272794_0003 ACCEPTED"},
		{yarn.ApplicationReport{ID: app, State: yarn.AppFinished, FinalStatus: yarn.FinalSucceeded}, "ps-submit: application application_1795850272794_0003 FINISHED SUCCEEDED"},
		{yarn.ApplicationReport{ID: app, State: yarn.AppFinished, FinalStatus: yarn.FinalFailed}, "ps-submit: application application_1795850272794_0003 FINISHED FAILED"},
		{yarn.ApplicationReport{ID: app, State: yarn.AppFailed, FinalStatus: yarn.FinalFailed}, "ps-submit: application application_1795850272794_0003 FAILED"},
		{yarn.ApplicationReport{ID: app, State: yarn.AppRunning, CurrentAttempt: yarn.AttemptID{App: app, Attempt: 2}},
			"ps-submit: application application_1795850272794_0003 RUNNING (attempt 2 of the ApplicationMaster)"},
	} {
		if got := reportLine(tc.r); got != tc.want {
			t.Errorf("reportLine(%v %v) = %q, want %q", tc.r.State, tc.r.FinalStatus, got, tc.want)
		}
	}
}
