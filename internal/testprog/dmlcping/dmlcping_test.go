package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/yarn"
)

// binDir holds the binaries the tests build, once per test run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dmlcping-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var builds sync.Map // package path -> *built

type built struct {
	once sync.Once
	path string
	err  error
}

// build builds the package pkg (an import path) once per test run and
// returns the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &built{})
	b := v.(*built)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, filepath.Base(pkg))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

const (
	psSubmitPkg = "github.com/spindle-ps/spindle/cmd/ps-submit"
	dmlcpingPkg = "github.com/spindle-ps/spindle/internal/testprog/dmlcping"
)

// wantLines are the lines a job of 3 workers and 2 servers prints, by
// the launcher's name for the task that prints it.
func wantLines() map[string]string {
	return map[string]string{
		"scheduler 0": "scheduler: 5 nodes registered",
		"server 0":    "server 0: registered with 5 nodes",
		"server 1":    "server 1: registered with 5 nodes",
		"worker 0":    "worker 0: registered with 5 nodes",
		"worker 1":    "worker 1: registered with 5 nodes",
		"worker 2":    "worker 2: registered with 5 nodes",
	}
}

// TestLocalDMLCOnlyProgram runs the program with ps-submit --cluster
// local: every task finds the scheduler and is told the number of nodes,
// and the rank each read from the contract is the one the launcher gave
// it.
func TestLocalDMLCOnlyProgram(t *testing.T) {
	psSubmit, prog := build(t, psSubmitPkg), build(t, dmlcpingPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, psSubmit, "--cluster", "local", "-n", "3", "-s", "2", "--", prog)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("ps-submit stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("ps-submit --cluster local: %v, want exit 0", err)
	}
	lines := strings.Split(stdout.String(), "\n")
	for task, want := range wantLines() {
		// The launcher tags each line with the task that printed it.
		line := "[" + task + "] " + want
		if n := count(lines, line); n != 1 {
			t.Errorf("ps-submit printed %q %d times, want once", line, n)
		}
	}
}

