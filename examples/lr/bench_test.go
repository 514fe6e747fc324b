package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/tracker"
)

// BenchmarkTrain measures training throughput, examples per second over
// 3 epochs of the generated 200,000 rows:
//
//   - impl=inmemory: the trainer's inner loop in one process with no
//     network and no files (lr.Local, the same updates in memory) — the
//     baseline;
//   - impl=job: whole ps-lr jobs through the local tracker, workers and
//     servers as processes over ZeroMQ, reading and parsing the libsvm
//     file, timed from start to the committed model (start-up included):
//     synchronous, bounded delay (staleness 2) and asynchronous, the
//     last two pipelined (--prefetch, the default) and not; the first and
//     last with --compress and with --delta-keys; asynchronous with the
//     significantly-modified filter (with and without compression); and
//     the three modes reading and parsing the file every epoch
//     (--cache-mb 0), where by default a worker keeps the parsed examples
//     in memory after the first; and the first and last with no task
//     bound to a CPU (local.CPUBindNone; by default, local.CPUBindAuto, a
//     2 × 2 job's are bound on a machine of 2 CPUs). Each reports the
//     bytes its epochs took on the wire (wire-MiB/epoch, both directions).
//
// Run with -benchtime=1x; every op is a full training run.
func BenchmarkTrain(b *testing.B) {
	const epochs, batch = 3, 100
	b.Run("impl=inmemory/workers=1", func(b *testing.B) {
		ex, err := gen.Examples(gen.Default())
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			upd, _ := store.NewUpdater[float32]("ftrl", lr.DefaultFTRLParams())
			l, err := lr.NewLocal(upd)
			if err != nil {
				b.Fatal(err)
			}
			for e := 0; e < epochs; e++ {
				if _, err := l.Epoch(ex, batch); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*epochs*len(ex))/b.Elapsed().Seconds(), "examples/s")
	})
	modes := []struct {
		name string
		args []string
		bind local.CPUBind
	}{
		{name: "sync"},
		{name: "staleness=2", args: []string{"--staleness", "2"}},
		{name: "staleness=2/prefetch=false", args: []string{"--staleness", "2", "--prefetch=false"}},
		{name: "async", args: []string{"--async"}},
		{name: "async/prefetch=false", args: []string{"--async", "--prefetch=false"}},
		{name: "sync/compress", args: []string{"--compress"}},
		{name: "async/compress", args: []string{"--async", "--compress"}},
		{name: "async/significance=0.5", args: []string{"--async", "--significance", "0.5"}},
		{name: "async/compress/significance=0.5", args: []string{"--async", "--compress", "--significance", "0.5"}},
		{name: "sync/delta-keys", args: []string{"--delta-keys"}},
		{name: "async/delta-keys", args: []string{"--async", "--delta-keys"}},
		{name: "sync/nocache", args: []string{"--cache-mb", "0"}},
		{name: "staleness=2/nocache", args: []string{"--staleness", "2", "--cache-mb", "0"}},
		{name: "async/nocache", args: []string{"--async", "--cache-mb", "0"}},
		{name: "sync/cpu-bind=none", bind: local.CPUBindNone},
		{name: "async/cpu-bind=none", args: []string{"--async"}, bind: local.CPUBindNone},
	}
	for _, mode := range modes {
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("impl=job/mode=%s/workers=%d/servers=%d", mode.name, w, w), func(b *testing.B) {
				args := append([]string{psLR, "--epochs", fmt.Sprint(epochs), "--batch", fmt.Sprint(batch)}, mode.args...)
				res, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
				if err != nil {
					b.Fatal(err)
				}
				defer res.Close()
				var wire float64
				var toData, after time.Duration
				for i := 0; i < b.N; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					r, err := local.Run(ctx, job.JobSpec{
						Command: args, NumWorkers: w, NumServers: w, MaxAttempts: 1,
						Inputs: []string{filepath.Join(dataDir, "train.libsvm")}, SplitSize: 2 << 20,
						Output: filepath.Join(b.TempDir(), "model"),
					}, local.Options{Environ: os.Environ(), Log: quietLog(), Planner: tracker.InputPlanner(res), Resolver: res, CPUBind: mode.bind})
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					after += time.Since(r.Status.MetricsAt[epochs-1])
					for _, m := range r.Status.EpochMetrics {
						wire += m[feed.MetricBytesToServers] + m[feed.MetricBytesFromServers]
					}
					toData += r.Status.FirstData.Sub(r.Status.Started)
				}
				b.ReportMetric(float64(b.N*epochs*rows)/b.Elapsed().Seconds(), "examples/s")
				b.ReportMetric(wire/float64(b.N*epochs)/(1<<20), "wire-MiB/epoch")
				// From the job's start to a worker's first request for
				// input, and from the last epoch's report to the job's end
				// (the model written, every process gone).
				b.ReportMetric(float64(toData.Milliseconds())/float64(b.N), "ms-to-first-data")
				b.ReportMetric(float64(after.Milliseconds())/float64(b.N), "ms-after-training")
			})
		}
	}
}

