package psnode_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
)

// TestKeyCache: a worker with the key cache pushes and pulls the same key
// list over and over; after the first time it sends a reference, and its
// traffic is well under compression's alone; when the servers forget
// their lists (as servers started again would), the references miss, the
// worker sends the lists again, and every sum is still right.
func TestKeyCache(t *testing.T) {
	run := func(opt psnode.WorkerOption, forget bool) psnode.AppBytes {
		c := startCluster(t, 2, 1, 52, func(p *conf.PS) { p.MaxDimension = 1 << 20 })
		defer c.close()
		var srvs []*psnode.KVServer[float32]
		for _, s := range c.servers {
			upd, _ := store.NewUpdater[float32]("sum", nil)
			h, err := psnode.NewStoreHandler[float32](upd, 1)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := psnode.NewKVServer[float32](s, 0, h.Handle)
			if err != nil {
				t.Fatal(err)
			}
			srvs = append(srvs, srv)
		}
		ctx := ctxT(t, 20*time.Second)
		kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0, opt)
		if err != nil {
			t.Fatal(err)
		}
		// Keys spread at random, as a batch's features are: their gaps do
		// not compress much, so what the cache saves shows.
		rng := rand.New(rand.NewPCG(7, 8))
		keys := make([]uint64, 0, 500)
		for len(keys) < 500 {
			keys = append(keys, rng.Uint64N(1<<20))
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		grad := make([]float32, len(keys))
		for i := range grad {
			grad[i] = float32(i%7) * 0.25
		}
		var got []float32
		for round := 1; round <= 6; round++ {
			if forget && round == 4 {
				for _, s := range srvs {
					psnode.ForgetKeyLists(s)
				}
			}
			ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: grad})
			if err == nil {
				err = kv.Wait(ctx, ts)
			}
			if err == nil {
				ts, err = kv.Pull(ctx, keys, &got, nil)
			}
			if err == nil {
				err = kv.Wait(ctx, ts)
			}
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for i, g := range grad {
				if want := g * float32(round); got[i] != want {
					t.Fatalf("round %d: key %d holds %v, want %v", round, keys[i], got[i], want)
				}
			}
		}
		return c.workers[0].AppBytes(0)
	}
	plain := run(psnode.WithCompression(), false)
	cached := run(psnode.WithKeyCache(), false)
	missed := run(psnode.WithKeyCache(), true)
	t.Logf("bytes sent: compressed %d, with the key cache %d, with the lists forgotten once %d", plain.Sent, cached.Sent, missed.Sent)
	if cached.Sent >= plain.Sent*3/4 {
		t.Errorf("with the key cache the worker sent %d bytes, compression alone %d: want at least a quarter fewer", cached.Sent, plain.Sent)
	}
	if missed.Sent <= cached.Sent {
		t.Errorf("after the servers forgot their lists the worker sent %d bytes, no more than the %d without: the lists were not sent again", missed.Sent, cached.Sent)
	}
}
