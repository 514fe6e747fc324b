package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/internal/consistency"
	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// The tests run real jobs: ps-lr built from this package, started by the
// local tracker as separate processes talking ZeroMQ over loopback.
var (
	psLR    string // the built binary
	dataDir string // train.libsvm, test.libsvm
	trueAUC float64
	rows    = 200_000
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "ps-lr-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		psLR = filepath.Join(dir, "ps-lr")
		if out, err := exec.Command("go", "build", "-o", psLR, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build ps-lr: %v\n%s", err, out)
			return 1
		}
		dataDir = filepath.Join(dir, "data")
		var out bytes.Buffer
		if err := gen.Main("ps-lr gen", []string{"--out", dataDir, "--rows", fmt.Sprint(rows), "--test-rows", "20000"}, &out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := fmt.Sscanf(out.String()[strings.LastIndex(out.String(), "AUC is ")+len("AUC is "):], "%g", &trueAUC); err != nil {
			fmt.Fprintf(os.Stderr, "true AUC in %q: %v\n", out.String(), err)
			return 1
		}
		return m.Run()
	}())
}

type jobRun struct {
	res    job.Result
	err    error
	out    string
	model  string
	parts  map[string][]byte
	auc    float64
	status tracker.Status
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// runJob trains with workers and servers and returns the result, the
// model's part files and its test AUC (from ps-lr eval).
func runJob(t *testing.T, workers, servers int, splitSize int64, args ...string) jobRun {
	t.Helper()
	return runJobWith(t, workers, servers, splitSize, nil, args...)
}

// runJobWith is runJob with a hook that may change the job's spec.
func runJobWith(t *testing.T, workers, servers int, splitSize int64, mod func(*job.JobSpec), args ...string) jobRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	modelDir := filepath.Join(t.TempDir(), "model")
	res, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var out syncbuf.Buffer
	r := jobRun{model: modelDir}
	spec := job.JobSpec{
		Name:        "lr-test",
		Command:     append([]string{psLR, "--test", filepath.Join(dataDir, "test.libsvm")}, args...),
		NumWorkers:  workers,
		NumServers:  servers,
		MaxAttempts: 2,
		Inputs:      []string{filepath.Join(dataDir, "train.libsvm")},
		SplitSize:   splitSize,
		Output:      modelDir,
	}
	if mod != nil {
		mod(&spec)
	}
	r.res, r.err = local.Run(ctx, spec, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(res), Resolver: res})
	r.out = out.String()
	r.status = r.res.Status
	if r.err != nil {
		t.Fatalf("job %dx%d %v: %v\n%s", workers, servers, args, r.err, r.out)
	}
	r.parts = map[string][]byte{}
	names, _ := filepath.Glob(filepath.Join(modelDir, "part-*"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		r.parts[filepath.Base(n)] = b
	}
	r.auc = evalAUC(t, modelDir, func(string) (string, bool) { return "", false })
	return r
}

// evalAUC scores the model at uri (a directory, or hdfs:// with lookup
// giving the cluster's configuration) on the test set with ps-lr eval.
func evalAUC(t *testing.T, uri string, lookup func(string) (string, bool)) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var eval bytes.Buffer
	if err := evalMain(ctx, []string{"--model", uri, "--test", filepath.Join(dataDir, "test.libsvm")}, &eval, lookup); err != nil {
		t.Fatalf("eval: %v", err)
	}
	var auc float64
	if _, err := fmt.Sscanf(eval.String(), "test AUC %g", &auc); err != nil {
		t.Fatalf("eval output %q: %v", eval.String(), err)
	}
	return auc
}

// TestCSVWithHeader trains on CSV files whose first line is a header
// (--format csv --csv-header), scoring the held-out CSV file after each
// epoch, and ps-lr eval scores the model on it the same way; without
// --csv-header, eval stops at the header, naming its line.
func TestCSVWithHeader(t *testing.T) {
	dir := t.TempDir()
	// y is 1 when x1 + x2 > 1; x3 is noise.
	write := func(name string, rows int, seed uint64) string {
		rng := rand.New(rand.NewPCG(seed, 1))
		var b strings.Builder
		b.WriteString("clicked,x1,x2,x3\n")
		for range rows {
			x1, x2, x3 := rng.Float64(), rng.Float64(), rng.Float64()
			y := 0
			if x1+x2 > 1 {
				y = 1
			}
			fmt.Fprintf(&b, "%d,%.3f,%.3f,%.3f\n", y, x1, x2, x3)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train, test := write("train.csv", 20000, 1), write("test.csv", 2000, 2)
	args := []string{"--format", "csv", "--csv-header", "--test", test, "--updater", "adagrad", "--lr", "0.5", "--l2", "0"}
	r := runJobWith(t, 1, 1, 0, func(s *job.JobSpec) {
		s.Inputs = []string{train}
		s.Command = append([]string{psLR, "--epochs", "3"}, args...)
	})
	ctx := t.Context()
	var out bytes.Buffer
	if err := evalMain(ctx, append([]string{"--model", r.model}, args[:5]...), &out, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("eval: %v", err)
	}
	var auc float64
	if _, err := fmt.Sscanf(out.String(), "test AUC %g", &auc); err != nil || auc < 0.9 {
		t.Errorf("eval: %q (%v); want a test AUC above 0.9", out.String(), err)
	}
	t.Logf("test AUC %.4f", auc)
	if got := r.status.Metrics["test_auc"]; math.Abs(got-auc) > 5e-5 {
		t.Errorf("the job's last test_auc %.6f, eval's %.6f", got, auc)
	}
	err := evalMain(ctx, []string{"--model", r.model, "--format", "csv", "--test", test}, &out, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "test.csv, line 1") {
		t.Errorf("eval without --csv-header: %v; want an error at the header, line 1", err)
	}
}

var syncRun, waitingRun, singleRun hadooptest.Shared[jobRun]

// syncJob runs the synchronous 2×2 job over 2 epochs, pipelined (the
// default).
func syncJob(t *testing.T) jobRun {
	return syncRun.Get(t, "synchronous job", func() jobRun { return runJob(t, 2, 2, 2<<20, "--epochs", "2") })
}

// waitingJob runs the same job waiting for each pull and push, and
// reading its files every epoch (--cache-mb 0): neither prefetching nor
// the cache of examples, both on by default, must change the model.
func waitingJob(t *testing.T) jobRun {
	return waitingRun.Get(t, "synchronous job without --prefetch", func() jobRun {
		return runJob(t, 2, 2, 2<<20, "--epochs", "2", "--prefetch=false", "--cache-mb", "0")
	})
}

// singleJob runs the same job with 1 worker and 1 server.
func singleJob(t *testing.T) jobRun {
	return singleRun.Get(t, "1×1 job", func() jobRun { return runJob(t, 1, 1, 2<<20, "--epochs", "2") })
}

var (
	straightMu   sync.Mutex
	straightRuns = map[int]*jobRun{}
)

// straightJob runs, once for all tests, the synchronous 2×2 job over 4
// epochs never interrupted: the model a job that lost something and
// started again from a checkpoint must reach.
func straightJob(t *testing.T) jobRun { return straightJobOf(t, 2) }

// straightJobOf runs, once for all tests, the synchronous job of 2
// workers and servers servers over 4 epochs, never interrupted and
// without replicas.
func straightJobOf(t *testing.T, servers int) jobRun {
	t.Helper()
	straightMu.Lock()
	defer straightMu.Unlock()
	r := straightRuns[servers]
	if r == nil {
		r = &jobRun{}
		straightRuns[servers] = r // a failed run is not tried again
		*r = runJob(t, 2, servers, 2<<20, "--epochs", "4")
	}
	if r.parts == nil {
		t.Fatalf("the shared 2×%d job failed (see the first test's output)", servers)
	}
	return *r
}

// TestSyncRunsWriteBitIdenticalModels: two synchronous runs, one with
// the defaults (pipelined, and reading its files in the first epoch
// only: the cache of examples sized by the worker's memory) and one
// neither pipelined nor caching, write the same model bit for bit.
func TestSyncRunsWriteBitIdenticalModels(t *testing.T) {
	a, b := syncJob(t).parts, waitingJob(t).parts
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("parts %d and %d, want 2 each", len(a), len(b))
	}
	for name, data := range a {
		if len(data) == 0 {
			t.Errorf("%s is empty: the keys were not spread over the servers", name)
		}
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two synchronous runs, one with the defaults, the other without --prefetch and --cache-mb 0", name)
		}
	}
	if m := cachedRE.FindString(waitingJob(t).out); m != "" {
		t.Errorf("a job with --cache-mb 0 read from a cache: %s", m)
	}
	// By default each worker read every shard of its second epoch from
	// memory.
	def := syncJob(t)
	cached := cachedRE.FindAllStringSubmatch(def.out, -1)
	if len(cached) != 2 {
		t.Fatalf("%d workers said what they read from the cache, want 2:\n%s", len(cached), def.out)
	}
	for _, m := range cached {
		if m[1] != m[2] || m[1] == "0" {
			t.Errorf("a worker read %s of its %s shards from the cache, want all", m[1], m[2])
		}
	}
}

