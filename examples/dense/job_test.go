package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// The tests run real jobs: ps-dense built from this package, started by
// the local launcher (and by ps-submit) as separate processes talking
// ZeroMQ over loopback, against the model one process computes in the
// test (dense.Local) on the same data, seed and flags.
var (
	psDense  string // the built binary
	psSubmit string
	dataDir  string // train.csv, test.csv
	gen      = dense.GenConfig{Rows: 4000, Features: 12, Classes: 3, ModelSeed: 11, RowSeed: 12}
	trainCfg = dense.Config{Mode: dense.ModePlain, Batch: 128, Seed: 7, Adam: dense.DefaultAdam()}
	epochs   = 3
)

// flags are ps-dense's flags for trainCfg.
func flags(mode string) []string {
	return []string{"--mode", mode, "--epochs", strconv.Itoa(epochs), "--batch", strconv.Itoa(trainCfg.Batch),
		"--seed", strconv.FormatUint(trainCfg.Seed, 10), "--classes", strconv.Itoa(gen.Classes)}
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "ps-dense-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		psDense, psSubmit = filepath.Join(dir, "ps-dense"), filepath.Join(dir, "ps-submit")
		for bin, pkg := range map[string]string{psDense: ".", psSubmit: "../../cmd/ps-submit"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
				return 1
			}
		}
		dataDir = filepath.Join(dir, "data")
		args := []string{"--out", dataDir, "--rows", strconv.Itoa(gen.Rows), "--test-rows", "2000", "--features", strconv.Itoa(gen.Features),
			"--classes", strconv.Itoa(gen.Classes), "--model-seed", strconv.FormatUint(gen.ModelSeed, 10), "--row-seed", strconv.FormatUint(gen.RowSeed, 10)}
		if err := genMain(context.Background(), args, io.Discard); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

var (
	refOnce  sync.Once
	refModel dense.Model
	refErr   error
)

