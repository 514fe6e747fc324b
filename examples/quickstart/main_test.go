package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// TestReadmeHoldsTheProgram: the README shows this very program, so that
// the compiler checks what readers copy.
func TestReadmeHoldsTheProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// From the package clause on: the README introduces the program in
	// its own words.
	code := string(src[bytes.Index(src, []byte("package main")):])
	if !strings.Contains(string(readme), "```go\n"+code+"```\n") {
		t.Error("README.md's \"Writing a program against psnode\" does not hold examples/quickstart/main.go from its package clause on, in a go code block")
	}
}

// TestQuickstartJob runs the program as a real 2×2 job under the local
// launcher: every epoch is checkpointed and the model holds the four
// weights near their targets k/10.
func TestQuickstartJob(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ckpt")
	res, out := runJob(t, dir, job.JobSpec{MaxAttempts: 1, CheckpointDir: ck, CheckpointInterval: "1"})
	if res.State != tracker.Succeeded {
		t.Fatalf("job: %v\n%s", res.State, out)
	}
	for _, n := range []string{"1", "2", "3"} {
		if _, err := os.Stat(filepath.Join(ck, n, "_manifest.json")); err != nil {
			t.Errorf("checkpoint %s not committed: %v", n, err)
		}
	}
	checkModel(t, res.Output)
}

// TestWorkerExitsWithoutFinalizing: a worker whose process exits 0
// without finalizing its node has not finished when it does so in the
// middle of training or before it starts its node: the launcher starts
// it again, its successor joins the job or rejoins the synchronous
// steps, and the job ends with the whole model rather than waiting for
// the worker forever, or until the scheduler's registration times out.
// Workers that skip Finalize after their last barrier did finish: the
// job ends with the whole model. The program is this one with a stray
// os.Exit(0) (faulty).
func TestWorkerExitsWithoutFinalizing(t *testing.T) {
	const first = `os.Getenv("DMLC_ROLE") == "worker" && os.Getenv("DMLC_TASK_ID") == "1" && os.Getenv("DMLC_NUM_ATTEMPT") == "0"`
	for _, tt := range []struct{ where, at, when, says string }{
		{"in-epoch-1", "\t\tfor step := from; step < steps; step++ {\n", first + " && epoch == 1 && step == steps/2", "without leaving the job"},
		{"before-start", "func run(ctx context.Context) error {\n", first, "before its node joined the job"},
		// Every worker's every process: nothing to start again for.
		{"after-finish", "if err := tables.Finish(ctx); err != nil { // servers write the model\n\t\treturn err\n\t}\n", `n.Role() == transport.RoleWorker`, ""},
	} {
		t.Run(tt.where, func(t *testing.T) {
			t.Parallel() // the launcher's grace is spent waiting
			dir := t.TempDir()
			res, out := runJob(t, dir, job.JobSpec{MaxAttempts: 2}, faulty(t, dir, tt.at, tt.when, "os.Exit(0)"))
			if res.State != tracker.Succeeded {
				t.Fatalf("job: %v\n%s", res.State, out)
			}
			checkModel(t, res.Output)
			if tt.says == "" {
				return
			}
			for _, tr := range res.Tasks {
				if want := map[bool]int{true: 2, false: 1}[tr.Role == conf.RoleWorker && tr.Rank == 1]; tr.Attempts != want {
					t.Errorf("%s %d ran %d times, want %d", tr.Role, tr.Rank, tr.Attempts, want)
				}
			}
			found := false
			for _, ev := range res.Status.Events {
				found = found || ev.Kind == tracker.EventExited && ev.Task == "worker 1" && strings.Contains(ev.Detail, tt.says)
			}
			if !found {
				t.Errorf("no event says worker 1 exited 0 %s: %+v", tt.says, res.Status.Events)
			}
		})
	}
}