// TestHadoopDMLCOnlyProgramOnYARN runs the program with ps-submit
// --cluster yarn: the application succeeds, and each task's container
// printed its line.
func TestHadoopDMLCOnlyProgramOnYARN(t *testing.T) {
	cl := hadooptest.Connect(t)
	psSubmit, prog := build(t, psSubmitPkg), build(t, dmlcpingPkg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, psSubmit, "--cluster", "yarn", "-n", "3", "-s", "2",
		"--worker-memory", "128m", "--server-memory", "128m", "--jobname", "spindle-test-dmlcping", "--", prog)
	// The program is shipped by its path; nothing in the working
	// directory can stand in for it.
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("ps-submit:\n%s", out.String())
	if err != nil {
		t.Fatalf("ps-submit --cluster yarn: %v, want exit 0", err)
	}
	m := regexp.MustCompile(`application (application_\d+_\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("ps-submit printed no application id")
	}
	app, err := yarn.ParseApplicationID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	rm, err := yarn.NewRMClient(ctx, cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	r, err := rm.ApplicationReport(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded {
		t.Errorf("application %v: %v %v (%s), want FINISHED SUCCEEDED", app, r.State, r.FinalStatus, r.Diagnostics)
	}

	stdout := hadooptest.ContainerFiles(t, app.String(), "stdout")
	if len(stdout) == 0 {
		if os.Getenv("SPINDLE_MINICLUSTER_DIR") != "" {
			t.Fatalf("no container stdout of %v in the mini cluster's log dirs", app)
		}
		t.Logf("container stdout not on local disk; not checking it")
		return
	}
	byLine := map[string][]string{} // line -> containers that printed it
	for c, s := range stdout {
		t.Logf("container %s stdout:\n%s", c, s)
		for _, l := range strings.Split(s, "\n") {
			byLine[l] = append(byLine[l], c)
		}
	}
	containers := map[string]string{} // container -> task
	for task, want := range wantLines() {
		cs := byLine[want]
		if len(cs) != 1 {
			t.Errorf("%d containers printed %q, want 1 (%s)", len(cs), want, task)
			continue
		}
		if other, dup := containers[cs[0]]; dup {
			t.Errorf("container %s ran both %s and %s", cs[0], other, task)
		}
		containers[cs[0]] = task
	}
}

// TestEnvErrors runs the program with a missing or malformed variable of
// the contract: it exits 2 naming the variable.
func TestEnvErrors(t *testing.T) {
	prog := build(t, dmlcpingPkg)
	worker := map[string]string{
		"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9091",
		"DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "3", "DMLC_TASK_ID": "0", "DMLC_NODE_HOST": "127.0.0.1",
	}
	tests := []struct {
		name    string
		change  map[string]string // "" removes the variable
		wantVar string
	}{
		{"no_role", map[string]string{"DMLC_ROLE": ""}, "DMLC_ROLE"},
		{"bad_role", map[string]string{"DMLC_ROLE": "client"}, "DMLC_ROLE"},
		{"no_root_uri", map[string]string{"DMLC_PS_ROOT_URI": ""}, "DMLC_PS_ROOT_URI"},
		{"no_root_port", map[string]string{"DMLC_PS_ROOT_PORT": ""}, "DMLC_PS_ROOT_PORT"},
		{"bad_root_port", map[string]string{"DMLC_PS_ROOT_PORT": "ninety"}, "DMLC_PS_ROOT_PORT"},
		{"root_port_out_of_range", map[string]string{"DMLC_PS_ROOT_PORT": "70000"}, "DMLC_PS_ROOT_PORT"},
		{"no_num_server", map[string]string{"DMLC_NUM_SERVER": ""}, "DMLC_NUM_SERVER"},
		{"bad_num_worker", map[string]string{"DMLC_NUM_WORKER": "-1"}, "DMLC_NUM_WORKER"},
		{"no_task_id", map[string]string{"DMLC_TASK_ID": ""}, "DMLC_TASK_ID"},
		{"task_id_out_of_range", map[string]string{"DMLC_TASK_ID": "3"}, "DMLC_TASK_ID"},
		{"no_node_host", map[string]string{"DMLC_NODE_HOST": ""}, "DMLC_NODE_HOST"},
		{"node_host_a_name", map[string]string{"DMLC_NODE_HOST": "localhost"}, "DMLC_NODE_HOST"},
		{"root_uri_a_name", map[string]string{"DMLC_PS_ROOT_URI": "localhost"}, "DMLC_PS_ROOT_URI"},
		{"scheduler_no_num_worker", map[string]string{"DMLC_ROLE": "scheduler", "DMLC_NUM_WORKER": ""}, "DMLC_NUM_WORKER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range worker {
				env[k] = v
			}
			for k, v := range tt.change {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog)
			cmd.Env = environ(env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want exit status 2; stderr: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantVar) {
				t.Errorf("stderr %q does not name %s", stderr.String(), tt.wantVar)
			}
		})
	}
}

// rendezvous runs, without a launcher, a scheduler and the given
// (role, rank) nodes of a job of numServers and numWorkers, with an
// environment of DMLC_* variables only, and returns each process's exit
// error and output, the scheduler's first.
func rendezvous(t *testing.T, numServers, numWorkers int, nodes [][2]string) ([]error, []string) {
	t.Helper()
	prog := build(t, dmlcpingPkg)
	port := strconv.Itoa(nettest.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, n := range append([][2]string{{"scheduler", ""}}, nodes...) {
		env := map[string]string{"DMLC_ROLE": n[0], "DMLC_TASK_ID": n[1],
			"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": port,
			"DMLC_NUM_SERVER": strconv.Itoa(numServers), "DMLC_NUM_WORKER": strconv.Itoa(numWorkers),
			"DMLC_NODE_HOST": "127.0.0.1", "DMLC_NUM_ATTEMPT": "0"}
		cmd := exec.CommandContext(ctx, prog)
		cmd.Env = environ(env)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	errs := make([]error, len(cmds))
	texts := make([]string, len(cmds))
	for i, cmd := range cmds {
		errs[i] = cmd.Wait()
		texts[i] = outs[i].String()
		t.Logf("process %d (%s): %v\n%s", i, strings.Join(cmd.Env, " "), errs[i], texts[i])
	}
	if ctx.Err() != nil {
		t.Fatalf("the processes did not end within a minute")
	}
	return errs, texts
}

// TestRendezvousWithOnlyDMLC runs the program with nothing in its
// environment but the DMLC_* contract (no SPINDLE_* variable, not even
// PATH): the nodes register and learn their number.
func TestRendezvousWithOnlyDMLC(t *testing.T) {
	errs, outs := rendezvous(t, 1, 2, [][2]string{{"worker", "1"}, {"server", "0"}, {"worker", "0"}})
	want := []string{"scheduler: 3 nodes registered", "worker 1: registered with 3 nodes",
		"server 0: registered with 3 nodes", "worker 0: registered with 3 nodes"}
	for i := range errs {
		if errs[i] != nil {
			t.Errorf("process %d: %v, want exit 0", i, errs[i])
		}
		if !strings.Contains(outs[i], want[i]+"\n") {
			t.Errorf("process %d printed %q, want the line %q", i, outs[i], want[i])
		}
	}
}

// TestDuplicateRankFails checks that the scheduler catches two nodes
// with one rank, so that the launcher tests above would notice a contract
// that gave two tasks the same DMLC_TASK_ID.
func TestDuplicateRankFails(t *testing.T) {
	errs, outs := rendezvous(t, 0, 2, [][2]string{{"worker", "0"}, {"worker", "0"}})
	var ee *exec.ExitError
	if !errors.As(errs[0], &ee) || ee.ExitCode() != 1 {
		t.Fatalf("scheduler: %v, want exit status 1", errs[0])
	}
	if !strings.Contains(outs[0], "worker 0 registered twice") {
		t.Errorf("the scheduler does not say worker 0 registered twice")
	}
	for i := 1; i < len(errs); i++ {
		if errs[i] == nil {
			t.Errorf("worker %d exited 0 although the rendezvous failed", i)
		}
	}
}

func environ(m map[string]string) []string {
	var env []string
	for k, v := range m {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	sort.Strings(env)
	return env
}

func count(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}