// stalledRE finds how long a server's synchronous steps had stopped when
// it learned of a worker's death (psnode's log field "stalled").
var stalledRE = regexp.MustCompile(`stalled=([0-9.]+[a-zµ]+)`)

// BenchmarkSyncWorkerKilled measures what a worker's death costs a
// synchronous job without checkpoints: every op runs the 2×2 job of 4
// epochs undisturbed and then with worker 1 killed (SIGKILL) once epoch 1
// has begun, alternately, and reports the means of:
//
//   - s-wall-undisturbed and s-wall-killed: each job's time, start to
//     committed model;
//   - s-lost: their difference, the time the death cost;
//   - s-stall: how long the other worker's steps stood still: how long
//     the oldest of its pushes a server held had waited for the dead
//     worker's part when the server let the steps go on without it (the
//     longest any server reports; 0 when the death was known before a
//     step waited for the dead worker).
//
// With SPINDLE_BENCH_BASELINE_PSLR naming another ps-lr binary (an older
// one, whose synchronous jobs start again from their newest checkpoint
// when a worker dies), every op also runs the same kill with that binary
// and a checkpoint every epoch, and reports s-wall-killed-baseline.
//
// Run with -benchtime=1x or more.
func BenchmarkSyncWorkerKilled(b *testing.B) {
	baseline := os.Getenv("SPINDLE_BENCH_BASELINE_PSLR")
	var wall, killed, stall, base time.Duration
	kill := taskKill{conf.RoleWorker, 1, 1}
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if res, err, out := killedJobAt(b, fmt.Sprintf("lr-bench-undisturbed-%d", i), ""); err != nil || res.State != tracker.Succeeded {
			b.Fatalf("undisturbed job: %v %v\n%s", res.State, err, out)
		}
		wall += time.Since(start)
		start = time.Now()
		res, err, out := killedJobAt(b, fmt.Sprintf("lr-bench-killed-%d", i), "", kill)
		if err != nil || res.State != tracker.Succeeded {
			b.Fatalf("job with a worker killed: %v %v\n%s", res.State, err, out)
		}
		killed += time.Since(start)
		stalls := stalledRE.FindAllStringSubmatch(out, -1)
		if len(stalls) == 0 {
			b.Fatalf("no server says how long its steps stalled:\n%s", out)
		}
		var longest time.Duration
		for _, m := range stalls {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				b.Fatalf("stalled=%s: %v", m[1], err)
			}
			longest = max(longest, d)
		}
		stall += longest
		if baseline != "" {
			start = time.Now()
			res, err, out := killedJobWith(b, baseline, fmt.Sprintf("lr-bench-baseline-%d", i), filepath.Join(b.TempDir(), "ckpt"), kill)
			if err != nil || res.State != tracker.Succeeded {
				b.Fatalf("baseline job with a worker killed: %v %v\n%s", res.State, err, out)
			}
			base += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(wall.Seconds()/n, "s-wall-undisturbed")
	b.ReportMetric(killed.Seconds()/n, "s-wall-killed")
	b.ReportMetric((killed-wall).Seconds()/n, "s-lost")
	b.ReportMetric(stall.Seconds()/n, "s-stall")
	if baseline != "" {
		b.ReportMetric(base.Seconds()/n, "s-wall-killed-baseline")
	}
}