// TestConsistentPartitionerSameWeights: the synchronous 2×2 job with
// --partitioner consistent, which spreads the keys over the servers
// otherwise than hash does, learns the very weights of the job with hash:
// a key's updates do not depend on the server that applies them, which is
// what lets servers come and go without changing the model.
func TestConsistentPartitionerSameWeights(t *testing.T) {
	consistent := runJob(t, 2, 2, 2<<20, "--epochs", "4", "--partitioner", "consistent")
	straight := straightJob(t)
	lines := func(r jobRun) []string {
		var all []string
		for _, data := range r.parts {
			all = append(all, strings.Split(strings.TrimSpace(string(data)), "\n")...)
		}
		slices.Sort(all)
		return all
	}
	got, want := lines(consistent), lines(straight)
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("the weights with --partitioner consistent (%d lines) differ from those with hash (%d lines)", len(got), len(want))
	}
	if bytes.Equal(consistent.parts["part-00000"], straight.parts["part-00000"]) {
		t.Error("part-00000 is the same with both partitioners: the keys were not spread otherwise")
	}
}

// TestEpochTraffic: each epoch's metrics carry the bytes the workers'
// pushes and pulls took on the wire and the servers' answers: a push
// sends a key and a value per key and a pull a key, while an answer
// brings a value, so the first is more than twice the second.
func TestEpochTraffic(t *testing.T) {
	run := syncJob(t)
	for e := 0; e < 2; e++ {
		m := run.status.EpochMetrics[e]
		to, from := m[feed.MetricBytesToServers], m[feed.MetricBytesFromServers]
		t.Logf("epoch %d: %.0f bytes to the servers, %.0f from them", e, to, from)
		if from <= 0 || to <= 2*from {
			t.Errorf("epoch %d: %.0f bytes to the servers and %.0f from them; want both, the first more than twice the second", e, to, from)
		}
	}
}

// TestCompressionIsLossless: synchronous runs with --compress, with
// --key-cache and with --delta-keys write the same model bit for bit as
// without; their epochs take under half the bytes on the wire, the key
// cache fewer than compression alone, and the keys as gaps without zstd
// more than with it.
func TestCompressionIsLossless(t *testing.T) {
	run := syncJob(t)
	bytesOf := func(r jobRun, e int) float64 {
		m := r.status.EpochMetrics[e]
		return m[feed.MetricBytesToServers] + m[feed.MetricBytesFromServers]
	}
	var compressed [3]float64
	for i, flag := range []string{"--compress", "--key-cache", "--delta-keys"} {
		r := runJob(t, 2, 2, 2<<20, "--epochs", "2", flag)
		for name, data := range run.parts {
			if !bytes.Equal(data, r.parts[name]) {
				t.Errorf("%s differs between the runs with and without %s", name, flag)
			}
		}
		for e := 0; e < 2; e++ {
			p, c := bytesOf(run, e), bytesOf(r, e)
			t.Logf("%s, epoch %d: %.0f bytes on the wire, %.0f with it (%.0f%% less)", flag, e, p, c, 100*(1-c/p))
			if c <= 0 || c > p/2 {
				t.Errorf("%s, epoch %d: %.0f bytes against %.0f plain; want under half", flag, e, c, p)
			}
		}
		compressed[i] = bytesOf(r, 0) + bytesOf(r, 1)
	}
	if compressed[1] >= compressed[0] {
		t.Errorf("with the key cache %.0f bytes, with compression alone %.0f: the cache saved nothing", compressed[1], compressed[0])
	}
	if compressed[2] <= compressed[0] {
		t.Errorf("with the keys as gaps %.0f bytes, with zstd too %.0f: zstd saved nothing", compressed[2], compressed[0])
	}
}

