package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/io/records"
)

// The tests run real jobs: ps-fm built from this package (and ps-lr, to
// compare with), launched by the ps-submit binary as separate processes
// talking ZeroMQ over loopback.
var (
	binDir  string // ps-fm, ps-lr, ps-submit
	outDir  string // the models of the jobs, by job name
	psFM    string
	psLR    string
	dataDir string // train.libsvm, test.libsvm: ps-lr's generated data
	rows    = 200_000
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "ps-fm-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binDir, dataDir, outDir = filepath.Join(dir, "bin"), filepath.Join(dir, "data"), filepath.Join(dir, "models")
		psFM, psLR = filepath.Join(binDir, "ps-fm"), filepath.Join(binDir, "ps-lr")
		return m.Run()
	}())
}

var (
	setupOnce sync.Once
	setupErr  error
)

// setup builds ps-fm and ps-submit and generates the data, once for the
// tests that run jobs.
func setup(t testing.TB) {
	t.Helper()
	setupOnce.Do(func() {
		for _, b := range []struct{ name, pkg string }{{"ps-fm", "."}, {"ps-submit", "../../cmd/ps-submit"}} {
			if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, b.name), b.pkg).CombinedOutput(); err != nil {
				setupErr = fmt.Errorf("build %s: %w\n%s", b.name, err, out)
				return
			}
		}
		setupErr = gen.Main("ps-fm gen", []string{"--out", dataDir, "--rows", strconv.Itoa(rows), "--test-rows", "20000"}, io.Discard)
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

// submit runs ps-submit with flags, then "--" and command, and returns
// its combined output and error (nil when it exited 0). onLine, when set,
// sees each line of the output as it comes. The job may take 5 minutes.
func submit(t testing.TB, flags, command []string, onLine func(string)) (string, error) {
	t.Helper()
	setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append(append([]string{}, flags...), "--"), command...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "ps-submit"), args...)
	cmd.Dir = t.TempDir()
	var out syncbuf.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		_, _ = io.Copy(&out, pr) // an overlong line: keep the rest
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if ctx.Err() != nil {
		t.Fatalf("ps-submit %v did not end within 5 minutes\n%s", args, out.String())
	}
	return out.String(), err
}

// jobRun is a finished job: its output, its model's part files (by path
// relative to the model directory) and the model's test AUC.
type jobRun struct {
	out      string
	model    string
	parts    map[string][]byte
	auc      float64
	manifest model.Manifest
}

// localFlags are ps-submit's flags for a local job of name on the
// generated training set, writing its model to modelDir.
func localFlags(name string, workers, servers int, modelDir string, extra ...string) []string {
	return append([]string{"--cluster", "local", "--jobname", name, "-n", strconv.Itoa(workers), "-s", strconv.Itoa(servers),
		"--max-attempts", "2", "--input", filepath.Join(dataDir, "train.libsvm"), "--split-size", "2m", "--output", modelDir}, extra...)
}

// runFM trains ps-fm with workers and servers and args, and reads its
// model back with the evaluator.
func runFM(t *testing.T, name string, workers, servers int, submitFlags []string, args ...string) jobRun {
	t.Helper()
	modelDir := sharedDir(t, name)
	command := append([]string{psFM, "--test", filepath.Join(dataDir, "test.libsvm")}, args...)
	out, err := submit(t, localFlags(name, workers, servers, modelDir, submitFlags...), command, nil)
	if err != nil {
		t.Fatalf("job %s %dx%d %v: %v\n%s", name, workers, servers, args, err, out)
	}
	return readRun(t, out, modelDir)
}

// sharedDir returns a fresh path for the model of job name, which
// outlives the test that ran the job, as the shared runs must.
func sharedDir(t testing.TB, name string) string {
	t.Helper()
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(outDir, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "model")
}