// replicationRE finds a server's replication traffic (psnode's log line
// "replication traffic" at the end of a job).
var replicationRE = regexp.MustCompile(`msg="replication traffic".* sent_bytes=([0-9]+)`)

// BenchmarkReplication measures what replicas cost a synchronous ps-lr
// job of 2 workers and 3 servers over 3 epochs: every op runs it with
// replicas=0 and with replicas=1, alternately, and reports for each the
// examples per second (start to committed model), the workers' push
// traffic (push-MiB/epoch: bytes_to_servers_sum) and the servers'
// replication traffic (repl-MiB/epoch, the updates forwarded to the
// replicas and their acknowledgements), and their ratio. In a
// synchronous job a server forwards each step's sum once, where the
// workers sent it one part each: about k/n of the push traffic for k
// replicas and n workers.
//
// Run with -benchtime=1x or more.
func BenchmarkReplication(b *testing.B) {
	const epochs = 3
	res, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	type sums struct {
		wall       time.Duration
		push, repl float64
	}
	var by [2]sums
	for i := 0; i < b.N; i++ {
		for k := range by {
			var out syncbuf.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			start := time.Now()
			r, err := local.Run(ctx, job.JobSpec{
				Command: []string{psLR, "--epochs", fmt.Sprint(epochs)}, NumWorkers: 2, NumServers: 3, Replicas: k, MaxAttempts: 1,
				Inputs: []string{filepath.Join(dataDir, "train.libsvm")}, SplitSize: 2 << 20,
				Output: filepath.Join(b.TempDir(), "model"),
			}, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(res), Resolver: res})
			cancel()
			if err != nil {
				b.Fatalf("replicas=%d: %v\n%s", k, err, out.String())
			}
			by[k].wall += time.Since(start)
			for _, m := range r.Status.EpochMetrics {
				by[k].push += m[feed.MetricBytesToServers]
			}
			for _, m := range replicationRE.FindAllStringSubmatch(out.String(), -1) {
				n, _ := strconv.ParseFloat(m[1], 64)
				by[k].repl += n
			}
		}
	}
	for k, s := range by {
		b.ReportMetric(float64(b.N*epochs*rows)/s.wall.Seconds(), fmt.Sprintf("examples/s-replicas=%d", k))
		b.ReportMetric(s.push/float64(b.N*epochs)/(1<<20), fmt.Sprintf("push-MiB/epoch-replicas=%d", k))
	}
	b.ReportMetric(by[1].repl/float64(b.N*epochs)/(1<<20), "repl-MiB/epoch-replicas=1")
	if by[1].push > 0 {
		b.ReportMetric(by[1].repl/by[1].push, "repl/push")
	}
}

