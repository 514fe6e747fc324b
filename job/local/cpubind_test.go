package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

// cpusAllowed reads the Cpus_allowed_list of a /proc status file.
func cpusAllowed(t *testing.T, status string) string {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s: no Cpus_allowed_list", status)
	return ""
}

// TestRunLocalBindsServerAndWorkerOfARankToOneCPU runs real processes
// with CPUBindCores: each server and worker runs on the one CPU of its
// rank, with GOMAXPROCS=2 unless the job sets it; the scheduler runs
// where the launcher may; and every thread of the launcher has its own
// CPUs back. Not parallel: it reads the masks of all of this process's
// threads, which no other test may be changing meanwhile.
func TestRunLocalBindsServerAndWorkerOfARankToOneCPU(t *testing.T) {
	cpus, err := ownCPUs()
	if err != nil {
		t.Fatal(err)
	}
	own := cpusAllowed(t, "/proc/self/status")
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			environ = append(environ, kv)
		}
	}
	script := `echo "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) gomaxprocs=$GOMAXPROCS"`
	run := func(bind CPUBind, spec job.JobSpec) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out syncbuf.Buffer
		spec.Command, spec.MaxAttempts = []string{"/bin/sh", "-c", script}, 1
		res, err := Run(ctx, spec, Options{Environ: environ, Stdout: &out, Log: quietLog(), StopGrace: time.Second, CPUBind: bind})
		if err != nil || res.State != tracker.Succeeded {
			t.Fatalf("job: %v %v\n%s", res.State, err, out.String())
		}
		return out.String()
	}
	check := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	out := run(CPUBindCores, job.JobSpec{NumServers: 2, NumWorkers: 3, WorkerEnv: []string{"GOMAXPROCS=3"}})
	check(out,
		fmt.Sprintf("[server 0] cpus=%d gomaxprocs=2", cpus[0]),
		fmt.Sprintf("[server 1] cpus=%d gomaxprocs=2", cpus[1%len(cpus)]),
		fmt.Sprintf("[worker 0] cpus=%d gomaxprocs=3", cpus[0]),
		fmt.Sprintf("[worker 1] cpus=%d gomaxprocs=3", cpus[1%len(cpus)]),
		fmt.Sprintf("[worker 2] cpus=%d gomaxprocs=3", cpus[2%len(cpus)]),
		fmt.Sprintf("[scheduler 0] cpus=%s gomaxprocs=", own))
	threads, _ := filepath.Glob("/proc/self/task/*/status")
	if len(threads) == 0 {
		t.Fatal("no threads in /proc/self/task")
	}
	for _, th := range threads {
		if got := cpusAllowed(t, th); got != own {
			t.Errorf("thread %s runs on CPUs %s after the job, not %s", filepath.Base(filepath.Dir(th)), got, own)
		}
	}

	out = run(CPUBindNone, job.JobSpec{NumServers: 2, NumWorkers: 2})
	check(out,
		fmt.Sprintf("[server 1] cpus=%s gomaxprocs=", own),
		fmt.Sprintf("[worker 1] cpus=%s gomaxprocs=", own))
}
