package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/psnode"
)

// Asynchronous and bounded-delay steps. With --prefetch (the default) a
// worker keeps one mini-batch in hand: when the feed hands it batch b+1
// it copies it, sends the pull of its weights, and only then computes
// and pushes batch b, whose pull went out a step earlier; so the pull's
// round trip overlaps the gradient and the push. A push is waited for
// only before its buffers are reused, two steps later. Without
// --prefetch each step pulls, computes and pushes in turn, waiting for
// each. In bounded-delay mode a batch's pull and push carry its clock,
// its place in the epoch (feed.Batch's Epoch and Step); when the feed
// has no shard for the worker, idle sends the batch in hand, waits for
// every push and tells the servers the worker holds no one back.

// pipeline is a worker's two batch slots.
type pipeline struct {
	slots [2]slot
	cur   int   // the slot the next batch goes into
	held  *slot // the batch whose pull is out and which is not computed yet
}

// slot holds one batch: its own copy of the examples, keys, weights,
// gradients, and the requests in flight on them.
type slot struct {
	ex      []lr.Example
	keyBuf  []uint64
	valBuf  []float32
	keys    []uint64
	w, grad []float32
	clock   psnode.Clock
	pull    int32
	pushing bool
	push    int32
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

// freeStep is the feed's step function in asynchronous and bounded-delay
// modes.
func (w *worker) freeStep(ctx context.Context, b feed.Batch) error {
	p := &w.pipe
	s := &p.slots[p.cur]
	if err := w.settle(ctx, s); err != nil {
		return err
	}
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
		return w.settle(ctx, s)
	}
	p.cur ^= 1
	prev := p.held
	p.held = s
	if prev != nil {
		return w.compute(ctx, prev)
	}
	return nil
}

// pullAt sends the pull of s's weights.
func (w *worker) pullAt(ctx context.Context, s *slot) (int32, error) {
	if w.f.bounded() {
		return w.t.PullAt(ctx, s.clock, s.keys, &s.w)
	}
	return w.t.Pull(ctx, s.keys, &s.w)
}

// compute waits for s's weights, computes its gradients and sends the
// push, without waiting for it.
func (w *worker) compute(ctx context.Context, s *slot) error {
	if err := w.wait(ctx, func() (int32, error) { return s.pull, nil }); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	s.grad = slices.Grow(s.grad[:0], len(s.keys))[:len(s.keys)]
	loss, err := lr.Gradient(s.ex, s.keys, s.w, s.grad)
	if err != nil {
		return err
	}
	w.lossSum += loss
	w.examples += int64(len(s.ex))
	if w.f.bounded() {
		s.push, err = w.t.PushAt(ctx, s.clock, s.keys, s.grad)
	} else {
		s.push, err = w.t.Push(ctx, s.keys, s.grad)
	}
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	s.pushing = true
	return nil
}

// settle waits for s's push, if one is in flight.
func (w *worker) settle(ctx context.Context, s *slot) error {
	if !s.pushing {
		return nil
	}
	s.pushing = false
	if err := w.wait(ctx, func() (int32, error) { return s.push, nil }); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	return nil
}

// idle is the feed's Idle hook: the worker has no shard for now. It
// sends the batch in hand and, in bounded-delay mode, says it holds no
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

// flush computes the batch in hand and waits for every push, so that its
// loss counts and its updates are applied.
func (w *worker) flush(ctx context.Context) error {
	p := &w.pipe
	if p.held != nil {
		s := p.held
		p.held = nil
		if err := w.compute(ctx, s); err != nil {
			return err
		}
	}
	for i := range p.slots {
		if err := w.settle(ctx, &p.slots[i]); err != nil {
			return err
		}
	}
	return nil
}