func TestDistributedModelQuality(t *testing.T) {
	run, one := syncJob(t), singleJob(t)
	auc := run.auc
	t.Logf("test AUC: 2 workers × 2 servers %.4f, 1 × 1 %.4f, true weights %.4f", auc, one.auc, trueAUC)
	if d := auc - one.auc; d < -0.005 || d > 0.005 {
		t.Errorf("distributed AUC %.4f is %.4f from the single-worker run's %.4f (allowed 0.005)", auc, d, one.auc)
	}
	if d := trueAUC - auc; d > 0.01 || d < -0.01 {
		t.Errorf("distributed AUC %.4f is %.4f from the true weights' %.4f (allowed 0.01)", auc, d, trueAUC)
	}
	// ps-submit's metrics come from the workers' reports; eval prints
	// four decimals.
	if got := run.status.Metrics["test_auc"]; got < auc-5e-5 || got > auc+5e-5 {
		t.Errorf("tracker's test_auc %.6f, the written model's %.6f", got, auc)
	}
}

// TestEveryRecordOnceWithAWorkerKilled kills worker 1 with SIGKILL as it
// reads its third shard of the first epoch, in asynchronous mode: the
// launcher restarts it, its unfinished shard goes back to the queue,
// every epoch counts every record exactly once, the epoch's metrics count
// the examples the dead process trained on before it died, and the model
// scores within 0.002 AUC of the same job undisturbed.
func TestEveryRecordOnceWithAWorkerKilled(t *testing.T) {
	r := runJob(t, 2, 2, 1<<20, "--epochs", "2", "--async", "--die-after", "1:3")
	for _, tr := range r.res.Tasks {
		if tr.Role == conf.RoleWorker && tr.Rank == 1 && tr.Attempts != 2 {
			t.Errorf("worker 1 ran %d times, want 2 (killed once)", tr.Attempts)
		}
	}
	if !strings.Contains(r.out, "[worker 1#1]") {
		t.Errorf("no output from worker 1's second attempt")
	}
	want := int64(countLines(t, filepath.Join(dataDir, "train.libsvm")))
	for e := 0; e < 2; e++ {
		if got := r.status.EpochRecords[e]; got != want {
			t.Errorf("epoch %d counted %d records, want %d", e, got, want)
		}
	}
	// The dead process reported its first two shards' examples with
	// them; it may have lost those of the second's last batches, which
	// it computed as it read the third (the pipeline's depth), and never
	// reported the third's, which another process read again.
	lost := int64(consistency.FreeDepth * 100) // --batch 100
	for e := 0; e < 2; e++ {
		if got := int64(r.status.EpochMetrics[e]["examples_count"]); got > want || got < want-lost {
			t.Errorf("epoch %d's metrics count %d examples, want %d (at most %d fewer)", e, got, want, lost)
		}
	}
	// Within 0.002 of the same job undisturbed.
	u := runJob(t, 2, 2, 1<<20, "--epochs", "2", "--async")
	t.Logf("test AUC %.4f after worker 1 was killed, %.4f without", r.auc, u.auc)
	if math.Abs(r.auc-u.auc) > 0.002 {
		t.Errorf("AUC %.4f after a worker was killed, %.4f without: more than 0.002 apart", r.auc, u.auc)
	}
}

// TestAsyncWorker0KilledAfterACheckpoint: in asynchronous mode with a
// checkpoint after every epoch, worker 0, which takes them, is killed
// after checkpoint 1 was committed. Its replacement goes on at the
// job's current epoch: the job succeeds, counts every record once per
// epoch, and every committed checkpoint still holds the files its
// manifest lists. (It once started again at epoch 0, had the servers
// write checkpoint 1's files over the committed ones, and failed on
// committing it again, attempt after attempt.)
func TestAsyncWorker0KilledAfterACheckpoint(t *testing.T) {
	ckDir := filepath.Join(t.TempDir(), "ck")
	// 29 shards an epoch: worker 0's 30th is in epoch 1 or later.
	r := runJobWith(t, 2, 2, 1<<20, func(s *job.JobSpec) { s.CheckpointDir, s.CheckpointInterval = ckDir, "1" },
		"--epochs", "4", "--async", "--die-after", "0:30")
	for _, tr := range r.res.Tasks {
		if tr.Role == conf.RoleWorker && tr.Rank == 0 && tr.Attempts != 2 {
			t.Errorf("worker 0 ran %d times, want 2 (killed once)", tr.Attempts)
		}
	}
	want := int64(countLines(t, filepath.Join(dataDir, "train.libsvm")))
	for e := 0; e < 4; e++ {
		if got := r.status.EpochRecords[e]; got != want {
			t.Errorf("epoch %d counted %d records, want %d", e, got, want)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(ckDir, "*", ckpt.ManifestName))
	if len(dirs) == 0 {
		t.Fatalf("no committed checkpoint in %s", ckDir)
	}
	for _, mf := range dirs {
		data, err := os.ReadFile(mf)
		if err != nil {
			t.Fatal(err)
		}
		var m ckpt.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", mf, err)
		}
		for _, f := range m.Files {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(mf), f.Name))
			if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != f.SHA256 {
				t.Errorf("checkpoint %d: %s is not the file its manifest lists (%v)", m.N, f.Name, err)
			}
		}
	}
}

// TestEveryRecordOnceWithAWorkerHung: worker 1 blocks for ever after its
// first shard, in asynchronous mode, its node still answering heartbeats.
// Once worker 0 has waited the stall timeout for the epoch's last shard,
// the tracker reports worker 1 stalled; the launcher stops and restarts
// it, its shard goes back to the queue, every epoch counts every record
// once, and the model scores as the true weights do, within 0.01 AUC.
func TestEveryRecordOnceWithAWorkerHung(t *testing.T) {
	const stall = 3 * time.Second
	r := runJobWith(t, 2, 2, 1<<20, func(s *job.JobSpec) { s.StallTimeout = stall }, "--epochs", "2", "--async", "--hang-after", "1:1")
	for _, tr := range r.res.Tasks {
		if tr.Role == conf.RoleWorker && tr.Rank == 1 && tr.Attempts != 2 {
			t.Errorf("worker 1 ran %d times, want 2 (stopped once)", tr.Attempts)
		}
	}
	found := false
	for _, ev := range r.status.Events {
		found = found || ev.Kind == tracker.EventStalled && ev.Task == "worker 1" && strings.Contains(ev.Detail, "shard") && ev.Took >= stall
	}
	if !found {
		t.Errorf("no event says worker 1 stalled on its shard: %+v", r.status.Events)
	}
	want := int64(countLines(t, filepath.Join(dataDir, "train.libsvm")))
	for e := 0; e < 2; e++ {
		if got := r.status.EpochRecords[e]; got != want {
			t.Errorf("epoch %d counted %d records, want %d", e, got, want)
		}
	}
	if d := trueAUC - r.auc; d > 0.01 || d < -0.01 {
		t.Errorf("AUC %.4f is %.4f from the true weights' %.4f (allowed 0.01)", r.auc, d, trueAUC)
	}
}

