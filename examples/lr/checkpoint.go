package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/tracker"
)

// Checkpoints are taken at the end of an epoch, when worker 0 decides one
// is due: it asks every server (over a simple app) to write its table to
// <checkpoint-dir>/<n>/server-<rank>, n being the epochs completed, and
// then asks the tracker to commit checkpoint n. In synchronous mode no step
// of the next epoch can be applied meanwhile (it needs worker 0's part),
// so the checkpoint is the exact state at the epoch's end, and a job
// resumed from it trains on to the same model as one never stopped. In
// asynchronous mode other workers go on pushing, and the checkpoint is a
// consistent copy of each server taken a moment apart.
const (
	ckptApp  = 1 // the simple app of checkpoint requests
	ckptHead = 1 // "write checkpoint n" (body: n)
)

// serveCheckpoints answers checkpoint requests on a server.
func serveCheckpoints(n *psnode.Node, st *psnode.StoreHandler[float32], res *dfs.Resolver, dir string) error {
	_, err := psnode.NewSimpleApp(n, ckptApp, 0, func(req psnode.SimpleRequest) (int32, []byte, error) {
		if req.Head != ckptHead || dir == "" {
			return 0, nil, fmt.Errorf("unexpected checkpoint request %d (checkpoint dir %q)", req.Head, dir)
		}
		num, err := strconv.Atoi(string(req.Body))
		if err != nil || num < 0 {
			return 0, nil, fmt.Errorf("checkpoint number %q", req.Body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		fsys, base, err := res.Resolve(ctx, dir)
		if err != nil {
			return 0, nil, err
		}
		path := ckpt.Path(base, num)
		if err := fsys.MkdirAll(ctx, path, 0o755); err != nil {
			return 0, nil, err
		}
		var entry ckpt.FileEntry
		err = st.Snapshot(func(records int, all func(yield func(key uint64, vals, state []float32) bool)) error {
			h := ckpt.Header{Elem: ckpt.Float32, Dim: st.Dim(), StateWidth: st.StateWidth(), Records: int64(records)}
			var err error
			entry, err = ckpt.WriteServerFile[float32](ctx, fsys, path+"/"+ckpt.ServerFileName(n.Rank()), h, all)
			return err
		})
		if err != nil {
			return 0, nil, err
		}
		body, err := json.Marshal(entry)
		return ckptHead, body, err
	})
	return err
}

// restore loads this server's part of the checkpoint a resumed job starts
// from; it runs before the server answers anything.
func restore(ctx context.Context, n *psnode.Node, st *psnode.StoreHandler[float32], res *dfs.Resolver, from string) error {
	fsys, base, err := res.Resolve(ctx, from)
	if err != nil {
		return err
	}
	name := base + "/" + ckpt.ServerFileName(n.Rank())
	h, err := ckpt.ReadServerFile[float32](ctx, fsys, name, st.Restore)
	if err != nil {
		return fmt.Errorf("restore from %s: %w", fsys.URI(name), err)
	}
	if h.Dim != st.Dim() || h.StateWidth != st.StateWidth() {
		return fmt.Errorf("restore from %s: %d values and %d state values per key; this server keeps %d and %d (a different --updater?)",
			fsys.URI(name), h.Dim, h.StateWidth, st.Dim(), st.StateWidth())
	}
	return nil
}

// checkpointer decides, on worker 0, when a checkpoint is due.
type checkpointer struct {
	app      *psnode.SimpleApp
	tc       *tracker.Client
	everyN   int           // every N epochs, or
	every    time.Duration // when this much time has passed
	last     time.Time
	part     string
	maxKey   uint64
	disabled bool
}

func newCheckpointer(n *psnode.Node, tc *tracker.Client, dir, interval, partitioner string, maxKey uint64) (*checkpointer, error) {
	c := &checkpointer{tc: tc, part: partitioner, maxKey: maxKey, last: time.Now()}
	if dir == "" || interval == "" || n.Rank() != 0 {
		c.disabled = true
		return c, nil
	}
	if k, err := strconv.Atoi(strings.TrimSpace(interval)); err == nil {
		if k < 1 {
			return nil, fmt.Errorf("checkpoint interval %q: need at least 1 epoch", interval)
		}
		c.everyN = k
	} else if d, err := time.ParseDuration(interval); err == nil && d > 0 {
		c.every = d
	} else {
		return nil, fmt.Errorf("checkpoint interval %q: want a number of epochs or a duration such as 10m", interval)
	}
	var err error
	c.app, err = psnode.NewSimpleApp(n, ckptApp, 0, nil)
	return c, err
}

// afterEpoch takes a checkpoint when one is due after epoch (0-based)
// ended.
func (c *checkpointer) afterEpoch(ctx context.Context, epoch int) error {
	if c.disabled {
		return nil
	}
	due := (c.everyN > 0 && (epoch+1)%c.everyN == 0) || (c.every > 0 && time.Since(c.last) >= c.every)
	if !due {
		return nil
	}
	num := epoch + 1
	res, err := c.app.Call(ctx, ckptHead, []byte(strconv.Itoa(num)), transport.ServerGroup)
	if err != nil {
		return fmt.Errorf("checkpoint %d: %w", num, err)
	}
	info := tracker.CheckpointInfo{N: num, Epoch: num, NextEpoch: num, Partitioner: c.part, MaxKey: c.maxKey}
	for _, r := range res {
		var e ckpt.FileEntry
		if err := json.Unmarshal(r.Body, &e); err != nil {
			return fmt.Errorf("checkpoint %d: server %d's answer: %w", num, r.Sender, err)
		}
		info.Files = append(info.Files, tracker.CheckpointFile{Name: e.Name, Bytes: e.Bytes, SHA256: e.SHA256})
	}
	if err := c.tc.CommitCheckpoint(ctx, info); err != nil {
		return fmt.Errorf("checkpoint %d: %w", num, err)
	}
	c.last = time.Now()
	return nil
}
