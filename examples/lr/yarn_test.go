package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
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

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// The YARN tests run ps-lr as a YARN application on the mini cluster,
// through yarnclient.Submit with the real ps-submit binary as the
// ApplicationMaster, reading from and writing to its HDFS.

var (
	psSubmitOnce sync.Once
	psSubmitBin  string
)

// psSubmit builds ps-submit once for the package's tests.
func psSubmit(t testing.TB) string {
	t.Helper()
	psSubmitOnce.Do(func() {
		// Beside ps-lr, in the directory TestMain removes.
		psSubmitBin = hadooptest.BuildInto(t, "github.com/spindle-ps/spindle/cmd/ps-submit", filepath.Dir(psLR))
	})
	if psSubmitBin == "" {
		t.Fatal("ps-submit was not built (see the first test's output)")
	}
	return psSubmitBin
}

// uploadData copies the generated train and test sets into a fresh HDFS
// directory, in 1 MiB blocks so that records and shards cross block
// boundaries, and returns the directory's path.
func uploadData(t testing.TB, c *hadooptest.Cluster) string {
	t.Helper()
	dir := c.TempDir(t)
	for _, name := range []string{"train.libsvm", "test.libsvm"} {
		data, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		c.WriteFile(t, dir+"/"+name, data, dfs.CreateOptions{BlockSize: 1 << 20})
	}
	return dir
}

type yarnRun struct {
	res job.Result
	err error
	app yarn.ApplicationID
}

// runYARN runs spec as a YARN application and waits for its end (at most
// 5 minutes). onStatus, when set, sees the job's status as the
// ApplicationMaster's tracker reports it, every 100 ms while it runs.
func runYARN(t testing.TB, spec job.JobSpec, onStatus func(app yarn.ApplicationID, st tracker.Status)) yarnRun {
	t.Helper()
	return runYARNAs(t, spec, yarnclient.Login{}, onStatus)
}

// runYARNAs is runYARN with ps-submit logged in as login says.
func runYARNAs(t testing.TB, spec job.JobSpec, login yarnclient.Login, onStatus func(app yarn.ApplicationID, st tracker.Status)) yarnRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var r yarnRun
	opts := yarnclient.Options{
		Lookup:            os.LookupEnv,
		Executable:        psSubmit(t),
		Log:               quietLog(),
		Poll:              100 * time.Millisecond,
		AllocationTimeout: 2 * time.Minute,
		OnSubmitted:       func(id yarn.ApplicationID) { r.app = id },
		Login:             login,
	}
	if onStatus != nil {
		opts.OnStatus = func(st tracker.Status) { onStatus(r.app, st) }
	}
	r.res, r.err = yarnclient.Submit(ctx, spec, opts)
	if ctx.Err() != nil {
		t.Fatalf("the YARN job did not end within 5 minutes: %v", r.err)
	}
	if len(r.res.Tasks) == 0 && r.app != (yarn.ApplicationID{}) {
		// The client's result has no tasks: the job's final status,
		// which the ApplicationMaster left beside its logs, lists them.
		_, st, stErr, err := yarnclient.JobStatus(ctx, r.app, os.LookupEnv, yarnclient.Login{})
		if err == nil {
			err = stErr
		}
		if err != nil || st == nil {
			t.Fatalf("the final status of %s: %v", r.app, err)
		}
		for _, task := range st.Tasks {
			r.res.Tasks = append(r.res.Tasks, job.TaskResult{Role: task.Role, Rank: task.Rank, Attempts: task.Attempt + 1, Retired: task.State == "retired"})
		}
	}
	return r
}

// amLog is the ApplicationMaster's stderr: the first container's.
func amLog(t *testing.T, app yarn.ApplicationID) string {
	t.Helper()
	for c, s := range hadooptest.ContainerFiles(t, app.String(), "stderr") {
		if strings.HasSuffix(c, "_000001") {
			return s
		}
	}
	return ""
}

