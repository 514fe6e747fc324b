package psnode_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
)

func serveSync(t *testing.T, c *cluster) {
	t.Helper()
	for _, s := range c.servers {
		upd, _ := store.NewUpdater[float64]("sum", nil)
		st, err := psnode.NewStoreHandler[float64](upd, 1)
		if err != nil {
			t.Fatal(err)
		}
		h, err := psnode.NewSyncHandler(st, len(c.workers))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := psnode.NewKVServer[float64](s, 0, h.Handle)
		if err != nil {
			t.Fatal(err)
		}
		h.WatchDeaths(s, srv)
	}
}

func push(ctx context.Context, kv *psnode.KVWorker[float64], keys []uint64, vals []float64, cmd int32) error {
	ts, err := kv.Push(ctx, psnode.KVPairs[float64]{Keys: keys, Vals: vals}, psnode.WithCmd(cmd), psnode.ToAllServers())
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	return err
}

// TestSyncStepsWaitForEveryWorker: worker 0 runs three steps of an epoch
// and worker 1 one; every step is applied only with both parts (or after
// worker 1 said it is done), and SyncDone returns only when both are done.
func TestSyncStepsWaitForEveryWorker(t *testing.T) {
	c := startCluster(t, 2, 2, 200, func(p *conf.PS) { p.MaxDimension = 100 })
	serveSync(t, c)
	ctx := ctxT(t, 20*time.Second)
	kvs := make([]*psnode.KVWorker[float64], 2)
	for i, w := range c.workers {
		var err error
		if kvs[i], err = psnode.NewKVWorker[float64](w, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	keys := []uint64{1, 90} // one on each server
	steps := []int{3, 1}
	pulled := make([][]float64, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range kvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				for s := 0; s < steps[i]; s++ {
					cmd, _ := psnode.SyncStep(0, s)
					if err := push(ctx, kvs[i], keys, []float64{float64(i + 1), float64(10 * (i + 1))}, cmd); err != nil {
						return fmt.Errorf("worker %d step %d: %w", i, s, err)
					}
				}
				done, _ := psnode.SyncDone(0)
				if err := push(ctx, kvs[i], nil, nil, done); err != nil {
					return fmt.Errorf("worker %d done: %w", i, err)
				}
				// Every step of the epoch is applied now, for both.
				ts, err := kvs[i].Pull(ctx, keys, &pulled[i], nil)
				if err == nil {
					err = kvs[i].Wait(ctx, ts)
				}
				return err
			}()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Worker 0 pushed 1 three times, worker 1 pushed 2 once: 5 (and 50).
	for i, p := range pulled {
		if fmt.Sprint(p) != "[5 50]" {
			t.Fatalf("worker %d pulled %v after the epoch, want [5 50]", i, p)
		}
	}
}

func TestSyncFailsWhenAWorkerDies(t *testing.T) {
	c := startCluster(t, 1, 2, 201, func(p *conf.PS) {
		p.HeartbeatInterval = 20 * time.Millisecond
		p.HeartbeatTimeout = 300 * time.Millisecond
	})
	serveSync(t, c)
	ctx := ctxT(t, 10*time.Second)
	kv, err := psnode.NewKVWorker[float64](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.net.Isolate(c.workers[1].ID())
	cmd, _ := psnode.SyncStep(0, 0)
	err = push(ctx, kv, []uint64{1}, []float64{1}, cmd)
	// The server's answer crosses the wire as a message; the worker can
	// still tell it from other failures, to ask for the job's restart.
	if !errors.Is(err, psnode.ErrSyncWorkerDied) {
		t.Fatalf("step with a dead worker: %v, want ErrSyncWorkerDied, not a hang", err)
	}
}