// taskKill is a SIGKILL of role's rank once epoch has begun.
type taskKill struct {
	role        conf.Role
	rank, epoch int
}

// killedJob runs the synchronous 2×2 job over 4 epochs with the local
// launcher (checkpointing every epoch into ckDir, unless ""), and kills
// role's rank 1 with SIGKILL once epoch 1 has begun, before the job ends.
func killedJob(t *testing.T, name, ckDir string, role conf.Role) (job.Result, error, string) {
	t.Helper()
	return killedJobAt(t, name, ckDir, taskKill{role, 1, 1})
}

// killedJobAt is killedJob with the kills given, in order, each once its
// epoch has begun and a shard of it is done; every task has one attempt
// more than it is killed.
func killedJobAt(t testing.TB, name, ckDir string, kills ...taskKill) (job.Result, error, string) {
	t.Helper()
	return killedJobWith(t, psLR, name, ckDir, kills...)
}

// killedJobWith is killedJobAt running the ps-lr binary bin.
func killedJobWith(t testing.TB, bin, name, ckDir string, kills ...taskKill) (job.Result, error, string) {
	t.Helper()
	return killedJobSpec(t, bin, name, ckDir, nil, nil, kills...)
}

// killedJobSpec is killedJobWith with mod applied to the job's spec, and
// the time of each kill appended to at (when not nil). A kill after the
// first waits, besides its epoch, until the job has recovered from the
// one before: the killed task runs again and said so (a worker's rejoin
// or a server's restore, among the job's events).
func killedJobSpec(t testing.TB, bin, name, ckDir string, mod func(*job.JobSpec), at *[]time.Time, kills ...taskKill) (job.Result, error, string) {
	t.Helper()
	return signalledJob(t, bin, name, ckDir, syscall.SIGKILL, mod, at, kills...)
}

// signalledJob is killedJobSpec sending sig rather than SIGKILL.
func signalledJob(t testing.TB, bin, name, ckDir string, sig syscall.Signal, mod func(*job.JobSpec), at *[]time.Time, kills ...taskKill) (job.Result, error, string) {
	t.Helper()
	name = hadooptest.JobName(name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	perTask := map[taskKill]int{}
	for _, k := range kills {
		perTask[taskKill{k.role, k.rank, 0}]++
	}
	spec := job.JobSpec{
		Name:        name,
		Command:     []string{bin, "--epochs", "4"},
		NumWorkers:  2,
		NumServers:  2,
		MaxAttempts: 1 + slices.Max(append(slices.Collect(maps.Values(perTask)), 0)),
		Inputs:      []string{filepath.Join(dataDir, "train.libsvm")},
		SplitSize:   2 << 20,
		Output:      filepath.Join(t.TempDir(), "model"),
	}
	if ckDir != "" {
		spec.CheckpointDir, spec.CheckpointInterval = ckDir, "1"
	}
	if len(kills) == 0 {
		spec.MaxAttempts = 1
	}
	if mod != nil {
		mod(&spec)
	}
	r := localResolverForTest(t)
	next := 0
	res, err := local.Run(ctx, spec, local.Options{
		Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(r), Resolver: r,
		OnStatus: func(st tracker.Status) {
			if next == len(kills) {
				return
			}
			k := kills[next]
			if next > 0 && recoveries(st) < next {
				return
			}
			if st.Epoch >= k.epoch && st.ShardsDone >= 1 && (st.Epoch < 3 || st.ShardsDone < st.ShardsTotal-2) {
				if len(hadooptest.SignalTask(t, "SPINDLE_JOB_NAME="+name, string(k.role), k.rank, sig)) > 0 {
					next++
					if at != nil {
						*at = append(*at, time.Now())
					}
				}
			}
		},
	})
	if next < len(kills) {
		t.Fatalf("%d of %d kills done mid-job (job %v %v)\n%s", next, len(kills), res.State, err, out.String())
	}
	return res, err, out.String()
}

// recoveries counts the job's events that say a killed task's new
// process took its place: a worker's rejoin, a server's restore, a
// scheduler's rebuilt table.
func recoveries(st tracker.Status) int {
	n := 0
	for _, e := range st.Events {
		if e.Kind == tracker.EventRejoined || e.Kind == tracker.EventRestored || e.Kind == tracker.EventRebuilt {
			n++
		}
	}
	return n
}

// checkStartedAgain checks that a job that lost a process reached, by
// starting again from a checkpoint in ckDir, the model of the job never
// interrupted, counting every epoch's records once.
func checkStartedAgain(t *testing.T, res job.Result, err error, out, ckDir string) {
	t.Helper()
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job after a process was killed: %v %v\n%s", res.State, err, out)
	}
	m, err := model.ReadManifest(context.Background(), localResolverForTest(t), res.Output)
	if err != nil {
		t.Fatal(err)
	}
	if m.Training == nil || m.Training.Restarts != 1 || !strings.HasPrefix(m.Training.ResumedFrom, "file://"+ckDir+"/") {
		t.Errorf("manifest's training section %+v; want 1 restart from a checkpoint in %s", m.Training, ckDir)
	}
	for e := 0; e < 4; e++ {
		if got := res.Status.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	checkSameModel(t, res.Output, straightJob(t), "a process was lost")
}

// TestServerKilled kills server 1 with SIGKILL during a synchronous job
// run by the local launcher. With checkpoints every process is started
// again from the newest committed checkpoint and the model is the one of
// a job never interrupted; without, the job fails naming the server.
func TestServerKilled(t *testing.T) {
	t.Run("checkpoints", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "ckpt")
		res, err, out := killedJob(t, "lr-server-killed-ckpt", ck, conf.RoleServer)
		checkStartedAgain(t, res, err, out, ck)
	})
	t.Run("no_checkpoints", func(t *testing.T) {
		res, err, out := killedJob(t, "lr-server-killed-nockpt", "", conf.RoleServer)
		if err == nil || res.State != tracker.Failed {
			t.Fatalf("job without checkpoints after losing a server: %v %v; want FAILED\n%s", res.State, err, out)
		}
		for _, want := range []string{"server 1 failed", "CheckpointDir"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q\n%s", err, want, out)
			}
		}
	})
}

// withReplicas makes a job 2×3 whose servers keep one replica each.
func withReplicas(s *job.JobSpec) { s.NumServers, s.Replicas = 3, 1 }

// straight3Job is the 2×3 job never interrupted: the model a job whose
// servers keep replicas must write, whatever died.
func straight3Job(t *testing.T) jobRun { return straightJobOf(t, 3) }

