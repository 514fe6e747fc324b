package psnode_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
)

func serveSync(t *testing.T, c *cluster) []*psnode.SyncHandler[float64] {
	t.Helper()
	var hs []*psnode.SyncHandler[float64]
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
		hs = append(hs, h)
	}
	return hs
}

// kvWorkers makes a KV worker of app 0 on every worker of c.
func kvWorkers(t *testing.T, c *cluster) []*psnode.KVWorker[float64] {
	t.Helper()
	kvs := make([]*psnode.KVWorker[float64], len(c.workers))
	for i, w := range c.workers {
		var err error
		if kvs[i], err = psnode.NewKVWorker[float64](w, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	return kvs
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
	kvs := kvWorkers(t, c)
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

// TestSyncGoesOnWhenAWorkerDies: a step waits for a worker until it is
// known dead, then is applied with the live workers' parts; the end of
// the epoch still waits for its replacement, within the caller's
// deadline.
func TestSyncGoesOnWhenAWorkerDies(t *testing.T) {
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
	if err := push(ctx, kv, []uint64{1}, []float64{1}, cmd); err != nil {
		t.Fatalf("step with a dead worker: %v, want it applied with the live one", err)
	}
	var got []float64
	ts, err := kv.Pull(ctx, []uint64{1}, &got, nil)
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil || !slices.Equal(got, []float64{1}) {
		t.Fatalf("pulled %v (%v) after the step, want [1]", got, err)
	}
	done, _ := psnode.SyncDone(0)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := push(short, kv, nil, nil, done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("end of epoch without the dead worker's replacement: %v, want the caller's deadline", err)
	}
}

// TestSyncPullStepWaitsForEarlierSteps: a pull that carries step s of an
// epoch is held on every server until step s−1 is applied with every
// worker's part, even when it was sent before its own worker pushed step
// s−1; then it reads exactly the weights after that step.
func TestSyncPullStepWaitsForEarlierSteps(t *testing.T) {
	c := startCluster(t, 2, 2, 201, func(p *conf.PS) { p.MaxDimension = 100 })
	hs := serveSync(t, c)
	ctx := ctxT(t, 20*time.Second)
	kvs := kvWorkers(t, c)
	keys := []uint64{1, 90} // one on each server
	const epoch = 1
	step0, _ := psnode.SyncStep(epoch, 0)
	step1, _ := psnode.SyncStep(epoch, 1)
	var got []float64
	pull, err := kvs[0].Pull(ctx, keys, &got, nil, psnode.WithCmd(step1))
	if err != nil {
		t.Fatal(err)
	}
	pulled := make(chan error, 1)
	go func() { pulled <- kvs[0].Wait(ctx, pull) }()
	heldOnBoth := func(n int) {
		t.Helper()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for hs[0].Held() != n || hs[1].Held() != n {
			select {
			case err := <-pulled:
				t.Fatalf("pull of step 1 completed (err %v) before step 0 was applied", err)
			case <-ctx.Done():
				t.Fatalf("servers hold %d and %d pulls, want %d", hs[0].Held(), hs[1].Held(), n)
			case <-tick.C:
			}
		}
	}
	heldOnBoth(1)
	// Worker 0's own part of step 0 does not complete the step.
	ts0, err := kvs[0].Push(ctx, psnode.KVPairs[float64]{Keys: keys, Vals: []float64{1, 10}}, psnode.WithCmd(step0), psnode.ToAllServers())
	if err != nil {
		t.Fatal(err)
	}
	heldOnBoth(1)
	if err := push(ctx, kvs[1], keys, []float64{2, 20}, step0); err != nil {
		t.Fatal(err)
	}
	if err := <-pulled; err != nil {
		t.Fatalf("pull of step 1: %v", err)
	}
	if err := kvs[0].Wait(ctx, ts0); err != nil {
		t.Fatal(err)
	}
	if want := []float64{3, 30}; !slices.Equal(got, want) {
		t.Fatalf("pull of step 1 read %v, want the weights after step 0, %v", got, want)
	}
	heldOnBoth(0)
}