// reference is the model one process trains on train.csv.
func reference(t *testing.T) dense.Model {
	t.Helper()
	refOnce.Do(func() {
		data, err := readLocal(context.Background(), filepath.Join(dataDir, "train.csv"), gen.Classes)
		if err != nil {
			refErr = err
			return
		}
		tr, err := dense.NewTrainer(trainCfg, dense.Local{}, data, gen.Classes)
		if err != nil {
			refErr = err
			return
		}
		for e := range epochs {
			if _, err := tr.Epoch(context.Background(), e); err != nil {
				refErr = err
				return
			}
		}
		refModel = tr.Model
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refModel
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// checkModel compares the model in dir with the single process's, bit
// for bit, checks its test accuracy against the true model's, and
// returns the manifest's training metrics.
func checkModel(t *testing.T, res model.Resolver, dir string) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	ref := reference(t)
	got, err := readModel(ctx, res, dir, gen.Features)
	if err != nil {
		t.Fatal(err)
	}
	if got.K != ref.K || len(got.W) != len(ref.W) {
		t.Fatalf("model of %d classes and %d parameters, want %d and %d", got.K, len(got.W), ref.K, len(ref.W))
	}
	diff := 0
	for i := range ref.W {
		if math.Float64bits(got.W[i]) != math.Float64bits(ref.W[i]) {
			if diff < 3 {
				t.Errorf("parameter %d is %v, the single process's %v", i, got.W[i], ref.W[i])
			}
			diff++
		}
	}
	if diff > 0 {
		t.Errorf("%d of %d parameters differ from the single process's", diff, len(ref.W))
	}
	test, err := readLocal(ctx, filepath.Join(dataDir, "test.csv"), gen.Classes)
	if err != nil {
		t.Fatal(err)
	}
	acc, _, err := got.Evaluate(test)
	if err != nil {
		t.Fatal(err)
	}
	trueAcc, _, _ := gen.TrueModel().Evaluate(test)
	t.Logf("test accuracy %.4f (the true model's %.4f)", acc, trueAcc)
	if acc < trueAcc-0.05 {
		t.Errorf("test accuracy %.4f, the true model's %.4f", acc, trueAcc)
	}
	m, err := model.ReadManifest(ctx, res, dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Training == nil {
		t.Fatal("the manifest has no training metrics")
	}
	return m.Training.Metrics
}

// checkMemory checks the optimizer state worker 0 reports: the whole in
// plain mode, its shard (at most ⌈P/N⌉ parameters) in ZeRO mode.
func checkMemory(t *testing.T, metrics map[string]float64, mode string, workers int) {
	t.Helper()
	params := float64(dense.NumParams(gen.Features, gen.Classes))
	got, whole, sum := metrics["optimizer_bytes"], metrics["optimizer_bytes_whole"], metrics["optimizer_bytes_sum"]
	t.Logf("%s, %d workers: optimizer state on worker 0 %.0f bytes, whole %.0f bytes (%.2f), all workers %.0f bytes", mode, workers, got, whole, got/whole, sum)
	if whole != 16*params {
		t.Errorf("whole optimizer state %.0f bytes, want %.0f", whole, 16*params)
	}
	switch mode {
	case dense.ModePlain:
		if got != whole || sum != float64(workers)*whole {
			t.Errorf("plain: worker 0 holds %.0f bytes, all %.0f; want %.0f each", got, sum, whole)
		}
	case dense.ModeZeRO:
		if got > 16*math.Ceil(params/float64(workers)) || sum != whole {
			t.Errorf("zero: worker 0 holds %.0f bytes, all %.0f; want at most 1/%d of %.0f, %.0f in all", got, sum, workers, whole, whole)
		}
	}
}

// runLocal runs ps-dense with the local launcher.
func runLocal(t *testing.T, workers int, mod func(*job.JobSpec), args ...string) (job.Result, string) {
	t.Helper()
	return runLocalWatched(t, workers, mod, nil, args...)
}

// runLocalWatched is runLocal with onStatus given the job's status as it
// runs (when not nil).
func runLocalWatched(t *testing.T, workers int, mod func(*job.JobSpec), onStatus func(tracker.Status), args ...string) (job.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var out syncbuf.Buffer
	spec := job.JobSpec{
		Name: "dense-test", Command: append([]string{psDense}, args...),
		NumWorkers: workers, Collective: true, MaxAttempts: 2,
		Inputs: []string{filepath.Join(dataDir, "train.csv")}, SplitSize: 64 << 10,
		Output: filepath.Join(t.TempDir(), "model"),
	}
	if mod != nil {
		mod(&spec)
	}
	r, err := local.Run(ctx, spec, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(res), Resolver: res, OnStatus: onStatus})
	if err != nil {
		t.Fatalf("job of %d workers %v: %v\n%s", workers, args, err, out.String())
	}
	return r, out.String()
}

// TestSchedulerKilled: the scheduler of a collective job, killed with
// SIGKILL mid-training, is started again alone; the workers, whose
// collectives do not go through it, rejoin the new one, and the job
// writes, without starting again, the very model of the same job
// undisturbed. The job trains long enough (400 epochs) to be killed.
func TestSchedulerKilled(t *testing.T) {
	t.Parallel()
	args := append(flags(dense.ModePlain), "--epochs", "400")
	straight, _ := runLocal(t, 2, func(s *job.JobSpec) { s.Name = hadooptest.JobName("dense-straight") }, args...)
	name := hadooptest.JobName("dense-scheduler-killed")
	killed := false
	r, out := runLocalWatched(t, 2, func(s *job.JobSpec) { s.Name = name }, func(st tracker.Status) {
		if !killed && st.Epoch >= 1 {
			killed = len(hadooptest.KillTask(t, "SPINDLE_JOB_NAME="+name, "scheduler", 0)) > 0
		}
	}, args...)
	if !killed {
		t.Fatalf("the scheduler was never killed mid-job\n%s", out)
	}
	if r.Restarts != 0 {
		t.Errorf("the job started again %d time(s); want none", r.Restarts)
	}
	for _, tr := range r.Tasks {
		if want := map[bool]int{true: 2, false: 1}[tr.Role == "scheduler"]; tr.Attempts != want {
			t.Errorf("%s %d ran %d time(s), want %d", tr.Role, tr.Rank, tr.Attempts, want)
		}
	}
	res, _ := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	defer res.Close()
	want, err := readModel(context.Background(), res, straight.Output, gen.Features)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readModel(context.Background(), res, r.Output, gen.Features)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.W, want.W) {
		t.Error("the model after the scheduler was killed differs from the job undisturbed")
	}
}

// TestZeROJobMatchesOneProcess: three workers in ZeRO mode, the input cut
// into several shards, write the single process's model, each holding a
// third of the optimizer state.
func TestZeROJobMatchesOneProcess(t *testing.T) {
	t.Parallel()
	r, out := runLocal(t, 3, nil, flags(dense.ModeZeRO)...)
	t.Logf("ps-dense:\n%s", out)
	res, _ := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	defer res.Close()
	metrics := checkModel(t, res, r.Output)
	checkMemory(t, metrics, dense.ModeZeRO, 3)
	if got := r.Status.EpochRecords[epochs-1]; got != int64(gen.Rows) {
		t.Errorf("the tracker counted %d records in the last epoch, want %d", got, gen.Rows)
	}
}

// TestSubmitWithoutServers: ps-submit -s 0 runs a plain-mode job of two
// workers end to end, with a scheduler and no server.
func TestSubmitWithoutServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	output := filepath.Join(t.TempDir(), "model")
	args := append([]string{"--cluster", "local", "-n", "2", "-s", "0", "--jobname", "dense-submit", "--max-attempts", "1",
		"--input", filepath.Join(dataDir, "train.csv"), "--output", output, "--", psDense}, flags(dense.ModePlain)...)
	cmd := exec.CommandContext(ctx, psSubmit, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ps-submit: %v\n%s", err, out.String())
	}
	t.Logf("ps-submit:\n%s", out.String())
	for _, want := range []string{"exit codes  scheduler 0 · workers 0 0", "2 workers, mode plain"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ps-submit's output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "[server") {
		t.Error("a server ran")
	}
	res, _ := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	defer res.Close()
	metrics := checkModel(t, res, output)
	checkMemory(t, metrics, dense.ModePlain, 2)
	var eval bytes.Buffer
	if err := evalMain(ctx, []string{"--model", output, "--test", filepath.Join(dataDir, "test.csv")}, &eval, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("eval: %v", err)
	}
	if !strings.HasPrefix(eval.String(), "test accuracy ") {
		t.Errorf("eval printed %q", eval.String())
	}
}