// TestServerKilledWithReplicas kills server 1 with SIGKILL in the middle
// of epoch 1 of a synchronous job of 2 workers and 3 servers that keep
// one replica each, without a checkpoint directory. The launcher starts
// server 1 alone; its new process restores its tables from the replicas,
// the workers send it what the dead one had not answered, and the job
// succeeds with the very model of the job never interrupted (and of one
// without replicas), no other task started again, every record counted
// once per epoch.
//
// With a checkpoint every epoch too, the checkpoints go on, the new
// process writing its part of them, and nothing rolls back either.
func TestServerKilledWithReplicas(t *testing.T) {
	t.Run("no_checkpoints", func(t *testing.T) { serverKilledWithReplicas(t, "") })
	t.Run("checkpoints", func(t *testing.T) {
		ck := filepath.Join(t.TempDir(), "ckpt")
		serverKilledWithReplicas(t, ck)
		// Checkpoint 4, at the end, is the new process's work too.
		c, err := ckpt.Latest(context.Background(), dfs.Local{}, ck, true)
		if err != nil || c.N != 4 {
			t.Fatalf("newest checkpoint %+v (%v), want 4", c, err)
		}
	})
}

func serverKilledWithReplicas(t *testing.T, ck string) {
	var at []time.Time
	res, err, out := killedJobSpec(t, psLR, "lr-server-killed-replicas", ck, withReplicas, &at, taskKill{conf.RoleServer, 1, 1})
	checkFailedOver(t, res, err, out, map[taskKill]int{{conf.RoleServer, 1, 0}: 2})
	restored := theEvent(t, res.Status, tracker.EventRestored, "server 1")
	t.Logf("from the kill to server 1's new process's first update: %v (from its exit, as the job's events say: %v)",
		restored.At.Sub(at[0]).Round(time.Millisecond), restored.Took.Round(time.Millisecond))
	checkSameModel(t, res.Output, straight3Job(t), "server 1 was killed")
}

// TestSchedulerKilled kills the scheduler with SIGKILL in the middle of
// epoch 1 of the synchronous 2×2 job, without a checkpoint directory.
// The launcher starts a new scheduler alone, on a new port; the servers
// and workers, which went on training meanwhile, find it through the
// tracker and rejoin it, and it rebuilds its node table from them. The
// job succeeds with the very model of the job never interrupted, no
// other task started again, every record counted once per epoch.
func TestSchedulerKilled(t *testing.T) {
	var at []time.Time
	res, err, out := killedJobSpec(t, psLR, "lr-scheduler-killed", "", nil, &at, taskKill{conf.RoleScheduler, 0, 1})
	checkFailedOver(t, res, err, out, map[taskKill]int{{conf.RoleScheduler, 0, 0}: 2})
	rebuilt := theEvent(t, res.Status, tracker.EventRebuilt, "scheduler 0")
	t.Logf("from the kill to the new scheduler's rebuilt table: %v (from its exit, as the job's events say: %v)",
		rebuilt.At.Sub(at[0]).Round(time.Millisecond), rebuilt.Took.Round(time.Millisecond))
	checkSameModel(t, res.Output, straightJob(t), "the scheduler was killed")
}

// TestSchedulerStopped is TestSchedulerKilled with SIGSTOP: a scheduler
// that hangs rather than dies. The servers and workers lose it once it
// has not been heard from for the heartbeat timeout (3 s here) and report
// it; the launcher stops it and starts a new one alone, which rebuilds
// its table from the nodes, and the job writes the model of a job never
// interrupted. Before, the nodes looked for a replacement the launcher
// never started, and the job's last barrier waited for it.
func TestSchedulerStopped(t *testing.T) {
	res, err, out := signalledJob(t, psLR, "lr-scheduler-stopped", "", syscall.SIGSTOP, withFastHeartbeats, nil,
		taskKill{conf.RoleScheduler, 0, 1})
	checkFailedOver(t, res, err, out, map[taskKill]int{{conf.RoleScheduler, 0, 0}: 2})
	theEvent(t, res.Status, tracker.EventUnresponsive, "scheduler 0")
	theEvent(t, res.Status, tracker.EventRebuilt, "scheduler 0")
	checkSameModel(t, res.Output, straightJob(t), "the scheduler was stopped")
}

// withFastHeartbeats has a job's nodes send heartbeats every 250 ms and
// lose a node not heard from for 3 s (PS_HEARTBEAT_INTERVAL,
// PS_HEARTBEAT_TIMEOUT; 10 s by default), for the tests of hung tasks.
func withFastHeartbeats(s *job.JobSpec) {
	s.Env = append(s.Env, "PS_HEARTBEAT_INTERVAL=0.25", "PS_HEARTBEAT_TIMEOUT=3")
}

// TestChaos kills five random tasks of a synchronous job of 2 workers and
// 3 servers that keep one replica each, without a checkpoint directory,
// one after another, each once the job recovered from the kill before
// (never more than one server down), then the scheduler in the last
// epoch: the job succeeds without starting
// again, only the killed tasks ran more than once, every record is
// counted once per epoch, the model scores within 0.002 AUC of the job
// never interrupted, and no process of the job is left.
func TestChaos(t *testing.T) {
	kills, attempts := chaosKills(t)
	name := "lr-chaos"
	mod := func(s *job.JobSpec) {
		withReplicas(s)
		s.Command = []string{psLR, "--epochs", "6"}
		name = s.Name
	}
	res, err, out := killedJobSpec(t, psLR, name, "", mod, nil, kills...)
	if left := jobProcesses(t, name); len(left) > 0 {
		t.Errorf("processes of the job left after it ended: %v", left)
	}
	checkFailedOver(t, res, err, out, attempts)
	straight := runJob(t, 2, 3, 2<<20, "--epochs", "6")
	auc := evalAUC(t, res.Output, func(string) (string, bool) { return "", false })
	t.Logf("test AUC %.4f after %d kills, %.4f without", auc, len(kills), straight.auc)
	if math.Abs(auc-straight.auc) > 0.002 {
		t.Errorf("AUC %.4f after %d kills, %.4f without: more than 0.002 apart", auc, len(kills), straight.auc)
	}
}

// chaosKills draws five kills of the servers and workers of a job of 2
// workers and 3 servers, one in each of its epochs 0 to 4, then kills the
// scheduler in epoch 5, and returns them with the attempts each task then
// makes ({role, rank, 0}: attempts).
func chaosKills(t *testing.T) ([]taskKill, map[taskKill]int) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var kills []taskKill
	attempts := map[taskKill]int{}
	for e := range 5 {
		k := taskKill{conf.RoleServer, rng.IntN(3), e}
		if rng.IntN(2) == 0 {
			k = taskKill{conf.RoleWorker, rng.IntN(2), e}
		}
		kills = append(kills, k)
		key := taskKill{k.role, k.rank, 0}
		attempts[key] = max(attempts[key], 1) + 1
	}
	kills = append(kills, taskKill{conf.RoleScheduler, 0, 5})
	attempts[taskKill{conf.RoleScheduler, 0, 0}] = 2
	t.Logf("seed %d: kills %v", seed, kills)
	return kills, attempts
}

