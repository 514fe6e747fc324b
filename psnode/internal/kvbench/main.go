// Command kvbench is psnode's counterpart of ps-lite's
// tests/test_kv_app_benchmark: one program run as the scheduler, the
// servers and the workers, each configured by the DMLC_* environment as
// ps-lite's tests/local.sh sets it. Each worker pushes N keys (spread
// over all of uint64 as ps-lite spreads them, float32 values), waits,
// then pulls them back and waits, and prints both times; with -rtt R it
// then pushes 1 key R times, one after the other, and prints the mean
// round trip.
//
//	go build -o kvbench ./psnode/internal/kvbench
//	DMLC_ROLE=scheduler ... kvbench -handler sum &
//
// scripts/bench-pslite.sh runs it against ps-lite.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/launch"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

func main() {
	handler := flag.String("handler", "empty", "server handler: empty (answers zeros, stores nothing) or sum (the built-in sum store)")
	num := flag.Int("keys", 10_000_000, "keys per push and pull")
	rtt := flag.Int("rtt", 0, "1-key push round trips to time after the push and pull")
	prof := flag.String("cpuprofile", "", "write a CPU profile of this process to `file`.<role>")
	flag.Parse()
	if *prof != "" {
		f, err := os.Create(*prof + "." + os.Getenv("DMLC_ROLE"))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kvbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	if err := run(*handler, *num, *rtt, logrus.NewEntry(log)); err != nil {
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(handler string, num, rtt int, log *logrus.Entry) error {
	if handler != "empty" && handler != "sum" {
		return fmt.Errorf("-handler %q: want empty or sum", handler)
	}
	ctx := context.Background()
	node, err := launch.Start(ctx, os.LookupEnv, os.Environ(), log)
	if err != nil {
		return err
	}
	defer node.Close()
	switch node.Role() {
	case transport.RoleServer:
		h := emptyHandler
		if handler == "sum" {
			upd, err := store.NewUpdater[float32]("sum", nil)
			if err != nil {
				return err
			}
			sh, err := psnode.NewStoreHandler[float32](upd, 1)
			if err != nil {
				return err
			}
			h = sh.Handle
		}
		if _, err := psnode.NewKVServer[float32](node, 0, h); err != nil {
			return err
		}
	case transport.RoleWorker:
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := work(wctx, node, num, rtt)
		cancel()
		if err != nil {
			return err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return node.Finalize(fctx)
}

// emptyHandler answers a push with nothing and a pull with zeros, as
// ps-lite's benchmark does (psnode never echoes the keys).
func emptyHandler(req *psnode.KVRequest[float32], srv *psnode.KVServer[float32]) {
	res := psnode.KVPairs[float32]{}
	if req.Pull {
		res.Vals = make([]float32, len(req.Keys))
	}
	_ = srv.Respond(context.Background(), req, res)
}

func work(ctx context.Context, node *psnode.Node, num, rtt int) error {
	kv, err := psnode.NewKVWorker[float32](node, 0, 0)
	if err != nil {
		return err
	}
	rank := node.Rank()
	rng := rand.New(rand.NewPCG(uint64(rank)+7, 0))
	keys := make([]uint64, num)
	vals := make([]float32, num)
	for i := range keys {
		keys[i] = math.MaxUint64/uint64(num)*uint64(i) + uint64(rank)
		vals[i] = float32(rng.IntN(1000))
	}
	t0 := time.Now()
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: vals})
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	push := time.Since(t0)
	var got []float32
	t0 = time.Now()
	ts, err = kv.Pull(ctx, keys, &got, nil)
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	pull := time.Since(t0)
	fmt.Printf("keys=%d push_ms=%.1f pull_ms=%.1f\n", num, ms(push), ms(pull))
	if rtt > 0 {
		one := psnode.KVPairs[float32]{Keys: keys[:1], Vals: vals[:1]}
		t0 = time.Now()
		for i := 0; i < rtt; i++ {
			ts, err := kv.Push(ctx, one)
			if err == nil {
				err = kv.Wait(ctx, ts)
			}
			if err != nil {
				return fmt.Errorf("1-key push: %w", err)
			}
		}
		fmt.Printf("rtt_us=%.1f\n", float64(time.Since(t0).Microseconds())/float64(rtt))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