// readRun reads a finished job's model.
func readRun(t *testing.T, out, modelDir string) jobRun {
	t.Helper()
	r := jobRun{out: out, model: modelDir, parts: map[string][]byte{}}
	err := filepath.WalkDir(modelDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "part-") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(modelDir, p)
		r.parts[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.manifest, err = model.ReadManifest(ctx, localResolver(t), modelDir); err != nil {
		t.Fatalf("model of the job: %v\n%s", err, out)
	}
	r.auc = evalAUC(t, modelDir)
	return r
}

// evalAUC runs ps-fm eval on the model in dir and returns the AUC it
// prints.
func evalAUC(t *testing.T, dir string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var eval bytes.Buffer
	if err := evalMain(ctx, []string{"--model", dir, "--test", filepath.Join(dataDir, "test.libsvm")}, &eval, os.LookupEnv); err != nil {
		t.Fatalf("eval %s: %v", dir, err)
	}
	var auc float64
	if _, err := fmt.Sscanf(eval.String(), "test AUC %g", &auc); err != nil {
		t.Fatalf("eval output %q: %v", eval.String(), err)
	}
	return auc
}

// exactAUC evaluates ps-fm's local model in dir with full precision.
func exactAUC(t *testing.T, dir string) float64 {
	t.Helper()
	return exactAUCWith(t, localResolver(t), dir)
}

// exactAUCWith is exactAUC for a model that res reaches.
func exactAUCWith(t *testing.T, res model.Resolver, dir string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := readModel(ctx, res, dir, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	auc, _, err := m.Evaluate(testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	return auc
}

// lrAUC evaluates ps-lr's model in dir with full precision.
func lrAUC(t *testing.T, dir string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var m lr.Model
	err := model.Read(ctx, localResolver(t), dir, func(key uint64, vals []float32) error {
		m.Keys, m.W = append(m.Keys, key), append(m.W, vals[0])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sorted, err := sortLR(m)
	if err != nil {
		t.Fatal(err)
	}
	auc, _, err := sorted.Evaluate(testSet(t))
	if err != nil {
		t.Fatal(err)
	}
	return auc
}

// sortLR sorts an lr.Model read part by part.
func sortLR(m lr.Model) (lr.Model, error) {
	type kw struct {
		k uint64
		w float32
	}
	rows := make([]kw, len(m.Keys))
	for i := range rows {
		rows[i] = kw{m.Keys[i], m.W[i]}
	}
	slices.SortFunc(rows, func(a, b kw) int { return cmp.Compare(a.k, b.k) })
	out := lr.Model{Keys: make([]uint64, len(rows)), W: make([]float32, len(rows))}
	for i, r := range rows {
		out.Keys[i], out.W[i] = r.k, r.w
	}
	return out, out.Validate()
}

var (
	testOnce sync.Once
	testRows []lr.Example
)

func testSet(t *testing.T) []lr.Example {
	t.Helper()
	testOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if testRows, err = readExamples(ctx, localResolver(t), filepath.Join(dataDir, "test.libsvm"), records.Options{Format: records.FormatLibSVM}); err != nil {
			t.Fatal(err)
		}
	})
	if testRows == nil {
		t.Fatal("the test set could not be read (see the first test's output)")
	}
	return testRows
}

func localResolver(t testing.TB) *dfs.Resolver {
	t.Helper()
	r, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var (
	syncRun, syncNoPrefetchRun, straightRun hadooptest.Shared[jobRun]
	lrRun                                   hadooptest.Shared[string] // ps-lr's model directory
)

// syncJob runs the synchronous 2×2 ps-fm job over 2 epochs, pipelined
// (the default).
func syncJob(t *testing.T) jobRun {
	return syncRun.Get(t, "synchronous job", func() jobRun { return runFM(t, "fm-sync-0", 2, 2, nil, "--epochs", "2") })
}

// syncJobNoPrefetch runs the same job with --prefetch=false.
func syncJobNoPrefetch(t *testing.T) jobRun {
	return syncNoPrefetchRun.Get(t, "synchronous job without --prefetch", func() jobRun {
		return runFM(t, "fm-sync-1", 2, 2, nil, "--epochs", "2", "--prefetch=false")
	})
}

// lrJob runs the same job with ps-lr and returns its model's directory.
func lrJob(t *testing.T) string {
	return lrRun.Get(t, "ps-lr job", func() string {
		setup(t)
		if out, err := exec.Command("go", "build", "-o", psLR, "../lr").CombinedOutput(); err != nil {
			t.Fatalf("build ps-lr: %v\n%s", err, out)
		}
		dir := sharedDir(t, "fm-test-lr")
		out, err := submit(t, localFlags("fm-test-lr", 2, 2, dir), []string{psLR, "--epochs", "2"}, nil)
		if err != nil {
			t.Fatalf("ps-lr job: %v\n%s", err, out)
		}
		return dir
	})
}

// TestSyncRunsWriteBitIdenticalModels: two synchronous runs, pipelined
// (the default) and not, write the same bytes, both tables spread over
// both servers.
func TestSyncRunsWriteBitIdenticalModels(t *testing.T) {
	a, b := syncJob(t).parts, syncJobNoPrefetch(t).parts
	for _, want := range []string{"w/part-00000", "w/part-00001", "v/part-00000", "v/part-00001"} {
		if len(a[want]) == 0 {
			t.Errorf("%s is missing or empty (parts: %v)", want, keysOf(a))
		}
	}
	if len(a) != 4 || len(b) != len(a) {
		t.Fatalf("parts %v and %v, want w and v from 2 servers each", keysOf(a), keysOf(b))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two synchronous runs, with and without --prefetch", name)
		}
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestQualityAtLeastLR: on ps-lr's generated data, ps-fm's test AUC is at
// least ps-lr's after the same epochs of the same synchronous 2×2 job,
// the evaluator agrees with the AUC the workers reported, and the
// interactions were learnt (embeddings moved away from their init).
func TestQualityAtLeastLR(t *testing.T) {
	run := syncJob(t)
	fmAUC, lAUC := exactAUC(t, run.model), lrAUC(t, lrJob(t))
	t.Logf("test AUC after 2 epochs: ps-fm %.5f, ps-lr %.5f", fmAUC, lAUC)
	if fmAUC < lAUC {
		t.Errorf("ps-fm's test AUC %.5f is below ps-lr's %.5f", fmAUC, lAUC)
	}
	if math.Abs(fmAUC-run.auc) > 5e-5 {
		t.Errorf("ps-fm eval printed AUC %.4f, the model's is %.6f", run.auc, fmAUC)
	}
	tr := run.manifest.Training
	if tr == nil {
		t.Fatal("the model's manifest has no training section")
	}
	if got := tr.Metrics["test_auc"]; math.Abs(got-fmAUC) > 5e-5 {
		t.Errorf("the workers reported test_auc %.6f, the written model's is %.6f", got, fmAUC)
	}
	for e := 0; e < 2; e++ {
		if got := tr.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := readModel(ctx, localResolver(t), run.model, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if m.Dim != 8 {
		t.Errorf("embedding dimension %d, want the default 8", m.Dim)
	}
	moved := 0
	for _, x := range m.V {
		if x >= 0.01 || x < -0.01 {
			moved++
		}
	}
	if moved == 0 {
		t.Errorf("no embedding value left its initial range: the interactions were not trained")
	}
	t.Logf("%d weights, %d embeddings, %d embedding values outside the initial range", len(m.W), len(m.VKeys), moved)
}

// straightJob runs the synchronous 2×2 job over 4 epochs never
// interrupted: the model a job that lost a server and started again from
// a checkpoint must reach.
func straightJob(t *testing.T) jobRun {
	return straightRun.Get(t, "4-epoch job", func() jobRun { return runFM(t, "fm-straight", 2, 2, nil, "--epochs", "4") })
}

// statusRE matches ps-submit's status line: "… · epoch E · shards D/T …".
var statusRE = regexp.MustCompile(`· epoch (\d+) · shards (\d+)/(\d+)`)

// killedJob runs the synchronous 2×2 job over 4 epochs (checkpointing
// every epoch into ckDir, unless "") and kills role's rank 1 with SIGKILL
// once epoch 1 has begun and checkpoint 1 is committed, before the job
// ends. ps-submit's status lines say where the job is: one at the start
// of each epoch, and others as shards are done. extra are more flags of
// ps-submit.
func killedJob(t *testing.T, name, ckDir, role string, extra ...string) (string, error, string) {
	t.Helper()
	name = hadooptest.JobName(name)
	modelDir := filepath.Join(t.TempDir(), "model")
	flags := append(localFlags(name, 2, 2, modelDir), extra...)
	if ckDir != "" {
		flags = append(flags, "--checkpoint-dir", ckDir, "--checkpoint-interval", "1")
	}
	var killed []int
	out, err := submit(t, flags, []string{psFM, "--epochs", "4", "--test", filepath.Join(dataDir, "test.libsvm")}, func(line string) {
		m := statusRE.FindStringSubmatch(line)
		if killed != nil || m == nil {
			return
		}
		epoch, _ := strconv.Atoi(m[1])
		done, _ := strconv.Atoi(m[2])
		total, _ := strconv.Atoi(m[3])
		if epoch < 1 || (epoch == 3 && done >= total-2) {
			return
		}
		if _, err := os.Stat(filepath.Join(ckDir, "1", "_manifest.json")); ckDir != "" && err != nil {
			return // not yet committed
		}
		killed = hadooptest.KillTask(t, "SPINDLE_JOB_NAME="+name, role, 1)
	})
	if len(killed) == 0 {
		t.Fatalf("%s 1 was never killed mid-job (%v)\n%s", role, err, out)
	}
	return modelDir, err, out
}

// TestServerKilled kills server 1 with SIGKILL during a synchronous job.
// With replicas (ps-submit's default with two servers) server 1 alone
// starts again, restores both tables from the replicas, and the job
// writes the very model of a job never interrupted without starting
// again. Without replicas: with checkpoints every process starts again
// from the newest committed checkpoint, which the framework wrote and
// restores, and the model is again the one of a job never interrupted;
// without, the job fails naming the server.
func TestServerKilled(t *testing.T) {
	t.Run("replicas", func(t *testing.T) {
		dir, err, out := killedJob(t, "fm-server-killed-replicas", "", "server")
		if err != nil {
			t.Fatalf("job after server 1 was killed: %v\n%s", err, out)
		}
		r := readRun(t, out, dir)
		if tr := r.manifest.Training; tr == nil || tr.Restarts != 0 {
			t.Errorf("manifest's training section %+v; want no restart", tr)
		}
		if !strings.Contains(out, "servers 0 0 (attempts 1 2)") {
			t.Errorf("ps-submit's summary does not say server 1 alone ran twice:\n%s", out)
		}
		straight := straightJob(t)
		for name, want := range straight.parts {
			if !bytes.Equal(r.parts[name], want) {
				t.Errorf("%s after a server was lost differs from the job never interrupted", name)
			}
		}
	})
	t.Run("checkpoints", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "ckpt")
		dir, err, out := killedJob(t, "fm-server-killed-ckpt", ck, "server", "--replicas", "0")
		if err != nil {
			t.Fatalf("job after server 1 was killed: %v\n%s", err, out)
		}
		r := readRun(t, out, dir)
		tr := r.manifest.Training
		if tr == nil || tr.Restarts != 1 || !strings.HasPrefix(tr.ResumedFrom, "file://"+ck+"/") {
			t.Errorf("manifest's training section %+v; want 1 restart from a checkpoint in %s", tr, ck)
		}
		straight := straightJob(t)
		if len(r.parts) != len(straight.parts) {
			t.Errorf("parts %v, the job never interrupted wrote %v", keysOf(r.parts), keysOf(straight.parts))
		}
		for name, want := range straight.parts {
			if !bytes.Equal(r.parts[name], want) {
				t.Errorf("%s after a server was lost differs from the job never interrupted", name)
			}
		}
	})
	t.Run("no_checkpoints", func(t *testing.T) {
		_, err, out := killedJob(t, "fm-server-killed-nockpt", "", "server", "--replicas", "0")
		if err == nil {
			t.Fatalf("job without checkpoints succeeded after losing a server\n%s", out)
		}
		for _, want := range []string{"server 1 failed", "--checkpoint-dir"} {
			if !strings.Contains(out, want) {
				t.Errorf("ps-submit's output does not say %q:\n%s", want, out)
			}
		}
	})
}

// TestSyncWorkerKilled kills worker 1 with SIGKILL during a synchronous
// job without checkpoints: the steps of both tables go on with the other
// worker, and worker 1's new process rejoins them where it left off. The
// job succeeds, every epoch counts every record once, and the model
// scores within 0.002 AUC of the job never interrupted.
func TestSyncWorkerKilled(t *testing.T) {
	dir, err, out := killedJob(t, "fm-sync-worker-killed", "", "worker")
	if err != nil {
		t.Fatalf("job after worker 1 was killed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "[worker 1#1]") {
		t.Errorf("no output from worker 1's second attempt:\n%s", out)
	}
	r := readRun(t, out, dir)
	tr := r.manifest.Training
	if tr == nil || tr.Restarts != 0 {
		t.Errorf("manifest's training section %+v; want no restart", tr)
	}
	for e := 0; e < 4; e++ {
		if got := tr.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	want := straightJob(t).auc
	t.Logf("test AUC %.4f after worker 1 was killed, %.4f without", r.auc, want)
	if math.Abs(r.auc-want) > 0.002 {
		t.Errorf("AUC %.4f after a worker was killed, %.4f without: more than 0.002 apart", r.auc, want)
	}
}

// TestAsyncWorkerKilled kills worker 1 (--die-after) after its first
// shard, in asynchronous mode: it is started again, its unfinished shard
// goes back to the queue, every epoch counts every record once, and the
// model is still good.
func TestAsyncWorkerKilled(t *testing.T) {
	r := runFM(t, "fm-async-worker-killed", 2, 2, []string{"--split-size", "1m"}, "--epochs", "2", "--async", "--die-after", "1:1")
	if !strings.Contains(r.out, "[worker 1#1]") {
		t.Errorf("no output from worker 1's second attempt:\n%s", r.out)
	}
	for e := 0; e < 2; e++ {
		if got := r.manifest.Training.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	if r.auc < 0.82 {
		t.Errorf("test AUC %.4f after an asynchronous job with a worker killed", r.auc)
	}
}

// TestBoundedDelay trains with --staleness 2, both tables bounded: the
// job finishes, every epoch counts every record once, and the test AUC is
// within 0.002 of the synchronous run's.
func TestBoundedDelay(t *testing.T) {
	want := syncJob(t).auc
	r := runFM(t, "fm-staleness", 2, 2, nil, "--epochs", "2", "--staleness", "2")
	for e := 0; e < 2; e++ {
		if got := r.manifest.Training.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	t.Logf("test AUC: bounded delay %.4f, synchronous %.4f", r.auc, want)
	if d := r.auc - want; d < -0.002 || d > 0.002 {
		t.Errorf("bounded-delay AUC %.4f is %.4f from the synchronous run's %.4f", r.auc, d, want)
	}
}

// TestModelFormats: a model written in the binary part format scores
// exactly as the same job's text model, and ps-fm eval reads both.
func TestModelFormats(t *testing.T) {
	text := runFM(t, "fm-format-text", 1, 1, nil, "--epochs", "1")
	bin := runFM(t, "fm-format-binary", 1, 1, nil, "--epochs", "1", "--model-format", "binary")
	if bytes.Equal(text.parts["w/part-00000"], bin.parts["w/part-00000"]) {
		t.Errorf("the binary and text parts are the same bytes")
	}
	a, b := exactAUC(t, text.model), exactAUC(t, bin.model)
	if a != b {
		t.Errorf("test AUC %.6f from the text model, %.6f from the binary one", a, b)
	}
	if text.auc != bin.auc {
		t.Errorf("ps-fm eval: %.4f from the text model, %.4f from the binary one", text.auc, bin.auc)
	}
}

// TestMalformedRecords: a job fails on a malformed record by default,
// naming the file, the line and its byte offset; with --max-bad-records it skips and
// counts it.
func TestMalformedRecords(t *testing.T) {
	setup(t)
	data, err := os.ReadFile(filepath.Join(dataDir, "train.libsvm"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")[:2000]
	good := strings.Join(lines[:1000], "")
	input := filepath.Join(t.TempDir(), "bad.libsvm")
	if err := os.WriteFile(input, []byte(good+"1 7:1 x:1\n"+strings.Join(lines[1000:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) (string, error, string) {
		modelDir := filepath.Join(t.TempDir(), "model")
		flags := []string{"--cluster", "local", "--jobname", name, "-n", "1", "-s", "1", "--max-attempts", "1", "--input", input, "--output", modelDir}
		out, err := submit(t, flags, append([]string{psFM, "--epochs", "1", "--async"}, args...), nil)
		return out, err, modelDir
	}
	out, err, _ := run("fm-bad-records")
	want := fmt.Sprintf("%s, line 1001 (byte %d)", "file://"+input, len(good))
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("job over a malformed record: %v; want a failure naming %q in:\n%s", err, want, out)
	}
	out, err, dir := run("fm-bad-records-skipped", "--max-bad-records", "1")
	if err != nil {
		t.Fatalf("job skipping one bad record: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := model.ReadManifest(ctx, localResolver(t), dir)
	if err != nil || m.Training == nil {
		t.Fatalf("manifest: %v %+v", err, m)
	}
	if got := m.Training.Metrics["bad_records_sum"]; got != 1 {
		t.Errorf("bad records counted %v, want 1", got)
	}
	if got := m.Training.EpochRecords[0]; got != 2000 {
		t.Errorf("records read %d, want the 2000 good ones", got)
	}
}

// TestResumeReachesTheSameModel stops a synchronous job after its
// checkpoint of epoch 2 (a 2-epoch job checkpointing every epoch) and
// resumes it to 4 epochs with ps-submit --resume: both tables, with their
// updaters' state, come back from the checkpoint, and the model is the
// very one of a 4-epoch job never stopped.
func TestResumeReachesTheSameModel(t *testing.T) {
	ck := filepath.Join(t.TempDir(), "ckpt")
	ckFlags := []string{"--checkpoint-dir", ck, "--checkpoint-interval", "1"}
	first := runFM(t, "fm-resume-first", 2, 2, ckFlags, "--epochs", "2")
	if first.manifest.Training == nil || len(first.manifest.Training.EpochRecords) != 2 {
		t.Fatalf("the first job's manifest: %+v", first.manifest.Training)
	}
	for _, f := range []string{"_manifest.json", "tables.json"} {
		if _, err := os.Stat(filepath.Join(ck, "2", f)); err != nil {
			t.Fatalf("checkpoint 2: %v", err)
		}
	}
	resumed := runFM(t, "fm-resume-second", 2, 2, append(ckFlags, "--resume"), "--epochs", "4")
	if tr := resumed.manifest.Training; tr == nil || !strings.HasPrefix(tr.ResumedFrom, "file://"+ck+"/2") {
		t.Errorf("the resumed job's training section %+v; want it resumed from checkpoint 2", tr)
	}
	if want := "  resumed     from file://" + ck + "/2\n"; !strings.Contains(resumed.out, want) {
		t.Errorf("ps-submit's summary does not say %q:\n%s", want, resumed.out)
	}
	straight := straightJob(t)
	if len(resumed.parts) != len(straight.parts) {
		t.Errorf("parts %v, the job never stopped wrote %v", keysOf(resumed.parts), keysOf(straight.parts))
	}
	for name, want := range straight.parts {
		if !bytes.Equal(resumed.parts[name], want) {
			t.Errorf("%s: the resumed job differs from the one never stopped", name)
		}
	}
}