// checkFailedOver checks a job that lost tasks and went on without
// starting again: it succeeded, each task ran attempts[{role, rank, 0}]
// times (1 if not given), and every epoch counted every record once.
func checkFailedOver(t *testing.T, res job.Result, err error, out string, attempts map[taskKill]int) {
	t.Helper()
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job after tasks were killed: %v %v\n%s", res.State, err, out)
	}
	if res.Restarts != 0 {
		t.Errorf("the job started again %d time(s); want none", res.Restarts)
	}
	checkAttempts(t, res.Tasks, attempts)
	for e, got := range res.Status.EpochRecords {
		if got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
}

// checkAttempts checks that each task ran attempts[{role, rank, 0}]
// times, 1 when not given.
func checkAttempts(t testing.TB, tasks []job.TaskResult, attempts map[taskKill]int) {
	t.Helper()
	for _, tr := range tasks {
		want := 1
		if n, ok := attempts[taskKill{tr.Role, tr.Rank, 0}]; ok {
			want = n
		}
		if tr.Attempts != want {
			t.Errorf("%s %d ran %d time(s), want %d", tr.Role, tr.Rank, tr.Attempts, want)
		}
	}
}

// eventsOf returns the job's events of kind.
func eventsOf(st tracker.Status, kind string) []tracker.Event {
	var out []tracker.Event
	for _, e := range st.Events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// theEvent returns the job's one event of kind, which task must have
// reported.
func theEvent(t testing.TB, st tracker.Status, kind, task string) tracker.Event {
	t.Helper()
	evs := eventsOf(st, kind)
	if len(evs) != 1 || evs[0].Task != task {
		t.Fatalf("the job's %s events %+v; want one, of %s", kind, evs, task)
	}
	return evs[0]
}

// checkSameModel checks that the model in dir has every part of want's,
// byte for byte; after says what happened to the job.
func checkSameModel(t *testing.T, dir string, want jobRun, after string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(want.parts)) {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(got, want.parts[p]) {
			t.Errorf("%s after %s differs from the job never interrupted (%v)", p, after, err)
		}
	}
}

// jobProcesses returns the processes whose environment names job.
func jobProcesses(t testing.TB, job string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/environ")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(env, []byte("\x00SPINDLE_JOB_NAME="+job+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out = append(out, pid)
	}
	return out
}

// TestSyncWorkerKilled kills worker 1 with SIGKILL during a synchronous
// job without checkpoints: the steps go on with the other worker, the
// launcher starts worker 1 again, and the new process rejoins after the
// last of its batches the servers applied. The job succeeds without
// starting any other task again, counts every epoch's records once, and
// its model scores within 0.002 AUC of the job never interrupted.
func TestSyncWorkerKilled(t *testing.T) {
	res, err, out := killedJob(t, "lr-sync-worker-killed", "", conf.RoleWorker)
	checkRejoined(t, res, err, out, map[int]int{1: 2})
}

// TestSyncWorkerStopped stops worker 1 with SIGSTOP during a synchronous
// job: a process that hangs rather than dies, and that its launcher sees
// running. The scheduler declares it dead once it has not been heard
// from for the heartbeat timeout (3 s here) and reports it; the launcher
// stops it and starts it again, and the new process rejoins the steps:
// the job ends as TestSyncWorkerKilled's does, where before it waited
// for the stopped worker for good.
func TestSyncWorkerStopped(t *testing.T) {
	res, err, out := signalledJob(t, psLR, "lr-sync-worker-stopped", "", syscall.SIGSTOP, withFastHeartbeats, nil, taskKill{conf.RoleWorker, 1, 1})
	checkRejoined(t, res, err, out, map[int]int{1: 2})
	found := false
	for _, e := range res.Status.Events {
		found = found || e.Kind == tracker.EventUnresponsive && e.Task == "worker 1"
	}
	if !found {
		t.Errorf("no event says the scheduler found worker 1 unresponsive: %+v", res.Status.Events)
	}
}

// TestSyncWorkersKilledRepeatedly kills a worker in each of three epochs,
// worker 1's first replacement among them: each new process rejoins, and
// the job ends as TestSyncWorkerKilled's does.
func TestSyncWorkersKilledRepeatedly(t *testing.T) {
	res, err, out := killedJobAt(t, "lr-sync-workers-killed", "",
		taskKill{conf.RoleWorker, 1, 0}, taskKill{conf.RoleWorker, 0, 1}, taskKill{conf.RoleWorker, 1, 2})
	checkRejoined(t, res, err, out, map[int]int{0: 2, 1: 3})
}