// faulty writes, in dir, main.go with "if when { do }" after the line
// at, and returns the go build flag that builds the program with it in
// main.go's place.
func faulty(t *testing.T, dir, at, when, do string) string {
	t.Helper()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	code := strings.Replace(string(src), at, at+"if "+when+" {\n"+do+"\n}\n", 1)
	if code == string(src) {
		t.Fatalf("main.go has no line %q to put %q after", at, do)
	}
	abs, err := filepath.Abs("main.go")
	if err != nil {
		t.Fatal(err)
	}
	patched, overlay := filepath.Join(dir, "main.go"), filepath.Join(dir, "overlay.json")
	writeTest(t, patched, code)
	writeTest(t, overlay, fmt.Sprintf(`{"Replace": {%q: %q}}`, abs, patched))
	return "-overlay=" + overlay
}

// TestWorkerHangs: a worker whose program hangs in its own code (a
// deadlock: its node still answers heartbeats) holds up the others
// only for the job's stall timeout. Then the node that waits for it
// reports it: a synchronous table's server when it hangs in the middle
// of an epoch, the scheduler when it hangs before the last barrier,
// which the other worker reached. The launcher stops it and starts it
// again, and the job ends with the whole model instead of waiting for
// ever.
func TestWorkerHangs(t *testing.T) {
	const first = `os.Getenv("DMLC_ROLE") == "worker" && os.Getenv("DMLC_TASK_ID") == "1" && os.Getenv("DMLC_NUM_ATTEMPT") == "0"`
	for _, tt := range []struct{ where, at, when, says string }{
		{"in-epoch-1", "\t\tfor step := from; step < steps; step++ {\n", first + " && epoch == 1 && step == steps/2", "table w on server"},
		{"before-finish", "if err := train(ctx, n, tables, w, task.Config.Job); err != nil {\n\t\t\treturn err\n\t\t}\n", first, "a barrier waited"},
	} {
		t.Run(tt.where, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := job.JobSpec{MaxAttempts: 2, StallTimeout: 3 * time.Second}
			res, out := runJob(t, dir, spec, faulty(t, dir, tt.at, tt.when, "select {}"))
			if res.State != tracker.Succeeded {
				t.Fatalf("job: %v\n%s", res.State, out)
			}
			checkModel(t, res.Output)
			for _, tr := range res.Tasks {
				if want := map[bool]int{true: 2, false: 1}[tr.Role == conf.RoleWorker && tr.Rank == 1]; tr.Attempts != want {
					t.Errorf("%s %d ran %d times, want %d", tr.Role, tr.Rank, tr.Attempts, want)
				}
			}
			found := false
			for _, ev := range res.Status.Events {
				found = found || ev.Kind == tracker.EventStalled && ev.Task == "worker 1" && strings.Contains(ev.Detail, tt.says) && ev.Took >= spec.StallTimeout
			}
			if !found {
				t.Errorf("no event says worker 1 stalled (%s): %+v", tt.says, res.Status.Events)
			}
		})
	}
}

func writeTest(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runJob builds the program, with the go build flags given, and runs it
// as a 2×2 job of spec under the local launcher, its model in dir, within
// three minutes. It returns the result and the tasks' output.
func runJob(t *testing.T, dir string, spec job.JobSpec, flags ...string) (job.Result, string) {
	t.Helper()
	bin := filepath.Join(dir, "program")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := logrus.New()
	l.Out = io.Discard
	spec.Name, spec.Command, spec.NumWorkers, spec.NumServers = "quickstart", []string{bin}, 2, 2
	spec.Output = filepath.Join(dir, "model")
	var stdout bytes.Buffer
	res, err := local.Run(ctx, spec, local.Options{Environ: os.Environ(), Stdout: &stdout, Log: logrus.NewEntry(l)})
	if err != nil {
		t.Fatalf("job: %v %v\n%s", res.State, err, stdout.String())
	}
	return res, stdout.String()
}

// checkModel checks that the model in out holds the four weights near
// their targets k/10.
func checkModel(t *testing.T, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[uint64]float32{}
	err = model.Read(ctx, r, out, func(key uint64, vals []float32) error {
		got[key] = vals[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := uint64(1); k <= 4; k++ {
		if w, ok := got[k]; !ok || math.Abs(float64(w)-float64(k)/10) > 1e-3 {
			t.Errorf("weight of key %d is %v (present %v), want about %v", k, w, ok, float64(k)/10)
		}
	}
}