// BenchmarkServerKilled measures what a server's death costs a
// synchronous ps-lr job of 2 workers and 3 servers that keep one replica
// each, without checkpoints: every op runs the job of 4 epochs undisturbed
// and with server 1 killed (SIGKILL) in epoch 1, alternately, and reports
// the means of:
//
//   - ms-kill-to-update: from the kill to the first update the server's
//     new process applied (its restore event's time), the time the job's
//     steps stood still;
//   - ms-exit-to-update: the same from the dead process's exit, as the
//     launcher saw it, the failover's time among the job's events;
//   - s-wall-undisturbed and s-wall-killed: each job's time, start to
//     committed model;
//   - s-wall-killed-checkpoint: the same kill in the same job without
//     replicas and with a checkpoint every epoch, which takes the whole
//     job back to its newest checkpoint (the way without replicas).
//
// Run with -benchtime=1x or more.
func BenchmarkServerKilled(b *testing.B) {
	var wall, killed, stall, restore, ckpt time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if res, err, out := killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-replicas-%d", i), "", withReplicas, nil); err != nil || res.State != tracker.Succeeded {
			b.Fatalf("undisturbed job: %v %v\n%s", res.State, err, out)
		}
		wall += time.Since(start)
		var at []time.Time
		start = time.Now()
		res, err, out := killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-server-killed-%d", i), "", withReplicas, &at, taskKill{conf.RoleServer, 1, 1})
		if err != nil || res.State != tracker.Succeeded {
			b.Fatalf("job with a server killed: %v %v\n%s", res.State, err, out)
		}
		killed += time.Since(start)
		ev := eventsOf(res.Status, tracker.EventRestored)
		if len(ev) != 1 || len(at) != 1 {
			b.Fatalf("%d restore events for %d kills", len(ev), len(at))
		}
		stall += ev[0].At.Sub(at[0])
		restore += ev[0].Took
		start = time.Now()
		noReplicas := func(s *job.JobSpec) { s.NumServers = 3 }
		res, err, out = killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-server-killed-ckpt-%d", i), filepath.Join(b.TempDir(), "ckpt"), noReplicas, nil, taskKill{conf.RoleServer, 1, 1})
		if err != nil || res.State != tracker.Succeeded || res.Restarts != 1 {
			b.Fatalf("job with a server killed, checkpoints, no replicas: %v %v, %d restarts\n%s", res.State, err, res.Restarts, out)
		}
		ckpt += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(stall.Milliseconds())/n, "ms-kill-to-update")
	b.ReportMetric(float64(restore.Milliseconds())/n, "ms-exit-to-update")
	b.ReportMetric(wall.Seconds()/n, "s-wall-undisturbed")
	b.ReportMetric(killed.Seconds()/n, "s-wall-killed")
	b.ReportMetric(ckpt.Seconds()/n, "s-wall-killed-checkpoint")
}

// BenchmarkSchedulerKilled measures what the scheduler's death costs the
// synchronous 2×2 job of 4 epochs without checkpoints, the scheduler
// killed with SIGKILL in epoch 1, against the same job undisturbed, run
// side by side:
//
//   - ms-kill-to-rebuilt: from the kill to the new scheduler's table
//     rebuilt from the running nodes (the tracker's event);
//   - ms-exit-to-rebuilt: the same from the dead process's exit, as the
//     launcher saw it, the failover's time among the job's events;
//   - s-wall-undisturbed and s-wall-killed: each job's time, start to
//     committed model.
//
// Run with -benchtime=1x or more.
func BenchmarkSchedulerKilled(b *testing.B) {
	var wall, killed, stall, rebuilt time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if res, err, out := killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-scheduler-%d", i), "", nil, nil); err != nil || res.State != tracker.Succeeded {
			b.Fatalf("undisturbed job: %v %v\n%s", res.State, err, out)
		}
		wall += time.Since(start)
		var at []time.Time
		start = time.Now()
		res, err, out := killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-scheduler-killed-%d", i), "", nil, &at, taskKill{conf.RoleScheduler, 0, 1})
		if err != nil || res.State != tracker.Succeeded {
			b.Fatalf("job with the scheduler killed: %v %v\n%s", res.State, err, out)
		}
		killed += time.Since(start)
		ev := eventsOf(res.Status, tracker.EventRebuilt)
		if len(ev) != 1 || len(at) != 1 {
			b.Fatalf("%d rebuilt events for %d kills", len(ev), len(at))
		}
		stall += ev[0].At.Sub(at[0])
		rebuilt += ev[0].Took
	}
	n := float64(b.N)
	b.ReportMetric(float64(stall.Milliseconds())/n, "ms-kill-to-rebuilt")
	b.ReportMetric(float64(rebuilt.Milliseconds())/n, "ms-exit-to-rebuilt")
	b.ReportMetric(wall.Seconds()/n, "s-wall-undisturbed")
	b.ReportMetric(killed.Seconds()/n, "s-wall-killed")
}
