package yarnam

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
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
// testCluster is a Cluster without its allocate loop, for the tests of
// its bookkeeping.
func testCluster(spec job.JobSpec) *Cluster {
	return &Cluster{spec: spec, outst: map[int32]int32{}, log: quietLog(), starting: map[int64]*launch{},
		byCont: map[yarn.ContainerID]*launch{}, bad: map[job.Task]map[yarn.NodeID]bool{}, seen: map[yarn.NodeID]bool{},
		blacklist: map[yarn.NodeID]bool{}, reserve: map[int32]int32{}, nodes: 2}
}

// TestAsks: the scheduler's launch asks for the whole gang at once;
// containers that come before their launches are held for them, and
// surplus ones released.
func TestAsks(t *testing.T) {
	t.Parallel()
	c := testCluster(job.JobSpec{NumWorkers: 2, NumServers: 1, WorkerMemoryMB: 256, ServerMemoryMB: 512})
	id := int64(0)
	add := func(role conf.Role, rank int) {
		id++
		if err := c.Start(t.Context(), job.Launch{ID: id, Task: job.Task{Role: role, Rank: rank}}); err != nil {
			t.Fatal(err)
		}
	}
	byPrio := func(asks []yarn.Ask) map[int32]int32 {
		m := map[int32]int32{}
		for _, a := range asks {
			m[a.Priority] = a.Count
			if want := c.resource(a.Priority); a.Resource != want {
				t.Errorf("ask %+v, want resource %+v", a, want)
			}
		}
		return m
	}
	add(conf.RoleScheduler, 0)
	got := byPrio(c.asksLocked())
	if want := map[int32]int32{prioScheduler: 1, prioServer: 1, prioWorker: 2}; !maps.Equal(got, want) {
		t.Fatalf("first asks %v, want the whole gang %v", got, want)
	}
	if again := c.asksLocked(); len(again) != 0 {
		t.Fatalf("unchanged asks sent again: %+v", again)
	}
	// The scheduler's container and a worker's came.
	if ln := c.matchLocked(yarn.Container{Priority: prioScheduler}); ln == nil || ln.l.Task.Role != conf.RoleScheduler {
		t.Fatalf("scheduler's container matched %+v", ln)
	}
	c.outst[prioScheduler] = 0
	wct := yarn.Container{Priority: prioWorker, ID: yarn.ContainerID{ID: 3}, Node: yarn.NodeID{Host: "nm", Port: 1}}
	if ln := c.matchLocked(wct); ln != nil || len(c.held) != 1 || len(c.releases) != 0 {
		t.Fatalf("early worker container matched %+v, held %v, released %v", ln, c.held, c.releases)
	}
	c.outst[prioWorker] = 1
	if got := c.asksLocked(); len(got) != 0 {
		t.Fatalf("asks changed while the held container stands for a launch to come: %+v", got)
	}
	// The scheduler is placed: the rest start, the held container goes to
	// worker 0, and nothing new is asked for.
	add(conf.RoleServer, 0)
	add(conf.RoleWorker, 0)
	add(conf.RoleWorker, 1)
	place := c.matchHeldLocked()
	if len(place) != 1 || place[0].l.Task != (job.Task{Role: conf.RoleWorker}) || place[0].ct.ID != wct.ID {
		t.Fatalf("held container placed %+v", place)
	}
	if got := c.asksLocked(); len(got) != 0 {
		t.Fatalf("asks after the rest started = %+v, want none", got)
	}
	// A surplus container is released.
	if ln := c.matchLocked(yarn.Container{Priority: prioScheduler, ID: yarn.ContainerID{ID: 7}}); ln != nil || len(c.releases) != 1 {
		t.Fatalf("surplus container matched %+v, releases %v", ln, c.releases)
	}
	// The scheduler starts again alone while the others run: it asks
	// for its own container, not for the gang again.
	add(conf.RoleScheduler, 0)
	if got := byPrio(c.asksLocked()); !maps.Equal(got, map[int32]int32{prioScheduler: 1}) {
		t.Fatalf("asks of a scheduler started again alone %v, want its own container only", got)
	}
	// StopAll's bookkeeping gives back what is held, and the next run's
	// scheduler asks for the gang again.
	c.held = append(c.held, yarn.Container{Priority: prioWorker, ID: yarn.ContainerID{ID: 9}})
	c.releaseHeldLocked()
	if len(c.held) != 0 || len(c.reserve) != 0 || len(c.releases) != 2 || c.gang {
		t.Errorf("after release: held %v reserve %v releases %v gang %v", c.held, c.reserve, c.releases, c.gang)
	}
}

