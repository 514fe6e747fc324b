// Command trainsim is a test program that stands in for a trainer where
// only the job's own machinery is under test: its workers take shards
// from the tracker, count made-up records and report made-up metrics, so
// that the status page, ps-submit status and ps-submit logs have
// something to show. It never talks to other tasks; servers and the
// scheduler, if any, print a line and exit 0.
//
//	trainsim [--epochs N] [--until FILE] [--pace D] [--fail-worker R]
//
// Each worker reads epochs until it has read N (default 3) and, with
// --until, FILE exists; it reads each shard for --pace (default 50ms),
// reports records (1000 + 100·rank per shard), and after every epoch in
// which it read something reports loss_sum and examples_count (the loss
// falls by epoch) and, worker 0 always, test_auc (it rises). It prints "worker R epoch E shard
// S" on its standard output for each shard and "worker R: done after N
// epochs" on its standard error at the end. With --fail-worker R, worker
// R's first attempt exits 3 after its first epoch, so that the launcher
// starts it again.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	if err := fl.Parse(args); err != nil {
		return 2
	}
	cfg, err := conf.FromEnv(conf.Default(), os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainsim:", err)
		return 2
	}
	rank, attempt := cfg.PS.TaskID, cfg.PS.NumAttempt
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
	done := 0
	for e := 0; ; e++ {
		if done >= *epochs && (*until == "" || exists(*until)) {
			break
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
		if err := tc.ShardDone(ctx, e, sh.ID, rank, attempt, recs); err != nil {
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
