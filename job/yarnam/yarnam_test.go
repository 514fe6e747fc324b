package yarnam

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// TestShellWords runs quoted commands the way a NodeManager's launch
// script does: bash -c "<words joined by spaces>".
func TestShellWords(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"plain", []string{"echo", "a", "b"}, "a b\n"},
		{"inner_expansion", []string{"/bin/sh", "-c", `echo "x$FOO" 'q'`}, "xbar q\n"},
		{"specials", []string{"printf", `%s|`, `a"b`, `c\d`, "e`f", "g'h", "$FOO", ""}, "a\"b|c\\d|e`f|g'h|$FOO||"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			script := `exec /bin/bash -c "` + strings.Join(shellWords(tt.args), " ") + `"`
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "FOO=bar")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			if string(out) != tt.want {
				t.Errorf("%s printed %q, want %q", script, out, tt.want)
			}
		})
	}
}

func TestDescribeExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code int32
		want string
	}{
		{"own_code", 3, "exit status 3"},
		{"killed_by_am", yarn.ExitKilledByAppMaster, "exit status -105 (KILLED_BY_APPMASTER)"},
		{"pmem", yarn.ExitKilledExceededPMem, "exit status -104 (KILLED_EXCEEDED_PMEM: over its memory limit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := describeExitStatus(tt.code); got != tt.want {
				t.Errorf("describeExitStatus(%d) = %q, want %q", tt.code, got, tt.want)
			}
		})
	}
}

// TestAsks checks that the asks follow the launches waiting for a
// container, per priority, with each role's resources, and are sent only
// when they change.
func TestAsks(t *testing.T) {
	t.Parallel()
	c := &Cluster{spec: job.JobSpec{NumWorkers: 2, NumServers: 1, WorkerMemoryMB: 256, ServerMemoryMB: 512}, outst: map[int32]int32{}, log: quietLog()}
	add := func(role conf.Role, rank int) {
		if err := c.Start(t.Context(), job.Launch{Task: job.Task{Role: role, Rank: rank}}); err != nil {
			t.Fatal(err)
		}
	}
	add(conf.RoleScheduler, 0)
	got := c.asksLocked()
	if len(got) != 1 || got[0].Priority != prioScheduler || got[0].Count != 1 || got[0].Resource.MemoryMB != 512 {
		t.Fatalf("first asks = %+v, want one scheduler container", got)
	}
	if again := c.asksLocked(); len(again) != 0 {
		t.Fatalf("unchanged asks sent again: %+v", again)
	}
	// The scheduler's container came.
	if ln := c.matchLocked(yarn.Container{Priority: prioScheduler}); ln == nil || ln.l.Task.Role != conf.RoleScheduler {
		t.Fatalf("scheduler's container matched %+v", ln)
	}
	c.outst[prioScheduler] = 0
	add(conf.RoleServer, 0)
	add(conf.RoleWorker, 0)
	add(conf.RoleWorker, 1)
	got = c.asksLocked()
	sort.Slice(got, func(a, b int) bool { return got[a].Priority < got[b].Priority })
	if len(got) != 2 || got[0].Priority != prioServer || got[0].Count != 1 || got[1].Priority != prioWorker ||
		got[1].Count != 2 || got[1].Resource.MemoryMB != 256 {
		t.Fatalf("asks after the scheduler came = %+v", got)
	}
	// A surplus container is released.
	if ln := c.matchLocked(yarn.Container{Priority: prioScheduler, ID: yarn.ContainerID{ID: 7}}); ln != nil || len(c.releases) != 1 {
		t.Fatalf("surplus container matched %+v, releases %v", ln, c.releases)
	}
}

// buildAMJob builds the test ApplicationMaster (internal/amjob). The
// NodeManagers of the test cluster run on this machine, so the AM command
// can name the binary directly.
func buildAMJob(t *testing.T) string {
	t.Helper()
	return hadooptest.Build(t, "github.com/spindle-ps/spindle/job/yarnam/internal/amjob")
}

// liveContainers lists, with Hadoop's yarn CLI, the containers of attempt
// the ResourceManager still knows as running; ok is false when the CLI is
// not available.
func liveContainers(t *testing.T, attempt yarn.AttemptID) (string, bool) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "minicluster.sh")
	if os.Getenv("SPINDLE_MINICLUSTER_DIR") == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, "yarn", "container", "-list", attempt.String()).Output()
	if err != nil {
		t.Logf("not checking with Hadoop's yarn CLI: %v", err)
		return "", false
	}
	return string(out), true
}