// checkRejoined checks a synchronous job that lost workers without a
// checkpoint directory: it succeeded without starting again, each worker
// rank ran attempts[rank] times (1 if not given) and every other task
// once, every epoch's records were counted once, and the model scores
// within 0.002 AUC of the job never interrupted.
func checkRejoined(t *testing.T, res job.Result, err error, out string, attempts map[int]int) {
	t.Helper()
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job after workers were killed: %v %v\n%s", res.State, err, out)
	}
	if res.Restarts != 0 {
		t.Errorf("the job started again %d time(s); want none", res.Restarts)
	}
	byTask := map[taskKill]int{}
	for rank, n := range attempts {
		byTask[taskKill{conf.RoleWorker, rank, 0}] = n
	}
	checkAttempts(t, res.Tasks, byTask)
	for e := 0; e < 4; e++ {
		if got := res.Status.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	// The epochs' metrics count the dead workers' examples too, but for
	// those of the shard each was reading that the servers had (the
	// replacement skips them): per kill, at most about a shard's.
	kills := 0
	for _, n := range attempts {
		kills += n - 1
	}
	shard := 2 * rows / max(res.Status.ShardsTotal, 1) // a shard's records, with room
	total := 0.0
	for e := 0; e < 4; e++ {
		total += res.Status.EpochMetrics[e]["examples_count"]
	}
	t.Logf("the epochs' metrics count %d examples of %d after %d kill(s)", int(total), 4*rows, kills)
	if lost := 4*rows - int(total); lost < 0 || lost > kills*shard {
		t.Errorf("the epochs' metrics count %d examples of %d: %d lost for %d kills, want at most %d", int(total), 4*rows, lost, kills, kills*shard)
	}
	if !strings.Contains(out, "rejoined") {
		t.Errorf("no replacement says it rejoined the steps:\n%s", out)
	}
	// Each replacement's rejoin is one of the job's events.
	rejoins := map[string]int{}
	for _, e := range res.Status.Events {
		if e.Kind == tracker.EventRejoined {
			rejoins[e.Task]++
		}
	}
	for rank, n := range attempts {
		if got := rejoins[fmt.Sprintf("worker %d", rank)]; got != n-1 {
			t.Errorf("worker %d rejoined %d time(s) by the job's events, want %d: %+v", rank, got, n-1, res.Status.Events)
		}
	}
	straight := straightJob(t)
	auc := evalAUC(t, res.Output, func(string) (string, bool) { return "", false })
	t.Logf("test AUC %.4f after workers were killed, %.4f without", auc, straight.auc)
	if math.Abs(auc-straight.auc) > 0.002 {
		t.Errorf("AUC %.4f after workers were killed, %.4f without: more than 0.002 apart", auc, straight.auc)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// TestHadoopTrainFromHDFS runs the synchronous 2×2 job with its input,
// test set and model in HDFS: the model must be the very same bytes as
// the local run's, and Hadoop's own `hdfs dfs -cat` must show the lines
// the Go reader returns. Then over it with Overwrite: a job that fails
// leaves the model as it was, one that succeeds replaces it, and neither
// leaves a directory beside it.
func TestHadoopTrainFromHDFS(t *testing.T) {
	c := hadooptest.Connect(t)
	run := syncJob(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := uploadData(t, c)
	// hdfs:/// takes the NameNode from fs.defaultFS; the input is a glob.
	input, test, modelURI := "hdfs://"+dir+"/train*.libsvm", "hdfs://"+dir+"/test.libsvm", "hdfs://"+dir+"/model"
	runHDFS := func(overwrite bool, stdout io.Writer, args ...string) (job.Result, error) {
		return local.Run(ctx, job.JobSpec{
			Name:        "lr-hdfs",
			Command:     append([]string{psLR, "--test", test}, args...),
			NumWorkers:  2,
			NumServers:  2,
			MaxAttempts: 1,
			Inputs:      []string{input},
			SplitSize:   2 << 20,
			Output:      modelURI,
			Overwrite:   overwrite,
		}, local.Options{Environ: os.Environ(), Stdout: stdout, Log: quietLog(), Planner: tracker.InputPlanner(c.Resolver), Resolver: c.Resolver})
	}
	var out syncbuf.Buffer
	res, err := runHDFS(false, &out, "--epochs", "2")
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job from HDFS: %v %v\n%s", res.State, err, out.String())
	}
	// The Go reader.
	readModel := func() []string {
		t.Helper()
		var lines []string
		err := model.Read(ctx, c.Resolver, modelURI, func(key uint64, vals []float32) error {
			lines = append(lines, fmt.Sprintf("%d\t%s", key, strconv.FormatFloat(float64(vals[0]), 'g', -1, 32)))
			return nil
		})
		if err != nil {
			t.Fatalf("read the model: %v", err)
		}
		return lines
	}
	goLines := readModel()
	// The same bytes as the local synchronous run's parts.
	var runLines []string
	for _, name := range []string{"part-00000", "part-00001"} {
		runLines = append(runLines, strings.Split(strings.TrimSuffix(string(run.parts[name]), "\n"), "\n")...)
	}
	if strings.Join(goLines, "\n") != strings.Join(runLines, "\n") {
		t.Errorf("the model trained from HDFS differs from the local run's (%d and %d lines)", len(goLines), len(runLines))
	}
	// Hadoop's own reader.
	cat, ok := hadooptest.HadoopShell(t, "-cat", dir+"/model/part-*")
	if ok {
		if got := strings.TrimSuffix(string(cat), "\n"); got != strings.Join(goLines, "\n") {
			t.Errorf("hdfs dfs -cat shows %d lines that differ from the Go reader's %d", strings.Count(got, "\n")+1, len(goLines))
		}
	}
	if !strings.Contains(out.String(), "test AUC") {
		t.Errorf("no test AUC reported:\n%s", out.String())
	}

	beside := func() {
		t.Helper()
		fsys, name, err := c.Resolver.Resolve(ctx, "hdfs://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := fsys.ReadDir(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s left beside the model", e.Name())
			}
		}
	}
	overwrite := func(args ...string) job.Result {
		t.Helper()
		res, err := runHDFS(true, io.Discard, args...)
		if err != nil && res.State == tracker.Succeeded {
			t.Fatal(err)
		}
		return res
	}
	if res := overwrite("--epochs", "1", "--bogus"); res.State != tracker.Failed {
		t.Fatalf("a job with a bad flag over the model: %v", res.State)
	}
	if got := readModel(); strings.Join(got, "\n") != strings.Join(goLines, "\n") {
		t.Errorf("a job with Overwrite that failed changed the model (%d lines, had %d)", len(got), len(goLines))
	}
	beside()
	if res := overwrite("--epochs", "1"); res.State != tracker.Succeeded {
		t.Fatalf("a 1-epoch job over the model: %v", res.State)
	}
	if got := readModel(); len(got) == 0 || strings.Join(got, "\n") == strings.Join(goLines, "\n") {
		t.Errorf("the 1-epoch job with Overwrite left the 2-epoch model in place (%d lines)", len(got))
	}
	beside()
}

