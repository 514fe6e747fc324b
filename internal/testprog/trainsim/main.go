// Command trainsim is a test program that stands in for a trainer where
// only the job's own machinery is under test: its workers take shards
// from the tracker, count made-up records and report made-up metrics, so
// that the status page, ps-submit status and ps-submit logs have
// something to show. It never talks to other tasks; servers and the
// scheduler, if any, print a line and exit 0.
//
//	trainsim [--epochs N] [--until FILE] [--plan-epochs P] [--pace D] [--fail-worker R] [--elastic]
//
// Each worker reads epochs until it has read N (default 3) and, with
// --until, FILE exists; it reads each shard for --pace (default 50ms),
// reports records (1000 + 100·rank per shard), and after every epoch in
// which it read something reports loss_sum and examples_count (the loss
// falls by epoch) and, worker 0 always, test_auc (it rises). It prints "worker R epoch E shard
// S" on its standard output for each shard and "worker R: done after N
// epochs" on its standard error at the end. With --fail-worker R, worker
// R's first attempt exits 3 after its first epoch, so that the launcher
// starts it again. With --plan-epochs P worker 0 tells the tracker, as it
// starts, that the job trains P epochs (its progress).
//
// With --elastic it plays a job whose servers and workers change
// (ps-submit scale): before every epoch each worker asks the tracker for
// the epoch's servers and workers (tracker.Client.View) and prints
// "worker R epoch E servers N workers W", and worker 0 reports
// tracker.EventScaled when they changed. A worker the epoch's workers
// leave out prints "worker R: retired before epoch E" and exits 0. A
// worker started to join (SPINDLE_JOINING=1) prints "worker R: joining
// W workers", reports tracker.EventJoined, asks the tracker for the
// epoch it begins at (tracker.Client.JoinEpoch) until there is one, and
// reads epochs from there. Servers stay up: one started to join prints
// "server R: joining N servers" and reports tracker.EventJoined; a
// server the job's servers left out after including it prints "server
// R: retired" and exits 0; the others exit 0 once every worker has.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	fl := flag.NewFlagSet("trainsim", flag.ContinueOnError)
	epochs := fl.Int("epochs", 3, "epochs to read at least")
	until := fl.String("until", "", "read epochs until this file exists")
	pace := fl.Duration("pace", 50*time.Millisecond, "time spent on each shard")
	failWorker := fl.Int("fail-worker", -1, "this worker's first attempt fails after its first epoch")
	elastic := fl.Bool("elastic", false, "ask for each epoch's servers; servers stay up, join and retire")
	plan := fl.Int("plan-epochs", 0, "worker 0 tells the tracker the job trains this many epochs")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	cfg, err := conf.FromEnv(conf.Default(), os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainsim:", err)
		return 2
	}
	rank, attempt := cfg.PS.TaskID, cfg.PS.NumAttempt
	if cfg.PS.Role == conf.RoleServer && *elastic {
		return serve(ctx, cfg, *pace)
	}
	if cfg.PS.Role != conf.RoleWorker {
		fmt.Printf("%s %d: nothing to do\n", cfg.PS.Role, rank)
		return 0
	}
	if cfg.Job.TrackerAddr == "" {
		fmt.Fprintln(os.Stderr, "trainsim: no tracker address (SPINDLE_TRACKER_ADDR)")
		return 2
	}
	tc, err := tracker.ConfigClient(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainsim:", err)
		return 2
	}
	defer tc.Close()
	tick := time.NewTicker(*pace)
	defer tick.Stop()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	first := 0
	if *elastic && cfg.PS.Joining {
		if first, err = join(cctx, tc, tick, rank, cfg.PS.NumWorkers); err != nil {
			fmt.Fprintf(os.Stderr, "trainsim: worker %d joining: %v\n", rank, err)
			return 1
		}
	}
	if *plan > 0 && rank == 0 {
		if err := tc.PlanEpochs(cctx, *plan); err != nil {
			fmt.Fprintf(os.Stderr, "trainsim: worker %d: %v\n", rank, err)
			return 1
		}
	}
	done, was := 0, counts{servers: cfg.PS.NumServers, workers: cfg.PS.NumWorkers}
	for e := first; ; e++ {
		if done >= *epochs && (*until == "" || exists(*until)) {
			break
		}
		if *elastic {
			if was, err = view(cctx, tc, e, rank, was); err != nil {
				fmt.Fprintf(os.Stderr, "trainsim: worker %d epoch %d: %v\n", rank, e, err)
				return 1
			}
			if rank >= was.workers {
				fmt.Printf("worker %d: retired before epoch %d\n", rank, e)
				return 0
			}
		}
		n, err := readEpoch(cctx, tc, tick, e, rank, attempt)
		if err != nil {
			fmt.Fprintf(os.Stderr, "trainsim: worker %d epoch %d: %v\n", rank, e, err)
			return 1
		}
		// A restarted worker finds its first epochs read already: it has
		// nothing to report of them.
		m := map[string]float64{"loss_sum": float64(n) * 0.7 / float64(e+1), "examples_count": float64(n)}
		if rank == 0 {
			m["test_auc"] = 0.9 - 0.3/float64(e+1)
		}
		if n > 0 || rank == 0 {
			if err := tc.ReportMetrics(cctx, e, rank, m); err != nil {
				fmt.Fprintf(os.Stderr, "trainsim: worker %d: report metrics: %v\n", rank, err)
				return 1
			}
		}
		done++
		if rank == *failWorker && attempt == 0 {
			fmt.Fprintf(os.Stderr, "worker %d: failing on purpose after epoch %d\n", rank, e)
			return 3
		}
	}
	fmt.Fprintf(os.Stderr, "worker %d: done after %d epochs\n", rank, done)
	return 0
}