func TestHadoopRunAM(t *testing.T) {
	cl := hadooptest.Connect(t)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel0()
	rm, err := yarn.NewRMClient(ctx0, cl.Conf, cl.User)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	bin := buildAMJob(t)
	small := func(s job.JobSpec) job.JobSpec {
		s.WorkerMemoryMB, s.ServerMemoryMB = 128, 128
		return s
	}
	rootRE := regexp.MustCompile(`^(scheduler|server|worker) (\S+):(\d+)$`)
	tests := []struct {
		name      string
		spec      job.JobSpec
		args      []string // for amjob
		want      yarn.FinalStatus
		wantDiags []string
		// check looks at the containers' stdout, keyed by container id.
		check func(t *testing.T, stdout map[string]string)
	}{
		{
			name: "three_workers",
			spec: small(job.JobSpec{Command: []string{"/bin/sh", "-c", "echo task $DMLC_TASK_ID"}, NumWorkers: 3, MaxAttempts: 1}),
			want: yarn.FinalSucceeded, wantDiags: []string{"all 3 tasks exited 0"},
			check: func(t *testing.T, stdout map[string]string) {
				for _, w := range []string{"task 0\n", "task 1\n", "task 2\n"} {
					n := 0
					for _, s := range stdout {
						if s == w {
							n++
						}
					}
					if n != 1 {
						t.Errorf("%d containers printed %q, want 1: %q", n, w, stdout)
					}
				}
			},
		},
		{
			name: "retry_succeeds",
			spec: small(job.JobSpec{Command: []string{"/bin/sh", "-c", `echo attempt $DMLC_NUM_ATTEMPT; test "$DMLC_NUM_ATTEMPT" -ge 1 || exit 1`},
				NumWorkers: 1, MaxAttempts: 2}),
			want: yarn.FinalSucceeded, wantDiags: []string{"all 1 tasks exited 0"},
			check: func(t *testing.T, stdout map[string]string) {
				var got []string
				for _, s := range stdout {
					if s != "" {
						got = append(got, s)
					}
				}
				sort.Strings(got)
				if strings.Join(got, "") != "attempt 0\nattempt 1\n" {
					t.Errorf("containers printed %q, want attempts 0 and 1", got)
				}
			},
		},
		{
			name: "always_exit_3",
			spec: small(job.JobSpec{Command: []string{"/bin/sh", "-c", "echo failing >&2; exit 3"}, NumWorkers: 1, MaxAttempts: 2}),
			want: yarn.FinalFailed, wantDiags: []string{"worker 0 failed", "exit status 3", "container_", "attempt 2 of 2"},
		},
		{
			// Workers as large as the largest container: the NodeManager
			// that runs the AM cannot hold one besides it, the other holds
			// one, busy until the job ends, so the second worker never
			// gets a container.
			name: "allocation_timeout",
			spec: job.JobSpec{Command: []string{"sleep", "120"}, NumWorkers: 2, MaxAttempts: 1, WorkerMemoryMB: maxAllocationMB(t, cl.Conf)},
			args: []string{"-allocation-timeout", "3s"},
			want: yarn.FinalFailed, wantDiags: []string{"containers did not come within 3s: still missing 1 worker"},
		},
		{
			name: "scheduler_server_workers",
			spec: small(job.JobSpec{Command: []string{"/bin/sh", "-c", "echo $DMLC_ROLE $DMLC_PS_ROOT_URI:$DMLC_PS_ROOT_PORT"},
				NumWorkers: 2, NumServers: 1, MaxAttempts: 1}),
			want: yarn.FinalSucceeded, wantDiags: []string{"all 4 tasks exited 0"},
			check: func(t *testing.T, stdout map[string]string) {
				roles := map[string]int{}
				roots := map[string]bool{}
				for _, s := range stdout {
					if s == "" {
						continue
					}
					m := rootRE.FindStringSubmatch(strings.TrimSpace(s))
					if m == nil {
						t.Errorf("container printed %q", s)
						continue
					}
					roles[m[1]]++
					roots[m[2]+":"+m[3]] = true
				}
				if roles["scheduler"] != 1 || roles["server"] != 1 || roles["worker"] != 2 || len(roots) != 1 {
					t.Errorf("roles %v, roots %v; want 1 scheduler, 1 server, 2 workers agreeing on one root", roles, roots)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			js, err := json.Marshal(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			app, err := rm.NewApplication(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = rm.Submit(ctx, yarn.Submission{
				ID:          app.ID,
				Name:        "spindle-amjob-" + tt.name,
				Type:        "SPINDLE",
				Command:     append(append([]string{bin}, tt.args...), append(shellWords([]string{string(js)}), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr")...),
				Env:         map[string]string{"HADOOP_CONF_DIR": os.Getenv("HADOOP_CONF_DIR")},
				Resource:    yarn.Resource{MemoryMB: 128, VCores: 1},
				MaxAttempts: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if t.Failed() {
					for c, s := range hadooptest.ContainerFiles(t, app.ID.String(), "stderr") {
						t.Logf("%s stderr:\n%s", c, s)
					}
				}
			})
			r := waitApp(ctx, t, rm, app.ID)
			t.Logf("final report: state %v, final status %v, diagnostics %q", r.State, r.FinalStatus, r.Diagnostics)
			if r.State != yarn.AppFinished || r.FinalStatus != tt.want {
				t.Errorf("state %v final status %v, want FINISHED %v", r.State, r.FinalStatus, tt.want)
			}
			for _, d := range tt.wantDiags {
				if !strings.Contains(r.Diagnostics, d) {
					t.Errorf("diagnostics %q do not contain %q", r.Diagnostics, d)
				}
			}
			stdout := hadooptest.ContainerFiles(t, app.ID.String(), "stdout")
			if tt.check != nil {
				if len(stdout) == 0 {
					t.Logf("container stdout no longer on local disk; not checking it")
				} else {
					tt.check(t, stdout)
				}
			}
			if tt.want == yarn.FinalFailed {
				if out, ok := liveContainers(t, r.CurrentAttempt); ok {
					t.Logf("yarn container -list %v:\n%s", r.CurrentAttempt, out)
					if strings.Contains(out, "container_") {
						t.Errorf("containers of %v still listed after the application finished", r.CurrentAttempt)
					}
				}
			}
		})
	}
}

// waitApp polls app's report until it is terminal.
func waitApp(ctx context.Context, t *testing.T, rm *yarn.RMClient, id yarn.ApplicationID) yarn.ApplicationReport {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last yarn.ApplicationReport
	for {
		r, err := rm.ApplicationReport(ctx, id)
		if err != nil {
			t.Fatalf("report of %v (last %+v): %v", id, last, err)
		}
		if last = r; r.State.Terminal() {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %v: %v; last report %+v", id, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// TestHadoopRunAMKilled kills a running job through the ResourceManager:
// the application ends KILLED and no container process outlives it.
func TestHadoopRunAMKilled(t *testing.T) {
	cl := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rm, err := yarn.NewRMClient(ctx, cl.Conf, cl.User)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	bin := buildAMJob(t)
	marker := "spindle-amjob-kill-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// The marker stays in sh's arguments while sleep runs.
	spec := job.JobSpec{Command: []string{"/bin/sh", "-c", "sleep 600; : " + marker}, NumWorkers: 2, MaxAttempts: 1, WorkerMemoryMB: 128}
	js, _ := json.Marshal(spec)
	app, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = rm.Submit(ctx, yarn.Submission{
		ID: app.ID, Name: "spindle-amjob-kill", Type: "SPINDLE",
		Command:     append([]string{bin}, append(shellWords([]string{string(js)}), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr")...),
		Env:         map[string]string{"HADOOP_CONF_DIR": os.Getenv("HADOOP_CONF_DIR")},
		Resource:    yarn.Resource{MemoryMB: 128, VCores: 1},
		MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for c, s := range hadooptest.ContainerFiles(t, app.ID.String(), "stderr") {
				t.Logf("%s stderr:\n%s", c, s)
			}
		}
	})
	// Wait (bounded) until both task processes run.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for markedProcesses(marker) < 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("task processes did not start: %v", ctx.Err())
		case <-tick.C:
		}
	}
	if _, err := rm.Kill(ctx, app.ID); err != nil {
		t.Fatal(err)
	}
	r := waitApp(ctx, t, rm, app.ID)
	t.Logf("final report: state %v, final status %v, diagnostics %q", r.State, r.FinalStatus, r.Diagnostics)
	if r.State != yarn.AppKilled {
		t.Errorf("state %v, want KILLED", r.State)
	}
	deadline := time.Now().Add(30 * time.Second)
	for markedProcesses(marker) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d task processes still running 30s after the application ended", markedProcesses(marker))
		}
		<-tick.C
	}
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

// maxAllocationMB returns the largest container the cluster grants
// (yarn.scheduler.maximum-allocation-mb), which the mini cluster sets to
// a NodeManager's whole memory.
func maxAllocationMB(t *testing.T, hc conf.HadoopConf) int {
	t.Helper()
	mb, err := strconv.Atoi(hc["yarn.scheduler.maximum-allocation-mb"])
	if err != nil || mb < 256 {
		t.Fatalf("yarn.scheduler.maximum-allocation-mb %q in the cluster's configuration: want a number of MB", hc["yarn.scheduler.maximum-allocation-mb"])
	}
	return mb
}