// TestResumeReachesTheSameModel stops a synchronous job after its
// checkpoint of epoch 2 (a 2-epoch job checkpointing every epoch) and
// resumes it to 4 epochs: the model must be the same bytes as a 4-epoch
// job never stopped. Then, with checkpoint 2 corrupted on purpose, the
// resumed job falls back to checkpoint 1 and still reaches the same model.
func TestResumeReachesTheSameModel(t *testing.T) {
	ckDir := filepath.Join(t.TempDir(), "ckpt")
	withCkpt := func(dir string, resume bool) func(*job.JobSpec) {
		return func(s *job.JobSpec) {
			s.CheckpointDir, s.CheckpointInterval, s.Resume = dir, "1", resume
		}
	}
	runJobWith(t, 2, 2, 2<<20, withCkpt(ckDir, false), "--epochs", "2")
	for _, n := range []string{"1", "2"} {
		if _, err := os.Stat(filepath.Join(ckDir, n, "_manifest.json")); err != nil {
			t.Fatalf("checkpoint %s not committed: %v", n, err)
		}
	}
	corrupt := filepath.Join(t.TempDir(), "ckpt-corrupt")
	if out, err := exec.Command("cp", "-r", ckDir, corrupt).CombinedOutput(); err != nil {
		t.Fatalf("copy checkpoints: %v %s", err, out)
	}
	f, err := os.OpenFile(filepath.Join(corrupt, "2", ckpt.TableFileName("w", 0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 1000); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, 1000); err != nil {
		t.Fatal(err)
	}
	f.Close()

	straight := straightJob(t)
	resumed := runJobWith(t, 2, 2, 2<<20, withCkpt(ckDir, true), "--epochs", "4")
	fellBack := runJobWith(t, 2, 2, 2<<20, withCkpt(corrupt, true), "--epochs", "4")
	for name, want := range straight.parts {
		if !bytes.Equal(resumed.parts[name], want) {
			t.Errorf("%s: the job resumed from checkpoint 2 differs from the one never stopped", name)
		}
		if !bytes.Equal(fellBack.parts[name], want) {
			t.Errorf("%s: the job that fell back to checkpoint 1 differs from the one never stopped", name)
		}
	}
	if len(straight.parts) != 2 {
		t.Fatalf("%d parts", len(straight.parts))
	}
	// The result and the status's events name the checkpoint each
	// started from.
	for _, r := range []struct {
		run   jobRun
		dir   string
		n     int
		epoch int
	}{{resumed, ckDir, 2, 2}, {fellBack, corrupt, 1, 1}} {
		uri := fmt.Sprintf("file://%s/%d", r.dir, r.n)
		if r.run.res.ResumedFrom != uri {
			t.Errorf("resumed from %q; want %q", r.run.res.ResumedFrom, uri)
		}
		want := fmt.Sprintf("from checkpoint %s (epoch %d)", uri, r.epoch)
		if !slices.ContainsFunc(r.run.status.Events, func(e tracker.Event) bool { return e.Kind == tracker.EventResumed && e.Detail == want }) {
			t.Errorf("events %+v; want one %q %q", r.run.status.Events, tracker.EventResumed, want)
		}
	}
	if slices.ContainsFunc(straight.status.Events, func(e tracker.Event) bool { return e.Kind == tracker.EventResumed }) {
		t.Errorf("the job that never stopped has a %q event: %+v", tracker.EventResumed, straight.status.Events)
	}
}

// TestMalformedRecords: a job fails on a malformed record by default,
// naming the file, the line and its byte offset; with --max-bad-records it skips,
// counts and reports it. A synchronous worker with attempts left fails again in each
// one, and the job fails then, its model not written: the servers once
// took the death of the worker's second process for the end of training,
// wrote the model and exited, and the third process waited for them for
// the 30 minutes of a table's I/O bound.
func TestMalformedRecords(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dataDir, "train.libsvm"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")[:2000]
	good := strings.Join(lines[:1000], "")
	bad := "1 7:1 x:1\n"
	input := filepath.Join(t.TempDir(), "bad.libsvm")
	if err := os.WriteFile(input, []byte(good+bad+strings.Join(lines[1000:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(t.TempDir(), "model")
	run := func(attempts int, args ...string) (job.Result, error, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out syncbuf.Buffer
		res, err := local.Run(ctx, job.JobSpec{
			Command: append([]string{psLR, "--epochs", "1"}, args...), NumWorkers: 1, NumServers: 1, MaxAttempts: attempts,
			Inputs: []string{input}, Output: output,
		}, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(localResolverForTest(t))})
		return res, err, out.String()
	}
	want := fmt.Sprintf("%s, line 1001 (byte %d)", "file://"+input, len(good))
	res, err, out := run(1, "--async")
	if err == nil || res.State != tracker.Failed || !strings.Contains(out, want) {
		t.Fatalf("job over a malformed record: %v %v; want a failure naming %q in:\n%s", res.State, err, want, out)
	}
	// Another attempt would meet the same record: the worker's first
	// failure ends the job, though it may have three.
	res, err, out = run(3)
	if err == nil || res.State != tracker.Failed || !strings.Contains(err.Error(), "attempt 1 of 3, and is not started again") || !strings.Contains(err.Error(), want) {
		t.Fatalf("synchronous job over a malformed record, 3 attempts: %v %v; want the worker's first failure, naming %q, in:\n%s", res.State, err, want, out)
	}
	if res.Restarts != 0 {
		t.Errorf("the job started again %d times", res.Restarts)
	}
	if parts, _ := filepath.Glob(filepath.Join(output, "*")); len(parts) != 0 {
		t.Fatalf("the failed job wrote %v", parts)
	}
	res, err, out = run(1, "--async", "--max-bad-records", "1", "--epochs", "2")
	if err != nil {
		t.Fatalf("job skipping one bad record: %v\n%s", err, out)
	}
	if got := res.Status.Metrics["bad_records_sum"]; got != 1 {
		t.Errorf("bad records counted %v, want 1", got)
	}
	// The worker says which record it skipped, once in two epochs.
	if n := strings.Count(out, "skipped a malformed record (--max-bad-records): records: "+want); n != 1 {
		t.Errorf("the skipped record is reported %d times, want once, naming %q, in:\n%s", n, want, out)
	}
	if got := res.Status.EpochRecords[0]; got != 2000 {
		t.Errorf("records read %d, want the 2000 good ones", got)
	}
	// Worker 0 said how many epochs the job trains, for its progress.
	if p, ok := res.Status.Progress(); res.Status.EpochsPlanned != 2 || !ok || p != 1 {
		t.Errorf("%d epochs planned, progress %v %v; want 2, 1", res.Status.EpochsPlanned, p, ok)
	}
}

func localResolverForTest(t testing.TB) job.Resolver {
	t.Helper()
	r, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestBinaryModel: the 1×1 synchronous job with --model-format binary
// writes binary parts holding the very weights of the text run, which
// ps-lr eval and the Go reader read alike.
func TestBinaryModel(t *testing.T) {
	text := singleJob(t)
	bin := runJob(t, 1, 1, 2<<20, "--epochs", "2", "--model-format", "binary")
	ctx := context.Background()
	m, err := model.ReadManifest(ctx, localResolverForTest(t), bin.model)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tables) != 1 || m.Tables[0].Format != model.FormatBinary || m.Tables[0].Name != "w" {
		t.Fatalf("manifest tables %+v, want one binary table w", m.Tables)
	}
	read := func(dir string) string {
		var b strings.Builder
		err := model.Read(ctx, localResolverForTest(t), dir, func(key uint64, vals []float32) error {
			fmt.Fprintf(&b, "%d\t%s\n", key, strconv.FormatFloat(float64(vals[0]), 'g', -1, 32))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got, want := read(bin.model), string(text.parts["part-00000"]); got != want {
		t.Errorf("the binary model reads as %d bytes of lines, the text model is %d bytes: they differ", len(got), len(want))
	}
	if bin.auc != text.auc {
		t.Errorf("eval: binary model AUC %v, text model %v", bin.auc, text.auc)
	}
}