// counts are an epoch's servers and workers.
type counts struct{ servers, workers int }

// view asks for epoch e's servers and workers, prints them and, on
// worker 0, reports a change from was.
func view(ctx context.Context, tc *tracker.Client, e, rank int, was counts) (counts, error) {
	servers, workers, err := tc.View(ctx, e)
	if err != nil {
		return was, err
	}
	now := counts{servers: servers, workers: workers}
	fmt.Printf("worker %d epoch %d servers %d workers %d\n", rank, e, servers, workers)
	var changes []string
	if now.servers != was.servers {
		changes = append(changes, fmt.Sprintf("servers %d → %d", was.servers, now.servers))
	}
	if now.workers != was.workers {
		changes = append(changes, fmt.Sprintf("workers %d → %d", was.workers, now.workers))
	}
	if rank == 0 && len(changes) > 0 {
		err = tc.ReportEvent(ctx, tracker.Event{Kind: tracker.EventScaled, Task: "worker 0", Detail: strings.Join(changes, ", ")})
	}
	return now, err
}

// join is a worker started to join the job: it reports it is ready and
// returns the epoch it begins at, asking the tracker at every tick
// until there is one.
func join(ctx context.Context, tc *tracker.Client, tick *time.Ticker, rank, workers int) (int, error) {
	task := fmt.Sprintf("worker %d", rank)
	fmt.Printf("%s: joining %d workers\n", task, workers)
	if err := tc.ReportEvent(ctx, tracker.Event{Kind: tracker.EventJoined, Task: task, Detail: "ready"}); err != nil {
		return 0, err
	}
	for {
		e, err := tc.JoinEpoch(ctx, rank)
		if err != nil {
			return 0, err
		}
		if e >= 0 {
			fmt.Printf("%s: begins at epoch %d\n", task, e)
			return e, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// serve is an elastic job's server: it joins when started to, retires
// when the job's servers leave it out after including it, and otherwise
// ends once every worker exited 0.
func serve(ctx context.Context, cfg conf.Config, pace time.Duration) int {
	rank := cfg.PS.TaskID
	tc, err := tracker.ConfigClient(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainsim:", err)
		return 2
	}
	defer tc.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	task := fmt.Sprintf("server %d", rank)
	if cfg.PS.Joining {
		fmt.Printf("%s: joining %d servers\n", task, cfg.PS.NumServers)
		if err := tc.ReportEvent(cctx, tracker.Event{Kind: tracker.EventJoined, Task: task, Detail: "ready"}); err != nil {
			fmt.Fprintf(os.Stderr, "trainsim: %s: %v\n", task, err)
			return 1
		}
	}
	member := !cfg.PS.Joining
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for {
		st, err := tc.Status(cctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "trainsim: %s: %v\n", task, err)
			return 1
		}
		switch {
		case st.Servers > rank:
			member = true
		case member:
			fmt.Printf("%s: retired\n", task)
			return 0
		}
		for _, r := range st.Roles {
			if r.Role == conf.RoleWorker && r.Want > 0 && r.Succeeded == r.Want {
				fmt.Printf("%s: every worker done\n", task)
				return 0
			}
		}
		select {
		case <-cctx.Done():
			return 1
		case <-tick.C:
		}
	}
}

// readEpoch reads epoch e's shards until every one is done and returns
// the records this worker counted.
func readEpoch(ctx context.Context, tc *tracker.Client, tick *time.Ticker, e, rank, attempt int) (int64, error) {
	var n int64
	for {
		sh, d, wait, err := tc.NextShard(ctx, e, rank, attempt)
		if err != nil {
			return n, err
		}
		switch d {
		case tracker.EpochDone:
			return n, nil
		case tracker.Wait:
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return n, ctx.Err()
			case <-t.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-tick.C:
		}
		recs := int64(1000 + 100*rank)
		if err := tc.ShardDone(ctx, e, sh.ID, rank, attempt, recs, nil); err != nil {
			return n, err
		}
		n += recs
		fmt.Printf("worker %d epoch %d shard %d\n", rank, e, sh.ID)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}