// TestScaleOutAsks: a server started to join a running job (beyond the
// spec's servers, after the gang) asks for one more server container;
// one stopped while it waits for its container asks for none.
func TestScaleOutAsks(t *testing.T) {
	t.Parallel()
	c := testCluster(job.JobSpec{NumWorkers: 1, NumServers: 1, ServerMemoryMB: 512})
	start := func(id int64, role conf.Role, rank int) {
		if err := c.Start(t.Context(), job.Launch{ID: id, Task: job.Task{Role: role, Rank: rank}}); err != nil {
			t.Fatal(err)
		}
	}
	start(1, conf.RoleScheduler, 0)
	start(2, conf.RoleServer, 0)
	start(3, conf.RoleWorker, 0)
	c.asksLocked()
	for i, p := range []int32{prioScheduler, prioServer, prioWorker} {
		if ln := c.matchLocked(yarn.Container{Priority: p, ID: yarn.ContainerID{ID: int64(i + 1)}}); ln == nil {
			t.Fatalf("the gang's container of priority %d matched no launch", p)
		}
		c.outst[p] = 0
	}
	if got := c.asksLocked(); len(got) != 0 {
		t.Fatalf("asks once the gang is placed: %+v", got)
	}
	start(4, conf.RoleServer, 1)
	got := c.asksLocked()
	if len(got) != 1 || got[0].Priority != prioServer || got[0].Count != 1 || got[0].Resource != c.resource(prioServer) {
		t.Fatalf("asks of a server joining %+v, want one server container", got)
	}
	start(5, conf.RoleServer, 2)
	if got := c.asksLocked(); len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("asks of a second server joining %+v, want two server containers", got)
	}
	if err := c.Stop(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
	if got := c.asksLocked(); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("asks once the second joiner is stopped %+v, want one server container", got)
	}
	if ln := c.matchLocked(yarn.Container{Priority: prioServer, ID: yarn.ContainerID{ID: 9}}); ln == nil || ln.l.ID != 4 {
		t.Fatalf("the server container went to %+v, want server 1's launch", ln)
	}
}

// TestScaleOutWorkerAsks: a worker started to join a running job
// (beyond the spec's workers, after the gang) asks for one more worker
// container of the workers' size, which goes to it.
func TestScaleOutWorkerAsks(t *testing.T) {
	t.Parallel()
	c := testCluster(job.JobSpec{NumWorkers: 1, NumServers: 1, WorkerMemoryMB: 768})
	start := func(id int64, role conf.Role, rank int) {
		if err := c.Start(t.Context(), job.Launch{ID: id, Task: job.Task{Role: role, Rank: rank}}); err != nil {
			t.Fatal(err)
		}
	}
	start(1, conf.RoleScheduler, 0)
	start(2, conf.RoleServer, 0)
	start(3, conf.RoleWorker, 0)
	c.asksLocked()
	for i, p := range []int32{prioScheduler, prioServer, prioWorker} {
		if ln := c.matchLocked(yarn.Container{Priority: p, ID: yarn.ContainerID{ID: int64(i + 1)}}); ln == nil {
			t.Fatalf("the gang's container of priority %d matched no launch", p)
		}
		c.outst[p] = 0
	}
	start(4, conf.RoleWorker, 1)
	got := c.asksLocked()
	if len(got) == 0 || got[0].Priority != prioWorker || got[0].Count != 1 || got[0].Resource != c.resource(prioWorker) {
		t.Fatalf("asks of a worker joining %+v, want one worker container", got)
	}
	if got[0].Resource.MemoryMB != 768 {
		t.Errorf("the joining worker's container has %d MB, want the workers' 768", got[0].Resource.MemoryMB)
	}
	if ln := c.matchLocked(yarn.Container{Priority: prioWorker, ID: yarn.ContainerID{ID: 9}}); ln == nil || ln.l.ID != 4 {
		t.Fatalf("the worker container went to %+v, want worker 1's launch", ln)
	}
}

// TestGangOfAScaledJob: a run of a job whose servers and workers
// scaled (a whole restart) asks at once for the servers and workers it
// starts with, not the spec's.
func TestGangOfAScaledJob(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		servers, workers int
		want             map[int32]int32
	}{
		{0, 0, map[int32]int32{prioScheduler: 1, prioServer: 2, prioWorker: 3}},
		{1, 5, map[int32]int32{prioScheduler: 1, prioServer: 1, prioWorker: 5}},
		{3, 1, map[int32]int32{prioScheduler: 1, prioServer: 3, prioWorker: 1}},
	} {
		c := testCluster(job.JobSpec{NumWorkers: 3, NumServers: 2})
		l := job.Launch{ID: 1, Task: job.Task{Role: conf.RoleScheduler}, Servers: tt.servers, Workers: tt.workers}
		if err := c.Start(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		got := map[int32]int32{}
		for _, a := range c.asksLocked() {
			got[a.Priority] = a.Count
		}
		if !maps.Equal(got, tt.want) {
			t.Errorf("run of %d servers and %d workers: asks %v, want %v", tt.servers, tt.workers, got, tt.want)
		}
	}
}

