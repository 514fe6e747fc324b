package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/psnode"
)

// A worker's steps, in every mode. With --prefetch (the default) a
// worker keeps prefetchDepth mini-batches in hand: when the feed hands it
// batch b it copies it and sends the pull of its weights, and only then
// computes and pushes batch b−prefetchDepth, whose pull went out that
// many steps earlier; so the pulls' round trips overlap the gradients and
// the pushes. Pushes are not waited for one by one (psnode copies what it
// sends before Push returns): up to maxPushes are in flight, and idle
// waits for all. Without --prefetch each step pulls, computes and pushes
// in turn, waiting for each. In synchronous mode a batch's pull and
// push carry its step (PullStep, PushStep): the servers answer the pull
// once the step before is applied with every worker's part, so the
// prefetched weights are exactly those a worker that waited would read,
// and the model stays bit-identical. In bounded-delay mode they carry
// its clock, its place in the epoch (feed.Batch's Epoch and Step); when the feed has no shard for the worker, idle computes the
// batches in hand, waits for every push and tells the servers the worker
// holds no one back.

// maxPushes bounds a worker's pushes in flight.
const maxPushes = 8

// prefetchDepth is how many batches' pulls are out ahead of the one being
// computed.
const prefetchDepth = 2

// pipeline is a worker's batch slots and its pushes in flight.
type pipeline struct {
	slots  []slot  // prefetchDepth+1, used in turn
	next   int     // the slot the next batch goes into
	held   []*slot // batches whose pull is out and which are not computed yet, oldest first
	grad   []float32
	pushes []int32 // in flight, oldest first
}

// slot holds one batch: its own copy of the examples, its keys, and its
// weights with the pull that fills them.
type slot struct {
	ex     []lr.Example
	keyBuf []uint64
	valBuf []float32
	keys   []uint64
	w      []float32
	clock  psnode.Clock
	pull   int32
}

// load copies recs into s (the feed reuses its buffers once the step
// returns).
func (s *slot) load(b feed.Batch) {
	n := 0
	for i := range b.Examples {
		n += len(b.Examples[i].Keys)
	}
	s.keyBuf = slices.Grow(s.keyBuf[:0], n)
	s.valBuf = slices.Grow(s.valBuf[:0], n)
	s.ex = slices.Grow(s.ex[:0], len(b.Examples))[:len(b.Examples)]
	for i, r := range b.Examples {
		k0, v0 := len(s.keyBuf), len(s.valBuf)
		s.keyBuf = append(s.keyBuf, r.Keys...)
		s.valBuf = append(s.valBuf, r.Vals...)
		s.ex[i] = lr.Example{Label: r.Label, Keys: s.keyBuf[k0:len(s.keyBuf):len(s.keyBuf)], Vals: s.valBuf[v0:len(s.valBuf):len(s.valBuf)]}
	}
}

// step is the feed's step function.
func (w *worker) step(ctx context.Context, b feed.Batch) error {
	p := &w.pipe
	if p.slots == nil {
		p.slots = make([]slot, prefetchDepth+1)
	}
	// The oldest slot: computed (its pull waited for) before the newest
	// prefetchDepth were loaded.
	s := &p.slots[p.next]
	p.next = (p.next + 1) % len(p.slots)
	if w.f.prefetch {
		s.load(b)
	} else {
		s.ex = toExamples(s.ex, b.Examples) // used before the step returns
	}
	var err error
	if s.keys, err = lr.BatchKeys(s.ex, s.keys); err != nil {
		return err
	}
	s.clock = psnode.Clock{Epoch: b.Epoch, Step: b.Step}
	if s.pull, err = w.pullAt(ctx, s); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if !w.f.prefetch {
		if err := w.compute(ctx, s); err != nil {
			return err
		}
		return w.settle(ctx, 0)
	}
	p.held = append(p.held, s)
	if len(p.held) > prefetchDepth {
		return w.computeOldest(ctx)
	}
	return nil
}

// computeOldest computes the oldest batch held.
func (w *worker) computeOldest(ctx context.Context) error {
	p := &w.pipe
	s := p.held[0]
	p.held = p.held[:copy(p.held, p.held[1:])]
	return w.compute(ctx, s)
}

// pullAt sends the pull of s's weights.
func (w *worker) pullAt(ctx context.Context, s *slot) (int32, error) {
	switch {
	case w.f.bounded():
		return w.t.PullAt(ctx, s.clock, s.keys, &s.w)
	case !w.f.free():
		return w.t.PullStep(ctx, s.clock.Epoch, s.clock.Step, s.keys, &s.w)
	}
	return w.t.Pull(ctx, s.keys, &s.w)
}

// compute waits for s's weights, computes its gradients and sends the
// push, without waiting for it.
func (w *worker) compute(ctx context.Context, s *slot) error {
	if err := w.wait(ctx, func() (int32, error) { return s.pull, nil }); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	p := &w.pipe
	p.grad = slices.Grow(p.grad[:0], len(s.keys))[:len(s.keys)]
	loss, err := lr.Gradient(s.ex, s.keys, s.w, p.grad)
	if err != nil {
		return err
	}
	w.lossSum += loss
	w.examples += int64(len(s.ex))
	var ts int32
	switch {
	case w.f.bounded():
		ts, err = w.t.PushAt(ctx, s.clock, s.keys, p.grad)
	case !w.f.free():
		ts, err = w.t.PushStep(ctx, s.clock.Epoch, s.clock.Step, s.keys, p.grad)
	default:
		ts, err = w.t.Push(ctx, s.keys, p.grad)
	}
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	p.pushes = append(p.pushes, ts)
	return w.settle(ctx, maxPushes)
}

// settle waits for the oldest pushes until at most keep are in flight.
func (w *worker) settle(ctx context.Context, keep int) error {
	p := &w.pipe
	for len(p.pushes) > keep {
		ts := p.pushes[0]
		p.pushes = p.pushes[1:]
		if err := w.wait(ctx, func() (int32, error) { return ts, nil }); err != nil {
			return fmt.Errorf("push: %w", err)
		}
	}
	if len(p.pushes) == 0 {
		p.pushes = p.pushes[:0:cap(p.pushes)]
	}
	return nil
}

// idle is the feed's Idle hook: the worker has no shard for now. It
// computes and sends the batches in hand and, in bounded-delay mode, says it holds no
// one back in epoch.
func (w *worker) idle(ctx context.Context, epoch int) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	if !w.f.bounded() {
		return nil
	}
	return w.wait(ctx, func() (int32, error) { return w.t.Idle(ctx, epoch) })
}

// flush computes the batches in hand and waits for every push, so that
// their loss counts and their updates are applied.
func (w *worker) flush(ctx context.Context) error {
	for len(w.pipe.held) > 0 {
		if err := w.computeOldest(ctx); err != nil {
			return err
		}
	}
	return w.settle(ctx, 0)
}