// TestLostWorkerResumesFromCheckpoint: a worker killed as epoch 2 begins
// takes the job back to the checkpoint after epoch 2, and the job still
// writes the single process's model: the checkpoint holds the
// parameters, the optimizer state and the step count exactly.
func TestLostWorkerResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	ckptDir := filepath.Join(t.TempDir(), "ckpt")
	r, out := runLocal(t, 2, func(s *job.JobSpec) {
		s.CheckpointDir, s.CheckpointInterval = ckptDir, "1"
	}, append(flags(dense.ModeZeRO), "--die-after", "1:2")...)
	t.Logf("ps-dense:\n%s", out)
	want := "file://" + filepath.Join(ckptDir, "2")
	if r.Restarts != 1 || r.ResumedFrom != want {
		t.Errorf("restarts %d from %q, want 1 from %q", r.Restarts, r.ResumedFrom, want)
	}
	res, _ := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	defer res.Close()
	checkModel(t, res, r.Output)
	data, err := os.ReadFile(filepath.Join(ckptDir, "2", stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil || doc.Steps != 2*((gen.Rows+trainCfg.Batch-1)/trainCfg.Batch) {
		t.Errorf("checkpoint 2's state %s (%v): want the steps of 2 epochs", data, err)
	}
}

// TestLostWorkerFailsTheJob: without a checkpoint directory, a worker
// killed mid-training fails the job at once, naming it, instead of having
// it started again alone (it could not rejoin its peers' collectives).
func TestLostWorkerFailsTheJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var out syncbuf.Buffer
	spec := job.JobSpec{
		Name: "dense-lost", Command: append(append([]string{psDense}, flags(dense.ModePlain)...), "--die-after", "1:1"),
		NumWorkers: 2, Collective: true, MaxAttempts: 2, Inputs: []string{filepath.Join(dataDir, "train.csv")},
	}
	start := time.Now()
	r, err := local.Run(ctx, spec, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(res), Resolver: res})
	if err == nil || r.State != tracker.Failed || !strings.Contains(err.Error(), "worker 1 failed") || !strings.Contains(err.Error(), "CheckpointDir") {
		t.Fatalf("job state %v, error %v; want a failure naming worker 1 and the missing checkpoint directory\n%s", r.State, err, out.String())
	}
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