// TestBlacklistNode: a node is named to YARN by host, or by host:port when
// another NodeManager shares its host; containers that still come on it
// are turned down; the last node is never blacklisted.
func TestBlacklistNode(t *testing.T) {
	t.Parallel()
	c := testCluster(job.JobSpec{NumWorkers: 1})
	a, b, other := yarn.NodeID{Host: "h", Port: 1}, yarn.NodeID{Host: "h", Port: 2}, yarn.NodeID{Host: "g", Port: 3}
	c.seen[a], c.seen[other] = true, true
	c.nodes = 3
	if c.BlacklistNode("nowhere:9") {
		t.Errorf("blacklisted a node without containers")
	}
	if !c.BlacklistNode(other.String()) || !slices.Equal(c.blAdd, []string{"g"}) {
		t.Fatalf("blacklist of a host's only NodeManager sent %v, want [g]", c.blAdd)
	}
	c.seen[b] = true
	if !c.BlacklistNode(a.String()) {
		t.Fatal("second node refused")
	}
	if !slices.Equal(c.blAdd, []string{"g", "h:1"}) {
		t.Fatalf("blacklist sent %v, want [g h:1]", c.blAdd)
	}
	if c.BlacklistNode(b.String()) {
		t.Errorf("blacklisted the last node")
	}
	if got := c.Blacklisted(); !slices.Equal(got, []string{"g:3", "h:1"}) {
		t.Errorf("Blacklisted() = %v", got)
	}
	if err := c.Start(t.Context(), job.Launch{ID: 1, Task: job.Task{Role: conf.RoleWorker}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxNodeRejects; i++ {
		if ln := c.matchLocked(yarn.Container{Priority: prioWorker, Node: a}); ln != nil {
			t.Fatalf("container on a blacklisted node taken (reject %d)", i)
		}
	}
	if ln := c.matchLocked(yarn.Container{Priority: prioWorker, Node: a}); ln == nil {
		t.Errorf("container refused past maxNodeRejects")
	}
}

// TestLostExit names the exit statuses of containers YARN took away.
func TestLostExit(t *testing.T) {
	t.Parallel()
	for _, code := range []int32{yarn.ExitAborted, yarn.ExitDisksFailed, yarn.ExitPreempted, yarn.ExitKilledByResourceManager} {
		if !lostExit(code) {
			t.Errorf("exit status %d not taken as lost", code)
		}
	}
	for _, code := range []int32{0, 1, 137, yarn.ExitKilledExceededPMem, yarn.ExitKilledByAppMaster, yarn.ExitInvalid} {
		if lostExit(code) {
			t.Errorf("exit status %d taken as lost", code)
		}
	}
}

// TestRegisterTimeout: the tasks wait for registration longer than the AM
// waits for a container.
func TestRegisterTimeout(t *testing.T) {
	t.Parallel()
	for _, a := range []time.Duration{0, time.Second, time.Hour} {
		eff := a
		if eff == 0 {
			eff = DefaultAllocationTimeout
		}
		if got := RegisterTimeout(a); got <= eff {
			t.Errorf("RegisterTimeout(%v) = %v, not above the allocation timeout", a, got)
		}
	}
	if got, want := registerTimeoutEnv(3*time.Second), "SPINDLE_REGISTER_TIMEOUT=123"; got != want {
		t.Errorf("registerTimeoutEnv = %q, want %q", got, want)
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
	rm, err := yarn.NewRMClient(ctx0, cl.Conf, yarn.Identity{User: cl.User})
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
	// The first task to run claims its NodeManager (the NodeManagers share
	// this host and its file system) as the bad one, where every task
	// fails.
	claim := filepath.Join(t.TempDir(), "bad-node")
	badNode := `ln -s "$NM_PORT" ` + claim + ` 2>/dev/null; if [ "$(readlink ` + claim + `)" = "$NM_PORT" ]; then echo "failing on NodeManager port $NM_PORT" >&2; exit 5; fi; echo ok`
	tests := []struct {
		name      string
		spec      job.JobSpec
		args      []string // for amjob
		want      yarn.FinalStatus
		wantDiags []string
		// check looks at the containers' stdout, keyed by container id.
		check func(t *testing.T, stdout map[string]string)
		// checkDiag looks at the application's diagnostics.
		checkDiag func(t *testing.T, diag string)
		// checkAMLog looks at the ApplicationMaster's stderr.
		checkAMLog func(t *testing.T, log string)
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
			// What the NodeManager says of the exit comes after, once,
			// with the task's last words.
			checkDiag: func(t *testing.T, diag string) {
				head, rest, ok := strings.Cut(diag, "; the cluster's diagnostics:\n")
				if !ok || !strings.HasSuffix(head, "attempt 2 of 2") || strings.Count(rest, "non-zero exit code 3") != 1 ||
					!strings.Contains(rest, "\n    failing") || strings.Contains(rest, "Container id:") {
					t.Errorf("diagnostics %q; want the failure, then the container's diagnostics once with its stderr", diag)
				}
			},
		},
		{
			// Workers as large as the largest container: the NodeManager
			// that runs the AM cannot hold one besides it, the other holds
			// one, busy until the job ends, so the second worker never
			// gets a container.
			name: "allocation_timeout",
			spec: job.JobSpec{Command: []string{"sleep", "120"}, NumWorkers: 2, MaxAttempts: 1, WorkerMemoryMB: maxAllocationMB(t, cl.Conf)},
			args: []string{"-allocation-timeout", "3s"},
			// Both workers miss out when other tests' containers fill the
			// free NodeManager meanwhile (the Hadoop stage runs packages in
			// parallel), so the count is not checked.
			want: yarn.FinalFailed, wantDiags: []string{"containers did not come within 3s: still missing ", " worker (cluster of "},
		},
		{
			name: "bad_node_blacklisted",
			spec: small(job.JobSpec{Command: []string{"/bin/sh", "-c", badNode}, NumWorkers: 3, MaxAttempts: 3, BlacklistAfter: 1}),
			want: yarn.FinalSucceeded, wantDiags: []string{"all 3 tasks exited 0", "blacklisted after 1 failed launches"},
			checkDiag: func(t *testing.T, diag string) {
				port, err := os.Readlink(claim)
				if err != nil {
					t.Fatalf("no task claimed a node: %v", err)
				}
				if want := ":" + port + " blacklisted"; !strings.Contains(diag, want) {
					t.Errorf("diagnostics %q do not name the bad node (%q)", diag, want)
				}
			},
			checkAMLog: func(t *testing.T, log string) {
				// The mini cluster's NodeManagers stand on hosts of their
				// own and the scheduler names nodes by host alone
				// (include-port-in-node-name is off), so the blacklist
				// request must name the bad node's host without its port
				// for YARN to apply it.
				port, _ := os.Readlink(claim)
				m := regexp.MustCompile(`node="([^"]+):` + regexp.QuoteMeta(port) + `"`).FindStringSubmatch(log)
				if m == nil {
					t.Fatalf("the AM's log names no node with port %s:\n%s", port, log)
				}
				if want := "blacklist_name=" + m[1] + " "; !strings.Contains(log, want) {
					t.Errorf("the AM's log does not show %q:\n%s", want, log)
				}
			},
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
			if tt.checkDiag != nil {
				tt.checkDiag(t, r.Diagnostics)
			}
			if tt.checkAMLog != nil {
				found := false
				for c, s := range hadooptest.ContainerFiles(t, app.ID.String(), "stderr") {
					if strings.HasSuffix(c, "_000001") {
						found = true
						tt.checkAMLog(t, s)
					}
				}
				if !found && os.Getenv("SPINDLE_MINICLUSTER_DIR") != "" {
					t.Errorf("no stderr of the ApplicationMaster's container")
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
	rm, err := yarn.NewRMClient(ctx, cl.Conf, yarn.Identity{User: cl.User})
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

// TestPlaceAsks: the workers' asks name the hosts storing the most
// shards and their racks, beside the ask anywhere, with the same count.
func TestPlaceAsks(t *testing.T) {
	t.Parallel()
	hosts, racks := inputPlaces([]tracker.Shard{
		{Hosts: []string{"b", "10.0.0.2"}, Racks: []string{"/r1"}},
		{Hosts: []string{"a"}, Racks: []string{"/r1"}},
		{Hosts: []string{"b"}, Racks: []string{"/r2"}},
		{},
	})
	if !slices.Equal(hosts, []string{"b", "10.0.0.2", "a"}) || !slices.Equal(racks, []string{"/r1", "/r2"}) {
		t.Fatalf("places %v %v", hosts, racks)
	}
	c := testCluster(job.JobSpec{NumWorkers: 2, WorkerMemoryMB: 256})
	c.SetInputPlaces([]string{"b"}, []string{"/r1"})
	for i := int64(1); i <= 2; i++ {
		if err := c.Start(t.Context(), job.Launch{ID: i, Task: job.Task{Role: conf.RoleWorker, Rank: int(i - 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int32{}
	for _, a := range c.asksLocked() {
		if a.Priority != prioWorker || a.Resource.MemoryMB != 256 || a.StrictLocality {
			t.Errorf("ask %+v", a)
		}
		got[a.Place] = a.Count
	}
	if want := map[string]int32{"": 2, "b": 2, "/r1": 2}; !maps.Equal(got, want) {
		t.Errorf("asks %v, want %v", got, want)
	}
}