// readModel returns the model's part files, concatenated in rank order,
// once it is complete (_SUCCESS).
func readModel(t *testing.T, c *hadooptest.Cluster, uri string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := readManifestOf(ctx, c, uri)
	if err != nil {
		t.Fatal(err)
	}
	fsys, dir, err := c.Resolver.Resolve(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range m.Parts {
		f, err := fsys.Open(ctx, dir+"/"+p.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(&b, f)
		f.Close()
		if err != nil {
			t.Fatalf("read %s: %v", p.Name, err)
		}
	}
	return b.String()
}

// localModel is the same text for a local run's parts.
func localModel(t *testing.T, r jobRun) string {
	t.Helper()
	if len(r.parts) != 2 {
		t.Fatalf("the local run wrote %d parts, want 2", len(r.parts))
	}
	return string(r.parts["part-00000"]) + string(r.parts["part-00001"])
}

// readManifestOf reads the committed model's manifest.
func readManifestOf(ctx context.Context, c *hadooptest.Cluster, uri string) (model.Manifest, error) {
	m, err := model.ReadManifest(ctx, c.Resolver, uri)
	if err != nil {
		return m, fmt.Errorf("model manifest: %w", err)
	}
	return m, nil
}

// manifest reads the training section of the committed model's manifest.
func manifest(t testing.TB, c *hadooptest.Cluster, uri string) model.Training {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := model.ReadManifest(ctx, c.Resolver, uri)
	if err != nil {
		t.Fatalf("model manifest: %v", err)
	}
	if m.Training == nil {
		t.Fatalf("the manifest of %s has no training section", uri)
	}
	return *m.Training
}

// checkEveryRecordOnce checks that each of epochs epochs counted every
// training record exactly once.
func checkEveryRecordOnce(t *testing.T, tr model.Training, epochs int) {
	t.Helper()
	for e := 0; e < epochs; e++ {
		if got := tr.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
}

// TestHadoopYARNTrainMatchesLocal: the synchronous 2×2 LR job on YARN,
// from HDFS to HDFS, writes the same model as the job run on this machine
// with the local launcher, and so the same test AUC.
func TestHadoopYARNTrainMatchesLocal(t *testing.T) {
	c := hadooptest.Connect(t)
	run := syncJob(t)
	dir := uploadData(t, c)
	spec := lrSpec(dir, "model")
	spec.Command = []string{psLR, "--epochs", "2", "--test", "hdfs://" + dir + "/test.libsvm"}
	spec.MaxAttempts = 1
	out := spec.Output
	r := runYARN(t, spec, nil)
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("YARN job: %v %v\nAM log:\n%s", r.res.State, r.err, amLog(t, r.app))
	}
	if got, want := readModel(t, c, out), localModel(t, run); got != want {
		t.Errorf("the model trained on YARN differs from the local run's (%d and %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
	auc := evalAUC(t, out, os.LookupEnv)
	t.Logf("test AUC: YARN %.4f, local %.4f", auc, run.auc)
	if d := auc - run.auc; d < -0.002 || d > 0.002 {
		t.Errorf("AUC on YARN %.4f is %.4f from the local run's %.4f (allowed 0.002)", auc, d, run.auc)
	}
	tr := manifest(t, c, out)
	checkEveryRecordOnce(t, tr, 2)
	// The client's summary comes from the manifest.
	if got := r.res.Status.Metrics["test_auc"]; got < auc-5e-5 || got > auc+5e-5 {
		t.Errorf("ps-submit's test_auc %.6f, the model's %.6f", got, auc)
	}
}

// TestHadoopYARNWorkerKilled kills worker 1's process with SIGKILL in its
// container mid-job.
//   - Asynchronous mode, in the first epoch: the ApplicationMaster runs it
//     again in a new container, its shard is handed out again, and each
//     epoch counts every record exactly once.
//   - Synchronous mode without checkpoints, in the third epoch: the steps
//     go on with the other worker, the ApplicationMaster runs worker 1
//     again, and its new process rejoins the steps after its last batch
//     the servers applied. No other task starts again, each epoch counts
//     every record once, and the model scores within 0.002 AUC of the
//     job never interrupted.
func TestHadoopYARNWorkerKilled(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := uploadData(t, c)
	t.Run("async", func(t *testing.T) {
		out := "hdfs://" + dir + "/model-async"
		var killed []int
		r := runYARN(t, job.JobSpec{
			Name:        "lr-yarn-worker-killed",
			Command:     []string{psLR, "--epochs", "2", "--async"},
			NumWorkers:  2,
			NumServers:  2,
			MaxAttempts: 2,
			Inputs:      []string{"hdfs://" + dir + "/train.libsvm"},
			SplitSize:   1 << 20,
			Output:      out,
		}, func(app yarn.ApplicationID, st tracker.Status) {
			if killed == nil && st.Epoch == 0 && st.ShardsDone >= 2 && st.ShardsDone < st.ShardsTotal-4 {
				killed = hadooptest.KillTask(t, hadooptest.ContainerOf(app.String()), string(conf.RoleWorker), 1)
			}
		})
		if len(killed) == 0 {
			t.Fatalf("worker 1 was never killed mid-epoch (job %v %v)", r.res.State, r.err)
		}
		log := amLog(t, r.app)
		if r.err != nil || r.res.State != tracker.Succeeded {
			t.Fatalf("YARN job after a worker was killed: %v %v\nAM log:\n%s", r.res.State, r.err, log)
		}
		if !strings.Contains(log, `task="worker 1"`) || !strings.Contains(log, "task failed; restarting it") {
			t.Errorf("the AM's log does not show worker 1 started again:\n%s", log)
		}
		tr := manifest(t, c, out)
		checkEveryRecordOnce(t, tr, 2)
		// Shards handed out on demand go by locality (TestHadoopYARNLocality).
		if tr.LocatedShards == 0 {
			t.Errorf("manifest: no shard handed out with its hosts known")
		}
		if r.res.Status.LocatedGiven != tr.LocatedShards {
			t.Errorf("ps-submit's summary counts %d located shards, the manifest %d", r.res.Status.LocatedGiven, tr.LocatedShards)
		}
	})
	t.Run("sync", func(t *testing.T) {
		s := lrSpec(dir, "sync-worker-killed")
		var killed []int
		r := runYARN(t, s, killAt(t, &killed, 2, conf.RoleWorker))
		if len(killed) == 0 {
			t.Fatalf("worker 1 was never killed mid-job (job %v %v)", r.res.State, r.err)
		}
		log := amLog(t, r.app)
		if r.err != nil || r.res.State != tracker.Succeeded {
			t.Fatalf("YARN job after a worker was killed: %v %v\nAM log:\n%s", r.res.State, r.err, log)
		}
		checkAttempts(t, r.res.Tasks, map[taskKill]int{{conf.RoleWorker, 1, 0}: 2})
		tr := manifest(t, c, s.Output)
		if tr.Restarts != 0 {
			t.Errorf("the manifest says the job started again %d time(s); want none", tr.Restarts)
		}
		// The servers say how long the other worker stood still.
		var stalls []string
		for _, log := range hadooptest.ContainerFiles(t, r.app.String(), "stderr") {
			for _, m := range stalledRE.FindAllStringSubmatch(log, -1) {
				stalls = append(stalls, m[1])
			}
		}
		if len(stalls) == 0 {
			t.Errorf("no server's log says the steps went on without the dead worker")
		}
		t.Logf("the servers' steps stood still for %v", stalls)
		checkEveryRecordOnce(t, tr, 4)
		auc, want := evalAUC(t, s.Output, os.LookupEnv), straightJob(t).auc
		t.Logf("test AUC: %.4f after worker 1 was killed, %.4f without", auc, want)
		if math.Abs(auc-want) > 0.002 {
			t.Errorf("AUC %.4f after a worker was killed, %.4f without: more than 0.002 apart", auc, want)
		}
	})
}

// lrSpec is the synchronous 2×2 job over 4 epochs from dir's training
// set (2 MiB shards, 2 attempts), writing its model to dir/name.
func lrSpec(dir, name string) job.JobSpec {
	return job.JobSpec{
		Name:        name,
		Command:     []string{psLR, "--epochs", "4"},
		NumWorkers:  2,
		NumServers:  2,
		MaxAttempts: 2,
		Inputs:      []string{"hdfs://" + dir + "/train.libsvm"},
		SplitSize:   2 << 20,
		Output:      "hdfs://" + dir + "/" + name,
	}
}

// killAt kills role's rank 1 (SIGKILL, in its container) once epoch has
// begun and before it ends, recording the processes killed.
func killAt(t *testing.T, killed *[]int, epoch int, role conf.Role) func(yarn.ApplicationID, tracker.Status) {
	return func(app yarn.ApplicationID, st tracker.Status) {
		if *killed == nil && st.Epoch == epoch && st.ShardsDone >= 1 && st.ShardsDone < st.ShardsTotal-2 {
			*killed = hadooptest.KillTask(t, hadooptest.ContainerOf(app.String()), string(role), 1)
		}
	}
}

// checkStartedAgainOnYARN checks that the job r of spec, which lost the
// processes killed, started again once from a checkpoint and wrote the
// model of the job never interrupted, counting every record once.
func checkStartedAgainOnYARN(t *testing.T, c *hadooptest.Cluster, r yarnRun, spec job.JobSpec, killed []int) {
	t.Helper()
	if len(killed) == 0 {
		t.Fatalf("nothing was killed mid-job (job %v %v)", r.res.State, r.err)
	}
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("YARN job after a process was killed: %v %v\nAM log:\n%s", r.res.State, r.err, amLog(t, r.app))
	}
	if got, want := readModel(t, c, spec.Output), localModel(t, straightJob(t)); got != want {
		t.Errorf("the model after a process was lost differs from the job never interrupted (%d and %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
	tr := manifest(t, c, spec.Output)
	if tr.Restarts != 1 || tr.ResumedFrom == "" {
		t.Errorf("the manifest says %d restarts from %q; want 1, from a checkpoint", tr.Restarts, tr.ResumedFrom)
	}
	t.Logf("started again from %s", tr.ResumedFrom)
	checkEveryRecordOnce(t, tr, 4)
}

// TestHadoopYARNServerKilled kills server 1's process with SIGKILL in its
// container during a synchronous job. With replicas the
// ApplicationMaster starts server 1 alone again, which restores its
// tables from them, and the job writes the very model of a job never
// interrupted without starting again. Without replicas: with checkpoints
// the ApplicationMaster starts the whole job again from the newest
// committed checkpoint, and the model is again the one of a job never
// interrupted; without, the application fails naming the server, and no
// model is marked complete.
func TestHadoopYARNServerKilled(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := uploadData(t, c)
	t.Run("checkpoints", func(t *testing.T) {
		s := lrSpec(dir, "with-checkpoints")
		s.CheckpointDir, s.CheckpointInterval = "hdfs://"+dir+"/ckpt", "1"
		var killed []int
		r := runYARN(t, s, killAt(t, &killed, 2, conf.RoleServer))
		checkStartedAgainOnYARN(t, c, r, s, killed)
	})
	t.Run("replicas", func(t *testing.T) {
		// Three servers keeping one replica each, no checkpoints: the
		// ApplicationMaster starts server 1 again alone, in a new
		// container, and its process restores its tables from the
		// replicas.
		s := lrSpec(dir, "with-replicas")
		withReplicas(&s)
		s.WorkerMemoryMB, s.ServerMemoryMB = 512, 512
		var killed []int
		var at time.Time
		var last tracker.Status // the events come with the running job's status
		kill := killAt(t, &killed, 1, conf.RoleServer)
		r := runYARN(t, s, func(app yarn.ApplicationID, st tracker.Status) {
			last = st
			if killed == nil {
				kill(app, st)
				at = time.Now()
			}
		})
		if len(killed) == 0 {
			t.Fatalf("server 1 was never killed mid-epoch (job %v %v)", r.res.State, r.err)
		}
		if r.err != nil || r.res.State != tracker.Succeeded {
			t.Fatalf("YARN job after a server was killed: %v %v\nAM log:\n%s", r.res.State, r.err, amLog(t, r.app))
		}
		checkAttempts(t, r.res.Tasks, map[taskKill]int{{conf.RoleServer, 1, 0}: 2})
		straight := straight3Job(t)
		want := string(straight.parts["part-00000"]) + string(straight.parts["part-00001"]) + string(straight.parts["part-00002"])
		if got := readModel(t, c, s.Output); got != want {
			t.Errorf("the model after server 1 was killed differs from the job never interrupted (%d and %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
		}
		tr := manifest(t, c, s.Output)
		if tr.Restarts != 0 {
			t.Errorf("the manifest says the job started again %d time(s); want none", tr.Restarts)
		}
		checkEveryRecordOnce(t, tr, 4)
		restored := theEvent(t, last, tracker.EventRestored, "server 1")
		t.Logf("from the kill to server 1's new process's first update: %v (from its exit, as the job's events say: %v)",
			restored.At.Sub(at).Round(time.Millisecond), restored.Took.Round(time.Millisecond))
	})
	t.Run("no_checkpoints", func(t *testing.T) {
		s := lrSpec(dir, "without-checkpoints")
		var killed []int
		r := runYARN(t, s, killAt(t, &killed, 1, conf.RoleServer))
		if len(killed) == 0 {
			t.Fatalf("server 1 was never killed mid-epoch (job %v %v)", r.res.State, r.err)
		}
		if r.err == nil || r.res.State != tracker.Failed {
			t.Fatalf("job without checkpoints after losing a server: %v %v; want FAILED", r.res.State, r.err)
		}
		t.Logf("diagnostic: %v", r.err)
		for _, want := range []string{"server 1 failed", "CheckpointDir"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("diagnostic %q does not say %q", r.err, want)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := model.ReadManifest(ctx, c.Resolver, s.Output); !errors.Is(err, model.ErrIncomplete) {
			t.Errorf("the failed job's output: %v, want no complete model", err)
		}
	})
}

// TestHadoopYARNChaos is TestChaos on YARN: five SIGKILLs of random
// servers and workers, in their containers, then one of the scheduler,
// of a synchronous job of 2 workers and 3 servers that keep one replica
// each, without checkpoints, each once the job recovered from the one
// before. The job succeeds
// without starting again, only the killed tasks ran again, every record
// is counted once per epoch, the model scores within 0.002 AUC of the job
// never interrupted, and no process of the job is left.
func TestHadoopYARNChaos(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := uploadData(t, c)
	kills, attempts := chaosKills(t)
	s := lrSpec(dir, hadooptest.JobName("chaos"))
	withReplicas(&s)
	s.Command = []string{psLR, "--epochs", "6"}
	s.MaxAttempts = 1 + slices.Max(slices.Collect(maps.Values(attempts)))
	s.WorkerMemoryMB, s.ServerMemoryMB = 512, 512
	next := 0
	var last tracker.Status // the events come with the running job's status
	r := runYARN(t, s, func(app yarn.ApplicationID, st tracker.Status) {
		last = st
		if next == len(kills) || (next > 0 && recoveries(st) < next) {
			return
		}
		k := kills[next]
		if st.Epoch >= k.epoch && st.ShardsDone >= 1 && st.ShardsDone < st.ShardsTotal-2 {
			if len(hadooptest.KillTask(t, hadooptest.ContainerOf(app.String()), string(k.role), k.rank)) > 0 {
				next++
			}
		}
	})
	if next < len(kills) {
		t.Fatalf("%d of %d kills done mid-job (job %v %v)", next, len(kills), r.res.State, r.err)
	}
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("YARN job after %d kills: %v %v\nAM log:\n%s", len(kills), r.res.State, r.err, amLog(t, r.app))
	}
	checkAttempts(t, r.res.Tasks, attempts)
	tr := manifest(t, c, s.Output)
	if tr.Restarts != 0 {
		t.Errorf("the manifest says the job started again %d time(s); want none", tr.Restarts)
	}
	checkEveryRecordOnce(t, tr, 6)
	rebuilt := theEvent(t, last, tracker.EventRebuilt, "scheduler 0")
	t.Logf("from the scheduler's exit to the new one's rebuilt table: %v", rebuilt.Took.Round(time.Millisecond))
	auc, want := evalAUC(t, s.Output, os.LookupEnv), runJob(t, 2, 3, 2<<20, "--epochs", "6").auc
	t.Logf("test AUC %.4f after %d kills, %.4f without", auc, len(kills), want)
	if math.Abs(auc-want) > 0.002 {
		t.Errorf("AUC %.4f after %d kills, %.4f without: more than 0.002 apart", auc, len(kills), want)
	}
	// The NodeManagers stop the containers as the application ends: give
	// them a bounded while.
	deadline := time.Now().Add(time.Minute)
	for len(jobProcesses(t, s.Name)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling a condition, within the deadline
	}
	if left := jobProcesses(t, s.Name); len(left) > 0 {
		t.Errorf("processes of the job left a minute after it ended: %v", left)
	}
}

// TestHadoopYARNApplicationMasterKilled stops the ApplicationMaster's
// process during the third epoch of a synchronous job with checkpoints
// that allows YARN a second attempt: with SIGKILL, as the kernel's OOM
// killer would, and with SIGTERM, as a NodeManager that shuts down does
// (the AM then stops its containers itself and leaves the application to
// YARN). The new attempt starts every task again from the newest committed
// checkpoint, and the model is the one of a job never interrupted.
func TestHadoopYARNApplicationMasterKilled(t *testing.T) {
	c := hadooptest.Connect(t)
	straight := straightJob(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { amStopped(t, c, straight, sig) })
	}
}

func amStopped(t *testing.T, c *hadooptest.Cluster, straight jobRun, sig syscall.Signal) {
	dir := uploadData(t, c)
	spec := lrSpec(dir, "am-killed")
	spec.MaxAttempts = 1
	spec.CheckpointDir, spec.CheckpointInterval = "hdfs://"+dir+"/ckpt", "1"
	var killed []int
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var app yarn.ApplicationID
	res, err := yarnclient.Submit(ctx, spec, yarnclient.Options{
		Lookup:            os.LookupEnv,
		Executable:        psSubmit(t),
		Log:               quietLog(),
		Poll:              100 * time.Millisecond,
		AllocationTimeout: 2 * time.Minute,
		AMMaxAttempts:     2,
		OnSubmitted:       func(id yarn.ApplicationID) { app = id },
		OnStatus: func(st tracker.Status) {
			if killed == nil && st.Epoch == 2 && st.ShardsDone >= 1 && st.ShardsDone < st.ShardsTotal-2 {
				// The first attempt's AM is its first container.
				killed = hadooptest.SignalTask(t, hadooptest.ContainerOf(app.String())+"01_000001", "", 0, sig)
			}
		},
	})
	if len(killed) == 0 {
		t.Fatalf("the ApplicationMaster was never killed mid-job (job %v %v)", res.State, err)
	}
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("YARN job after its ApplicationMaster was killed: %v %v", res.State, err)
	}
	if got, want := readModel(t, c, spec.Output), localModel(t, straight); got != want {
		t.Errorf("the model after the AM was lost differs from the job never interrupted (%d and %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
	tr := manifest(t, c, spec.Output)
	if tr.ResumedFrom == "" {
		t.Errorf("the second attempt did not start from a checkpoint: %+v", tr)
	}
	t.Logf("second attempt started from %s", tr.ResumedFrom)
	// ps-submit's summary and the job's final status say so too.
	if res.ResumedFrom != tr.ResumedFrom {
		t.Errorf("the client's result resumed from %q, the manifest says %q", res.ResumedFrom, tr.ResumedFrom)
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	_, st, stErr, err := yarnclient.JobStatus(sctx, app, os.LookupEnv, yarnclient.Login{})
	if err == nil {
		err = stErr
	}
	if err != nil || st == nil {
		t.Fatalf("the final status of %s: %v", app, err)
	}
	if !slices.ContainsFunc(st.Events, func(e web.Event) bool {
		return e.Kind == tracker.EventResumed && strings.HasPrefix(e.Detail, "from checkpoint "+tr.ResumedFrom+" (epoch ")
	}) {
		t.Errorf("the final status's events %+v do not say the second attempt resumed from %s", st.Events, tr.ResumedFrom)
	}
}

// TestHadoopYARNScale is TestScaleServersOutAndBack on YARN: the
// synchronous 2×2 job with --partitioner consistent, asked by `ps-submit
// scale APPLICATION --servers 4` once epoch 1 has begun and `--servers 2`
// once that change is done. The ApplicationMaster starts the two new
// servers in containers of their own; the job succeeds with no task
// started again, moves about half the keys each way, retires the two
// servers, and writes the model of the local job never scaled, bit for
// bit, counting every record once per epoch.
func TestHadoopYARNScale(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := uploadData(t, c)
	args := []string{"--epochs", scaleEpochs, "--partitioner", "consistent"}
	want := runJob(t, 2, 2, 2<<20, args...)
	s := lrSpec(dir, "scaled")
	s.Command = append([]string{psLR}, args...)
	s.WorkerMemoryMB, s.ServerMemoryMB = 512, 512
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		asked   int
		askErrs []string
		wg      sync.WaitGroup
	)
	ask := func(app yarn.ApplicationID, servers int) {
		defer wg.Done()
		cmd := exec.CommandContext(ctx, psSubmit(t), "scale", app.String(), "--servers", strconv.Itoa(servers))
		if out, err := cmd.CombinedOutput(); err != nil {
			mu.Lock()
			askErrs = append(askErrs, fmt.Sprintf("scale to %d servers: %v\n%s", servers, err, out))
			mu.Unlock()
		}
	}
	var last tracker.Status
	r := runYARN(t, s, func(app yarn.ApplicationID, st tracker.Status) {
		last = st
		mu.Lock()
		defer mu.Unlock()
		if asked < 2 && st.Epoch >= 1 && len(eventsOf(st, tracker.EventScaled)) == asked {
			asked++
			wg.Add(1)
			go ask(app, map[int]int{1: 4, 2: 2}[asked])
		}
	})
	wg.Wait()
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("YARN job that scaled: %v %v\nAM log:\n%s", r.res.State, r.err, amLog(t, r.app))
	}
	for _, e := range askErrs {
		t.Error(e)
	}
	scaled := eventsOf(last, tracker.EventScaled)
	if len(scaled) != 2 {
		t.Fatalf("scaled events %+v, want two (2 → 4, 4 → 2)", scaled)
	}
	for i, from := range []int{2, 4} {
		share := movedShare(t, scaled[i], from, 6-from)
		t.Logf("servers %d → %d on YARN: moved %.1f%% of the keys in %v", from, 6-from, 100*share, scaled[i].Took.Round(time.Millisecond))
		if share < 0.45 || share > 0.55 {
			t.Errorf("servers %d → %d moved %.3f of the keys, want about 1/2", from, 6-from, share)
		}
	}
	checkRetired(t, r.res, conf.RoleServer, 2)
	if got := readModel(t, c, s.Output); got != localModel(t, want) {
		t.Errorf("the model of the job that scaled on YARN differs from the local job never scaled (%d and %d lines)",
			strings.Count(got, "\n"), strings.Count(localModel(t, want), "\n"))
	}
	epochs, _ := strconv.Atoi(scaleEpochs)
	checkEveryRecordOnce(t, manifest(t, c, s.Output), epochs)
}
