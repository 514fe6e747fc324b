package psnode_test

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestPushAnswersRide: while a server is busy, its answer to each push
// queued behind it rides on its answer to the pull that follows
// (Meta.Acks), one message for the two; every push still completes, and
// the last pull reads all of them.
func TestPushAnswersRide(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, 1, 1, nil)
	ctx := ctxT(t, 30*time.Second)
	upd, err := store.NewUpdater[float32]("sum", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := psnode.NewStoreHandler[float32](upd, 1)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 25 // of a push and a pull
	release := make(chan struct{})
	var first sync.Once
	var stuck error
	_, err = psnode.NewKVServer[float32](c.servers[0], 0, func(req *psnode.KVRequest[float32], srv *psnode.KVServer[float32]) {
		first.Do(func() {
			// Hold the first push until the other requests are queued.
			select {
			case <-release:
			case <-ctx.Done():
				stuck = ctx.Err()
			}
			for stuck == nil && psnode.QueuedRequests(srv) < 2*rounds-1 {
				select {
				case <-ctx.Done():
					stuck = ctx.Err()
				default:
					runtime.Gosched()
				}
			}
		})
		h.Handle(req, srv)
	})
	if err != nil {
		t.Fatal(err)
	}
	worker := c.workers[0].ID()
	var answers, riding atomic.Int64
	c.net.Hook(func(m *transport.Message) bool {
		if m.Meta.Control.Cmd == transport.CmdNone && !m.Meta.Request && m.Meta.Recver == worker && m.Meta.AppID == 0 {
			answers.Add(1)
			riding.Add(int64(len(m.Meta.Acks)))
		}
		return true
	})
	kv, err := psnode.NewKVWorker[float32](c.workers[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := []uint64{1, 5, 9}
	var sent []int32
	pulled := make([][]float32, rounds)
	for i := range rounds {
		ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: []float32{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		pull, err := kv.Pull(ctx, keys, &pulled[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ts, pull)
	}
	close(release)
	for _, ts := range sent {
		if err := kv.Wait(ctx, ts); err != nil {
			t.Fatalf("request %d: %v", ts, err)
		}
	}
	if stuck != nil {
		t.Fatalf("the requests were not queued: %v", stuck)
	}
	if got, want := pulled[rounds-1], []float32{rounds, 2 * rounds, 3 * rounds}; !slices.Equal(got, want) {
		t.Fatalf("last pull read %v, want %v", got, want)
	}
	// The requests were all queued: each push's answer rides on the
	// answer to the pull after it.
	if a, r := answers.Load(), riding.Load(); a != rounds || r != rounds {
		t.Fatalf("%d answers carrying %d more, for %d pushes each followed by a pull: want %d carrying %d", a, r, rounds, rounds, rounds)
	}
}
